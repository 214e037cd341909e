"""The horizontal pod autoscaler controller (``horizontal-pod-autoscaler-controller``): scales any scalable
target through its ``/scale`` subresource from resource, custom and external metrics."""

from controller_manager.controllers.podautoscaler.controller import HorizontalController

__all__ = ["HorizontalController"]
