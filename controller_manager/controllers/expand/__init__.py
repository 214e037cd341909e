"""The volume expander (``persistentvolume-expander-controller``): hands resize requests to external resizers."""

from .controller import ExpandController

__all__ = ["ExpandController"]
