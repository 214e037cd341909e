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

Guarantees of :class:`TriggerTimeTracker`: the trigger time of a sync is the Service's creation time the first
time a Service is seen, then the earliest Ready-transition time (or Service creation) that changed since the
previous sync, or None when nothing did (the annotation is then removed by the next write).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller_manager.api.meta import meta, parse_time
from controller_manager.api.pods import get_pod_ready_condition

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


@dataclass
class _ServiceState:
    service_trigger_time: float | None = None
    pod_trigger_times: dict[str, float] = field(default_factory=dict)


def _pod_trigger_time(pod: Obj) -> float | None:
    condition = get_pod_ready_condition(pod)
    return parse_time(condition.get("lastTransitionTime")) if condition is not None else None


class TriggerTimeTracker:
    """``TriggerTimeTracker``: the last-change-trigger-time of each sync, per Service.

    Like upstream it may be off when one object changes several times between two syncs."""

    def __init__(self) -> None:
        self._states: dict[ServiceName, _ServiceState] = {}

    def compute(self, namespace: str, service: Obj, pods: Iterable[Obj]) -> float | None:
        """Update the Service's state; the trigger time to publish, or None for none."""
        key = (namespace, str(meta(service).get("name") or ""))
        state = self._states.get(key)
        was_known = state is not None
        previous = state or _ServiceState()
        earliest: float | None = None
        pod_times: dict[str, float] = {}
        for pod in pods:
            t = _pod_trigger_time(pod)
            if t is None:
                continue
            name = str(meta(pod).get("name") or "")
            pod_times[name] = t
            last = previous.pod_trigger_times.get(name)
            if last is None or t > last:
                earliest = t if earliest is None else min(earliest, t)
        service_time = parse_time(meta(service).get("creationTimestamp"))
        if service_time is not None and (previous.service_trigger_time is None
                                         or service_time > previous.service_trigger_time):
            earliest = service_time if earliest is None else min(earliest, service_time)
        self._states[key] = _ServiceState(service_time, pod_times)
        if not was_known:
            return service_time  # a new Service: its creation triggered this sync
        return earliest

    def delete_service(self, namespace: str, name: str) -> None:
        self._states.pop((namespace, name), None)
