"""The EndpointSlice controller (``endpointslice-controller``): see :mod:`.controller` for its guarantees and
:mod:`.reconciler` for how slices are packed."""

from controller_manager.controllerutil.endpointslice import StaleInformerCache

from .controller import CONTROLLER_QUALIFIED_NAME, EndpointSliceController
from .reconciler import ReconcileError, Reconciler

__all__ = ["CONTROLLER_QUALIFIED_NAME", "EndpointSliceController", "ReconcileError", "Reconciler",
           "StaleInformerCache"]
