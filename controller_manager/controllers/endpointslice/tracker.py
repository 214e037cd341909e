"""What the controller remembers between syncs: its own EndpointSlice writes, and the last trigger times
(``util/endpointslice_tracker.go``, ``util/trigger_time_tracker.go``).

Guarantees of :class:`EndpointSliceTracker`:
- Every slice the controller created or updated is recorded with the generation the server returned; every
  slice it deleted is recorded as an expected deletion. Slices are grouped by their Service
  (namespace + ``kubernetes.io/service-name`` label) and known by UID.
- :meth:`~EndpointSliceTracker.stale_slices` is the stale-cache guard: a sync must not act while the cache shows
  an older generation than one written, still shows a slice deleted, or lacks a slice created. A Service
  recreated under the same name (new UID) drops the old one's records, which can never show up.
- :meth:`~EndpointSliceTracker.should_sync` says whether an informer event about a slice is news (not the echo
  of our own write), :meth:`~EndpointSliceTracker.handle_deletion` whether a deletion was unexpected.

:class:`TriggerTimeTracker` (the trigger time of a sync: the Service's creation time the first time a Service is
seen, then the earliest Ready-transition time or Service creation that changed since the previous sync, or None)
is shared with the endpoints controller, from :mod:`controller_manager.controllerutil.endpoints`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from controller_manager.api.meta import meta

from .util import LABEL_SERVICE_NAME

Obj = Mapping[str, Any]

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
