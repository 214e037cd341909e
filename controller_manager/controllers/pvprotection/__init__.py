"""The PV protection controller (``persistentvolume-protection-controller``): the pv-protection finalizer."""

from .controller import PVProtectionController

__all__ = ["PVProtectionController"]
