"""Pure builders and predicates of the EndpointSlice controller (``staging/src/k8s.io/endpointslice/utils.go``
and ``util/controller_utils.go``).

Guarantees:
- Nothing here does I/O or mutates its inputs; every slice, endpoint or label map returned is a new dict.
- An endpoint is the API's JSON: ``addresses``, ``conditions`` (``ready``/``serving``/``terminating``, always all
  three), ``targetRef`` (kind Pod, namespace, name, uid; empty fields left out as the API omits them), and
  ``nodeName``/``zone``/``hostname`` only when set. Addresses are re-rendered canonically (``0010.1.2.3`` ->
  ``10.1.2.3``, IPv6 compressed), as upstream's ``ParseIPSloppy(...).String()`` does.
- Ports are resolved per pod with ``FindPort`` (:func:`~controller_manager.controllerutil.endpoints.find_port`);
  a port that cannot be resolved is left out of that pod's port list, so pods resolving differently land in
  different slices.
- Slice labels are the Service's labels minus the reserved ones, plus ``kubernetes.io/service-name``,
  ``endpointslice.kubernetes.io/managed-by`` and, for a Service without a cluster IP,
  ``service.kubernetes.io/headless``; ``set_endpoint_slice_labels`` tells whether the copied labels changed.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from controller_manager.api.meta import meta
from controller_manager.api.pods import is_pod_ready, pod_ips
from controller_manager.controllerutil.endpoints import (
    LAST_CHANGE_TRIGGER_TIME,
    PortNotFound,
    find_port,
    format_trigger_time,
    parse_ip_sloppy,
    should_set_hostname,
)
from controller_manager.controllerutil.endpointslice import (
    ADDRESS_TYPE_IPV4,
    ADDRESS_TYPE_IPV6,
    LABEL_MANAGED_BY,
    LABEL_SERVICE_NAME,
    endpoint_slice_prefix,
)

Obj = Mapping[str, Any]

IS_HEADLESS_SERVICE = "service.kubernetes.io/headless"
LABEL_TOPOLOGY_ZONE = "topology.kubernetes.io/zone"
CLUSTER_IP_NONE = "None"
DEFAULT_PROTOCOL = "TCP"


def _spec(obj: Obj) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _labels(obj: Obj | None) -> Mapping[str, str]:
    if obj is None:
        return {}
    labels = meta(obj).get("labels")
    return labels if isinstance(labels, Mapping) else {}


# --- addresses --------------------------------------------------------------------------------------------

def get_endpoint_addresses(pod: Obj, address_type: str) -> list[str]:
    """The pod's IPs of ``address_type`` in canonical text form (``getEndpointAddresses``)."""
    addresses: list[str] = []
    for text in pod_ips(pod):
        ip = parse_ip_sloppy(text)
        if ip is None:
            continue  # the API server validates pod IPs; an unparsable one can only be skipped
        is_v6 = isinstance(ip, ipaddress.IPv6Address)
        if is_v6 == (address_type == ADDRESS_TYPE_IPV6):
            addresses.append(str(ip))
    return addresses


# --- pods -------------------------------------------------------------------------------------------------


def pod_to_endpoint(pod: Obj, node: Obj | None, service: Obj, address_type: str) -> dict[str, Any]:
    """The Endpoint for ``pod`` (``podToEndpoint``). ``node`` supplies the zone; None when unknown."""
    serving = is_pod_ready(pod)
    terminating = meta(pod).get("deletionTimestamp") is not None
    # A terminating pod is never "ready", unless the Service publishes not-ready addresses anyway.
    ready = bool(_spec(service).get("publishNotReadyAddresses")) or (serving and not terminating)
    pm = meta(pod)
    target_ref = {"kind": "Pod", "namespace": pm.get("namespace"), "name": pm.get("name"), "uid": pm.get("uid")}
    endpoint: dict[str, Any] = {
        "addresses": get_endpoint_addresses(pod, address_type),
        "conditions": {"ready": ready, "serving": serving, "terminating": terminating},
        "targetRef": {k: v for k, v in target_ref.items() if v},
    }
    node_name = _spec(pod).get("nodeName")
    if node_name:
        endpoint["nodeName"] = node_name
    zone = _labels(node).get(LABEL_TOPOLOGY_ZONE)
    if zone:
        endpoint["zone"] = zone
    if should_set_hostname(pod, service):
        endpoint["hostname"] = _spec(pod).get("hostname")
    return endpoint


# --- ports ------------------------------------------------------------------------------------------------

def get_endpoint_ports(service: Obj, pod: Obj) -> list[dict[str, Any]]:
    """The EndpointPorts of ``service`` as resolved for ``pod`` (``getEndpointPorts``)."""
    spec = _spec(service)
    service_ports = [p for p in spec.get("ports") or () if isinstance(p, Mapping)]
    if not service_ports and spec.get("clusterIP") == CLUSTER_IP_NONE:
        return []  # a headless Service may have no ports
    ports: list[dict[str, Any]] = []
    for service_port in service_ports:
        try:
            number = find_port(pod, service_port)
        except PortNotFound:
            continue
        port: dict[str, Any] = {
            "name": service_port.get("name") or "",
            "port": number,
            "protocol": service_port.get("protocol") or DEFAULT_PROTOCOL,
        }
        if service_port.get("appProtocol") is not None:
            port["appProtocol"] = service_port["appProtocol"]
        ports.append(port)
    return ports


# --- services ---------------------------------------------------------------------------------------------

def is_service_ip_set(service: Obj) -> bool:
    cluster_ip = _spec(service).get("clusterIP")
    return bool(cluster_ip) and cluster_ip != CLUSTER_IP_NONE


