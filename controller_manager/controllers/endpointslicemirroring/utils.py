"""Pure builders and predicates of the mirroring controller (``pkg/controller/endpointslicemirroring/utils.go``).

Guarantees:
- Nothing here does I/O or mutates its inputs; every slice, endpoint or map returned is a new dict.
- A mirrored slice is controlled by its Endpoints (``ownerReferences``: v1 Endpoints, controller and
  blockOwnerDeletion), carries the Endpoints' labels with ``kubernetes.io/service-name`` and
  ``endpointslice.kubernetes.io/managed-by: endpointslicemirroring-controller.k8s.io`` set over them, and its
  annotations but the last-change trigger time and kubectl's last-applied configuration.
- An address becomes an endpoint with one canonical address (``0010.1.2.3`` -> ``10.1.2.3``, IPv6 compressed,
  an IPv4-mapped IPv6 address as IPv4), the ``ready`` condition only, and the address' targetRef, nodeName and
  (non-empty) hostname; its address type is its IP's family. An unparsable IP gives no endpoint.
- An Endpoints is mirrored unless it is labelled ``endpointslice.kubernetes.io/skip-mirror: "true"`` or carries
  the leader-election annotation (an Endpoints used as a lock, not a list of endpoints).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from typing import Any

from controller_manager.api.meta import meta
from controller_manager.controllerutil.endpoints import LAST_CHANGE_TRIGGER_TIME, parse_ip_sloppy
from controller_manager.controllerutil.endpointslice import (
    ADDRESS_TYPE_IPV4,
    ADDRESS_TYPE_IPV6,
    LABEL_MANAGED_BY,
    LABEL_SERVICE_NAME,
    PortMapKey,
    endpoint_slice_prefix,
    managed_by,
    port_map_key,
)

Obj = Mapping[str, Any]

# The managed-by label value of the slices this controller writes.
CONTROLLER_NAME = "endpointslicemirroring-controller.k8s.io"
LABEL_SKIP_MIRROR = "endpointslice.kubernetes.io/skip-mirror"
LEADER_ELECTION_ANNOTATION = "control-plane.alpha.kubernetes.io/leader"
LAST_APPLIED_CONFIG_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"

# (address type, port list key): one group of mirrored slices.
AddrTypePortMapKey = tuple[str, PortMapKey]


def _str_map(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}


def addr_type_port_map_key(ports: Sequence[Mapping[str, Any]] | None, address_type: str) -> AddrTypePortMapKey:
    """``newAddrTypePortMapKey``: equal for the same address type and the same ports in any order."""
    return address_type, port_map_key(ports)


def address_type_of(ip_text: str) -> str | None:
    """``getAddressType``: the family of an IP written the way Endpoints may write it, or None if invalid."""
    ip = parse_ip_sloppy(ip_text)
    if ip is None:
        return None
    return ADDRESS_TYPE_IPV6 if isinstance(ip, ipaddress.IPv6Address) else ADDRESS_TYPE_IPV4


def address_to_endpoint(address: Obj, ready: bool) -> tuple[dict[str, Any], str] | None:
    """``addressToEndpoint``: the endpoint for an Endpoints address and its address type; None for a bad IP."""
    ip = parse_ip_sloppy(str(address.get("ip") or ""))
    if ip is None:
        return None
    endpoint: dict[str, Any] = {"addresses": [str(ip)], "conditions": {"ready": ready}}
    if isinstance(address.get("targetRef"), Mapping):
        endpoint["targetRef"] = dict(address["targetRef"])
    if address.get("nodeName") is not None:
        endpoint["nodeName"] = address["nodeName"]
    if address.get("hostname"):
        endpoint["hostname"] = address["hostname"]
    return endpoint, ADDRESS_TYPE_IPV6 if isinstance(ip, ipaddress.IPv6Address) else ADDRESS_TYPE_IPV4


def ep_ports_to_eps_ports(ports: Sequence[Any] | None) -> list[dict[str, Any]]:
    """``epPortsToEpsPorts``: Endpoints ports as EndpointSlice ports (name, port, protocol, appProtocol)."""
    out: list[dict[str, Any]] = []
    for port in ports or ():
        if not isinstance(port, Mapping):
            continue
        converted: dict[str, Any] = {"name": port.get("name") or "", "port": port.get("port"),
                                     "protocol": port.get("protocol") or ""}
        if port.get("appProtocol") is not None:
            converted["appProtocol"] = port["appProtocol"]
        out.append(converted)
    return out


def endpoints_controller_ref(endpoints: Obj) -> dict[str, Any]:
    """``metav1.NewControllerRef(endpoints, v1 Endpoints)``."""
    m = meta(endpoints)
    return {"apiVersion": "v1", "kind": "Endpoints", "name": m.get("name"), "uid": m.get("uid"),
            "controller": True, "blockOwnerDeletion": True}


def mirrored_annotations(endpoints: Obj) -> dict[str, str]:
    """The Endpoints' annotations a mirrored slice carries: all but the trigger time and last-applied."""
    return clone_and_remove_keys(_str_map(meta(endpoints).get("annotations")), LAST_CHANGE_TRIGGER_TIME,
                                 LAST_APPLIED_CONFIG_ANNOTATION)


def new_endpoint_slice(endpoints: Obj, ports: Sequence[Mapping[str, Any]], address_type: str,
                       slice_name: str) -> dict[str, Any]:
    """``newEndpointSlice``: an empty mirrored slice; named ``slice_name``, or to be generated when empty."""
    m = meta(endpoints)
    name = str(m.get("name") or "")
    labels = _str_map(m.get("labels"))
    labels[LABEL_SERVICE_NAME] = name
    labels[LABEL_MANAGED_BY] = CONTROLLER_NAME
    metadata: dict[str, Any] = {
        "namespace": m.get("namespace"),
        "labels": labels,
        "annotations": mirrored_annotations(endpoints),
        "ownerReferences": [endpoints_controller_ref(endpoints)],
    }
    if slice_name:
        metadata["name"] = slice_name
    else:
        metadata["generateName"] = endpoint_slice_prefix(name)
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": metadata,
            "addressType": address_type, "endpoints": [], "ports": [dict(p) for p in ports]}


def skip_mirror(labels: Mapping[str, Any] | None) -> bool:
    """``skipMirror``: the skip-mirror label is exactly ``"true"``."""
    return (labels or {}).get(LABEL_SKIP_MIRROR) == "true"


def has_leader_election(annotations: Mapping[str, Any] | None) -> bool:
    return LEADER_ELECTION_ANNOTATION in (annotations or {})


def should_mirror(endpoints: Obj | None) -> bool:
    """``shouldMirror``: not skipped by label and not a leader-election lock. A Service without selector is
    checked separately."""
    if endpoints is None:
        return False
    m = meta(endpoints)
    return not skip_mirror(m.get("labels")) and not has_leader_election(m.get("annotations"))


def clone_and_remove_keys(values: Mapping[str, str] | None, *keys: str) -> dict[str, str]:
    """``cloneAndRemoveKeys``: a copy without ``keys``."""
    return {k: v for k, v in (values or {}).items() if k not in keys}


def managed_by_controller(slice_: Obj) -> bool:
    return managed_by(slice_, CONTROLLER_NAME)


def managed_by_changed(a: Obj, b: Obj) -> bool:
    """One of the two is managed by this controller and the other is not."""
    return managed_by_controller(a) != managed_by_controller(b)
