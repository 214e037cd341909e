"""A Pod's ``/status`` write checked as ``ValidatePodStatusUpdate`` does (pkg/apis/core/validation).

Guarantees, in upstream's order (metadata is checked by :func:`validation.validate` before):
- custom condition types are qualified names; the path is ``metadata.conditions[i].Type`` (upstream builds it
  from the metadata path);
- a changed, non-empty ``nominatedNodeName`` is a DNS subdomain; ``qosClass`` is immutable;
- unless the pod's restartPolicy is Always, a terminated container may not go back to another state (OnFailure
  lets a failed one restart; a restartable init container may restart; ephemeral containers never restart);
  the error is on the *old* status's index;
- ``resourceClaimStatuses`` name entries of ``spec.resourceClaims``, once each, with valid claim names;
- ``extendedResourceClaimStatus`` (DRAExtendedResource) maps at least one request, each naming a container of the
  spec that requests that resource, with a DNS label request name and no repeated mapping, onto a valid claim name;
- ``nodeAllocatableResourceClaimStatuses`` (DRANodeAllocatableResources) name each claim once, list containers
  once, and map or charge overhead per resource name once, with the names and quantities present, an overhead
  giving a per-pod or per-container amount, never negative;
- ``podIPs`` (after the v1 conversion: a ``podIP`` that differs from ``podIPs[0]`` wins) and ``hostIPs`` are
  strict canonical IPs, at most one per family, without repeats; ``hostIPs[0]`` equals ``hostIP``;
- a Linux container's reported user ids are in range (a Windows pod's may not be set), and allocated resource
  health names a container's request or claim, with known health values and unique resource IDs; ephemeral
  containers report none.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Mapping
from typing import Any

from controller_manager.api.quantity import QuantityError, parse_quantity
from controller_manager.api.selectors import is_dns1123_label, is_label_key
from controller_manager.sim.apiserver.validation_errors import (
    FieldError,
    GoRepr,
    duplicate,
    forbidden,
    go_json,
    invalid,
    not_supported,
    required,
)
from controller_manager.sim.apiserver.validation_pods import name_is_dns_subdomain

__all__ = ["validate_pod_status_update"]

_SYSTEM_CONDITIONS = ("PodScheduled", "Ready", "Initialized")
_HEALTH = ("Healthy", "Unhealthy", "Unknown")
_MAX_ID = 2**31 - 1
_ID_RANGE = f"must be between 0 and {_MAX_ID}, inclusive"
_V4_SLOPPY = re.compile(r"(\d+)\.(\d+)\.(\d+)\.(\d+)")
# Dotted-quad IPv4 as Go prints it: four octets of 0-255, ASCII digits without leading zeros.
_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_CANONICAL_V4 = re.compile(rf"{_OCTET}\.{_OCTET}\.{_OCTET}\.{_OCTET}")


def _dict(value: Any) -> Mapping[str, Any]:
    # (a plain dict, nearly always, spares the Mapping ABC's instance check)
    return value if type(value) is dict or isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def validate_pod_status_update(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    status, old_status = _dict(new.get("status")), _dict(old.get("status"))
    spec = _dict(old.get("spec"))  # the status strategy keeps the stored spec
    errs: list[FieldError] = []
    for i, cond in enumerate(_list(status.get("conditions"))):
        ctype = str(_dict(cond).get("type") or "")
        if ctype not in _SYSTEM_CONDITIONS:
            errs.extend(invalid(f"metadata.conditions[{i}].Type", ctype, msg) for msg in _condition_type(ctype))
    nominated = str(status.get("nominatedNodeName") or "")
    if nominated and nominated != str(old_status.get("nominatedNodeName") or ""):
        errs.extend(invalid("status.nominatedNodeName", nominated, msg)
                    for msg in name_is_dns_subdomain(nominated, False))
    qos, old_qos = str(status.get("qosClass") or ""), str(old_status.get("qosClass") or "")
    if qos != old_qos:
        errs.append(invalid("status.qosClass", qos, "field is immutable"))
    policy = str(spec.get("restartPolicy") or "")
    restartable_init = {str(_dict(c).get("name")) for c in _list(spec.get("initContainers"))
                        if _dict(c).get("restartPolicy") == "Always"}
    errs.extend(_state_transitions(status, old_status, "containerStatuses", policy, set()))
    errs.extend(_state_transitions(status, old_status, "initContainerStatuses", policy, restartable_init))
    errs.extend(_state_transitions(status, old_status, "ephemeralContainerStatuses", "Never", set()))
    errs.extend(_resource_claim_statuses(status, spec))
    errs.extend(_extended_resource_claim_status(status.get("extendedResourceClaimStatus"), spec))
    errs.extend(_node_allocatable_claim_statuses(_list(status.get("nodeAllocatableResourceClaimStatuses"))))
    errs.extend(_pod_ips(status))
    errs.extend(_host_ips(status))
    windows = _dict(spec.get("os")).get("name") == "windows"
    for key in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"):
        errs.extend(_users(_list(status.get(key)), f"status.{key}", windows))
    errs.extend(_allocated_health(_list(status.get("containerStatuses")), "status.containerStatuses",
                                  _list(spec.get("containers"))))
    errs.extend(_allocated_health(_list(status.get("initContainerStatuses")), "status.initContainerStatuses",
                                  _list(spec.get("initContainers"))))
    for i, cs in enumerate(_list(status.get("ephemeralContainerStatuses"))):
        if _list(_dict(cs).get("allocatedResourcesStatus")):
            errs.append(forbidden(f"status.ephemeralContainerStatuses[{i}].allocatedResourcesStatus",
                                  "must not be specified in container status"))
    return errs


@functools.lru_cache(maxsize=1024)  # (a kubelet reports the same few condition types for every pod)
def _condition_type(ctype: str) -> tuple[str, ...]:
    return tuple(is_label_key(ctype))


def _terminated(cs: Any) -> Mapping[str, Any] | None:
    term = _dict(_dict(cs).get("state")).get("terminated")
    return term if isinstance(term, Mapping) else None


def _state_transitions(status: Mapping[str, Any], old_status: Mapping[str, Any], key: str, policy: str,
                       restartable: set[str]) -> list[FieldError]:
    if policy == "Always":
        return []
    errs: list[FieldError] = []
    new_statuses = _list(status.get(key))
    for i, old_cs in enumerate(_list(old_status.get(key))):
        term = _terminated(old_cs)
        if term is None:
            continue
        if int(term.get("exitCode") or 0) != 0 and policy == "OnFailure":
            continue
        name = _dict(old_cs).get("name")
        if str(name) in restartable:
            continue
        for new_cs in new_statuses:
            if _dict(new_cs).get("name") == name and _terminated(new_cs) is None:
                errs.append(forbidden(f"status.{key}[{i}].state", "may not be transitioned to non-terminated state"))
    return errs


def _resource_claim_statuses(status: Mapping[str, Any], spec: Mapping[str, Any]) -> list[FieldError]:
    claims = {str(_dict(c).get("name")) for c in _list(spec.get("resourceClaims"))}
    seen: set[str] = set()
    errs: list[FieldError] = []
    for i, entry in enumerate(_list(status.get("resourceClaimStatuses"))):
        e = _dict(entry)
        name = str(e.get("name") or "")
        path = f"status.resourceClaimStatuses[{i}].name"
        if name not in claims:
            errs.append(invalid(path, name, "must match the name of an entry in `spec.resourceClaims`"))
        if name in seen:
            errs.append(duplicate(path, name))
        seen.add(name)
        claim_name = e.get("resourceClaimName")
        if claim_name is not None:
            errs.extend(invalid(path, str(claim_name), msg) for msg in name_is_dns_subdomain(str(claim_name), False))
    return errs


def _extended_resource_claim_status(claim: Any, spec: Mapping[str, Any]) -> list[FieldError]:
    if not isinstance(claim, Mapping):
        return []
    path = "status.extendedResourceClaimStatus"
    containers = {str(_dict(c).get("name")): _dict(c)
                  for c in [*_list(spec.get("initContainers")), *_list(spec.get("containers"))]}
    errs: list[FieldError] = []
    mappings = _list(claim.get("requestMappings"))
    if not mappings:
        errs.append(required(f"{path}.requestMappings", "at least one request mapping is required"))
    seen: set[tuple[str, str, str]] = set()
    for i, entry in enumerate(mappings):
        m = _dict(entry)
        container, resource, request = (str(m.get(k) or "") for k in ("containerName", "resourceName", "requestName"))
        mpath = f"{path}.requestMappings[{i}]"
        if container not in containers:
            errs.append(invalid(f"{mpath}.containerName", container,
                                "must match the name of an entry in spec.initContainers.name or spec.containers.name"))
        elif resource not in _dict(_dict(containers[container].get("resources")).get("requests")):
            errs.append(invalid(f"{mpath}.resourceName", resource,
                                "must match the extended resource name of an entry in "
                                "spec.initContainers.resources.requests or spec.containers.resources.requests"))
        # upstream reports a bad request name on the status's path, without the mapping's index
        errs.extend(invalid(f"{path}.requestName", request, msg) for msg in is_dns1123_label(request))
        if (container, resource, request) in seen:
            errs.extend([duplicate(f"{mpath}.containerName", container), duplicate(f"{mpath}.resourceName", resource),
                         duplicate(f"{mpath}.requestName", request)])
        seen.add((container, resource, request))
    claim_name = str(claim.get("resourceClaimName") or "")
    if not claim_name:
        errs.append(required(f"{path}.resourceClaimName"))
    else:
        errs.extend(invalid(f"{path}.resourceClaimName", claim_name, msg)
                    for msg in name_is_dns_subdomain(claim_name, False))
    return errs


def _negative(value: Any) -> bool:
    try:
        return parse_quantity(value) < 0
    except (QuantityError, ValueError):
        return False  # the codec refuses a value that is not a quantity before validation


def _node_allocatable_claim_statuses(entries: list[Any]) -> list[FieldError]:
    path = "status.nodeAllocatableResourceClaimStatuses"
    errs: list[FieldError] = []
    claims: set[str] = set()
    for i, entry in enumerate(entries):
        e, epath = _dict(entry), f"{path}[{i}]"
        claim_name = str(e.get("resourceClaimName") or "")
        if not claim_name:
            errs.append(required(f"{epath}.resourceClaimName"))
        elif claim_name in claims:
            errs.append(duplicate(epath, claim_name))
        claims.add(claim_name)
        containers: set[str] = set()
        for j, name in enumerate(_list(e.get("containers"))):
            if name in containers:
                errs.append(duplicate(f"{epath}.containers[{j}]", name))
            containers.add(name)
        mapped: set[str] = set()
        for j, item in enumerate(_list(e.get("mapping"))):
            m, mpath = _dict(item), f"{epath}.mapping[{j}]"
            name = str(m.get("name") or "")
            if not name:
                errs.append(required(f"{mpath}.name"))
            if m.get("quantity") is None:
                errs.append(required(f"{mpath}.quantity"))
            if name and name in mapped:
                errs.append(duplicate(mpath, name))
            mapped.add(name)
        charged: set[str] = set()
        for j, item in enumerate(_list(e.get("overhead"))):
            o, opath = _dict(item), f"{epath}.overhead[{j}]"
            name = str(o.get("name") or "")
            if not name:
                errs.append(required(f"{opath}.name"))
            per_pod, per_container = o.get("perPod"), o.get("perContainer")
            if per_pod is None and per_container is None:
                errs.append(invalid(opath, "", "at least one of perPod or perContainer must be set"))
            for key, amount in (("perPod", per_pod), ("perContainer", per_container)):
                if amount is not None and _negative(amount):
                    errs.append(invalid(f"{opath}.{key}", str(amount), "must be non-negative"))
            if name and name in charged:
                errs.append(duplicate(opath, name))
            charged.add(name)
    return errs


@functools.lru_cache(maxsize=4096)  # every status write of a pod checks the same few addresses
def _parse_sloppy(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """netutils.ParseIPSloppy: Go's old net.ParseIP, which reads IPv4 octets with leading zeros as decimal."""
    m = _V4_SLOPPY.fullmatch(text)
    if m is not None:
        octets = [int(g) for g in m.groups()]
        return ipaddress.IPv4Address(".".join(map(str, octets))) if all(o <= 255 for o in octets) else None
    if ":" not in text or "%" in text:
        return None
    try:
        return ipaddress.IPv6Address(text)
    except ValueError:
        return None


