"""kube-controller-manager's ``persistentvolume-binder-controller`` (``pkg/controller/volume/persistentvolume``,
``pv_controller_base.go``): the informers, the two queues and the periodic resync around :class:`~.binder.Binder`.

Guarantees, as upstream:
- Two queues of one worker each: ``volumes`` (names) and ``claims`` (``namespace/name``), fed by every add, update
  and delete of a PersistentVolume / PersistentVolumeClaim, and by a resync of everything every
  ``--pvclaimbinder-sync-period`` (15 s).
- A worker syncs the object the informer holds, after caching it in the controller's own cache (which keeps
  the newer of the informer's and its own writes; an older version is skipped). An object gone from the
  informer is removed from that cache: a deleted volume gets its claim synced (it may now be Lost), a deleted
  bound claim gets its volume synced (it may now be Released).
- A failed sync is logged and left to the next event or resync (upstream's queues have no retry).
- Events are recorded as ``persistentvolume-controller``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from controller_manager.api.meta import meta
from controller_manager.api.resources import NODES, PERSISTENTVOLUMECLAIMS, PERSISTENTVOLUMES, PODS, STORAGECLASSES
from controller_manager.client.errors import ApiError, Conflict
from controller_manager.runtime.controller import Controller, ControllerContext, Result
from controller_manager.runtime.informers import Added, Deleted, Event, Updated

from . import metrics
from .binder import COMPONENT, Binder, BindError
from .helpers import claim_key, claim_ref, claim_ref_key, name_of, pod_claim_names, volume_name_of_claim
from .plugins import default_plugins

Obj = Mapping[str, Any]

POD_PVC_INDEX = "persistentvolume-binder:pvc"  # pods by the claims their volumes use (common.PodPVCIndex)
DEFAULT_SYNC_PERIOD = 15.0


def _pod_pvc_index(pod: Obj) -> list[str]:
    return pod_claim_names(pod)


def _seconds(options: Mapping[str, Any], key: str, default: float) -> float:
    value = options.get(key, default)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else default


class PersistentVolumeBinderController(Controller):
    name: ClassVar[str] = "persistentvolume-binder-controller"
    alias: ClassVar[str] = "persistentvolume-binder"
    queue_name: ClassVar[str | None] = "volumes"
    default_workers: ClassVar[int] = 1

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        options = ctx.options
        self.sync_period = _seconds(options, "pvclaimbinder_sync_period", DEFAULT_SYNC_PERIOD)
        enable_provisioning = options.get("enable_dynamic_provisioning", True)
        enable_hostpath = options.get("enable_hostpath_provisioner", False) is True
        self.claim_queue = ctx.new_queue("claims")
        self.volume_informer = ctx.informers.informer(PERSISTENTVOLUMES)
        self.claim_informer = ctx.informers.informer(PERSISTENTVOLUMECLAIMS)
        self.class_informer = ctx.informers.informer(STORAGECLASSES)
        self.pod_informer = ctx.informers.informer(PODS, indexers={POD_PVC_INDEX: _pod_pvc_index})
        self.node_informer = ctx.informers.informer(NODES)
        self.volume_informer.add_handler(self._on_volume)
        self.claim_informer.add_handler(self._on_claim)
        self.binder = Binder(
            ctx.client, ctx.events.recorder(COMPONENT), ctx.clock, self.log,
            get_class=self.class_informer.store.get,
            list_classes=self.class_informer.store.list,
            informer_claim=self.claim_informer.store.get,
            pods_for_claim=self._pods_for_claim,
            enqueue_claim=self.claim_queue.add,
            plugins=default_plugins(enable_hostpath),
            get_node=self.node_informer.store.get,
            enable_dynamic_provisioning=enable_provisioning is not False,
        )
        self._initialized = False
        binder = self.binder
        metrics.COLLECTOR.source = lambda: (list(binder.volumes.values()), list(binder.claims.values()),
                                            binder.plugin_name_for_metrics)

    # --- informer handlers (enqueueWork) -----------------------------------------------------------------

    def _on_volume(self, event: Event) -> None:
        obj = event.new if isinstance(event, Updated) else event.obj if isinstance(event, Added | Deleted) else None
        if obj is not None:
            self.queue.add(name_of(obj))

    def _on_claim(self, event: Event) -> None:
        obj = event.new if isinstance(event, Updated) else event.obj if isinstance(event, Added | Deleted) else None
        if obj is not None:
            self.claim_queue.add(claim_key(obj))

    def _pods_for_claim(self, key: str) -> Sequence[Obj]:
        return self.pod_informer.store.by_index(POD_PVC_INDEX, key)

    def _initialize_caches(self) -> None:
        """``initializeCaches``: the controller's caches start as what the informers hold."""
        if self._initialized:
            return
        self._initialized = True
        for volume in self.volume_informer.store.list():
            self.binder.store_volume(volume)
        for claim in self.claim_informer.store.list():
            self.binder.store_claim(claim)

    # --- workers -------------------------------------------------------------------------------------------

    async def sync(self, key: str) -> Result | None:
        """``volumeWorker``: one volume by name."""
        self._initialize_caches()
        volume = self.volume_informer.store.get(key)
        if volume is not None:
            if self.binder.store_volume(volume):
                await self._guard(self.binder.sync_volume(volume), volume=key)
            return None
        cached = self.binder.volumes.pop(key, None)
        if cached is None:
            return None  # the deletion was handled already
        self.binder.timestamps.record(key, failed=False)  # a delete operation, if any, has ended
        ref = claim_ref(cached)
        if ref is not None:
            # The claim of a deleted volume may now be Lost: sync it without waiting for the resync.
            self.claim_queue.add(claim_ref_key(ref))
        return None

    async def sync_claim(self, key: str) -> Result | None:
        """``claimWorker``: one claim by ``namespace/name``."""
        self._initialize_caches()
        claim = self.claim_informer.store.get(key)
        if claim is not None:
            if self.binder.store_claim(claim):
                await self._guard(self.binder.sync_claim(claim), pvc=key)
            return None
        cached = self.binder.claims.pop(key, None)
        if cached is None:
            return None
        self.binder.timestamps.delete(key)  # an unfinished provisioning is abandoned
        volume_name = volume_name_of_claim(cached)
        if volume_name:
            # A deleted claim's volume is now Released: sync it without waiting for the resync.
            self.queue.add(volume_name)
        return None

    async def _guard(self, sync: Any, **what: str) -> None:
        try:
            await sync
        except Conflict as err:
            self.log.debug("Could not sync, version conflict", error=str(err), **what)
        except (ApiError, BindError) as err:
            self.log.error("Could not sync", error=str(err), **what)

    async def run_background(self) -> None:
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self.run_queue(self.claim_queue, self.sync_claim), name=f"{self.name}:claims")
                tg.create_task(self._resync_loop(), name=f"{self.name}:resync")
        finally:
            self.claim_queue.shut_down()
            self.binder.operations.cancel_all()

    async def _resync_loop(self) -> None:
        """``resync``: every sync period, every claim and every volume is queued again."""
        while True:
            await self.ctx.clock.sleep(self.sync_period)
            for claim in self.claim_informer.store.list():
                self.claim_queue.add(claim_key(claim))
            for volume in self.volume_informer.store.list():
                self.queue.add(str(meta(volume).get("name") or ""))
