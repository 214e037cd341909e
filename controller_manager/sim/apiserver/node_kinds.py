"""node.k8s.io/v1 RuntimeClass validation (``pkg/apis/node/validation``).

Guarantees:
- ``handler`` must be a DNS label (so it is required: an empty one fails the label's pattern) and may not change.
- ``overhead.podFixed`` is checked as a container's limits are (upstream reuses ValidateResourceRequirements, so
  the errors name ``overhead.limits[<resource>]``): a standard or extended resource name and a non-negative amount.
- ``scheduling.nodeSelector`` holds valid labels; ``scheduling.tolerations`` are valid tolerations.
- An update is validated as a create, plus the immutable handler.
"""

from __future__ import annotations

from typing import Any

from controller_manager.api.resource_lists import parse_list
from controller_manager.api.selectors import is_label_key
from controller_manager.sim.apiserver.validation_errors import FieldError, invalid
from controller_manager.sim.apiserver.validation_pods import (
    name_is_dns_label,
    validate_labels,
    validate_tolerations,
)

Obj = dict[str, Any]

IMMUTABLE = "field is immutable"
_CONTAINER_RESOURCES = ("cpu", "memory", "ephemeral-storage")
_QUOTA_RESOURCES = frozenset({
    "pods", "services", "replicationcontrollers", "resourcequotas", "secrets", "configmaps",
    "persistentvolumeclaims", "storage", "requests.cpu", "requests.memory", "requests.storage",
    "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage",
    "services.nodeports", "services.loadbalancers"})


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _is_native(name: str) -> bool:
    """helper.IsNativeResource: unprefixed or in the kubernetes.io domain."""
    return "/" not in name or "kubernetes.io/" in name


def _is_standard(name: str) -> bool:
    """helper.IsStandardResourceName (container resources, quota's names and their requests./limits. forms)."""
    return (name in _CONTAINER_RESOURCES or name.startswith("hugepages-") or name in _QUOTA_RESOURCES
            or name.startswith(("requests.hugepages-", "limits.hugepages-")))


def _is_extended(name: str) -> bool:
    """helper.IsExtendedResourceName: prefixed outside kubernetes.io, and a qualified name as a quota's."""
    return not _is_native(name) and not name.startswith("requests.") and not is_label_key(f"requests.{name}")


def container_limits_errors(limits: Any, path: str) -> list[FieldError]:
    """ValidateResourceRequirements' checks of ``limits``: validateContainerResourceName and a non-negative
    amount for each."""
    errs: list[FieldError] = []
    amounts = parse_list(limits)
    for name in sorted(_dict(limits)):
        rpath = f"{path}[{name}]"
        name_errs = [invalid(rpath, name, msg) for msg in is_label_key(name)]
        if not name_errs and "/" not in name and not _is_standard(name):
            name_errs.append(invalid(rpath, name, "must be a standard resource type or fully qualified"))
        errs.extend(name_errs)
        if "/" not in name:
            if name not in _CONTAINER_RESOURCES and not name.startswith("hugepages-"):
                errs.append(invalid(rpath, name, "must be a standard resource for containers"))
        elif not _is_native(name) and not _is_extended(name):
            errs.append(invalid(rpath, name, "doesn't follow extended resource name standard"))
        amount = amounts.get(name)
        if amount is not None and amount.value < 0:
            errs.append(invalid(rpath, amount.text(), "must be greater than or equal to 0"))
    return errs


def runtime_class_errors(obj: Obj, old: Obj | None) -> list[FieldError]:
    """ValidateRuntimeClass (and ValidateRuntimeClassUpdate's immutable handler on an update)."""
    handler = str(obj.get("handler") or "")
    errs = [invalid("handler", handler, msg) for msg in name_is_dns_label(handler, False)]
    overhead = obj.get("overhead")
    if isinstance(overhead, dict):
        errs.extend(container_limits_errors(overhead.get("podFixed"), "overhead.limits"))
    scheduling = obj.get("scheduling")
    if isinstance(scheduling, dict):
        if scheduling.get("nodeSelector") is not None:
            errs.extend(validate_labels(scheduling["nodeSelector"], "scheduling.nodeSelector"))
        errs.extend(validate_tolerations(scheduling.get("tolerations"), "scheduling.tolerations"))
    if old is not None and obj.get("handler") != old.get("handler"):
        errs.append(invalid("handler", obj.get("handler"), IMMUTABLE))
    return errs
