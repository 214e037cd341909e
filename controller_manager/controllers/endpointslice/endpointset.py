"""Identity and comparison of endpoints and port lists (``util/endpointset.go``, ``util/controller_utils.go``).

Guarantees:
- An endpoint's identity is its sorted addresses, hostname and target namespace/name: conditions, node or zone
  may change while it keeps its place in its slice (an in-place update, not a move).
- :class:`EndpointSet` is insertion-ordered, so which endpoint :meth:`EndpointSet.pop_any` hands out (and so how
  slices are filled) is deterministic for a given pod order, where upstream's Go map is random.
- :func:`port_map_key` is the same for two port lists with the same ports in any order; the API server's
  defaults (empty name, TCP) are applied first, so a slice read back from the server keys like the one built.
- :func:`endpoints_equal_beyond_hash` compares what the identity leaves out (node, zone, the three conditions,
  targetRef but its resourceVersion); an absent condition differs from a false one, as nil differs from false.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

Endpoint = Mapping[str, Any]
EndpointHash = tuple[tuple[str, ...], str, str, str]
PortMapKey = tuple[tuple[str, Any, str, Any], ...]

_CONDITIONS = ("ready", "serving", "terminating")


def endpoint_hash(endpoint: Endpoint) -> EndpointHash:
    """``hashEndpoint``: sorted addresses, hostname, target namespace and name."""
    addresses = endpoint.get("addresses") or ()
    ref = endpoint.get("targetRef")
    ref = ref if isinstance(ref, Mapping) else {}
    return (tuple(sorted(str(a) for a in addresses)), str(endpoint.get("hostname") or ""),
            str(ref.get("namespace") or ""), str(ref.get("name") or ""))


class EndpointSet:
    """Endpoints by identity (``util.EndpointSet``), in insertion order."""

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: dict[EndpointHash, Endpoint] = {}

    def insert(self, endpoint: Endpoint) -> None:
        self._items[endpoint_hash(endpoint)] = endpoint

    def get(self, endpoint: Endpoint) -> Endpoint | None:
        """The member with ``endpoint``'s identity, if any."""
        return self._items.get(endpoint_hash(endpoint))

    def delete(self, endpoint: Endpoint) -> None:
        self._items.pop(endpoint_hash(endpoint), None)

    def pop_any(self) -> Endpoint:
        """Remove and return the oldest member; KeyError when empty."""
        key = next(iter(self._items))
        return self._items.pop(key)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Endpoint]:
        return iter(self._items.values())


def port_map_key(ports: Sequence[Mapping[str, Any]] | None) -> PortMapKey:
    """``NewPortMapKey``: the same for equal port lists in any order (nil and empty alike)."""
    normalized = [
        (str(p.get("name") or ""), p.get("port"), str(p.get("protocol") or "TCP"), p.get("appProtocol"))
        for p in ports or () if isinstance(p, Mapping)
    ]
    return tuple(sorted(normalized, key=repr))


def _ref_without_rv(ref: Any) -> Any:
    if not isinstance(ref, Mapping):
        return ref
    return {k: v for k, v in ref.items() if k != "resourceVersion"}


def endpoints_equal_beyond_hash(a: Endpoint, b: Endpoint) -> bool:
    """``EndpointsEqualBeyondHash``: node, zone, conditions and targetRef (resourceVersion aside) equal."""
    if a.get("nodeName") != b.get("nodeName") or a.get("zone") != b.get("zone"):
        return False
    ca, cb = a.get("conditions") or {}, b.get("conditions") or {}
    if any(ca.get(c) != cb.get(c) for c in _CONDITIONS):
        return False
    return bool(_ref_without_rv(a.get("targetRef")) == _ref_without_rv(b.get("targetRef")))
