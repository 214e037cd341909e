"""The PVC protection controller (``persistentvolumeclaim-protection-controller``): the pvc-protection finalizer
and the Unused condition."""

from .controller import PVCProtectionController

__all__ = ["PVCProtectionController"]