def _go_ip_string(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)  # net.IP prints a 4-in-6 address dotted
    return ip.compressed


def is_valid_ip(path: str, text: str) -> list[FieldError]:
    """validation.IsValidIP: a parseable IP without leading zeros or IPv4 mapping, in canonical form."""
    if _CANONICAL_V4.fullmatch(text):
        return []  # (the usual pod or host IP: nothing below could object to it)
    ip = _parse_sloppy(text)
    if ip is None:
        return [invalid(path, text, "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)")]
    errs: list[FieldError] = []
    if isinstance(ip, ipaddress.IPv4Address) and str(ip) != text:
        errs.append(invalid(path, text, "must not have leading 0s"))
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        errs.append(invalid(path, text, "must not be an IPv4-mapped IPv6 address"))
    if errs:
        return errs
    canonical = _go_ip_string(ip)
    if canonical != text:
        errs.append(invalid(path, text, f'must be in canonical form ("{canonical}")'))
    return errs


def _dual_stack(ips: list[str]) -> bool:
    parsed = [_parse_sloppy(ip) for ip in ips]
    if any(p is None for p in parsed):
        return False
    families = {4 if isinstance(p, ipaddress.IPv4Address) or p.ipv4_mapped is not None else 6  # type: ignore[union-attr]
                for p in parsed}
    return families == {4, 6}


