"""The replica manager shared by the ReplicaSet and ReplicationController controllers.

Upstream runs one implementation for both kinds: ``pkg/controller/replication/`` wraps the ReplicaSet
controller with adapters that convert ReplicationControllers to ReplicaSets and back. Here the kind is a
parameter instead (:class:`~.kind.ReplicaKind`: resource, event component, selector form, whether status has
``terminatingReplicas``), and :class:`~.controller.ReplicaManager` is subclassed once per kind by
``controller_manager.controllers.replicaset`` and ``controller_manager.controllers.replication``.

Why here, in ``controllerutil``: controllers never import each other (an import-linter independence contract
over every package under ``controllers/``), so the logic both run cannot live in either controller's package;
``controllerutil`` is the layer below ``controllers`` that holds what workload controllers share, and it
imports only ``runtime``, ``client`` and ``api`` as before. Nothing here is registered as a controller: a
kind becomes one only through its subclass in ``controllers/``.

Modules:
- ``kind``: the per-kind parameters and the two selector forms.
- ``controller``: the controller (handlers, expectations, sync, slow-start creates, ranked deletes).
- ``pods``: which pods an owner looks at and deletes first (pure).
- ``status``: status computation, the ReplicaFailure condition, the ``/status`` write (pure but the write).
"""

from .controller import BURST_REPLICAS, ReplicaManager
from .kind import ReplicaKind, label_selector, map_selector

__all__ = ["BURST_REPLICAS", "ReplicaKind", "ReplicaManager", "label_selector", "map_selector"]
