"""Storage kinds: PersistentVolume and PersistentVolumeClaim (core/v1), StorageClass, VolumeAttachment, CSIDriver
and CSINode (storage.k8s.io/v1): defaults, validation, the PV registry's phase bookkeeping and the
DefaultStorageClass admission plugin (``pkg/apis/{core,storage}/v1/defaults.go``, ``pkg/apis/{core,storage}/
validation``, ``pkg/registry/core/persistentvolume/strategy.go``).

Guarantees:
- PV: ``persistentVolumeReclaimPolicy`` Retain and ``volumeMode`` Filesystem by default; created ``Pending``
  with ``status.lastPhaseTransitionTime``, which every phase change through ``/status`` renews. Validation:
  access modes and capacity (storage only) required, exactly one volume source, a local volume needs node
  affinity, the source is immutable.
- PVC: access modes and a storage request required (and > 0); on update only the storage request,
  ``volumeName`` (once, from empty) and ``volumeAttributesClassName`` may change. A claim created without
  ``storageClassName`` gets the default class (``storageclass.kubernetes.io/is-default-class: "true"``).
- StorageClass: reclaimPolicy Delete and volumeBindingMode Immediate by default; provisioner required;
  parameters, provisioner, reclaimPolicy and volumeBindingMode immutable.
- VolumeAttachment: attacher, nodeName and exactly one source required; the spec is immutable.
- CSIDriver: attachRequired true, podInfoOnMount/requiresRepublish/storageCapacity/seLinuxMount false,
  fsGroupPolicy ReadWriteOnceWithFSType and volumeLifecycleModes [Persistent] by default.
- CSINode: each driver named once, with a nodeID.
- CSIStorageCapacity: a valid nodeTopology selector, a DNS-subdomain storageClassName (so required), non-negative
  capacity and maximumVolumeSize; nodeTopology and storageClassName immutable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from controller_manager.api.resource_lists import parse_list
from controller_manager.api.selectors import is_label_key
from controller_manager.sim.apiserver.networking import default_class_name
from controller_manager.sim.apiserver.validation_errors import (
    FieldError,
    GoRepr,
    duplicate,
    forbidden,
    go_json,
    invalid,
    label_selector_repr,
    not_supported,
    required,
)
from controller_manager.sim.apiserver.validation_pods import name_is_dns_subdomain, validate_labels

Obj = dict[str, Any]

DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
_ACCESS_MODES = ("ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod")
_RECLAIM = ("Delete", "Recycle", "Retain")
_CLASS_RECLAIM = ("Delete", "Retain")
_BINDING_MODES = ("Immediate", "WaitForFirstConsumer")
_VOLUME_MODES = ("Block", "Filesystem")
_FS_GROUP_POLICIES = ("File", "None", "ReadWriteOnceWithFSType")
_LIFECYCLE_MODES = ("Ephemeral", "Persistent")
_PV_SOURCES = ("gcePersistentDisk", "awsElasticBlockStore", "hostPath", "glusterfs", "nfs", "rbd", "iscsi",
               "cinder", "cephfs", "fc", "flocker", "flexVolume", "azureFile", "vsphereVolume", "quobyte",
               "azureDisk", "photonPersistentDisk", "portworxVolume", "scaleIO", "local", "storageos", "csi")


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _spec(obj: Obj) -> Obj:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        spec = obj["spec"] = {}
    return spec


def _set_default(obj: Obj, key: str, value: Any) -> None:
    if obj.get(key) in (None, ""):
        obj[key] = value


# --- defaults -------------------------------------------------------------------------------------------

def _pv_defaults(obj: Obj) -> None:
    spec = _spec(obj)
    _set_default(spec, "persistentVolumeReclaimPolicy", "Retain")
    _set_default(spec, "volumeMode", "Filesystem")


def _storage_class_defaults(obj: Obj) -> None:
    _set_default(obj, "reclaimPolicy", "Delete")
    _set_default(obj, "volumeBindingMode", "Immediate")


def _csi_driver_defaults(obj: Obj) -> None:
    spec = _spec(obj)
    for key, value in (("attachRequired", True), ("podInfoOnMount", False), ("requiresRepublish", False),
                       ("storageCapacity", False), ("fsGroupPolicy", "ReadWriteOnceWithFSType"),
                       ("seLinuxMount", False)):
        _set_default(spec, key, value)
    if not spec.get("volumeLifecycleModes"):
        spec["volumeLifecycleModes"] = ["Persistent"]


DEFAULTS: dict[str, Callable[[Obj], None]] = {
    "PersistentVolume": _pv_defaults,
    "StorageClass": _storage_class_defaults,
    "CSIDriver": _csi_driver_defaults,
}


# --- PersistentVolume -------------------------------------------------------------------------------------

def _access_modes(modes: Any, path: str, detail: str = "") -> list[FieldError]:
    if not modes:
        return [required(path, detail)]
    return [not_supported(path, m, _ACCESS_MODES) for m in modes if m not in _ACCESS_MODES]


def persistent_volume_errors(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    spec = _dict(obj.get("spec"))
    errs = _access_modes(spec.get("accessModes"), "spec.accessModes")
    capacity = _dict(spec.get("capacity"))
    if not capacity:
        errs.append(required("spec.capacity"))
    for name in capacity:
        if name != "storage":
            errs.append(not_supported("spec.capacity", name, ("storage",)))
    policy = spec.get("persistentVolumeReclaimPolicy")
    if policy not in _RECLAIM:
        errs.append(not_supported("spec.persistentVolumeReclaimPolicy", policy, _RECLAIM))
    mode = spec.get("volumeMode")
    if mode is not None and mode not in _VOLUME_MODES:
        errs.append(not_supported("spec.volumeMode", mode, _VOLUME_MODES))
    sources = [s for s in _PV_SOURCES if spec.get(s) is not None]
    if not sources:
        errs.append(required("spec", "must specify a volume type"))
    for extra in sources[1:]:
        errs.append(forbidden(f"spec.{extra}", "may not specify more than 1 volume type"))
    if "local" in sources and not spec.get("nodeAffinity"):
        errs.append(required("spec.nodeAffinity", "Local volume requires node affinity"))
    if "hostPath" in sources and not _dict(spec.get("hostPath")).get("path"):
        errs.append(required("spec.hostPath.path"))
    if old is not None:
        old_spec = _dict(old.get("spec"))
        if {s: spec.get(s) for s in _PV_SOURCES} != {s: old_spec.get(s) for s in _PV_SOURCES}:
            errs.append(forbidden("spec.persistentvolumesource",
                                  "spec.persistentvolumesource is immutable after creation"))
    return errs


def prepare_pv(new: Obj, old: Obj | None, now: str) -> Obj:
    """The registry's bookkeeping: a new PV is Pending since now; a phase change renews the time."""
    status = dict(_dict(new.get("status")))
    if old is None:
        return {**new, "status": {"phase": "Pending", "lastPhaseTransitionTime": now}}
    old_status = _dict(old.get("status"))
    if status.get("phase") != old_status.get("phase"):
        status["lastPhaseTransitionTime"] = now
    return {**new, "status": status}


