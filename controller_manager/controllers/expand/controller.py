"""The volume expand controller (kube-controller-manager's ``persistentvolume-expander-controller``,
``pkg/controller/volume/expand/expand_controller.go``), as it runs with no in-tree expandable plugin: every
volume is expanded by an external resizer (a CSI driver's external-resizer sidecar), this controller only
routes the request.

Guarantees:
- A Bound claim is looked at when added or deleted, and when its storage request or its status capacity grows.
- Its volume (``spec.volumeName``) is read live from the API server; a volume whose ``claimRef`` is not this
  claim (namespace and UID) is an error, retried with backoff ("persistent Volume is not bound to PVC being
  updated : <ns/name>"), as is a volume that cannot be read.
- Nothing is done unless the request exceeds ``status.capacity`` (or the volume carries the pre-resize
  capacity annotation).
- A volume of an in-tree plugin migrated to CSI (AWS EBS, GCE PD, Azure Disk and File, Cinder, vSphere,
  Portworx) gets a Normal ``ExternalExpanding`` event "CSI migration enabled for <plugin>; waiting for external
  resizer to expand the pvc", and the claim is annotated ``volume.kubernetes.io/storage-resizer: <CSI driver>``
  through a ``/status`` patch, so that driver's resizer takes it.
- Any other volume (a CSI one above all) gets a Normal ``ExternalExpanding`` event "waiting for an external
  controller to expand this PVC" and is not requeued: its driver's external-resizer acts on it.
- Ten workers (upstream's fixed count); the queue is ``volume_expand``; events come from ``volume_expand``.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any, ClassVar

from controller_manager.api.meta import key_of, meta, split_key
from controller_manager.api.quantity import parse_quantity
from controller_manager.api.resources import PERSISTENTVOLUMECLAIMS, PERSISTENTVOLUMES
from controller_manager.client.errors import ApiError
from controller_manager.runtime.controller import Controller, ControllerContext, Result
from controller_manager.runtime.informers import Added, Deleted, Event, Updated

__all__ = ["ANN_PRE_RESIZE_CAPACITY", "EXTERNAL_EXPANDING", "MIGRATED_PLUGINS", "RESIZER_ANNOTATION",
           "ExpandController", "migrated_plugin"]

Obj = Mapping[str, Any]

RESIZER_ANNOTATION = "volume.kubernetes.io/storage-resizer"
ANN_PRE_RESIZE_CAPACITY = "volume.alpha.kubernetes.io/pre-resize-capacity"
EXTERNAL_EXPANDING = "ExternalExpanding"

# In-tree volume source -> (in-tree plugin name, the CSI driver it migrated to); all migrations are GA.
MIGRATED_PLUGINS: dict[str, tuple[str, str]] = {
    "awsElasticBlockStore": ("kubernetes.io/aws-ebs", "ebs.csi.aws.com"),
    "gcePersistentDisk": ("kubernetes.io/gce-pd", "pd.csi.storage.gke.io"),
    "azureDisk": ("kubernetes.io/azure-disk", "disk.csi.azure.com"),
    "azureFile": ("kubernetes.io/azure-file", "file.csi.azure.com"),
    "cinder": ("kubernetes.io/cinder", "cinder.csi.openstack.org"),
    "vsphereVolume": ("kubernetes.io/vsphere-volume", "csi.vsphere.vmware.com"),
    "portworxVolume": ("kubernetes.io/portworx-volume", "pxd.portworx.com"),
}


class VolumeNotBound(Exception):
    """The claim's volume does not name it back."""


def _section(obj: Obj, *path: str) -> Mapping[str, Any]:
    for key in path:
        value = obj.get(key)
        obj = value if isinstance(value, Mapping) else {}
    return obj


def _storage(values: Mapping[str, Any]) -> Decimal:
    quantity = values.get("storage")
    return parse_quantity(quantity) if quantity is not None else Decimal(0)


def requested(pvc: Obj) -> Decimal:
    return _storage(_section(pvc, "spec", "resources", "requests"))


