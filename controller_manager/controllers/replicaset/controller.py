"""The ReplicaSet controller: keeps ``spec.replicas`` pods running for each ReplicaSet
(kube-controller-manager's ``replicaset-controller``, ``pkg/controller/replicaset/replica_set.go``).

The logic is the replica manager shared with the ReplicationController controller
(:mod:`controller_manager.controllerutil.replicamanager`, whose docstring lists the guarantees); this module
gives it the ReplicaSet kind: ``apps/v1`` ReplicaSets with a ``metav1.LabelSelector``, ``terminatingReplicas``
in status, events from ``replicaset-controller``, the work queue ``replicaset`` and
``--concurrent-replicaset-syncs`` workers.
"""

from __future__ import annotations

from typing import ClassVar

from controller_manager.api.resources import REPLICASETS
from controller_manager.controllerutil.replicamanager import BURST_REPLICAS, ReplicaKind, ReplicaManager, label_selector

__all__ = ["BURST_REPLICAS", "REPLICA_SET", "ReplicaSetController"]

REPLICA_SET = ReplicaKind(
    resource=REPLICASETS,
    component="replicaset-controller",
    parse_selector=label_selector,
    status_terminating_replicas=True,
    logger_name="controller_manager.controllers.replicaset",
)


class ReplicaSetController(ReplicaManager):
    """ReplicaSets -> pods. One instance per manager; its queue holds ReplicaSet keys."""

    kind: ClassVar[ReplicaKind] = REPLICA_SET
    name: ClassVar[str] = "replicaset-controller"
    alias: ClassVar[str] = "replicaset"
    queue_name: ClassVar[str | None] = "replicaset"
    workers_option: ClassVar[str | None] = "concurrent-replicaset-syncs"
    default_workers: ClassVar[int] = 5
