"""The Endpoints controller (``endpoints-controller``): see :mod:`.controller` for its guarantees, :mod:`.pods`
for which pods and addresses, :mod:`.subsets` for how subsets are packed and ordered."""

from .controller import CONTROLLER_NAME, LABEL_MANAGED_BY, EndpointsController, StaleEndpoints

__all__ = ["CONTROLLER_NAME", "LABEL_MANAGED_BY", "EndpointsController", "StaleEndpoints"]
