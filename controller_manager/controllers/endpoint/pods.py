"""From pods to Endpoints addresses and ports (``pkg/controller/endpoint``). Which pod changes matter,
``FindPort`` and ``ParseIPSloppy`` are shared with the EndpointSlice controller in
:mod:`controller_manager.controllerutil.endpoints`.

Guarantees:
- Nothing here does I/O or mutates its inputs.
- A pod is in a Service's Endpoints unless it is terminal (Failed/Succeeded), has no IP, or is terminating while
  the Service does not publish not-ready addresses.
- A pod's address is the first of its IPs in the Service's primary IP family (``spec.ipFamilies[0]``; without
  ipFamilies the cluster IP's family, or for a headless Service the pod's primary IP's), re-rendered canonically
  (``01.2.3.4`` -> ``1.2.3.4``); none means the pod is left out. It names its node (``nodeName``, written even
  when empty, as upstream's pointer is never nil) and targets the pod (kind, namespace, name, uid), and carries
  the pod's hostname when the pod's subdomain is the Service.
- Ports resolve as ``FindPort`` (:func:`~controller_manager.controllerutil.endpoints.find_port`); a port that
  does not resolve is left out for that pod.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

from controller_manager.api.meta import meta
from controller_manager.api.pods import pod_ips
from controller_manager.controllerutil.endpoints import parse_ip_sloppy, should_set_hostname

__all__ = [
    "endpoint_port",
    "pod_to_endpoint_address",
]

Obj = Mapping[str, Any]

CLUSTER_IP_NONE = "None"
IPV6 = "IPv6"


def _spec(obj: Obj) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


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
