"""kube-sim's external-resizer: what a CSI driver's ``csi-resizer`` sidecar (kubernetes-csi/external-resizer)
does to a claim whose storage request grew, for a simulated driver that needs no node-side expansion.

Guarantees:
- It acts on a Bound claim whose ``spec.resources.requests.storage`` exceeds ``status.capacity.storage`` and whose
  volume is a CSI volume (``spec.csi.driver``) of a driver it serves, or whose claim carries
  ``volume.kubernetes.io/storage-resizer: <driver>`` (a CSI-migrated in-tree volume). ``drivers=None`` serves
  every driver.
- First the claim is marked in progress through ``/status``: ``allocatedResources.storage`` = the request,
  ``allocatedResourceStatuses.storage`` = ``ControllerResizeInProgress``, a ``Resizing`` condition (True), and a
  Normal ``Resizing`` event "External resizer is resizing volume <pv>".
- After ``delay`` seconds (the driver's ControllerExpandVolume) the volume's ``spec.capacity.storage`` becomes
  the request; then the claim's ``status.capacity.storage`` too, its ``Resizing``/``FileSystemResizePending``
  conditions and its storage entry of ``allocatedResourceStatuses`` are removed, and a Normal
  ``VolumeResizeSuccessful`` event "Resize volume succeeded" is recorded.
- Events come from ``external-resizer <driver>``. A claim that changes meanwhile is looked at again (its newest
  request wins); a write refused (conflict, object gone) is retried from a fresh read after ``retry`` seconds.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import structlog

from controller_manager.api.meta import deep_copy, format_time, key_of, meta, split_key
from controller_manager.api.quantity import parse_quantity
from controller_manager.api.resources import PERSISTENTVOLUMECLAIMS, PERSISTENTVOLUMES
from controller_manager.clock import Clock
from controller_manager.sim import recorder
from controller_manager.sim.listwatch import ListWatch

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer

__all__ = ["RESIZER_ANNOTATION", "SimResizer"]

log = structlog.get_logger("kube-sim.resizer")

Obj = dict[str, Any]
RESIZER_ANNOTATION = "volume.kubernetes.io/storage-resizer"
_RESIZE_CONDITIONS = ("Resizing", "FileSystemResizePending")


def _section(obj: Mapping[str, Any], *path: str) -> Mapping[str, Any]:
    for key in path:
        value = obj.get(key)
        obj = value if isinstance(value, Mapping) else {}
    return obj


def _storage(values: Mapping[str, Any]) -> Decimal:
    quantity = values.get("storage")
    return parse_quantity(quantity) if quantity is not None else Decimal(0)


class SimResizer:
    """Resizes CSI volumes of the drivers it serves, as the external-resizer sidecar would."""

    def __init__(self, api: ApiServer, clock: Clock, *, drivers: set[str] | None = None, delay: float = 0.0,
                 retry: float = 0.5) -> None:
        self._api = api
        self._clock = clock
        self._drivers = drivers
        self.delay = delay  # seconds ControllerExpandVolume takes; may be changed while running
        self._retry = retry
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()
        self._seq = itertools.count()

    async def run(self) -> None:
        watch = ListWatch(self._api, PERSISTENTVOLUMECLAIMS, self._on_claim, clock=self._clock, name="sim-resizer")
        async with asyncio.TaskGroup() as tg:
            tg.create_task(watch.run(), name="sim-resizer-watch")
            tg.create_task(self._work(), name="sim-resizer-worker")

    def _on_claim(self, kind: str, pvc: dict[str, Any]) -> None:
        if kind != "DELETED" and self._wants(pvc):
            self._enqueue(key_of(pvc))

    def _enqueue(self, key: str) -> None:
        if key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    def _wants(self, pvc: Mapping[str, Any]) -> bool:
        return (_section(pvc, "status").get("phase") == "Bound"
                and _storage(_section(pvc, "spec", "resources", "requests")) > _storage(
                    _section(pvc, "status", "capacity")))

    def _driver(self, pvc: Mapping[str, Any], pv: Mapping[str, Any]) -> str | None:
        driver = _section(pv, "spec", "csi").get("driver") or (meta(pvc).get("annotations") or {}).get(
            RESIZER_ANNOTATION)
        if not driver or (self._drivers is not None and driver not in self._drivers):
            return None
        return str(driver)

    async def _work(self) -> None:
        while True:
            key = await self._queue.get()
            self._queued.discard(key)
            try:
                await self._resize(key)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a conflict, or the object went away: look again later
                log.debug("resize retried", pvc=key, error=str(exc))
                self._clock.call_later(self._retry, lambda k=key: self._enqueue(k))  # type: ignore[misc]

    async def _resize(self, key: str) -> None:
        namespace, name = split_key(key)
        pvc = self._api.get(PERSISTENTVOLUMECLAIMS, namespace, name)
        if not self._wants(pvc):
            return
        pv_name = str(_section(pvc, "spec").get("volumeName") or "")
        if not pv_name:
            return
        pv = self._api.get(PERSISTENTVOLUMES, None, pv_name)
        driver = self._driver(pvc, pv)
        if driver is None:
            return
        request = _section(pvc, "spec", "resources", "requests")["storage"]
        component = f"external-resizer {driver}"
        status = deep_copy(dict(_section(pvc, "status")))
        status["allocatedResources"] = {**(status.get("allocatedResources") or {}), "storage": request}
        status["allocatedResourceStatuses"] = {**(status.get("allocatedResourceStatuses") or {}),
                                               "storage": "ControllerResizeInProgress"}
        status["conditions"] = [*(c for c in status.get("conditions") or () if c.get("type") != "Resizing"),
                                {"type": "Resizing", "status": "True", "lastProbeTime": None,
                                 "lastTransitionTime": format_time(self._clock.now())}]
        pvc = self._api.update(PERSISTENTVOLUMECLAIMS, {**pvc, "status": status}, subresource="status")
        self._event(pvc, "Resizing", f"External resizer is resizing volume {pv_name}", component)

        if self.delay > 0:
            await self._clock.sleep(self.delay)  # ControllerExpandVolume

        pv = self._api.get(PERSISTENTVOLUMES, None, pv_name)
        pv_spec = dict(pv.get("spec") or {})
        pv_spec["capacity"] = {**(pv_spec.get("capacity") or {}), "storage": request}
        self._api.update(PERSISTENTVOLUMES, {**pv, "spec": pv_spec})

        pvc = self._api.get(PERSISTENTVOLUMECLAIMS, namespace, name)
        status = deep_copy(dict(_section(pvc, "status")))
        status["capacity"] = {**(status.get("capacity") or {}), "storage": request}
        status["conditions"] = [c for c in status.get("conditions") or () if c.get("type") not in _RESIZE_CONDITIONS]
        if not status["conditions"]:
            del status["conditions"]
        statuses = {k: v for k, v in (status.get("allocatedResourceStatuses") or {}).items() if k != "storage"}
        if statuses:
            status["allocatedResourceStatuses"] = statuses
        else:
            status.pop("allocatedResourceStatuses", None)
        pvc = self._api.update(PERSISTENTVOLUMECLAIMS, {**pvc, "status": status}, subresource="status")
        self._event(pvc, "VolumeResizeSuccessful", "Resize volume succeeded", component)
        log.info("volume resized", pvc=key, pv=pv_name, size=request)
        if self._wants(pvc):  # the request grew again meanwhile
            self._enqueue(key)

    def _event(self, pvc: Mapping[str, Any], reason: str, message: str, component: str) -> None:
        obj = {**pvc, "kind": "PersistentVolumeClaim", "apiVersion": "v1"}
        recorder.record(self._api, recorder.event_object(obj, "Normal", reason, message, component,
                                                         self._clock.now(), next(self._seq)))
