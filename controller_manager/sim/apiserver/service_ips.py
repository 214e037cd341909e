"""Cluster IPs and IP families of Services, set when a Service is created, as the real registry does.

Guarantees (``pkg/registry/core/service/storage/alloc.go``, single-stack IPv4 cluster):
- ``type: ExternalName`` gets no cluster IP and no IP families.
- ``clusterIP: None`` (headless) gets ``clusterIPs: ["None"]``; without a selector it defaults to
  ``ipFamilyPolicy: RequireDualStack`` (every family the cluster has: here IPv4 only), with one to SingleStack.
- Otherwise a requested ``clusterIP`` must lie in the service range and be free (else 422, with the real
  messages); without one the lowest free address of the range is allocated (the first one is the
  ``kubernetes`` Service's, as on a real cluster). ``clusterIPs`` mirrors it; ``ipFamilies`` defaults to
  ``[IPv4]`` and ``ipFamilyPolicy`` to ``SingleStack``.
- An IPv6 family or a dual-stack policy that requires two families is refused as on an IPv4-only cluster.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any

from controller_manager.api.resources import SERVICES

from . import errors
from .validation_errors import FieldError, invalid, invalid_status, not_supported

Obj = dict[str, Any]

SERVICE_CIDR = ipaddress.ip_network("10.96.0.0/12")  # kubeadm's default --service-cluster-ip-range
_KUBERNETES_SERVICE_IP = "10.96.0.1"  # the first address, which a real cluster's ``kubernetes`` Service holds


def assign(obj: Obj, in_use: Iterable[str]) -> Obj:
    """``obj`` (a defaulted Service being created) with its cluster IPs and IP families set."""
    spec = dict(obj.get("spec") or {})
    if spec.get("type") == "ExternalName":
        return obj
    name = str((obj.get("metadata") or {}).get("name", ""))
    errs: list[FieldError] = []
    families = spec.get("ipFamilies") or []
    if any(f != "IPv4" for f in families):
        errs.append(not_supported("spec.ipFamilies[0]", families[0] if families else "", ["IPv4"]))
    if spec.get("ipFamilyPolicy") == "RequireDualStack" and spec.get("clusterIP") != "None":
        errs.append(invalid("spec.ipFamilyPolicy", "RequireDualStack",
                            "this cluster is not configured for dual-stack services"))
    requested = spec.get("clusterIP") or (spec.get("clusterIPs") or [None])[0]
    if requested == "None":
        spec["clusterIP"] = "None"
        spec["clusterIPs"] = ["None"]
        default_policy = "SingleStack" if spec.get("selector") else "RequireDualStack"
    else:
        used = set(in_use)
        if requested:
            try:
                address = ipaddress.ip_address(requested)
            except ValueError:
                address = None
            if address is None or address not in SERVICE_CIDR:
                errs.append(invalid("spec.clusterIPs", [requested],
                                    f"failed to allocate IP {requested}: the provided IP ({requested}) is not in "
                                    f"the valid range. The range of valid IPs is {SERVICE_CIDR}"))
            elif requested in used:
                errs.append(invalid("spec.clusterIPs", [requested],
                                    f"failed to allocate IP {requested}: provided IP is already allocated"))
        else:
            requested = _first_free(used)
        spec["clusterIP"] = requested
        spec["clusterIPs"] = [requested]
        default_policy = "SingleStack"
    if errs:
        raise errors.StatusError(invalid_status(SERVICES, name, errs))
    spec.setdefault("ipFamilyPolicy", default_policy)
    spec["ipFamilies"] = families or ["IPv4"]
    return {**obj, "spec": spec}


def _first_free(used: set[str]) -> str:
    for address in SERVICE_CIDR.hosts():
        text = str(address)
        if text not in used and text != _KUBERNETES_SERVICE_IP:
            return text
    raise errors.StatusError(invalid_status(SERVICES, "", [invalid("spec.clusterIPs", [], "range is full")]))
