"""What the endpoints and EndpointSlice controllers share (upstream's ``pkg/controller/util/endpoint``): which
pods belong in a Service's endpoints, when a pod names a hostname, and the last-change trigger time each sync
publishes.

Guarantees:
- :func:`should_pod_be_in_endpoints` and :func:`should_set_hostname` answer as ``ShouldPodBeInEndpoints`` and
  ``ShouldSetHostname`` do.
- :class:`TriggerTimeTracker` keeps, per Service, the trigger times seen at its previous sync, as upstream's
  ``TriggerTimeTracker``; like upstream it may be off when an object changes several times between two syncs.
- :func:`format_trigger_time` writes a time as Go's ``time.RFC3339Nano`` does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller_manager.api.meta import format_time, meta, parse_time
from controller_manager.api.pods import get_pod_ready_condition, is_pod_terminal, pod_ips

__all__ = ["LAST_CHANGE_TRIGGER_TIME", "PortNotFound", "TriggerTimeTracker", "format_trigger_time",
           "should_pod_be_in_endpoints", "should_set_hostname"]

Obj = Mapping[str, Any]

LAST_CHANGE_TRIGGER_TIME = "endpoints.kubernetes.io/last-change-trigger-time"


class PortNotFound(LookupError):
    """A Service port's targetPort resolves to no port of the pod (``FindPort``'s error)."""


def _spec(obj: Obj) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def should_pod_be_in_endpoints(pod: Obj, include_terminating: bool = True) -> bool:
    """A pod with an IP that has not finished; a terminating one only when ``include_terminating``."""
    if is_pod_terminal(pod) or not pod_ips(pod):
        return False
    return include_terminating or meta(pod).get("deletionTimestamp") is None


def should_set_hostname(pod: Obj, service: Obj) -> bool:
    """The pod names a hostname and its subdomain is this Service (same namespace)."""
    spec = _spec(pod)
    return (bool(spec.get("hostname")) and spec.get("subdomain") == meta(service).get("name")
            and meta(service).get("namespace") == meta(pod).get("namespace"))


def format_trigger_time(ts: float) -> str:
    """RFC 3339 in UTC with nanoseconds, trailing zeros trimmed (Go's ``time.RFC3339Nano``)."""
    whole = int(ts // 1)
    text = format_time(float(whole))
    nanos = round((ts - whole) * 1e9)
    if nanos <= 0 or nanos >= 1_000_000_000:
        return text
    return f"{text[:-1]}.{nanos:09d}".rstrip("0") + "Z"


def _pod_trigger_time(pod: Obj) -> float | None:
    condition = get_pod_ready_condition(pod)
    return parse_time(condition.get("lastTransitionTime")) if condition is not None else None


@dataclass
class _ServiceState:
    service_trigger_time: float | None = None
    pod_trigger_times: dict[str, float] = field(default_factory=dict)


class TriggerTimeTracker:
    """``TriggerTimeTracker``: the last-change-trigger-time of each sync, per Service."""

    def __init__(self) -> None:
        self._states: dict[tuple[str, str], _ServiceState] = {}

    def compute(self, namespace: str, service: Obj, pods: Iterable[Obj]) -> float | None:
        """Record this sync's state; the trigger time to publish, or None for none."""
        key = (namespace, str(meta(service).get("name") or ""))
        previous = self._states.get(key)
        state = previous or _ServiceState()
        earliest: float | None = None
        pod_times: dict[str, float] = {}
        for pod in pods:
            t = _pod_trigger_time(pod)
            if t is None:
                continue
            name = str(meta(pod).get("name") or "")
            pod_times[name] = t
            last = state.pod_trigger_times.get(name)
            if last is None or t > last:
                earliest = t if earliest is None else min(earliest, t)
        service_time = parse_time(meta(service).get("creationTimestamp"))
        if service_time is not None and (state.service_trigger_time is None
                                         or service_time > state.service_trigger_time):
            earliest = service_time if earliest is None else min(earliest, service_time)
        self._states[key] = _ServiceState(service_time, pod_times)
        if previous is None:
            return service_time  # a new Service: its creation triggered this sync
        return earliest

    def delete_service(self, namespace: str, name: str) -> None:
        self._states.pop((namespace, name), None)