def capacity(pvc: Obj) -> Decimal:
    return _storage(_section(pvc, "status", "capacity"))


def migrated_plugin(pv: Obj) -> tuple[str, str] | None:
    """(in-tree plugin, CSI driver) for a volume of a plugin migrated to CSI, else None."""
    spec = _section(pv, "spec")
    for source, names in MIGRATED_PLUGINS.items():
        if spec.get(source) is not None:
            return names
    return None


def _bound(pvc: Obj) -> bool:
    return _section(pvc, "status").get("phase") == "Bound"


class ExpandController(Controller):
    name: ClassVar[str] = "persistentvolume-expander-controller"
    alias: ClassVar[str] = "persistentvolume-expander"
    queue_name: ClassVar[str | None] = "volume_expand"
    default_workers: ClassVar[int] = 10

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.client = ctx.client
        self.recorder = ctx.events.recorder("volume_expand")
        self.pvc_informer = ctx.informers.informer(PERSISTENTVOLUMECLAIMS)
        self.pvc_informer.add_handler(self._on_pvc)

    def _on_pvc(self, event: Event) -> None:
        if isinstance(event, Updated):
            # A grown request needs expanding; a grown capacity may end a resize.
            if requested(event.new) > requested(event.old) or capacity(event.new) > capacity(event.old):
                self._enqueue(event.new)
        elif isinstance(event, Added | Deleted):
            self._enqueue(event.obj)

    def _enqueue(self, pvc: Obj) -> None:
        if _bound(pvc):
            self.queue.add(key_of(pvc))

    async def sync(self, key: str) -> Result | None:
        pvc = self.pvc_informer.store.get(key)
        if pvc is None:
            return None
        volume_name = str(_section(pvc, "spec").get("volumeName") or "")
        try:
            pv = await self.client.get(PERSISTENTVOLUMES, volume_name)
        except ApiError as err:
            raise ApiError(err.status, err.reason, f'failed to get PV "{volume_name}": {err}') from err
        ref = _section(pv, "spec", "claimRef")
        pm = meta(pvc)
        if not ref or ref.get("namespace") != pm.get("namespace") or ref.get("uid") != pm.get("uid"):
            raise VolumeNotBound(f"persistent Volume is not bound to PVC being updated : {key}")
        annotations = meta(pv).get("annotations") or {}
        if requested(pvc) <= capacity(pvc) and ANN_PRE_RESIZE_CAPACITY not in annotations:
            return None
        migrated = migrated_plugin(pv)
        if migrated is not None:
            plugin, driver = migrated
            self.recorder.event(pvc, "Normal", EXTERNAL_EXPANDING,
                                f"CSI migration enabled for {plugin}; waiting for external resizer to expand the pvc")
            await self._set_resizer(pvc, driver, key)
            return None
        self.recorder.event(pvc, "Normal", EXTERNAL_EXPANDING, "waiting for an external controller to expand this PVC")
        self.log.info("Waiting for an external controller to expand the PVC", pvc=key, uid=pm.get("uid"))
        return None

    async def _set_resizer(self, pvc: Obj, driver: str, key: str) -> None:
        """``SetClaimResizer``: the annotation through a ``/status`` patch guarded by the resourceVersion."""
        if (meta(pvc).get("annotations") or {}).get(RESIZER_ANNOTATION) == driver:
            return
        namespace, name = split_key(key)
        patch = {"metadata": {"annotations": {RESIZER_ANNOTATION: driver},
                              "resourceVersion": meta(pvc).get("resourceVersion")}}
        try:
            await self.client.patch(PERSISTENTVOLUMECLAIMS, name, patch, namespace, patch_type="strategic",
                                    subresource="status")
        except ApiError as err:
            message = f"error setting resizer annotation to pvc {key}, with error {err}"
            self.recorder.event(pvc, "Warning", EXTERNAL_EXPANDING, message)
            raise ApiError(err.status, err.reason, message) from err
