"""networking.k8s.io/v1 ServiceCIDRs and IPAddresses: the ``kubernetes`` ServiceCIDR made at start-up, an
IPAddress for each allocated ClusterIP, and both kinds' validation (``pkg/apis/networking/validation``,
``pkg/controlplane/controller/defaultservicecidr``, ``pkg/registry/core/service/ipallocator``).

Guarantees:
- At start-up the ``kubernetes`` ServiceCIDR holds kube-sim's service range (:data:`service_ips.SERVICE_CIDR`)
  with a ``Ready`` condition, as the apiserver's default-ServiceCIDR controller writes it.
- Each ClusterIP given to a Service has an IPAddress named after it (labels ``ipaddress.kubernetes.io/ip-family``
  and ``ipaddress.kubernetes.io/managed-by: ipallocator.k8s.io``, ``spec.parentRef`` naming the Service); it is
  deleted with the Service. An address held by an IPAddress is not handed out again.
- ServiceCIDR validation: one or two CIDRs, valid and canonical, one per family; existing CIDRs are immutable
  (a single-stack range may only gain a second family). IPAddress: the name is a canonical IP, ``parentRef``
  names a resource and a name, and is immutable. Upstream's messages throughout.
- Strategic merge patches of both kinds follow their types (``metadata.finalizers`` a merged set, ServiceCIDR
  status conditions merged by type), as the kube-controller-manager's servicecidrs controller needs.
- Not simulated: allocation from ServiceCIDRs other than ``kubernetes`` (kube-sim allocates from its one range
  only). The finalizer and Ready condition of every ServiceCIDR are the controller-manager's
  ``service-cidr-controller``'s, not kube-sim's.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from controller_manager.api.resources import IPADDRESSES, SERVICECIDRS, Resource
from controller_manager.sim.apiserver.service_ips import SERVICE_CIDR
from controller_manager.sim.apiserver.validation_errors import FieldError, GoRepr, go_json, invalid, required

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer

Obj = dict[str, Any]

DEFAULT_NAME = "kubernetes"
MANAGED_BY_LABEL = "ipaddress.kubernetes.io/managed-by"
FAMILY_LABEL = "ipaddress.kubernetes.io/ip-family"
ALLOCATOR = "ipallocator.k8s.io"
_IMMUTABLE = "field is immutable"


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _served(api: ApiServer, res: Resource) -> bool:
    return api.lookup(res.group, res.version, res.plural) is not None


# --- the server's own objects ---------------------------------------------------------------------------

def install(api: ApiServer, now: str) -> None:
    """The ``kubernetes`` ServiceCIDR and its Ready condition, as a fresh cluster has them."""
    if not _served(api, SERVICECIDRS):
        return
    created = api.create(SERVICECIDRS, {"metadata": {"name": DEFAULT_NAME}, "spec": {"cidrs": [str(SERVICE_CIDR)]}})
    created["status"] = {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now,
                                         "reason": "", "message": "Kubernetes default Service CIDR is ready"}]}
    api.update(SERVICECIDRS, created, subresource="status")


def allocated(api: ApiServer) -> set[str]:
    """The addresses IPAddress objects hold (none when the kind is not served)."""
    if not _served(api, IPADDRESSES):
        return set()
    return {str(s.obj["metadata"]["name"]) for s in api.store(IPADDRESSES).iter_from(None)}


def _cluster_ips(service: Mapping[str, Any]) -> list[str]:
    spec = _dict(service.get("spec"))
    return [ip for ip in spec.get("clusterIPs") or () if isinstance(ip, str) and ip != "None"]


def after_service_created(api: ApiServer, service: Mapping[str, Any]) -> None:
    """The allocator's IPAddress for each ClusterIP of a Service just stored."""
    if not _served(api, IPADDRESSES):
        return
    meta = _dict(service.get("metadata"))
    for ip in _cluster_ips(service):
        if api.stored_object(IPADDRESSES, None, ip) is not None:
            continue
        family = "IPv6" if ":" in ip else "IPv4"
        api.create(IPADDRESSES, {
            "metadata": {"name": ip, "labels": {FAMILY_LABEL: family, MANAGED_BY_LABEL: ALLOCATOR}},
            "spec": {"parentRef": {"group": "", "resource": "services", "namespace": meta.get("namespace", ""),
                                   "name": meta.get("name", "")}}})


