"""The ephemeral volume controller (kube-controller-manager's ``ephemeral-volume-controller``,
``pkg/controller/volume/ephemeral/controller.go``).

Guarantees:
- For each generic ephemeral volume of a pod not being deleted, a PersistentVolumeClaim named
  ``<pod>-<volume>`` exists in the pod's namespace, created from the volume's ``volumeClaimTemplate`` (its
  labels, annotations and spec) with the pod as its controller owner (``blockOwnerDeletion``), so the garbage
  collector deletes it with the pod. Pods are looked at when added (their spec is immutable), and again when a
  claim one of them names is deleted (it is created anew).
- A claim of that name that the pod does not control is never touched: the pod gets a Warning
  ``FailedBinding`` event "ephemeral volume <volume>: PVC <ns>/<name> was not created for pod <ns>/<pod> (pod is
  not owner)" and is retried with backoff. A failed create gets the same event ("create PVC <name>: <error>").
- ``ephemeral_volume_controller_create_total`` counts every create request, ``..._create_failures_total`` the
  failed ones (:mod:`.metrics`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from controller_manager.api.meta import key_of, meta, split_key
from controller_manager.api.resources import PERSISTENTVOLUMECLAIMS, PODS
from controller_manager.api.volumes import (
    POD_PVC_INDEX,
    ephemeral_claim_name,
    pod_pvc_index,
    pod_volumes,
    volume_is_for_pod,
)
from controller_manager.client.errors import ApiError
from controller_manager.runtime.controller import Controller, ControllerContext, Result
from controller_manager.runtime.informers import Added, Deleted, Event

from . import metrics

__all__ = ["EphemeralVolumeController", "EphemeralVolumeError"]

Obj = Mapping[str, Any]
FAILED_BINDING = "FailedBinding"


class EphemeralVolumeError(Exception):
    """One ephemeral volume could not be given its claim; ``str()`` is upstream's text."""


class EphemeralVolumeController(Controller):
    name: ClassVar[str] = "ephemeral-volume-controller"
    alias: ClassVar[str] = "ephemeral-volume"
    queue_name: ClassVar[str | None] = "ephemeral_volume"
    workers_option: ClassVar[str | None] = "concurrent-ephemeralvolume-syncs"
    default_workers: ClassVar[int] = 5

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.client = ctx.client
        self.recorder = ctx.events.recorder("ephemeral_volume")
        self.pod_informer = ctx.informers.informer(PODS, indexers={POD_PVC_INDEX: pod_pvc_index})
        self.pvc_informer = ctx.informers.informer(PERSISTENTVOLUMECLAIMS)
        # The pod spec is immutable, so updates bring nothing to copy; deleted pods' claims go through the
        # garbage collector.
        self.pod_informer.add_handler(self._on_pod)
        self.pvc_informer.add_handler(self._on_pvc)

    def _on_pod(self, event: Event) -> None:
        if isinstance(event, Added):
            self._enqueue_pod(event.obj)

    def _enqueue_pod(self, pod: Obj) -> None:
        if meta(pod).get("deletionTimestamp") is not None:
            return
        if any(volume.get("ephemeral") is not None for volume in pod_volumes(pod)):
            self.queue.add(key_of(pod))

    def _on_pvc(self, event: Event) -> None:
        # A claim deleted while a pod still names it for an ephemeral volume: that pod needs it back.
        if isinstance(event, Deleted):
            for pod in self.pod_informer.store.by_index(POD_PVC_INDEX, key_of(event.obj)):
                self._enqueue_pod(pod)

    async def sync(self, key: str) -> Result | None:
        pod = self.pod_informer.store.get(key)
        if pod is None:
            self.log.debug("Ephemeral: nothing to do for pod, it is gone", pod=key)
            return None
        if meta(pod).get("deletionTimestamp") is not None:
            self.log.debug("Ephemeral: nothing to do for pod, it is marked for deletion", pod=key)
            return None
        for volume in pod_volumes(pod):
            try:
                await self.handle_volume(pod, volume)
            except EphemeralVolumeError as err:
                self.recorder.event(pod, "Warning", FAILED_BINDING, f"ephemeral volume {volume.get('name')}: {err}")
                raise EphemeralVolumeError(f"pod {key}, ephemeral volume {volume.get('name')}: {err}") from err
        return None

    async def handle_volume(self, pod: Obj, volume: Obj) -> None:
        source = volume.get("ephemeral")
        if not isinstance(source, Mapping):
            return
        namespace, _ = split_key(key_of(pod))
        claim_name = ephemeral_claim_name(pod, volume)
        existing = self.pvc_informer.store.get(f"{namespace}/{claim_name}")
        if existing is not None:
            problem = volume_is_for_pod(pod, existing)
            if problem is not None:
                raise EphemeralVolumeError(problem)
            self.log.debug("Ephemeral: PVC already created", volume=volume.get("name"), pvc=key_of(existing))
            return
        template = source.get("volumeClaimTemplate")
        template = template if isinstance(template, Mapping) else {}
        template_meta = template.get("metadata")
        template_meta = template_meta if isinstance(template_meta, Mapping) else {}
        pm = meta(pod)
        claim_meta: dict[str, Any] = {
            "name": claim_name,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pm.get("name"), "uid": pm.get("uid"),
                                 "controller": True, "blockOwnerDeletion": True}],
        }
        for field in ("annotations", "labels"):
            if template_meta.get(field):
                claim_meta[field] = dict(template_meta[field])
        claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": claim_meta,
                 "spec": dict(template.get("spec") or {})}
        metrics.CREATE_ATTEMPTS.inc()
        try:
            await self.client.create(PERSISTENTVOLUMECLAIMS, claim, namespace)
        except ApiError as err:
            metrics.CREATE_FAILURES.inc()
            raise EphemeralVolumeError(f"create PVC {claim_name}: {err}") from err
