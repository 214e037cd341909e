"""A bitmap of the node-sized subnets of one cluster CIDR (``pkg/controller/nodeipam/ipam/cidrset``).

Guarantees:
- A cluster CIDR ``C/m`` cut into node subnets ``/n`` has ``2**(n-m)`` of them, numbered from the start of
  ``C``. An IPv6 set refuses more than 16 bits between the two masks (``ERR_SUBNET_TOO_BIG``).
- :meth:`CIDRSet.allocate_next` hands out the first free subnet at or after the one after the last handed out
  (wrapping round), so freed subnets are reused only after the rest of the range; when every subnet is taken it
  raises :class:`CIDRSetError` with ``ERR_NO_CIDRS_REMAINING``.
- :meth:`CIDRSet.occupy` and :meth:`CIDRSet.release` mark or clear every node subnet a CIDR overlaps, whatever
  its size (a CIDR wider than the cluster CIDR covers it all); a CIDR that does not overlap the cluster CIDR is
  an error. Marking a taken subnet or clearing a free one changes nothing.
"""

from __future__ import annotations

import ipaddress
from typing import TypeAlias

from controller_manager.controllers.nodeipam import metrics

__all__ = ["ERR_NO_CIDRS_REMAINING", "ERR_SUBNET_TOO_BIG", "CIDRSet", "CIDRSetError", "Network", "parse_cidr"]

Network: TypeAlias = ipaddress.IPv4Network | ipaddress.IPv6Network

ERR_NO_CIDRS_REMAINING = ("CIDR allocation failed; there are no remaining CIDRs left to allocate in the "
                          "accepted range")
ERR_SUBNET_TOO_BIG = "New CIDR set failed; the node CIDR size is too big"

# Most bits between an IPv6 cluster mask and its node mask (the bitmap would be too large otherwise).
CLUSTER_SUBNET_MAX_DIFF = 16


class CIDRSetError(ValueError):
    """A CIDR set refused an operation; ``str()`` is upstream's message."""


def parse_cidr(text: str) -> Network:
    """``ParseCIDR``: an address with a prefix length; host bits are dropped (the network is kept)."""
    if "/" not in text:
        raise ValueError(f"invalid CIDR address: {text}")
    try:
        return ipaddress.ip_network(text.strip(), strict=False)
    except ValueError:
        raise ValueError(f"invalid CIDR address: {text}") from None


def _overlap(a: Network, b: Network) -> bool:
    return a.version == b.version and a.overlaps(b)


class CIDRSet:
    """The node subnets of ``cluster_cidr``, each ``/node_mask_size``, and which of them are taken."""

    def __init__(self, cluster_cidr: Network, node_mask_size: int) -> None:
        cluster_mask = cluster_cidr.prefixlen
        if cluster_cidr.version == 6 and node_mask_size - cluster_mask > CLUSTER_SUBNET_MAX_DIFF:
            raise CIDRSetError(ERR_SUBNET_TOO_BIG)
        self.cluster_cidr = cluster_cidr
        self.cluster_mask_size = cluster_mask
        self.node_mask_size = node_mask_size
        self.bits = cluster_cidr.max_prefixlen
        self.max_cidrs = 1 << (node_mask_size - cluster_mask)
        self.next_candidate = 0
        self.allocated = 0
        self._used = 0  # bit i set: subnet i is taken
        self.label = str(cluster_cidr)
        metrics.CIDRSET_MAX_CIDRS.labels(self.label).set(self.max_cidrs)

    def _usage(self) -> None:
        metrics.CIDRSET_USAGE.labels(self.label).set(self.allocated / self.max_cidrs)

    def __len__(self) -> int:
        return self.allocated

    def is_used(self, index: int) -> bool:
        return bool(self._used >> index & 1)

    def index_to_cidr(self, index: int) -> Network:
        """The node subnet numbered ``index``."""
        base = int(self.cluster_cidr.network_address) | index << (self.bits - self.node_mask_size)
        return ipaddress.ip_network((base, self.node_mask_size))

    def allocate_next(self) -> Network:
        if self.allocated == self.max_cidrs:
            raise CIDRSetError(ERR_NO_CIDRS_REMAINING)
        candidate = self.next_candidate
        tries = 0
        while tries < self.max_cidrs and self.is_used(candidate):
            candidate = (candidate + 1) % self.max_cidrs
            tries += 1
        self.next_candidate = (candidate + 1) % self.max_cidrs
        self._used |= 1 << candidate
        self.allocated += 1
        metrics.CIDRSET_ALLOCATIONS.labels(self.label).inc()
        self._usage()
        metrics.CIDRSET_ALLOCATION_TRIES.labels(self.label).observe(tries)
        return self.index_to_cidr(candidate)

    def index_for_ip(self, ip: int) -> int:
        """The number of the node subnet holding the address ``ip`` (an integer)."""
        index = (int(self.cluster_cidr.network_address) ^ ip) >> (self.bits - self.node_mask_size)
        if index >= self.max_cidrs:
            address = ipaddress.ip_address(ip) if self.bits == 32 else ipaddress.IPv6Address(ip)
            raise CIDRSetError(f"CIDR: {address}/{self.node_mask_size} is out of the range of CIDR allocator")
        return index

    def indices(self, cidr: Network | None) -> range:
        """The node subnets ``cidr`` overlaps, first to last."""
        if cidr is None:
            raise CIDRSetError(f"error getting indices for cluster cidr {self.cluster_cidr}, cidr is nil")
        if not _overlap(cidr, self.cluster_cidr):
            raise CIDRSetError(f"cidr {cidr} is out the range of cluster cidr {self.cluster_cidr}")
        if cidr.prefixlen <= self.cluster_mask_size:
            return range(self.max_cidrs)
        shift = self.bits - self.node_mask_size
        node_mask = ((1 << self.bits) - 1) >> shift << shift
        first = int(cidr.network_address)
        last = int(cidr.broadcast_address)
        return range(self.index_for_ip(first & node_mask), self.index_for_ip(last & node_mask) + 1)

    def _mask(self, cidr: Network | None) -> int:
        # One bit per subnet ``cidr`` overlaps: a range, set or cleared at once (it can span 2**24 subnets, where
        # a bit at a time is quadratic in the bitmap's length).
        span = self.indices(cidr)
        return (1 << span.stop) - (1 << span.start)

    def occupy(self, cidr: Network | None) -> None:
        """Mark every node subnet ``cidr`` overlaps as taken."""
        mask = self._mask(cidr)
        taken = (mask & ~self._used).bit_count()
        self._used |= mask
        if taken:
            self.allocated += taken
            metrics.CIDRSET_ALLOCATIONS.labels(self.label).inc(taken)
        self._usage()

    def release(self, cidr: Network | None) -> None:
        """Mark every node subnet ``cidr`` overlaps as free."""
        mask = self._mask(cidr)
        freed = (mask & self._used).bit_count()
        self._used &= ~mask
        if freed:
            self.allocated -= freed
            metrics.CIDRSET_RELEASES.labels(self.label).inc(freed)
        self._usage()
