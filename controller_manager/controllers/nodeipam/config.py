"""The node IPAM controller's flags, checked and combined as kube-controller-manager does at start-up
(``cmd/kube-controller-manager/app/core.go``: ``startNodeIpamController``, ``setNodeCIDRMaskSizes``; and
``NewNodeIpamController``).

Guarantees:
- ``--cluster-cidr`` is a comma list of at most two CIDRs; two must be one IPv4 and one IPv6 (dual-stack).
- Mask sizes, one per cluster CIDR in its order: ``--node-cidr-mask-size`` (single-stack only, and not together
  with the per-family flags), else ``--node-cidr-mask-size-ipv4``/``-ipv6`` (each refused for a single-stack
  cluster of the other family); unset (0) means 24 for IPv4 and 64 for IPv6.
- A cluster CIDR whose mask is longer than its node mask size is refused; so is no cluster CIDR at all.
- The service ranges (``--service-cluster-ip-range``: primary, then secondary after a comma) are optional;
  an unparsable one is logged and ignored, as upstream; both given must be of different families.
Every refusal is a :class:`ConfigError` carrying upstream's message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from controller_manager.controllers.nodeipam.cidrset import Network, parse_cidr

__all__ = ["DEFAULT_NODE_MASK_IPV4", "DEFAULT_NODE_MASK_IPV6", "ConfigError", "IPAMConfig", "node_cidr_mask_sizes",
           "parse_cluster_cidrs", "read_config"]

DEFAULT_NODE_MASK_IPV4 = 24
DEFAULT_NODE_MASK_IPV6 = 64
RANGE_ALLOCATOR = "RangeAllocator"


class ConfigError(ValueError):
    """A flag combination kube-controller-manager refuses at start-up."""


@dataclass(frozen=True, slots=True)
class IPAMConfig:
    cluster_cidrs: tuple[Network, ...]
    node_mask_sizes: tuple[int, ...]
    service_cidr: Network | None
    secondary_service_cidr: Network | None


def parse_cluster_cidrs(text: str) -> tuple[Network, ...]:
    """``processCIDRs``: the comma list of ``--cluster-cidr``, checked for count and families."""
    cidrs: list[Network] = []
    for part in text.split(","):
        try:
            cidrs.append(parse_cidr(part))
        except ValueError as err:
            raise ConfigError(f"failed to parse cidr value:{part!r} with error:{err}".replace("'", '"')) from None
    dual_stack = len(cidrs) > 1 and {c.version for c in cidrs} == {4, 6}
    if len(cidrs) > 2:
        raise ConfigError(f"len of clusters cidrs is:{len(cidrs)} > more than max allowed of 2")
    if len(cidrs) > 1 and not dual_stack:
        raise ConfigError(f"len of ClusterCIDRs=={len(cidrs)} and they are not configured as dual stack "
                          "(at least one from each IPFamily")
    return tuple(cidrs)


def node_cidr_mask_sizes(cluster_cidrs: tuple[Network, ...], mask: int, mask_v4: int,
                         mask_v6: int) -> tuple[int, ...]:
    """``setNodeCIDRMaskSizes``: the node mask size for each cluster CIDR (0 = the flag is unset)."""
    v4, v6 = DEFAULT_NODE_MASK_IPV4, DEFAULT_NODE_MASK_IPV6

    def per_cidr(size_v4: int, size_v6: int) -> tuple[int, ...]:
        return tuple(size_v6 if c.version == 6 else size_v4 for c in cluster_cidrs)

    if len(cluster_cidrs) > 1:
        if mask != 0:
            raise ConfigError("usage of --node-cidr-mask-size is not allowed with dual-stack clusters")
        return per_cidr(mask_v4 or v4, mask_v6 or v6)
    if mask != 0:
        if mask_v4 != 0 or mask_v6 != 0:
            raise ConfigError("usage of --node-cidr-mask-size-ipv4 and --node-cidr-mask-size-ipv6 is not allowed "
                              "if --node-cidr-mask-size is set. For dual-stack clusters please unset it and use "
                              "IPFamily specific flags")
        return per_cidr(mask, mask)
    single_stack_v6 = bool(cluster_cidrs) and cluster_cidrs[0].version == 6
    if mask_v4 != 0:
        if single_stack_v6:
            raise ConfigError("usage of --node-cidr-mask-size-ipv4 is not allowed for a single-stack IPv6 cluster")
        v4 = mask_v4
    if mask_v6 != 0:
        if not single_stack_v6:
            raise ConfigError("usage of --node-cidr-mask-size-ipv6 is not allowed for a single-stack IPv4 cluster")
        v6 = mask_v6
    return per_cidr(v4, v6)


def _optional_cidr(text: str, log: Any, what: str) -> Network | None:
    if not text.strip():
        return None
    try:
        return parse_cidr(text.strip())
    except ValueError as err:
        log.error(f"Unsuccessful parsing of {what}", CIDR=text, error=str(err))
        return None


def read_config(options: Mapping[str, Any], log: Any) -> IPAMConfig:
    """The controller's configuration from the parsed flags, or the start-up error upstream gives."""
    allocator = str(options.get("cidr_allocator_type", RANGE_ALLOCATOR) or RANGE_ALLOCATOR)
    if allocator != RANGE_ALLOCATOR:
        raise ConfigError(f"invalid CIDR allocator type: {allocator}")
    text = str(options.get("cluster_cidr", "") or "")
    cluster_cidrs = parse_cluster_cidrs(text) if text.strip() else ()
    # --service-cluster-ip-range: the primary range, then the secondary after a comma.
    service_ranges = str(options.get("service_cluster_ip_range", "") or "").split(",")
    service = _optional_cidr(service_ranges[0], log, "service CIDR")
    secondary = _optional_cidr(service_ranges[1], log, "secondary service CIDR") if len(service_ranges) > 1 else None
    if service is not None and secondary is not None and service.version == secondary.version:
        raise ConfigError("serviceCIDR and secondaryServiceCIDR are not dualstack (from different IPfamiles)")
    sizes = node_cidr_mask_sizes(cluster_cidrs, int(options.get("node_cidr_mask_size", 0) or 0),
                                 int(options.get("node_cidr_mask_size_ipv4", 0) or 0),
                                 int(options.get("node_cidr_mask_size_ipv6", 0) or 0))
    if not cluster_cidrs:
        raise ConfigError("Controller: Must specify --cluster-cidr if --allocate-node-cidrs is set")
    for cidr, size in zip(cluster_cidrs, sizes, strict=True):
        if cidr.prefixlen > size:
            raise ConfigError("Controller: Invalid --cluster-cidr, mask size of cluster CIDR must be less than or "
                              "equal to --node-cidr-mask-size configured for CIDR family")
    return IPAMConfig(cluster_cidrs, sizes, service, secondary)
