"""The VolumeAttributesClass protection controller (kube-controller-manager's
``volumeattributesclass-protection-controller``, ``pkg/controller/volume/vacprotection``).

Guarantees:
- Every VolumeAttributesClass not being deleted carries the ``kubernetes.io/vac-protection`` finalizer.
- A class being deleted keeps it while a PersistentVolume names it (``spec.volumeAttributesClassName``) or a
  claim does (``spec.volumeAttributesClassName``, ``status.currentVolumeAttributesClassName`` or
  ``status.modifyVolumeStatus.targetVolumeAttributesClassName``), as the informers' caches say (upstream asks
  no live list either); the class is looked at again when a claim or volume stops naming it or is deleted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from controller_manager.api.meta import deep_copy, meta
from controller_manager.api.resources import PERSISTENTVOLUMECLAIMS, PERSISTENTVOLUMES, VOLUMEATTRIBUTESCLASSES
from controller_manager.api.volumes import VAC_PROTECTION_FINALIZER, is_deletion_candidate, need_to_add_finalizer
from controller_manager.runtime.controller import Controller, ControllerContext, Result
from controller_manager.runtime.informers import Added, Deleted, Event, Updated

__all__ = ["VAC_NAME_INDEX", "VACProtectionController", "pv_class_names", "pvc_class_names"]

Obj = Mapping[str, Any]
VAC_NAME_INDEX = "volumeAttributesClassName"


def _section(obj: Obj, name: str) -> Mapping[str, Any]:
    value = obj.get(name)
    return value if isinstance(value, Mapping) else {}


def pvc_class_names(pvc: Obj) -> list[str]:
    """The classes a claim names: desired, current and the target of a modification in progress."""
    status = _section(pvc, "status")
    names = (_section(pvc, "spec").get("volumeAttributesClassName"), status.get("currentVolumeAttributesClassName"),
             _section(status, "modifyVolumeStatus").get("targetVolumeAttributesClassName"))
    return sorted({str(n) for n in names if n})


def pv_class_names(pv: Obj) -> list[str]:
    name = _section(pv, "spec").get("volumeAttributesClassName")
    return [str(name)] if name else []


class VACProtectionController(Controller):
    name: ClassVar[str] = "volumeattributesclass-protection-controller"
    alias: ClassVar[str] = "volumeattributesclass-protection-controller"  # upstream gives it no alias
    queue_name: ClassVar[str | None] = "vacprotection"
    default_workers: ClassVar[int] = 1

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.client = ctx.client
        self.vac_informer = ctx.informers.informer(VOLUMEATTRIBUTESCLASSES)
        self.pvc_informer = ctx.informers.informer(PERSISTENTVOLUMECLAIMS, indexers={VAC_NAME_INDEX: pvc_class_names})
        self.pv_informer = ctx.informers.informer(PERSISTENTVOLUMES, indexers={VAC_NAME_INDEX: pv_class_names})
        self.vac_informer.add_handler(self._on_vac)
        self.pvc_informer.add_handler(lambda event: self._on_user(event, pvc_class_names))
        self.pv_informer.add_handler(lambda event: self._on_user(event, pv_class_names))

    def _on_vac(self, event: Event) -> None:
        if isinstance(event, Deleted):
            return
        vac = event.new if isinstance(event, Updated) else event.obj
        if (need_to_add_finalizer(vac, VAC_PROTECTION_FINALIZER)
                or is_deletion_candidate(vac, VAC_PROTECTION_FINALIZER)):
            self.queue.add(str(meta(vac).get("name", "")))

    def _on_user(self, event: Event, names: Any) -> None:
        # A class can only become unused when a user lets go of it: an update dropping it, or a deletion.
        if isinstance(event, Added):
            return
        if isinstance(event, Updated):
            released = set(names(event.old)) - set(names(event.new))
        else:
            released = set(names(event.obj))
        for name in sorted(released):
            self.queue.add(name)

    def is_being_used(self, name: str) -> bool:
        return bool(self.pv_informer.store.index_count(VAC_NAME_INDEX, name)
                    or self.pvc_informer.store.index_count(VAC_NAME_INDEX, name))

    async def sync(self, key: str) -> Result | None:
        vac = self.vac_informer.store.get(key)
        if vac is None:
            self.log.debug("VAC not found, ignoring", vac=key)
            return None
        if is_deletion_candidate(vac, VAC_PROTECTION_FINALIZER):
            if not self.is_being_used(key):
                await self._set_finalizer(vac, present=False)
                return None
            self.log.debug("Keeping VAC because it is being used", vac=key)
        if need_to_add_finalizer(vac, VAC_PROTECTION_FINALIZER):
            await self._set_finalizer(vac, present=True)
        return None

    async def _set_finalizer(self, vac: Obj, *, present: bool) -> None:
        clone: dict[str, Any] = deep_copy(dict(vac))
        finalizers = [f for f in clone["metadata"].get("finalizers") or () if f != VAC_PROTECTION_FINALIZER]
        clone["metadata"]["finalizers"] = [*finalizers, VAC_PROTECTION_FINALIZER] if present else finalizers
        await self.client.update(VOLUMEATTRIBUTESCLASSES, clone)
        self.log.debug("Added protection finalizer to VAC" if present else "Removed protection finalizer from VAC",
                       vac=meta(vac).get("name"))
