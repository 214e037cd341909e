"""The ReplicaSet controller (``replicaset-controller``): see :mod:`.controller` for its guarantees."""

from .controller import BURST_REPLICAS, ReplicaSetController

__all__ = ["BURST_REPLICAS", "ReplicaSetController"]
