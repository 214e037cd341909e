"""The StatefulSet controller (``statefulset-controller``): see :mod:`.controller` for its guarantees."""

from .controller import StatefulSetController

__all__ = ["StatefulSetController"]
