"""The disruption controller (``disruption-controller``): see :mod:`.controller` for its guarantees."""

from .controller import DisruptionController

__all__ = ["DisruptionController"]
