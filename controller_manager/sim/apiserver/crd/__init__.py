"""CustomResourceDefinitions (apiextensions.k8s.io/v1), as upstream's apiextensions-apiserver serves them.

- :mod:`.resource`: the :class:`CustomResource` descriptor of one served version of a CRD.
- :mod:`.definition`: the CRD kind itself: defaulting, validation, names and status conditions.
- :mod:`.structural`: an instance checked against its version's openAPIV3Schema: pruning, defaulting,
  validation with upstream's messages.
- :mod:`.registry`: what the API server serves for the CRDs it stores, and the cleanup finalizer.
"""

from controller_manager.sim.apiserver.crd.resource import (
    CUSTOMRESOURCEDEFINITIONS,
    CustomResource,
    is_definition,
    list_kind,
)

__all__ = ["CUSTOMRESOURCEDEFINITIONS", "CustomResource", "is_definition", "list_kind"]
