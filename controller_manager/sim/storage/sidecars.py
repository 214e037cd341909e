"""The simulated CSI driver's controller side: its objects, an external-provisioner and an external-attacher.

Guarantees:
- :meth:`StorageSim.install` creates the CSIDriver and (unless ``storage_class`` is ``""``) the default
  StorageClass, if absent.
- Provisioner: a claim without ``spec.volumeName``, not being deleted, annotated
  ``volume.kubernetes.io/storage-provisioner`` (or the beta key) with the driver's name, whose class exists and
  names the driver, gets a PV (:func:`~.objects.provisioned_volume`) ``provision_delay`` seconds later, with the
  ``Provisioning`` and ``ProvisioningSucceeded`` Events on the claim. A ``WaitForFirstConsumer`` class waits
  for ``volume.kubernetes.io/selected-node``; the PV is then pinned to that node's zone. A missing class is the
  ``ProvisioningFailed`` Warning. A PV already there (``pvc-<claim uid>``) is not made twice.
- Deleter: a PV the driver provisioned whose phase is ``Released`` and reclaim policy ``Delete`` is, after
  ``delete_delay``, freed of the provisioner finalizer and deleted; so is one that was deleted while its claim
  held it, once Released.
- Attacher: a VolumeAttachment whose ``spec.attacher`` is the driver gets the ``external-attacher/<driver>``
  finalizer at once and, ``attach_delay`` later, ``status.attached: true``; if its PV carries the annotation
  ``sim.controller-manager.io/attach-error`` it gets ``status.attachError`` with that message instead. A
  VolumeAttachment being deleted loses that finalizer ``detach_delay`` after, so the deletion completes.
- Every write is in-process, one at a time on one worker task; delays read the injected clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import structlog

from controller_manager.api.meta import format_time, meta
from controller_manager.api.resources import (
    CSIDRIVERS,
    NODES,
    PERSISTENTVOLUMECLAIMS,
    PERSISTENTVOLUMES,
    STORAGECLASSES,
    VOLUMEATTACHMENTS,
)
from controller_manager.clock import Clock
from controller_manager.sim.listwatch import ListWatch, status_code
from controller_manager.sim.recorder import event_object, record
from controller_manager.sim.storage.config import StorageConfig
from controller_manager.sim.storage.objects import (
    PROVISIONED_BY_ANNOTATION,
    PROVISIONER_FINALIZER,
    SELECTED_NODE_ANNOTATION,
    STORAGE_PROVISIONER_ANNOTATIONS,
    ZONE_LABEL,
    attacher_finalizer,
    csi_driver,
    provisioned_volume,
    storage_class,
)

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer

__all__ = ["ATTACH_ERROR_ANNOTATION", "StorageSim"]

log = structlog.get_logger("kube-sim.storage")

ATTACH_ERROR_ANNOTATION = "sim.controller-manager.io/attach-error"
FIELD_MANAGER = "csi-provisioner"
ATTACHER_FIELD_MANAGER = "csi-attacher"


def _claim_provisioner(claim: Mapping[str, Any]) -> str:
    annotations = meta(claim).get("annotations") or {}
    for key in STORAGE_PROVISIONER_ANNOTATIONS:
        if annotations.get(key):
            return str(annotations[key])
    return ""


class StorageSim:
    """The driver's controller-side sidecars. ``run()`` until cancelled."""

    def __init__(self, api: ApiServer, clock: Clock, config: StorageConfig | None = None) -> None:
        self._api = api
        self._clock = clock
        self.config = config or StorageConfig()
        self._actions: asyncio.Queue[Callable[[], Awaitable[None]]] = asyncio.Queue()
        self._pending: set[tuple[str, str]] = set()  # (what, key) with a timer armed
        self._seq = 0
        self.component = f"{self.config.driver}_kube-sim"

    # ---- objects

    def install(self) -> None:
        objects = [(CSIDRIVERS, csi_driver(self.config))]
        if self.config.storage_class:
            objects.append((STORAGECLASSES, storage_class(self.config)))
        for res, obj in objects:
            try:
                self._api.create(res, obj)
            except Exception as exc:
                if status_code(exc) != 409:
                    raise

    # ---- scheduling work

    def _later(self, what: str, key: str, delay: float, action: Callable[[], Awaitable[None]]) -> None:
        if (what, key) in self._pending:
            return
        self._pending.add((what, key))

        def fire() -> None:
            self._pending.discard((what, key))
            self._actions.put_nowait(action)
        if delay <= 0:
            fire()
        else:
            self._clock.call_later(delay, fire)

    def _event(self, obj: Mapping[str, Any], event_type: str, reason: str, message: str) -> None:
        self._seq += 1
        record(self._api, event_object(obj, event_type, reason, message, self.component, self._clock.now(),
                                       self._seq))

    # ---- provisioner

    def _should_provision(self, claim: Mapping[str, Any]) -> bool:
        m = meta(claim)
        if m.get("deletionTimestamp") or (claim.get("spec") or {}).get("volumeName"):
            return False
        return _claim_provisioner(claim) == self.config.driver

    def _on_claim(self, kind: str, claim: dict[str, Any]) -> None:
        if kind == "DELETED" or not self._should_provision(claim):
            return
        m = meta(claim)
        key = f"{m.get('namespace')}/{m.get('name')}"
        self._later("provision", key, self.config.provision_delay, lambda: self._provision(key))

    async def _provision(self, key: str) -> None:
        namespace, _, name = key.partition("/")
        try:
            claim = self._api.get(PERSISTENTVOLUMECLAIMS, namespace, name)
        except Exception as exc:
            if status_code(exc) == 404:
                return
            raise
        if not self._should_provision(claim):
            return
        uid = meta(claim).get("uid")
        try:
            self._api.get(PERSISTENTVOLUMES, None, f"pvc-{uid}")
            return  # provisioned already; binding it is the PV controller's work
        except Exception as exc:
            if status_code(exc) != 404:
                raise
        class_name = str((claim.get("spec") or {}).get("storageClassName") or "")
        try:
            klass = self._api.get(STORAGECLASSES, None, class_name)
        except Exception as exc:
            if status_code(exc) != 404:
                raise
            self._event(claim, "Warning", "ProvisioningFailed",
                        f'storageclass.storage.k8s.io "{class_name}" not found')
            return
        if klass.get("provisioner") != self.config.driver:
            return
        zone = None
        selected = (meta(claim).get("annotations") or {}).get(SELECTED_NODE_ANNOTATION)
        if klass.get("volumeBindingMode") == "WaitForFirstConsumer" and not selected:
            return  # the scheduler picks the node first
        if selected:
            try:
                node = self._api.get(NODES, None, str(selected))
                zone = (meta(node).get("labels") or {}).get(ZONE_LABEL)
            except Exception as exc:
                if status_code(exc) != 404:
                    raise
                self._event(claim, "Warning", "ProvisioningFailed",
                            f'failed to get target node: node "{selected}" not found')
                return
        self._event(claim, "Normal", "Provisioning",
                    f'External provisioner is provisioning volume for claim "{namespace}/{name}"')
        volume = provisioned_volume(claim, klass, self.config, zone)
        try:
            self._api.create(PERSISTENTVOLUMES, volume, field_manager=FIELD_MANAGER)
        except Exception as exc:
            if status_code(exc) != 409:
                raise
        self._event(claim, "Normal", "ProvisioningSucceeded",
                    f"Successfully provisioned volume {volume['metadata']['name']}")

    # ---- deleter

    def _on_volume(self, kind: str, pv: dict[str, Any]) -> None:
        m = meta(pv)
        if kind == "DELETED" or (m.get("annotations") or {}).get(PROVISIONED_BY_ANNOTATION) != self.config.driver:
            return
        if (pv.get("status") or {}).get("phase") != "Released":
            return
        if (pv.get("spec") or {}).get("persistentVolumeReclaimPolicy") != "Delete":
            return
        name = str(m.get("name"))
        self._later("delete", name, self.config.delete_delay, lambda: self._delete_volume(name))

    async def _delete_volume(self, name: str) -> None:
        try:
            pv = self._api.get(PERSISTENTVOLUMES, None, name)
        except Exception as exc:
            if status_code(exc) == 404:
                return
            raise
        if (pv.get("status") or {}).get("phase") != "Released":
            return
        finalizers = list(meta(pv).get("finalizers") or ())
        if PROVISIONER_FINALIZER in finalizers:
            finalizers.remove(PROVISIONER_FINALIZER)
            pv = self._api.update(PERSISTENTVOLUMES, {**pv, "metadata": {**pv["metadata"], "finalizers": finalizers}},
                                  field_manager=FIELD_MANAGER)
        if not meta(pv).get("deletionTimestamp"):
            try:
                self._api.delete(PERSISTENTVOLUMES, None, name, preconditions={"uid": meta(pv).get("uid")})
            except Exception as exc:
                if status_code(exc) not in (404, 409):
                    raise

    # ---- attacher

    def _on_attachment(self, kind: str, va: dict[str, Any]) -> None:
        if kind == "DELETED" or (va.get("spec") or {}).get("attacher") != self.config.driver:
            return
        m = meta(va)
        name = str(m.get("name"))
        finalizer = attacher_finalizer(self.config.driver)
        if m.get("deletionTimestamp"):
            if finalizer in (m.get("finalizers") or ()):
                self._later("detach", name, self.config.detach_delay, lambda: self._detach(name))
            return
        status = va.get("status") or {}
        if status.get("attached") or status.get("attachError"):
            return
        if finalizer not in (m.get("finalizers") or ()):
            self._actions.put_nowait(lambda: self._add_finalizer(name))
        self._later("attach", name, self.config.attach_delay, lambda: self._attach(name))

    async def _add_finalizer(self, name: str) -> None:
        try:
            va = self._api.get(VOLUMEATTACHMENTS, None, name)
        except Exception as exc:
            if status_code(exc) == 404:
                return
            raise
        finalizer = attacher_finalizer(self.config.driver)
        finalizers = list(meta(va).get("finalizers") or ())
        if finalizer in finalizers or meta(va).get("deletionTimestamp"):
            return
        self._api.update(VOLUMEATTACHMENTS, {**va, "metadata": {**va["metadata"], "finalizers": [*finalizers,
                                                                                                    finalizer]}},
                         field_manager=ATTACHER_FIELD_MANAGER)

    async def _attach(self, name: str) -> None:
        try:
            va = self._api.get(VOLUMEATTACHMENTS, None, name)
        except Exception as exc:
            if status_code(exc) == 404:
                return
            raise
        if meta(va).get("deletionTimestamp"):
            return
        status: dict[str, Any] = {"attached": True}
        pv_name = ((va.get("spec") or {}).get("source") or {}).get("persistentVolumeName")
        if pv_name:
            try:
                pv = self._api.get(PERSISTENTVOLUMES, None, str(pv_name))
            except Exception as exc:
                if status_code(exc) != 404:
                    raise
                pv = {}
            error = (meta(pv).get("annotations") or {}).get(ATTACH_ERROR_ANNOTATION)
            if error:
                status = {"attached": False,
                          "attachError": {"time": format_time(self._clock.now()), "message": str(error)}}
        self._api.update(VOLUMEATTACHMENTS, {**va, "status": status}, subresource="status",
                         field_manager=ATTACHER_FIELD_MANAGER)

    async def _detach(self, name: str) -> None:
        try:
            va = self._api.get(VOLUMEATTACHMENTS, None, name)
        except Exception as exc:
            if status_code(exc) == 404:
                return
            raise
        finalizer = attacher_finalizer(self.config.driver)
        finalizers = [f for f in meta(va).get("finalizers") or () if f != finalizer]
        try:
            self._api.update(VOLUMEATTACHMENTS, {**va, "metadata": {**va["metadata"], "finalizers": finalizers}},
                             field_manager=ATTACHER_FIELD_MANAGER)
        except Exception as exc:
            if status_code(exc) != 404:
                raise

    # ---- the loop

    async def _worker(self) -> None:
        while True:
            action = await self._actions.get()
            try:
                await action()
            except Exception:
                log.exception("storage action failed")

    async def run(self) -> None:
        self.install()
        watches = {
            "csi-provisioner": ListWatch(self._api, PERSISTENTVOLUMECLAIMS, self._on_claim, clock=self._clock,
                                         name="csi-provisioner"),
            "csi-provisioner-pv": ListWatch(self._api, PERSISTENTVOLUMES, self._on_volume, clock=self._clock,
                                            name="csi-provisioner-pv"),
            "csi-attacher": ListWatch(self._api, VOLUMEATTACHMENTS, self._on_attachment, clock=self._clock,
                                      name="csi-attacher"),
        }
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self._worker(), name="sim-storage-worker")
            for name, watch in watches.items():
                tg.create_task(watch.run(), name=f"sim-storage-{name}")
