"""The TTL controller (``ttl-controller``): the ``node.alpha.kubernetes.io/ttl`` annotation on Nodes by cluster
size; see :mod:`.controller`."""

from .controller import TTL_ANNOTATION, TTL_BOUNDARIES, TTLBoundary, TTLController

__all__ = ["TTL_ANNOTATION", "TTL_BOUNDARIES", "TTLBoundary", "TTLController"]
