"""The taint eviction controller (``taint-eviction-controller``): deletes pods that do not tolerate NoExecute taints."""

from .controller import TaintEvictionController

__all__ = ["TaintEvictionController"]
