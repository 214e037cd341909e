"""The ReplicationController controller: keeps ``spec.replicas`` pods running for each core/v1
ReplicationController (kube-controller-manager's ``replicationcontroller-controller``,
``pkg/controller/replication/``).

Upstream runs the ReplicaSet controller's code for ReplicationControllers through adapters that convert each
RC to a ReplicaSet and back (``conversion.go``). Here the same shared logic,
:mod:`controller_manager.controllerutil.replicamanager` (its docstring lists the guarantees), is given the
ReplicationController kind, which is what those conversions amount to as a client sees them:

- owner references on pods name ``apiVersion: v1, kind: ReplicationController``; events are about the RC, from
  source component ``replication-controller`` (SuccessfulCreate "Created pod: <name>", FailedCreate, ...);
- ``spec.selector`` is a plain label map, read as ``matchLabels`` (absent: matches nothing; an empty map is never
  stored, the API server defaults it from the template's labels);
- status is written through ``replicationcontrollers/status`` with replicas, fullyLabeledReplicas,
  readyReplicas, availableReplicas, observedGeneration and the ``ReplicaFailure`` condition, but never
  ``terminatingReplicas`` (the RC API has no such field: upstream's ``EnableStatusTerminatingReplicas`` is off);
- the work queue is ``replicationmanager`` and ``--concurrent-rc-syncs`` (default 5) sets the workers.
"""

from __future__ import annotations

from typing import ClassVar

from controller_manager.api.resources import REPLICATIONCONTROLLERS
from controller_manager.controllerutil.replicamanager import BURST_REPLICAS, ReplicaKind, ReplicaManager, map_selector

__all__ = ["BURST_REPLICAS", "REPLICATION_CONTROLLER", "ReplicationManager"]

REPLICATION_CONTROLLER = ReplicaKind(
    resource=REPLICATIONCONTROLLERS,
    component="replication-controller",
    parse_selector=map_selector,
    status_terminating_replicas=False,
    logger_name="controller_manager.controllers.replication",
)


class ReplicationManager(ReplicaManager):
    """ReplicationControllers -> pods (upstream's ``ReplicationManager``); its queue holds RC keys."""

    kind: ClassVar[ReplicaKind] = REPLICATION_CONTROLLER
    name: ClassVar[str] = "replicationcontroller-controller"
    alias: ClassVar[str] = "replicationcontroller"
    queue_name: ClassVar[str | None] = "replicationmanager"
    workers_option: ClassVar[str | None] = "concurrent-rc-syncs"
    default_workers: ClassVar[int] = 5
