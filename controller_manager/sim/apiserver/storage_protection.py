"""kube-apiserver's StorageObjectInUseProtection and PersistentVolumeClaimResize admission plugins
(``plugin/pkg/admission/storage/storageobjectinuseprotection``, ``.../persistentvolume/resize``), and
VolumeAttributesClass validation (``pkg/apis/storage/validation``).

Guarantees:
- On create, a PersistentVolumeClaim gets the ``kubernetes.io/pvc-protection`` finalizer and a
  PersistentVolume the ``kubernetes.io/pv-protection`` finalizer, appended after any it already has and never
  twice. Updates and subresources are left alone (the protection controllers add it to older objects).
- PersistentVolumeClaimResize: an update of a claim that raises its storage request is refused (403 "only
  dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize")
  unless the claim names a StorageClass, the same before and after, that exists with ``allowVolumeExpansion:
  true``. (kube-sim checks it before the claim's validation, upstream after.)
- VolumeAttributesClass: ``driverName`` required; ``driverName`` and ``parameters`` may not change
  ("updates to driverName are forbidden.", "updates to parameters are forbidden.").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller_manager.api.quantity import parse_quantity
from controller_manager.api.volumes import PV_PROTECTION_FINALIZER, PVC_PROTECTION_FINALIZER
from controller_manager.sim.apiserver.validation_errors import FieldError, forbidden, required

Obj = dict[str, Any]

FINALIZER_BY_KIND = {"PersistentVolumeClaim": PVC_PROTECTION_FINALIZER, "PersistentVolume": PV_PROTECTION_FINALIZER}


def admit(kind: str, obj: Obj) -> None:
    """Add the kind's protection finalizer to ``obj`` (owned: edited in place)."""
    finalizer = FINALIZER_BY_KIND.get(kind)
    if finalizer is None:
        return
    metadata = obj.setdefault("metadata", {})
    finalizers = list(metadata.get("finalizers") or ())
    if finalizer not in finalizers:
        metadata["finalizers"] = [*finalizers, finalizer]


RESIZE_REFUSED = ("only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc "
                  "must support resize")


def _requested(pvc: Mapping[str, Any]) -> Any:
    spec = pvc.get("spec")
    resources = spec.get("resources") if isinstance(spec, Mapping) else None
    requests = resources.get("requests") if isinstance(resources, Mapping) else None
    value = requests.get("storage") if isinstance(requests, Mapping) else None
    return parse_quantity(value) if value is not None else 0


def _class_name(pvc: Mapping[str, Any]) -> str:
    spec = pvc.get("spec")
    return str((spec.get("storageClassName") if isinstance(spec, Mapping) else None) or "")


def resize_refusal(pvc: Mapping[str, Any], old: Mapping[str, Any],
                   classes: Mapping[str, Mapping[str, Any]]) -> str | None:
    """Why PersistentVolumeClaimResize refuses the update of ``old`` into ``pvc``, or None."""
    try:
        grows = _requested(pvc) > _requested(old)
    except ValueError:
        return None  # not a quantity: validation says so
    if not grows:
        return None
    name = _class_name(pvc)
    storage_class = classes.get(name)
    if not name or name != _class_name(old) or storage_class is None:
        return RESIZE_REFUSED
    return None if storage_class.get("allowVolumeExpansion") is True else RESIZE_REFUSED


def volume_attributes_class_errors(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    errs: list[FieldError] = []
    if not obj.get("driverName"):
        errs.append(required("driverName"))
    if old is not None:
        if obj.get("driverName") != old.get("driverName"):
            errs.append(forbidden("driverName", "updates to driverName are forbidden."))
        if (obj.get("parameters") or {}) != (old.get("parameters") or {}):
            errs.append(forbidden("parameters", "updates to parameters are forbidden."))
    return errs