def after_service_removed(api: ApiServer, service: Mapping[str, Any]) -> None:
    """Release the Service's addresses: the IPAddresses whose parentRef is that Service go."""
    if not _served(api, IPADDRESSES):
        return
    meta = _dict(service.get("metadata"))
    for ip in _cluster_ips(service):
        stored = api.stored_object(IPADDRESSES, None, ip)
        ref = _dict(_dict(_dict(stored).get("spec")).get("parentRef"))
        if stored is not None and ref.get("resource") == "services" and ref.get("name") == meta.get("name") \
                and ref.get("namespace") == meta.get("namespace"):
            api.delete(IPADDRESSES, None, ip)


# --- validation -----------------------------------------------------------------------------------------

def _cidr_errors(value: Any, path: str) -> list[FieldError]:
    text = str(value)
    try:
        network = ipaddress.ip_network(text, strict=False)
    except ValueError:
        if "/" in text and _leading_zeros(text):
            return [invalid(path, text, "must not have leading 0s in IP or prefix length")]
        return [invalid(path, text, "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)")]
    if network.network_address != ipaddress.ip_interface(text).ip:
        return [invalid(path, text, "must not have bits set beyond the prefix length")]
    if str(network) != text:
        return [invalid(path, text, f'must be in canonical form ("{network}")')]
    return []


def _leading_zeros(text: str) -> bool:
    address, _, prefix = text.partition("/")
    parts = [*address.split("."), prefix] if "." in address else [prefix]
    return any(len(p) > 1 and p.startswith("0") and p.isdigit() for p in parts)


def _spec_repr(cidrs: list[Any]) -> str:
    return go_json({"CIDRs": [str(c) for c in cidrs]})


def _service_cidr_create(cidrs: list[Any]) -> list[FieldError]:
    path = "spec.cidrs"
    if not cidrs:
        return [required(path, "at least one CIDR required")]
    if len(cidrs) > 2:
        return [invalid(path, GoRepr(_spec_repr(cidrs)), "may only hold up to 2 values")]
    errs: list[FieldError] = []
    for i, cidr in enumerate(cidrs):
        errs.extend(_cidr_errors(cidr, f"{path}[{i}]"))
    if len(cidrs) == 2:
        try:
            versions = {ipaddress.ip_network(str(c), strict=False).version for c in cidrs}
        except ValueError:
            versions = set()
        if len(versions) != 2:
            errs.append(invalid(path, GoRepr(_spec_repr(cidrs)),
                                "may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and "
                                "2001:db8::/64"))
    return errs


def service_cidr_errors(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    cidrs = list(_dict(obj.get("spec")).get("cidrs") or ())
    if old is None:
        return _service_cidr_create(cidrs)
    before = list(_dict(old.get("spec")).get("cidrs") or ())
    if len(before) == len(cidrs):
        pairs = enumerate(zip(before, cidrs, strict=True))
        return [invalid(f"spec.cidrs[{i}]", new, _IMMUTABLE) for i, (was, new) in pairs if was != new]
    if len(before) == 1 and len(cidrs) == 2:
        errs = [invalid("spec.cidrs[0]", cidrs[0], _IMMUTABLE)] if cidrs[0] != before[0] else []
        return errs + _service_cidr_create(cidrs)
    return [invalid("spec.cidrs", cidrs, _IMMUTABLE)]


def ip_address_name(name: str, prefix: bool) -> list[str]:
    """An IPAddress's name: an IP address written canonically."""
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return [f'ParseAddr("{name}"): unable to parse IP']
    if str(address) != name:
        return ["must be a canonical format IP address"]
    return []


def ip_address_errors(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    ref = _dict(obj.get("spec")).get("parentRef")
    if old is not None:
        before = _dict(old.get("spec")).get("parentRef")
        return [] if ref == before else [invalid("spec.parentRef", GoRepr(_ref_repr(ref)), _IMMUTABLE)]
    if ref is None:
        return [required("spec.parentRef")]
    errs: list[FieldError] = []
    if not _dict(ref).get("resource"):
        errs.append(required("spec.parentRef.resource"))
    if not _dict(ref).get("name"):
        errs.append(required("spec.parentRef.name"))
    return errs


def _ref_repr(ref: Any) -> str:
    """An internal ``*networking.ParentReference`` (Go field names) as ``json.Marshal`` writes it."""
    if ref is None:
        return "null"
    r = _dict(ref)
    return go_json({k.capitalize(): str(r.get(k) or "") for k in ("group", "resource", "namespace", "name")},
                   sort_keys=False)


