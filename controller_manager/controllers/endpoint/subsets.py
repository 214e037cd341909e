"""Endpoints subsets: capacity and comparison (``pkg/api/v1/endpoints`` and the
subset helpers of ``pkg/controller/endpoint``).

Guarantees:
- Nothing here does I/O or mutates its inputs. Subsets, addresses and ports are the API's JSON; a Go nil list is
  an absent key, an empty Go list an empty list (the wire omits both).
- Packing and canonical order (``RepackSubsets``, ``SortSubsets``) are shared with the mirroring controller, in
  :mod:`controller_manager.api.endpoints`.
- :func:`truncate_subsets` keeps at most :data:`MAX_CAPACITY` addresses, ready ones first, each subset keeping
  its share (rounded up, the last ones getting what is left).
- :func:`subsets_equal_ignoring_resource_version` is apimachinery's semantic equality (nil and empty lists
  alike) with the targetRefs' ``resourceVersion`` left out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "MAX_CAPACITY",
    "capacity_annotation_set_correctly",
    "subsets_equal_ignoring_resource_version",
    "truncate_subsets",
]

Obj = Mapping[str, Any]

# The most addresses (ready and not) one Endpoints object carries; beyond, it is truncated.
MAX_CAPACITY = 1000
OVER_CAPACITY_ANNOTATION = "endpoints.kubernetes.io/over-capacity"


def _list(value: Any) -> list[Any]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


# --- capacity ---------------------------------------------------------------------------------------------

def _count(subsets: Iterable[Obj], field: str) -> int:
    return sum(len(_list(s.get(field))) for s in subsets)


def capacity_annotation_set_correctly(annotations: Mapping[str, str] | None, subsets: Sequence[Obj]) -> bool:
    """False when the subsets are over capacity (they must be truncated) or the annotation is set anyway."""
    if _count(subsets, "addresses") + _count(subsets, "notReadyAddresses") > MAX_CAPACITY:
        return False
    return OVER_CAPACITY_ANNOTATION not in (annotations or {})


def truncate_subsets(subsets: Sequence[Obj]) -> tuple[list[dict[str, Any]], bool]:
    """``truncateEndpoints``: (the subsets cut to :data:`MAX_CAPACITY` addresses, whether anything was cut).

    Ready addresses are kept before not-ready ones; each subset keeps its proportion of what it had, rounded
    up, so the last subsets may get fewer."""
    total_ready = _count(subsets, "addresses")
    total_not_ready = _count(subsets, "notReadyAddresses")
    if total_ready + total_not_ready <= MAX_CAPACITY:
        return [dict(s) for s in subsets], False
    truncate_ready = total_ready > MAX_CAPACITY
    limit, total = (MAX_CAPACITY, total_ready) if truncate_ready else (MAX_CAPACITY - total_ready, total_not_ready)
    can_be_added = limit
    out: list[dict[str, Any]] = []
    for subset in subsets:
        copy = dict(subset)
        field = "addresses" if truncate_ready else "notReadyAddresses"
        present = _list(subset.get(field))
        to_add = min(math.ceil(len(present) / total * limit), can_be_added)
        kept = present[:to_add] if len(present) > to_add else present
        if field in copy:
            copy[field] = list(kept)
        if truncate_ready:
            copy["notReadyAddresses"] = []
        can_be_added -= len(kept)
        out.append(copy)
    return out, True


# --- comparison -------------------------------------------------------------------------------------------

def _norm_ref(ref: Any) -> Any:
    if not isinstance(ref, Mapping):
        return None
    return tuple(str(ref.get(k) or "") for k in ("kind", "namespace", "name", "uid", "apiVersion", "fieldPath"))


def _norm_address(address: Obj) -> tuple[Any, ...]:
    # nodeName is a pointer upstream: absent and "" differ.
    return (str(address.get("ip") or ""), str(address.get("hostname") or ""), address.get("nodeName"),
            _norm_ref(address.get("targetRef")))


def _norm_port(port: Obj) -> tuple[Any, ...]:
    return (str(port.get("name") or ""), int(port.get("port") or 0), str(port.get("protocol") or ""),
            port.get("appProtocol"))


def _norm_subsets(subsets: Any) -> list[tuple[Any, ...]]:
    return [(tuple(_norm_address(a) for a in _list(s.get("addresses"))),
             tuple(_norm_address(a) for a in _list(s.get("notReadyAddresses"))),
             tuple(_norm_port(p) for p in _list(s.get("ports"))))
            for s in _list(subsets)]


def subsets_equal_ignoring_resource_version(a: Any, b: Any) -> bool:
    """``endpointSubsetsEqualIgnoreResourceVersion``: semantically equal but for targetRef resourceVersions."""
    return _norm_subsets(a) == _norm_subsets(b)