# --- PersistentVolumeClaim --------------------------------------------------------------------------------

_PVC_MUTABLE = ("resources", "volumeName", "volumeAttributesClassName")


def persistent_volume_claim_errors(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    spec = _dict(obj.get("spec"))
    errs = _access_modes(spec.get("accessModes"), "spec.accessModes", "at least 1 access mode is required")
    requests = parse_list(_dict(_dict(spec.get("resources")).get("requests")))
    if "storage" not in requests:
        errs.append(required("spec.resources[storage]"))
    elif requests["storage"].value <= 0:
        errs.append(invalid("spec.resources.requests[storage]", requests["storage"].text(),
                            "must be greater than zero"))
    mode = spec.get("volumeMode")
    if mode is not None and mode not in _VOLUME_MODES:
        errs.append(not_supported("spec.volumeMode", mode, _VOLUME_MODES))
    if old is not None:
        old_spec = _dict(old.get("spec"))
        rest = {k: v for k, v in spec.items() if k not in _PVC_MUTABLE}
        old_rest = {k: v for k, v in old_spec.items() if k not in _PVC_MUTABLE}
        volume_changed = old_spec.get("volumeName") and spec.get("volumeName") != old_spec.get("volumeName")
        if rest != old_rest or volume_changed:
            errs.append(forbidden("spec", "spec is immutable after creation except resources.requests and "
                                          "volumeAttributesClassName for bound claims"))
    return errs


def admit_claim(pvc: Obj, classes: Iterable[Mapping[str, Any]]) -> None:
    """DefaultStorageClass on a create (``pvc`` owned: edited in place)."""
    spec = _spec(pvc)
    if spec.get("storageClassName") is not None:
        return
    name = default_class_name(classes, DEFAULT_CLASS_ANNOTATION)
    if name:
        spec["storageClassName"] = name


# --- storage.k8s.io -----------------------------------------------------------------------------------------

def storage_class_errors(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    errs: list[FieldError] = []
    if not obj.get("provisioner"):
        errs.append(required("provisioner"))
    if obj.get("reclaimPolicy") not in _CLASS_RECLAIM:
        errs.append(not_supported("reclaimPolicy", obj.get("reclaimPolicy"), _CLASS_RECLAIM))
    if obj.get("volumeBindingMode") not in _BINDING_MODES:
        errs.append(not_supported("volumeBindingMode", obj.get("volumeBindingMode"), _BINDING_MODES))
    for i, term in enumerate(obj.get("allowedTopologies") or ()):
        for j, requirement in enumerate(_dict(term).get("matchLabelExpressions") or ()):
            path = f"allowedTopologies[{i}].matchLabelExpressions[{j}]"
            requirement = _dict(requirement)
            values = list(requirement.get("values") or ())
            if not values:
                errs.append(required(f"{path}.values", "must specify as least one value"))
            for k, v in enumerate(values):
                if v in values[:k]:
                    errs.append(duplicate(f"{path}.values[{k}]", v))
            key = str(requirement.get("key") or "")
            errs.extend(invalid(f"{path}.key", key, m) for m in is_label_key(key))
    if old is not None:
        for field in ("parameters", "provisioner", "reclaimPolicy"):
            if obj.get(field) != old.get(field):
                errs.append(forbidden(field, f"updates to {field} are forbidden."))
        if obj.get("volumeBindingMode") != old.get("volumeBindingMode"):
            errs.append(invalid("volumeBindingMode", obj.get("volumeBindingMode"), "field is immutable"))
    return errs


def volume_attachment_errors(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    spec = _dict(obj.get("spec"))
    errs: list[FieldError] = []
    if not spec.get("attacher"):
        errs.append(required("spec.attacher"))
    if not spec.get("nodeName"):
        errs.append(required("spec.nodeName"))
    source = _dict(spec.get("source"))
    if (source.get("persistentVolumeName") is None) == (source.get("inlineVolumeSpec") is None):
        errs.append(required("spec.source", "must specify exactly one of inlineVolumeSpec and persistentVolumeName"))
    if old is not None and spec != _dict(old.get("spec")):
        errs.append(invalid("spec", _attachment_spec_repr(spec), "field is immutable"))
    return errs


def csi_driver_errors(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    spec = _dict(obj.get("spec"))
    errs: list[FieldError] = []
    policy = spec.get("fsGroupPolicy")
    if policy is not None and policy not in _FS_GROUP_POLICIES:
        errs.append(not_supported("spec.fsGroupPolicy", policy, _FS_GROUP_POLICIES))
    for i, mode in enumerate(spec.get("volumeLifecycleModes") or ()):
        if mode not in _LIFECYCLE_MODES:
            errs.append(not_supported(f"spec.volumeLifecycleModes[{i}]", mode, _LIFECYCLE_MODES))
    if old is not None and spec.get("attachRequired") != _dict(old.get("spec")).get("attachRequired"):
        errs.append(invalid("spec.attachRequired", spec.get("attachRequired"), "field is immutable"))
    return errs


def csi_node_errors(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, driver in enumerate(_dict(obj.get("spec")).get("drivers") or ()):
        driver = _dict(driver)
        name = str(driver.get("name") or "")
        if not name:
            errs.append(required(f"spec.drivers[{i}].name"))
        elif name in seen:
            errs.append(duplicate(f"spec.drivers[{i}].name", name))
        seen.add(name)
        if not driver.get("nodeID"):
            errs.append(required(f"spec.drivers[{i}].nodeID"))
        count = _dict(driver.get("allocatable")).get("count")
        if isinstance(count, int) and count < 0:
            errs.append(invalid(f"spec.drivers[{i}].allocatable.count", count, "must be greater than or equal to 0"))
    return errs


def _attachment_spec_repr(spec: Mapping[str, Any]) -> GoRepr:
    """The internal storage.VolumeAttachmentSpec (Go field names) as ``json.Marshal`` writes it. An inline
    volume spec (an internal PersistentVolumeSpec) is shown as ``{...}``: kube-sim does not render it."""
    source = _dict(spec.get("source"))
    pv = source.get("persistentVolumeName")
    inline = GoRepr("null") if source.get("inlineVolumeSpec") is None else GoRepr("{...}")
    shown = {"Attacher": str(spec.get("attacher") or ""),
             "Source": {"PersistentVolumeName": None if pv is None else str(pv), "InlineVolumeSpec": inline},
             "NodeName": str(spec.get("nodeName") or "")}
    return GoRepr(go_json(shown, sort_keys=False))


def label_selector_errors(selector: Any, path: str) -> list[FieldError]:
    """metav1validation.ValidateLabelSelector: valid matchLabels, and each expression's key, operator and
    values (In/NotIn need values, Exists/DoesNotExist take none)."""
    if not isinstance(selector, Mapping):
        return []
    errs = validate_labels(selector.get("matchLabels"), f"{path}.matchLabels")
    for i, expression in enumerate(selector.get("matchExpressions") or ()):
        e = expression if isinstance(expression, Mapping) else {}
        epath = f"{path}.matchExpressions[{i}]"
        operator, values = e.get("operator"), e.get("values") or []
        if operator in ("In", "NotIn"):
            if not values:
                errs.append(required(f"{epath}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                errs.append(forbidden(f"{epath}.values",
                                      "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
        else:
            errs.append(invalid(f"{epath}.operator", operator, "not a valid selector operator"))
        key = str(e.get("key") or "")
        errs.extend(invalid(f"{epath}.key", key, msg) for msg in is_label_key(key))
    return errs


def csi_storage_capacity_errors(obj: Obj, old: Obj | None) -> list[FieldError]:
    """ValidateCSIStorageCapacity (and, on an update, the immutable inputs of the CSI GetCapacity call)."""
    errs = label_selector_errors(obj.get("nodeTopology"), "nodeTopology")
    class_name = str(obj.get("storageClassName") or "")
    errs.extend(invalid("storageClassName", class_name, msg) for msg in name_is_dns_subdomain(class_name, False))
    for field in ("capacity", "maximumVolumeSize"):
        amount = parse_list({field: obj[field]}).get(field) if obj.get(field) is not None else None
        if amount is not None and amount.value < 0:
            errs.append(invalid(field, amount.text(), "must be greater than or equal to 0"))
    if old is not None:
        if obj.get("nodeTopology") != old.get("nodeTopology"):
            errs.append(invalid("nodeTopology", label_selector_repr(obj.get("nodeTopology")), "field is immutable"))
        if obj.get("storageClassName") != old.get("storageClassName"):
            errs.append(invalid("storageClassName", obj.get("storageClassName"), "field is immutable"))
    return errs
