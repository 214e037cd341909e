"""The PV protection controller (kube-controller-manager's ``persistentvolume-protection-controller``,
``pkg/controller/volume/pvprotection/pv_protection_controller.go``).

Guarantees:
- Every PersistentVolume not being deleted carries the ``kubernetes.io/pv-protection`` finalizer (the API
  server's StorageObjectInUseProtection admission adds it on create; this adds it to volumes created without).
- A volume being deleted keeps the finalizer while its ``status.phase`` is ``Bound``; once it is not, the
  finalizer is removed (an update of the cached copy: a stale one is a Conflict, retried with backoff).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from controller_manager.api.meta import deep_copy, meta
from controller_manager.api.resources import PERSISTENTVOLUMES
from controller_manager.api.volumes import PV_PROTECTION_FINALIZER, is_deletion_candidate, need_to_add_finalizer
from controller_manager.runtime.controller import Controller, ControllerContext, Result
from controller_manager.runtime.informers import Deleted, Event, Updated

__all__ = ["PVProtectionController", "is_being_used"]

Obj = Mapping[str, Any]


def is_being_used(pv: Obj) -> bool:
    """Bound, as the PV binder's status says."""
    status = pv.get("status")
    return isinstance(status, Mapping) and status.get("phase") == "Bound"


class PVProtectionController(Controller):
    name: ClassVar[str] = "persistentvolume-protection-controller"
    alias: ClassVar[str] = "pv-protection"
    queue_name: ClassVar[str | None] = "pvprotection"
    default_workers: ClassVar[int] = 1

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.client = ctx.client
        self.pv_informer = ctx.informers.informer(PERSISTENTVOLUMES)
        self.pv_informer.add_handler(self._on_pv)

    def _on_pv(self, event: Event) -> None:
        if isinstance(event, Deleted):
            return
        pv = event.new if isinstance(event, Updated) else event.obj
        if need_to_add_finalizer(pv, PV_PROTECTION_FINALIZER) or is_deletion_candidate(pv, PV_PROTECTION_FINALIZER):
            self.queue.add(str(meta(pv).get("name", "")))

    async def sync(self, key: str) -> Result | None:
        pv = self.pv_informer.store.get(key)
        if pv is None:
            self.log.debug("PV not found, ignoring", pv=key)
            return None
        if is_deletion_candidate(pv, PV_PROTECTION_FINALIZER):
            if not is_being_used(pv):
                await self._set_finalizer(pv, present=False)
                return None
            self.log.debug("Keeping PV because it is being used", pv=key)
        if need_to_add_finalizer(pv, PV_PROTECTION_FINALIZER):
            await self._set_finalizer(pv, present=True)
        return None

    async def _set_finalizer(self, pv: Obj, *, present: bool) -> None:
        clone: dict[str, Any] = deep_copy(dict(pv))
        finalizers = [f for f in clone["metadata"].get("finalizers") or () if f != PV_PROTECTION_FINALIZER]
        clone["metadata"]["finalizers"] = [*finalizers, PV_PROTECTION_FINALIZER] if present else finalizers
        await self.client.update(PERSISTENTVOLUMES, clone)
        self.log.debug("Added protection finalizer to PV" if present else "Removed protection finalizer from PV",
                       pv=meta(pv).get("name"))
