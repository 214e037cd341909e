"""What the endpoints and EndpointSlice controllers share (upstream's ``pkg/controller/util/endpoint``): which
pods belong in a Service's endpoints, which pod changes matter to which Services, a Service port's target on a
pod, the sloppy IP parser, when a pod names a hostname, and the last-change trigger time each sync publishes.

Guarantees:
- :func:`pod_endpoints_changed` answers as upstream's ``podEndpointsChanged``: labels, hostname or subdomain
  changed -> the Services it matches may have; readiness or ``status.podIPs`` changed -> its endpoint may have.
  Upstream compares the two ``deletionTimestamp`` *pointers*, and an informer's old and new pod are distinct
  objects, so any update of a pod that is (or was) terminating counts as a change; so it does here.
- :func:`get_services_to_update_on_pod_change` answers as ``GetServicesToUpdateOnPodChange``: nothing for a
  resync (same resourceVersion) or an irrelevant change; otherwise the Services selecting the new pod, and with
  changed labels also those selecting the old one (all of both when the pod changed too, else only those it
  joined or left). :func:`get_pod_service_memberships` is ``GetPodServiceMemberships``: a Service without a
  selector selects nothing, an empty one everything.
- :func:`find_port` answers as ``FindPort`` (``pkg/api/v1/pod``): a numeric targetPort (an absent one is Go's
  zero IntOrString, 0) is returned as is; a named one is the first container port, then sidecar
  (``restartPolicy: Always`` init container) port, of that name and exactly the Service port's protocol;
  otherwise :class:`PortNotFound` "no suitable port for manifest: <pod uid>".
- :func:`parse_ip_sloppy` answers as ``k8s.io/utils/net.ParseIPSloppy`` (Go 1.16's parser): IPv4 octets and
  IPv6 fields may carry any number of leading zeros; zones, brackets, ports, prefixes and whitespace are
  refused (None); an IPv4-mapped IPv6 address is the IPv4 address it maps (Go's ``net.IP`` has one form for
  both).
- :func:`should_pod_be_in_endpoints` and :func:`should_set_hostname` answer as ``ShouldPodBeInEndpoints`` and
  ``ShouldSetHostname`` do.
- :class:`TriggerTimeTracker` keeps, per Service, the trigger times seen at its previous sync, as upstream's
  ``TriggerTimeTracker``; like upstream it may be off when an object changes several times between two syncs.
- :func:`format_trigger_time` writes a time as Go's ``time.RFC3339Nano`` does.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller_manager.api.meta import format_time, key_of, meta, parse_time
from controller_manager.api.pods import get_pod_ready_condition, is_pod_ready, is_pod_terminal, pod_ips

__all__ = ["LAST_CHANGE_TRIGGER_TIME", "PortNotFound", "TriggerTimeTracker", "determine_needed_service_updates",
           "find_port", "format_trigger_time", "get_pod_service_memberships",
           "get_services_to_update_on_pod_change", "parse_ip_sloppy", "pod_endpoints_changed",
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


# --- which pod changes matter, to which Services ---------------------------------------------------------


def _labels(pod: Obj) -> Mapping[str, str]:
    labels = meta(pod).get("labels")
    return labels if isinstance(labels, Mapping) else {}


def pod_endpoints_changed(old: Obj, new: Obj) -> tuple[bool, bool]:
    """``podEndpointsChanged``: (the pod's endpoint may have changed, the Services it matches may have)."""
    old_spec, new_spec = _spec(old), _spec(new)
    labels_changed = (_labels(new) != _labels(old) or old_spec.get("hostname") != new_spec.get("hostname")
                      or old_spec.get("subdomain") != new_spec.get("subdomain"))
    # Upstream compares the deletionTimestamp pointers: any update of a terminating pod counts.
    if meta(old).get("deletionTimestamp") is not None or meta(new).get("deletionTimestamp") is not None:
        return True, labels_changed
    if is_pod_ready(old) != is_pod_ready(new):
        return True, labels_changed
    if pod_ips(old) != pod_ips(new):
        return True, labels_changed
    # Name, namespace and uid are immutable, and nodeName is set before the pod has an IP.
    return False, labels_changed


def get_pod_service_memberships(services: Iterable[Obj], labels: Mapping[str, str]) -> set[str]:
    """``GetPodServiceMemberships``: the keys of those of ``services`` (the pod's namespace's) that select a pod
    labelled ``labels``. A Service without a selector selects nothing."""
    found: set[str] = set()
    for service in services:
        selector = _spec(service).get("selector")
        if selector is not None and all(labels.get(k) == v for k, v in selector.items()):
            found.add(key_of(service))
    return found


def determine_needed_service_updates(old_services: set[str], services: set[str], pod_changed: bool) -> set[str]:
    """With changed labels: every Service of either set if the pod changed too, else only those it joined or
    left (the symmetric difference)."""
    return services | old_services if pod_changed else services ^ old_services


def get_services_to_update_on_pod_change(services_in: Callable[[str], Iterable[Obj]], old: Obj,
                                         new: Obj) -> set[str]:
    """``GetServicesToUpdateOnPodChange``: the keys of the Services whose endpoints a pod update may change.
    ``services_in(namespace)`` lists a namespace's Services (the informer's cache)."""
    if meta(old).get("resourceVersion") == meta(new).get("resourceVersion"):
        return set()  # a resync: Services get their own
    pod_changed, labels_changed = pod_endpoints_changed(old, new)
    if not pod_changed and not labels_changed:
        return set()
    services = get_pod_service_memberships(services_in(str(meta(new).get("namespace") or "")), _labels(new))
    if labels_changed:
        old_services = get_pod_service_memberships(services_in(str(meta(old).get("namespace") or "")),
                                                   _labels(old))
        services = determine_needed_service_updates(old_services, services, pod_changed)
    return services


# --- ports --------------------------------------------------------------------------------------------------

SIDECAR_RESTART_POLICY = "Always"


def _container_ports(pod: Obj) -> Iterable[Mapping[str, Any]]:
    """The ports of the pod's containers, then of its sidecars (init containers that keep running)."""
    spec = _spec(pod)
    for container in spec.get("containers") or ():
        if isinstance(container, Mapping):
            yield from (p for p in container.get("ports") or () if isinstance(p, Mapping))
    for container in spec.get("initContainers") or ():
        if isinstance(container, Mapping) and container.get("restartPolicy") == SIDECAR_RESTART_POLICY:
            yield from (p for p in container.get("ports") or () if isinstance(p, Mapping))


def find_port(pod: Obj, service_port: Mapping[str, Any]) -> int:
    """``FindPort``: the container port ``service_port`` targets on ``pod``; raises :class:`PortNotFound`."""
    target = service_port.get("targetPort", 0)
    if isinstance(target, int) and not isinstance(target, bool):
        return target
    if isinstance(target, str):
        protocol = service_port.get("protocol") or ""
        for port in _container_ports(pod):
            if port.get("name") == target and (port.get("protocol") or "") == protocol:
                return int(port.get("containerPort") or 0)
    raise PortNotFound(f"no suitable port for manifest: {meta(pod).get('uid') or ''}")


# --- ParseIPSloppy ------------------------------------------------------------------------------------------

_DIGITS = frozenset("0123456789")
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def _ipv4_bytes(text: str) -> bytes | None:
    """Four dot-separated decimal octets, leading zeros allowed (Go 1.16's ``parseIPv4``)."""
    parts = text.split(".")
    if len(parts) != 4 or not all(p and _DIGITS.issuperset(p) and int(p) <= 0xFF for p in parts):
        return None
    return bytes(int(p) for p in parts)


def _ipv6_groups(text: str) -> list[int] | None:
    """Colon-separated hex fields (leading zeros allowed), the last possibly dotted IPv4, as 16-bit groups."""
    if not text:
        return []
    groups: list[int] = []
    fields = text.split(":")
    for i, f in enumerate(fields):
        if i == len(fields) - 1 and "." in f:
            v4 = _ipv4_bytes(f)
            if v4 is None:
                return None
            groups += [v4[0] << 8 | v4[1], v4[2] << 8 | v4[3]]
        elif f and _HEX_DIGITS.issuperset(f) and int(f, 16) <= 0xFFFF:
            groups.append(int(f, 16))
        else:
            return None
    return groups


def _ipv6_bytes(text: str) -> bytes | None:
    halves = text.split("::")
    if len(halves) > 2:
        return None
    head = _ipv6_groups(halves[0])
    if head is None:
        return None
    if len(halves) == 1:
        groups = head
        if len(groups) != 8:
            return None
    else:
        if "." in halves[0]:
            return None  # a dotted IPv4 part ends the address
        tail = _ipv6_groups(halves[1])
        if tail is None or len(head) + len(tail) > 7:
            return None  # "::" stands for at least one zero group
        groups = [*head, *[0] * (8 - len(head) - len(tail)), *tail]
    return b"".join(g.to_bytes(2, "big") for g in groups)


def parse_ip_sloppy(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """``netutils.ParseIPSloppy``: the address, or None when ``text`` is not one."""
    for c in text:
        if c == ".":
            v4 = _ipv4_bytes(text)
            return ipaddress.IPv4Address(v4) if v4 is not None else None
        if c == ":":
            v6 = _ipv6_bytes(text)
            if v6 is None:
                return None
            ip = ipaddress.IPv6Address(v6)
            return ip.ipv4_mapped or ip
    return None


# --- trigger times ------------------------------------------------------------------------------------------


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
