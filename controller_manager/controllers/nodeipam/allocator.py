"""The range allocator's bookkeeping (``pkg/controller/nodeipam/ipam/range_allocator.go``), without I/O.

Guarantees:
- One :class:`~.cidrset.CIDRSet` per cluster CIDR, in ``--cluster-cidr`` order; a Node's ``spec.podCIDRs[i]``
  belongs to set ``i``. The service ranges are occupied in every cluster CIDR they overlap, so no Node gets them.
- :meth:`RangeAllocator.occupy` marks a Node's existing podCIDRs as taken (recovery at start-up and Nodes that
  arrive with podCIDRs); :meth:`RangeAllocator.release` frees them; :meth:`RangeAllocator.reserve` takes one
  new CIDR from every set, or none (a set that runs out gives back what the others gave). Errors carry
  upstream's messages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from controller_manager.controllers.nodeipam.cidrset import CIDRSet, CIDRSetError, Network, parse_cidr
from controller_manager.controllers.nodeipam.config import IPAMConfig

__all__ = ["AllocationError", "RangeAllocator", "node_pod_cidrs"]


class AllocationError(Exception):
    """A Node's CIDRs could not be occupied, released or allocated; ``str()`` is upstream's message."""


def node_pod_cidrs(node: Mapping[str, Any]) -> list[str]:
    """``spec.podCIDRs`` of a Node (empty when unset)."""
    spec = node.get("spec")
    cidrs = spec.get("podCIDRs") if isinstance(spec, Mapping) else None
    return [str(c) for c in cidrs] if isinstance(cidrs, list) else []


def _overlap(a: Network, b: Network) -> bool:
    return a.version == b.version and a.overlaps(b)


class RangeAllocator:
    def __init__(self, config: IPAMConfig, log: Any) -> None:
        self.cluster_cidrs = config.cluster_cidrs
        self.log = log
        self.sets = [CIDRSet(cidr, size) for cidr, size in zip(config.cluster_cidrs, config.node_mask_sizes,
                                                                strict=True)]
        for service in (config.service_cidr, config.secondary_service_cidr):
            if service is not None:
                self.filter_out_service_range(service)

    def filter_out_service_range(self, service: Network) -> None:
        """Occupy ``service`` in every cluster CIDR it overlaps."""
        for cidr, cidr_set in zip(self.cluster_cidrs, self.sets, strict=True):
            if not _overlap(cidr, service):
                continue
            try:
                cidr_set.occupy(service)
            except CIDRSetError as err:
                self.log.error("Error filtering out service cidr out cluster cidr", CIDR=str(cidr),
                               serviceCIDR=str(service), error=str(err))

    def _parsed(self, node_name: str, cidrs: Sequence[str], fail: str) -> list[tuple[int, Network]]:
        out = []
        for idx, text in enumerate(cidrs):
            try:
                cidr = parse_cidr(text)
            except ValueError as err:
                raise AllocationError(fail.format(cidr=text, node=node_name, error=err)) from None
            if idx >= len(self.sets):
                raise AllocationError(f"node:{node_name} has an allocated cidr: {cidr} at index:{idx} that does not "
                                      "exist in cluster cidrs configuration")
            out.append((idx, cidr))
        return out

    def occupy(self, node_name: str, cidrs: Sequence[str]) -> None:
        for idx, cidr in self._parsed(node_name, cidrs, "failed to parse node {node}, CIDR {cidr}"):
            try:
                self.sets[idx].occupy(cidr)
            except CIDRSetError as err:
                raise AllocationError(f"failed to mark cidr[{cidr}] at idx [{idx}] as occupied for node: "
                                      f"{node_name}: {err}") from None

    def release(self, node_name: str, cidrs: Sequence[str]) -> None:
        for idx, cidr in self._parsed(node_name, cidrs, "failed to parse CIDR {cidr} on Node {node}: {error}"):
            try:
                self.sets[idx].release(cidr)
            except CIDRSetError as err:
                raise AllocationError(f"error when releasing CIDR {cidr}: {err}") from None

    def reserve(self) -> list[Network]:
        """One new CIDR from each cluster CIDR, in order."""
        taken: list[Network] = []
        for idx, cidr_set in enumerate(self.sets):
            try:
                taken.append(cidr_set.allocate_next())
            except CIDRSetError as err:
                self.give_back(taken)
                raise AllocationError(f"failed to allocate cidr from cluster cidr at idx:{idx}: {err}") from None
        return taken

    def give_back(self, cidrs: Sequence[Network]) -> None:
        for idx, cidr in enumerate(cidrs):
            try:
                self.sets[idx].release(cidr)
            except CIDRSetError as err:
                self.log.error("Error when releasing CIDR", CIDR=str(cidr), error=str(err))
