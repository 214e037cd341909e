"""Printers of ``storage.k8s.io``: storage classes, volume attributes classes, volume attachments, CSI nodes,
drivers and storage capacities."""

from __future__ import annotations

from typing import Any

from controller_manager.sim.apiserver.tables.cells import (
    AGE,
    NAME,
    Column,
    Obj,
    Printer,
    age,
    count,
    meta,
    name,
    quantity_string,
    spec,
    status,
)

_DEFAULT_CLASS_ANNOTATIONS = ("storageclass.kubernetes.io/is-default-class",
                              "storageclass.beta.kubernetes.io/is-default-class")
_DEFAULT_VAC_ANNOTATION = "resource.kubernetes.io/is-default-class"


def _storage_class_cells(sc: Obj, now: float) -> list[Any]:
    annotations = meta(sc).get("annotations") or {}
    default = any(annotations.get(a) == "true" for a in _DEFAULT_CLASS_ANNOTATIONS)
    return [name(sc) + (" (default)" if default else ""), str(sc.get("provisioner") or ""),
            sc.get("reclaimPolicy") or "Delete", sc.get("volumeBindingMode") or "Immediate",
            bool(sc.get("allowVolumeExpansion")), age(sc, now)]


def _volume_attributes_class_cells(vac: Obj, now: float) -> list[Any]:
    default = (meta(vac).get("annotations") or {}).get(_DEFAULT_VAC_ANNOTATION) == "true"
    return [name(vac) + (" (default)" if default else ""), str(vac.get("driverName") or ""), age(vac, now)]


def _volume_attachment_cells(va: Obj, now: float) -> list[Any]:
    va_spec = spec(va)
    return [name(va), str(va_spec.get("attacher") or ""),
            str((va_spec.get("source") or {}).get("persistentVolumeName") or ""), str(va_spec.get("nodeName") or ""),
            bool(status(va).get("attached")), age(va, now)]


def _csi_driver_cells(driver: Obj, now: float) -> list[Any]:
    d = spec(driver)
    tokens = d.get("tokenRequests")
    audiences = "<unset>" if tokens is None else ",".join(str(t.get("audience") or "") for t in tokens)
    attach = d.get("attachRequired")
    return [name(driver), True if attach is None else bool(attach), bool(d.get("podInfoOnMount")),
            bool(d.get("storageCapacity")), audiences, bool(d.get("requiresRepublish")),
            ",".join(d.get("volumeLifecycleModes") or []) or "<none>", age(driver, now)]


def _csi_storage_capacity_cells(c: Obj, now: float) -> list[Any]:
    capacity = c.get("capacity")
    return [name(c), str(c.get("storageClassName") or ""), "<unset>" if capacity is None else quantity_string(capacity)]


PRINTERS: dict[str, Printer] = {
    "StorageClass": Printer((NAME, Column("Provisioner"), Column("ReclaimPolicy"), Column("VolumeBindingMode"),
                             Column("AllowVolumeExpansion"), AGE), _storage_class_cells),
    "VolumeAttributesClass": Printer((NAME, Column("DriverName"), AGE), _volume_attributes_class_cells),
    "VolumeAttachment": Printer((NAME, Column("Attacher", format="name"), Column("PV"), Column("Node"),
                                 Column("Attached", "boolean"), AGE), _volume_attachment_cells),
    "CSINode": Printer((NAME, Column("Drivers", "integer"), AGE),
                       lambda o, now: [name(o), count(spec(o).get("drivers")), age(o, now)]),
    "CSIDriver": Printer((NAME, Column("AttachRequired", "boolean"), Column("PodInfoOnMount", "boolean"),
                          Column("StorageCapacity", "boolean"), Column("TokenRequests"),
                          Column("RequiresRepublish", "boolean"), Column("Modes"), AGE), _csi_driver_cells),
    "CSIStorageCapacity": Printer((NAME, Column("StorageClassName"), Column("Capacity")),
                                  _csi_storage_capacity_cells),
}
