"""From pods to Endpoints addresses and ports, and which pod changes matter (``pkg/controller/endpoint``,
``k8s.io/endpointslice/util``, ``pkg/api/v1/pod.FindPort``).

Guarantees:
- Nothing here does I/O or mutates its inputs.
- A pod is in a Service's Endpoints unless it is terminal (Failed/Succeeded), has no IP, or is terminating while
  the Service does not publish not-ready addresses.
- A pod's address is the first of its IPs in the Service's primary IP family (``spec.ipFamilies[0]``; without
  ipFamilies the cluster IP's family, or for a headless Service the pod's primary IP's), re-rendered canonically
  (``01.2.3.4`` -> ``1.2.3.4``); none means the pod is left out. It names its node (``nodeName``, written even
  when empty, as upstream's pointer is never nil) and targets the pod (kind, namespace, name, uid), and carries
  the pod's hostname when the pod's subdomain is the Service.
- Ports resolve as ``FindPort``: a numeric targetPort is used as is, a named one is looked up in the containers'
  ports (then sidecars') with the same protocol; a port that does not resolve is left out for that pod.
- :class:`TriggerTimeTracker`: the last-change-trigger-time of a sync is a new Service's creation time, then the
  earliest Ready-transition (or Service creation) time that moved since the previous sync, else none.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from typing import Any

from controller_manager.api.meta import meta
from controller_manager.api.pods import is_pod_ready, pod_ips
from controller_manager.controllerutil.endpoints import PortNotFound, should_set_hostname

__all__ = [
    "endpoint_port",
    "find_port",
    "pod_endpoints_changed",
    "pod_to_endpoint_address",
]

Obj = Mapping[str, Any]

CLUSTER_IP_NONE = "None"
IPV6 = "IPv6"
SIDECAR_RESTART_POLICY = "Always"


def _spec(obj: Obj) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def parse_ip_sloppy(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """``netutils.ParseIPSloppy``: IPv4 octets may carry leading zeros (read as decimal); an IPv4-mapped IPv6
    address is the IPv4 address it maps."""
    if ":" in text:
        # The forked parser reads each IPv6 field as a hex number up to 0xFFFF, leading zeros and all.
        fields = text.split(":")
        if all(len(f) <= 4 or (all(c in "0123456789abcdefABCDEF" for c in f) and int(f, 16) <= 0xFFFF)
               for f in fields):
            text = ":".join(f if len(f) <= 4 else f"{int(f, 16):x}" for f in fields)
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        parts = text.split(".")
        if len(parts) != 4 or not all(p.isdigit() and 0 < len(p) <= 4 and int(p) <= 255 for p in parts):
            return None
        return ipaddress.IPv4Address(".".join(str(int(p)) for p in parts))
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _is_ipv6(text: str) -> bool:
    return isinstance(parse_ip_sloppy(text), ipaddress.IPv6Address)


# --- membership -------------------------------------------------------------------------------------------


def pod_to_endpoint_address(service: Obj, pod: Obj) -> dict[str, Any] | None:
    """``podToEndpointAddressForService``: the pod's address for this Service, or None when it has no IP of the
    Service's family (a dual-stack Service over single-stack pods, during upgrades)."""
    spec = _spec(service)
    families = spec.get("ipFamilies")
    if isinstance(families, list) and families:
        want_v6 = families[0] == IPV6  # this works for headful and headless
    else:
        cluster_ip = spec.get("clusterIP")
        if cluster_ip and cluster_ip != CLUSTER_IP_NONE:
            want_v6 = _is_ipv6(str(cluster_ip))
        else:
            ips = pod_ips(pod)
            want_v6 = bool(ips) and _is_ipv6(ips[0])
    for text in pod_ips(pod):
        ip = parse_ip_sloppy(text)
        if ip is not None and isinstance(ip, ipaddress.IPv6Address) == want_v6:
            m = meta(pod)
            ref = {"kind": "Pod", "namespace": m.get("namespace"), "name": m.get("name"), "uid": m.get("uid")}
            address: dict[str, Any] = {"ip": str(ip), "nodeName": str(_spec(pod).get("nodeName") or ""),
                                       "targetRef": {k: v for k, v in ref.items() if v}}
            if should_set_hostname(pod, service):
                address["hostname"] = _spec(pod).get("hostname")
            return address
    return None


# --- ports ------------------------------------------------------------------------------------------------

def _named_ports(pod: Obj) -> Iterable[Mapping[str, Any]]:
    spec = _spec(pod)
    for container in spec.get("containers") or ():
        if isinstance(container, Mapping):
            yield from (p for p in container.get("ports") or () if isinstance(p, Mapping))
    for container in spec.get("initContainers") or ():
        # Sidecars (init containers that keep running) serve traffic too.
        if isinstance(container, Mapping) and container.get("restartPolicy") == SIDECAR_RESTART_POLICY:
            yield from (p for p in container.get("ports") or () if isinstance(p, Mapping))


def find_port(pod: Obj, service_port: Mapping[str, Any]) -> int:
    """``FindPort``: the container port ``service_port`` targets on ``pod``; raises :class:`PortNotFound`.

    An absent targetPort is Go's zero IntOrString, the number 0 (the API server defaults it to the port)."""
    target = service_port.get("targetPort", 0)
    if isinstance(target, int) and not isinstance(target, bool):
        return target
    if isinstance(target, str):
        protocol = service_port.get("protocol") or ""
        for port in _named_ports(pod):
            if port.get("name") == target and (port.get("protocol") or "") == protocol:
                return int(port.get("containerPort") or 0)
    raise PortNotFound(f"no suitable port for manifest: {meta(pod).get('uid') or ''}")


def endpoint_port(service_port: Mapping[str, Any], number: int) -> dict[str, Any]:
    """``endpointPortFromServicePort``."""
    port: dict[str, Any] = {"port": number}
    if service_port.get("name"):
        port["name"] = service_port["name"]
    if service_port.get("protocol"):
        port["protocol"] = service_port["protocol"]
    if service_port.get("appProtocol") is not None:
        port["appProtocol"] = service_port["appProtocol"]
    return port


# --- pod changes ------------------------------------------------------------------------------------------

def pod_endpoints_changed(old: Obj, new: Obj) -> tuple[bool, bool]:
    """``podEndpointsChanged``: (the pod's address may have changed, the Services selecting it may have)."""
    old_spec, new_spec = _spec(old), _spec(new)
    labels_changed = ((meta(new).get("labels") or {}) != (meta(old).get("labels") or {})
                      or old_spec.get("hostname") != new_spec.get("hostname")
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


# --- trigger time -----------------------------------------------------------------------------------------


