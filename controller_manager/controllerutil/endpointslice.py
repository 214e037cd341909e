"""What the EndpointSlice controllers share (upstream's ``staging/src/k8s.io/endpointslice/util`` and
``pkg/controller/util/endpointslice``): the labels naming a slice's Service and manager, endpoint identity and
comparison, port-list keys, the tracker of a controller's own slice writes, and the stale-cache error.

Guarantees:
- An endpoint's identity is its sorted addresses, hostname and target namespace/name: conditions, node or zone
  may change while it keeps its place in its slice (an in-place update, not a move).
- :class:`EndpointSet` is insertion-ordered, so which endpoint :meth:`EndpointSet.pop_any` hands out (and so how
  slices are filled) is deterministic for a given insertion order, where upstream's Go map is random.
- :func:`port_map_key` is the same for two port lists with the same ports in any order; the API server's
  defaults (empty name, TCP) are applied first, so a slice read back from the server keys like the one built.
- :func:`endpoints_equal_beyond_hash` compares what the identity leaves out (node, zone, the three conditions,
  targetRef but its resourceVersion); an absent condition differs from a false one, as nil differs from false.
- :class:`EndpointSliceTracker`: every slice a controller created or updated is recorded with the generation the
  server returned; every slice it deleted as an expected deletion. Slices are grouped by their Service
  (namespace + ``kubernetes.io/service-name`` label) and known by UID. :meth:`~EndpointSliceTracker.stale_slices`
  is the stale-cache guard: a sync must not act while the cache shows an older generation than one written,
  still shows a slice deleted, or lacks a slice created. A Service recreated under the same name (new UID) drops
  the old one's records. :meth:`~EndpointSliceTracker.should_sync` says whether an informer event about a slice
  is news (not the echo of one's own write), :meth:`~EndpointSliceTracker.handle_deletion` whether a deletion
  was unexpected.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from controller_manager.api.meta import meta
from controller_manager.api.resources import Resource
from controller_manager.api.selectors import is_dns1123_subdomain

Obj = Mapping[str, Any]
Endpoint = Mapping[str, Any]
EndpointHash = tuple[tuple[str, ...], str, str, str]
PortMapKey = tuple[tuple[str, Any, str, Any], ...]

LABEL_SERVICE_NAME = "kubernetes.io/service-name"
LABEL_MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
ADDRESS_TYPE_IPV4 = "IPv4"
ADDRESS_TYPE_IPV6 = "IPv6"

_CONDITIONS = ("ready", "serving", "terminating")


class SliceWriter(Protocol):
    """The client calls the reconciler makes (``ApiClient`` has them)."""

    async def create(self, res: Resource, obj: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]: ...

    async def update(self, res: Resource, obj: Mapping[str, Any]) -> dict[str, Any]: ...

    async def delete(self, res: Resource, name: str, namespace: str | None = None) -> Any: ...


class StaleInformerCache(Exception):
    """The slice cache has not caught up with the controller's writes yet (``NewStaleInformerCache``)."""


def _labels(obj: Obj | None) -> Mapping[str, str]:
    if obj is None:
        return {}
    labels = meta(obj).get("labels")
    return labels if isinstance(labels, Mapping) else {}


def endpoint_slice_prefix(service_name: str) -> str:
    """``<service>-`` when that makes a valid generateName, else the bare name."""
    prefix = f"{service_name}-"
    # generateName is validated with its trailing dash masked (the random suffix follows it).
    if is_dns1123_subdomain(prefix[:-1] + "a"):
        return service_name
    return prefix


def service_controller_key(slice_: Obj | None) -> str:
    """``namespace/service`` from the slice's service-name label; ValueError without one."""
    if slice_ is None:
        raise ValueError("nil EndpointSlice passed to ServiceControllerKey()")
    name = _labels(slice_).get(LABEL_SERVICE_NAME)
    if not name:
        raise ValueError(f"EndpointSlice missing {LABEL_SERVICE_NAME} label")
    return f"{meta(slice_).get('namespace') or ''}/{name}"


def managed_by(slice_: Obj, controller_name: str) -> bool:
    """Whether the slice's managed-by label names ``controller_name``."""
    return _labels(slice_).get(LABEL_MANAGED_BY) == controller_name


# --- endpoints and ports ----------------------------------------------------------------------------------

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


# --- the tracker of one's own writes ---------------------------------------------------------------------

DELETION_EXPECTED = -1
ServiceName = tuple[str, str]  # (namespace, name)


def _service_of(slice_: Obj) -> ServiceName:
    labels = meta(slice_).get("labels") or {}
    return str(meta(slice_).get("namespace") or ""), str(labels.get(LABEL_SERVICE_NAME) or "")


def _generation(slice_: Obj) -> int:
    value = meta(slice_).get("generation")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _uid(obj: Obj) -> str:
    return str(meta(obj).get("uid") or "")


class EndpointSliceTracker:
    """Generations of the slices this controller wrote, by Service, by slice UID."""

    def __init__(self) -> None:
        self._generations: dict[ServiceName, dict[str, int]] = {}
        self._service_uids: dict[ServiceName, str] = {}

    def generations_for(self, slice_: Obj) -> dict[str, int] | None:
        """The tracked generations of the slice's Service (a live view, for tests), or None."""
        return self._generations.get(_service_of(slice_))

    def has(self, slice_: Obj) -> bool:
        gens = self._generations.get(_service_of(slice_))
        return gens is not None and _uid(slice_) in gens

    def should_sync(self, slice_: Obj) -> bool:
        """True unless the slice is tracked at this generation or a newer one (our own write echoing back)."""
        gens = self._generations.get(_service_of(slice_))
        if gens is None:
            return True
        tracked = gens.get(_uid(slice_))
        return tracked is None or _generation(slice_) > tracked

    def stale_slices(self, service: Obj, slices: Iterable[Obj]) -> bool:
        """True if the cache (``slices``) lags behind this controller's writes for ``service``."""
        name = (str(meta(service).get("namespace") or ""), str(meta(service).get("name") or ""))
        uid = _uid(service)
        tracked_uid = self._service_uids.get(name)
        if tracked_uid and uid and tracked_uid != uid:
            # Writes for a previous Service of this name will never show up: forget them.
            self._generations.pop(name, None)
        self._service_uids[name] = uid
        gens = self._generations.get(name)
        if gens is None:
            return False
        provided: set[str] = set()
        for slice_ in slices:
            slice_uid = _uid(slice_)
            provided.add(slice_uid)
            tracked = gens.get(slice_uid)
            if tracked is not None and (tracked == DELETION_EXPECTED or tracked > _generation(slice_)):
                return True
        return any(g != DELETION_EXPECTED and u not in provided for u, g in gens.items())

    def update(self, slice_: Obj) -> None:
        """Record a slice as written at its generation."""
        self._generations.setdefault(_service_of(slice_), {})[_uid(slice_)] = _generation(slice_)

    def expect_deletion(self, slice_: Obj) -> None:
        self._generations.setdefault(_service_of(slice_), {})[_uid(slice_)] = DELETION_EXPECTED

    def handle_deletion(self, slice_: Obj) -> bool:
        """Forget a deleted slice; False if it was tracked and its deletion was not expected."""
        gens = self._generations.get(_service_of(slice_))
        if gens is not None:
            tracked = gens.pop(_uid(slice_), None)
            if tracked is not None and tracked != DELETION_EXPECTED:
                return False
        return True

    def delete_service(self, namespace: str, name: str) -> None:
        self._generations.pop((namespace, name), None)
        self._service_uids.pop((namespace, name), None)
