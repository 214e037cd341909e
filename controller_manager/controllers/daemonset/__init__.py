"""The DaemonSet controller (``daemonset-controller``): see :mod:`.controller` for its guarantees."""

from .controller import BURST_REPLICAS, DaemonSetController

__all__ = ["BURST_REPLICAS", "DaemonSetController"]
