"""The EndpointSlice mirroring controller (``endpointslice-mirroring-controller``): see :mod:`.controller` for
its guarantees and :mod:`.reconciler` for how an Endpoints becomes slices."""

from .controller import EndpointSliceMirroringController
from .reconciler import ReconcileError, Reconciler
from .utils import CONTROLLER_NAME

__all__ = ["CONTROLLER_NAME", "EndpointSliceMirroringController", "ReconcileError", "Reconciler"]
