"""The ServiceCIDR controller (``service-cidr-controller``): see :mod:`.controller` for its guarantees and
:mod:`.cidrs` for how ranges and addresses are matched."""

from .controller import SERVICE_CIDR_PROTECTION_FINALIZER, ServiceCIDRsController

__all__ = ["SERVICE_CIDR_PROTECTION_FINALIZER", "ServiceCIDRsController"]
