"""The node lifecycle controller (``node-lifecycle-controller``): node health, NoExecute/NoSchedule taints, zones."""

from .controller import NOT_READY_TAINT, UNREACHABLE_TAINT, NodeLifecycleController

__all__ = ["NOT_READY_TAINT", "UNREACHABLE_TAINT", "NodeLifecycleController"]
