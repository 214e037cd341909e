"""kube-apiserver's StorageObjectInUseProtection admission plugin
(``plugin/pkg/admission/storage/storageobjectinuseprotection``), and VolumeAttributesClass validation
(``pkg/apis/storage/validation``).

Guarantees:
- On create, a PersistentVolumeClaim gets the ``kubernetes.io/pvc-protection`` finalizer and a
  PersistentVolume the ``kubernetes.io/pv-protection`` finalizer, appended after any it already has and never
  twice. Updates and subresources are left alone (the protection controllers add it to older objects).
- VolumeAttributesClass: ``driverName`` required; ``driverName`` and ``parameters`` may not change
  ("updates to driverName are forbidden.", "updates to parameters are forbidden.").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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
