"""The EndpointSlice controller (``endpointslice-controller``): see :mod:`.controller` for its guarantees and
:mod:`.reconciler` for how slices are packed."""

from .controller import CONTROLLER_QUALIFIED_NAME, EndpointSliceController, StaleInformerCache
from .reconciler import ReconcileError, Reconciler

__all__ = ["CONTROLLER_QUALIFIED_NAME", "EndpointSliceController", "ReconcileError", "Reconciler",
           "StaleInformerCache"]
