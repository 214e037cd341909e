"""The ReplicationController controller (``replicationcontroller-controller``): see :mod:`.controller`."""

from .controller import BURST_REPLICAS, REPLICATION_CONTROLLER, ReplicationManager

__all__ = ["BURST_REPLICAS", "REPLICATION_CONTROLLER", "ReplicationManager"]
