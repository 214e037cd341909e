"""The pod garbage collector (``pod-garbage-collector-controller``): terminated, orphaned and stuck pods."""

from .controller import PodGCController

__all__ = ["PodGCController"]