def _ip_structs(ips: list[str]) -> GoRepr:
    """Internal ``[]core.PodIP``/``[]core.HostIP`` (no JSON tags) as ``json.Marshal`` writes them."""
    return GoRepr(go_json([{"IP": ip} for ip in ips]))


def _pod_ips(status: Mapping[str, Any]) -> list[FieldError]:
    ips = [str(_dict(p).get("ip") or "") for p in _list(status.get("podIPs"))]
    pod_ip = str(status.get("podIP") or "")
    if pod_ip and (not ips or ips[0] != pod_ip):
        ips = [pod_ip]  # Convert_v1_PodStatus_To_core_PodStatus: podIP is authoritative
    path = "status.podIPs"
    errs: list[FieldError] = []
    for i, ip in enumerate(ips):
        errs.extend(is_valid_ip(f"{path}[{i}]", ip))
    if len(ips) > 1:
        if not _dual_stack(ips) or len(ips) > 2:
            errs.append(invalid(path, _ip_structs(ips), "may specify no more than one IP for each IP family"))
        seen: set[str] = set()
        for i, ip in enumerate(ips):
            if ip in seen:
                errs.append(duplicate(f"{path}[{i}]", GoRepr(go_json({"IP": ip}))))
            seen.add(ip)
    return errs