def address_types_for_service(service: Obj) -> list[str]:
    """The address types the Service's slices have (``getAddressTypesForService``), in ipFamilies order.

    Without ipFamilies (an API server too old to set them) the cluster IP's family decides; a headless
    Service then gets both types rather than losing endpoints."""
    spec = _spec(service)
    types: list[str] = []
    for family in spec.get("ipFamilies") or ():
        if family in (ADDRESS_TYPE_IPV4, ADDRESS_TYPE_IPV6) and family not in types:
            types.append(family)
    if types:
        return types
    cluster_ip = spec.get("clusterIP")
    if cluster_ip and cluster_ip != CLUSTER_IP_NONE:
        ip = parse_ip_sloppy(str(cluster_ip))
        return [ADDRESS_TYPE_IPV6 if isinstance(ip, ipaddress.IPv6Address) else ADDRESS_TYPE_IPV4]
    return [ADDRESS_TYPE_IPV4, ADDRESS_TYPE_IPV6]


def is_reserved_label_key(key: str) -> bool:
    return key in (LABEL_SERVICE_NAME, LABEL_MANAGED_BY, IS_HEADLESS_SERVICE)


def set_endpoint_slice_labels(slice_: Obj | None, service: Obj, controller_name: str) -> tuple[dict[str, str], bool]:
    """The labels ``slice_`` should carry, and whether the Service's (non-reserved) labels differ from its own.

    A change of the reserved labels alone (headless-ness, service name, managed-by) is not reported as a change:
    upstream leaves those to be fixed by the next write for another reason."""
    current = {k: v for k, v in _labels(slice_).items() if not is_reserved_label_key(k)}
    wanted = {k: str(v) for k, v in _labels(service).items() if not is_reserved_label_key(k)}
    updated = current != wanted
    if not is_service_ip_set(service):
        wanted[IS_HEADLESS_SERVICE] = ""
    wanted[LABEL_SERVICE_NAME] = str(meta(service).get("name") or "")
    wanted[LABEL_MANAGED_BY] = controller_name
    return wanted, updated


def service_controller_ref(service: Obj) -> dict[str, Any]:
    """``metav1.NewControllerRef(service, v1 Service)``."""
    m = meta(service)
    return {"apiVersion": "v1", "kind": "Service", "name": m.get("name"), "uid": m.get("uid"),
            "controller": True, "blockOwnerDeletion": True}


def new_endpoint_slice(service: Obj, ports: Sequence[Mapping[str, Any]], address_type: str,
                       controller_name: str) -> dict[str, Any]:
    """An empty slice (no name yet: created with generateName) for ``service`` (``newEndpointSlice``)."""
    m = meta(service)
    labels, _ = set_endpoint_slice_labels(None, service, controller_name)
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "generateName": endpoint_slice_prefix(str(m.get("name") or "")),
            "namespace": m.get("namespace"),
            "labels": labels,
            "ownerReferences": [service_controller_ref(service)],
        },
        "addressType": address_type,
        "endpoints": [],
        "ports": [dict(p) for p in ports],
    }


def owned_by(slice_: Obj, service: Obj) -> bool:
    """Whether an ownerReference of the slice names this Service (same UID, kind Service, v1)."""
    uid = meta(service).get("uid")
    for ref in meta(slice_).get("ownerReferences") or ():
        if (isinstance(ref, Mapping) and ref.get("uid") == uid and ref.get("kind") == "Service"
                and ref.get("apiVersion") == "v1"):
            return True
    return False


# --- slices -----------------------------------------------------------------------------------------------

def slice_endpoints(slice_: Obj) -> list[Mapping[str, Any]]:
    endpoints = slice_.get("endpoints")
    return [e for e in endpoints if isinstance(e, Mapping)] if isinstance(endpoints, list) else []


def get_slice_to_fill(slices: Iterable[Obj], num_endpoints: int, max_endpoints: int) -> Obj | None:
    """The slice that ends closest to full after taking ``num_endpoints`` more; None if none has room."""
    closest_diff = max_endpoints
    closest: Obj | None = None
    for candidate in slices:
        diff = max_endpoints - (num_endpoints + len(slice_endpoints(candidate)))
        if 0 <= diff < closest_diff:
            closest_diff, closest = diff, candidate
            if diff == 0:
                break
    return closest


def with_trigger_time(slice_: Mapping[str, Any], trigger_time: float | None) -> dict[str, Any]:
    """A copy of ``slice_`` whose last-change-trigger-time annotation says ``trigger_time`` (removed if None)."""
    m = dict(meta(slice_))
    annotations = dict(m.get("annotations") or {})
    if trigger_time is not None:
        annotations[LAST_CHANGE_TRIGGER_TIME] = format_trigger_time(trigger_time)
    else:
        annotations.pop(LAST_CHANGE_TRIGGER_TIME, None)
    m["annotations"] = annotations
    return {**slice_, "metadata": m}


def _empty_is_none(value: Any) -> Any:
    # apimachinery's semantic equality treats nil and empty slices/maps alike.
    return None if value in (None, [], {}) else value


def placeholder_slice_equal(a: Obj | None, b: Obj | None) -> bool:
    """``placeholderSliceCompare``: equal but for metadata other than namespace and labels."""
    if a is None or b is None:
        return a is None and b is None
    if meta(a).get("namespace") != meta(b).get("namespace"):
        return False
    if dict(_labels(a)) != dict(_labels(b)):
        return False
    for field in ("addressType", "endpoints", "ports"):
        if _empty_is_none(a.get(field)) != _empty_is_none(b.get(field)):
            return False
    return True