def _host_ips(status: Mapping[str, Any]) -> list[FieldError]:
    ips = [str(_dict(p).get("ip") or "") for p in _list(status.get("hostIPs"))]
    if not ips:
        return []
    path = "status.hostIPs"
    errs: list[FieldError] = []
    if str(status.get("hostIP") or "") != ips[0]:
        errs.append(invalid(f"{path}[0].ip", ips[0], "must be equal to `hostIP`"))
    for i, ip in enumerate(ips):
        errs.extend(is_valid_ip(f"{path}[{i}]", ip))
    if len(ips) > 1:
        seen: set[str] = set()
        for i, ip in enumerate(ips):
            if ip in seen:
                errs.append(duplicate(f"{path}[{i}]", GoRepr(go_json({"IP": ip}))))
            seen.add(ip)
        if not _dual_stack(ips) or len(ips) > 2:
            errs.append(invalid(path, _ip_structs(ips), "may specify no more than one IP for each IP family"))
    return errs


def _id_errors(path: str, value: Any) -> list[FieldError]:
    number = int(value or 0) if isinstance(value, int) else 0
    return [] if 0 <= number <= _MAX_ID else [invalid(path, number, _ID_RANGE)]


def _users(statuses: list[Any], path: str, windows: bool) -> list[FieldError]:
    errs: list[FieldError] = []
    for i, cs in enumerate(statuses):
        user = _dict(cs).get("user")
        if not isinstance(user, Mapping):
            continue
        linux = user.get("linux")
        # (upstream's path leaves out the "user" step)
        if windows:
            if linux is not None:
                errs.append(forbidden(f"{path}[{i}].linux", "cannot be set for a windows pod"))
            continue
        if not isinstance(linux, Mapping):
            continue
        errs.extend(_id_errors(f"{path}[{i}].linux.uid", linux.get("uid")))
        errs.extend(_id_errors(f"{path}[{i}].linux.gid", linux.get("gid")))
        for g, gid in enumerate(_list(linux.get("supplementalGroups"))):
            errs.extend(_id_errors(f"{path}[{i}].linux.supplementalGroups[{g}]", gid))
    return errs


def _allocated_health(statuses: list[Any], path: str, containers: list[Any]) -> list[FieldError]:
    by_name = {str(_dict(c).get("name")): _dict(c) for c in containers}
    errs: list[FieldError] = []
    for i, cs in enumerate(statuses):
        entries = _dict(cs).get("allocatedResourcesStatus")
        if entries is None:
            continue
        container = by_name.get(str(_dict(cs).get("name")))
        for j, entry in enumerate(_list(entries)):
            e = _dict(entry)
            name = str(e.get("name") or "")
            epath = f"{path}[{i}].allocatedResourcesStatus[{j}]"
            if container is not None:  # a status of a container the spec lacks is let be
                resources = _dict(container.get("resources"))
                if name.startswith("claim:"):
                    names = {"claim:" + str(_dict(c).get("name")) + (f"/{_dict(c)['request']}"
                                                                      if _dict(c).get("request") else "")
                             for c in _list(resources.get("claims"))}
                    detail = ("must match one of the container's resource claims in a format "
                              "'claim:<claimName>/<request>' or 'claim:<claimName>' if request is empty")
                else:
                    names = set(_dict(resources.get("requests")))
                    detail = "must match one of the container's resource requests"
                if name not in names:
                    errs.append(invalid(f"{epath}.name", name, detail))
            ids: set[str] = set()
            for k, res in enumerate(_list(e.get("resources"))):
                r = _dict(res)
                health = str(r.get("health") or "")
                if health not in _HEALTH:
                    errs.append(not_supported(f"{epath}.resources[{k}].health", health, _HEALTH))
                rid = str(r.get("resourceID") or "")
                if rid in ids:
                    errs.append(duplicate(f"{epath}.resources[{k}].resourceID", rid))
                ids.add(rid)
    return errs
