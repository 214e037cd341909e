"""kube-controller-manager's ``persistentvolume-attach-detach-controller`` for CSI volumes
(``pkg/controller/volume/attachdetach/attach_detach_controller.go``).

Guarantees:
- Nodes annotated ``volumes.kubernetes.io/controller-managed-attach-detach`` (any value; kubelets set it by
  default) are managed: the attachable volumes of the pods scheduled to them are attached there. Pods on other
  nodes are left to their kubelets.
- A pod's volumes are desired on its node from the moment it is scheduled until it terminates (phase Succeeded or
  Failed, or deleted with no container running) or is deleted. A claim that becomes Bound later re-processes the
  active pods that use it (the ``pvcs`` queue, one worker). Only CSI persistent volumes whose CSIDriver does not
  say ``attachRequired: false`` are attachable; inline CSI volumes never are.
- Attaching creates the VolumeAttachment ``csi-<sha256(volumeHandle+driver+node)>`` and waits for the
  external-attacher to mark it attached; then ``node.status.volumesAttached`` lists the volume
  (``kubernetes.io/csi/<driver>^<handle>``) and the pods get ``SuccessfulAttachVolume``. Failures are
  ``FailedAttachVolume`` events, retried with exponential backoff; an exclusive (ReadWriteOnce) volume attached
  elsewhere is a Multi-Attach error (:mod:`.reconciler`).
- Detaching starts once no pod on the node wants the volume and the node no longer reports it in
  ``volumesInUse`` (or after 6 minutes on a node that is not Ready, unless ``--disable-force-detach-on-timeout``;
  at once on a node tainted ``node.kubernetes.io/out-of-service``): the volume leaves ``volumesAttached``
  first, then the VolumeAttachment is deleted and awaited.
- At start-up the actual state is rebuilt from the Nodes' ``volumesAttached`` and ``volumesInUse`` and from the
  VolumeAttachments (an attachment nobody reports is uncertain, and detached if no pod wants it), then the
  desired state from the pods. The reconciler runs every 100 ms; every ``--attach-detach-reconcile-sync-period``
  (1m; not under a second, not with ``--disable-attach-detach-reconcile-sync``) the attachments are checked
  against their VolumeAttachments. The desired-state populator drops pods that are gone every minute and
  re-adds active pods every 3 minutes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, ClassVar

from controller_manager.api.csi import CONTROLLER_MANAGED_ATTACH_ANNOTATION, is_pod_terminated, pod_claim_names
from controller_manager.api.meta import key_of, meta
from controller_manager.api.resources import (
    CSIDRIVERS,
    CSINODES,
    NODES,
    PERSISTENTVOLUMECLAIMS,
    PERSISTENTVOLUMES,
    PODS,
    VOLUMEATTACHMENTS,
)
from controller_manager.controllers.attachdetach import metrics
from controller_manager.controllers.attachdetach.cache import (
    ActualStateOfWorld,
    AttachState,
    DesiredStateOfWorld,
    StateError,
)
from controller_manager.controllers.attachdetach.operations import OperationExecutor
from controller_manager.controllers.attachdetach.reconciler import Reconciler
from controller_manager.controllers.attachdetach.statusupdater import NodeStatusUpdater
from controller_manager.controllers.attachdetach.util import (
    SpecError,
    attachable,
    create_volume_spec,
    determine_volume_action,
    process_pod_volumes,
    spec_from_volume,
)
from controller_manager.runtime.controller import Controller, ControllerContext, Result
from controller_manager.runtime.informers import Added, Deleted, Event, Updated

__all__ = ["EVENT_COMPONENT", "POD_PVC_INDEX", "AttachDetachController", "TimerConfig", "pod_pvc_index"]

Obj = Mapping[str, Any]

EVENT_COMPONENT = "attachdetach-controller"
POD_PVC_INDEX = "attachdetach-pod-pvc"
POPULATOR_CHUNK = 500  # pods per event-loop turn in the populator's periodic sweep over every pod


class TimerConfig:
    """Upstream's ``DefaultTimerConfig`` (tests may shorten them)."""

    reconciler_loop_period: float = 0.1
    max_wait_for_unmount: float = 6 * 60.0
    populator_loop_period: float = 60.0
    populator_list_pods_period: float = 3 * 60.0


def pod_pvc_index(pod: Obj) -> list[str]:
    """``namespace/claim`` for every claim the pod's volumes use."""
    namespace = meta(pod).get("namespace")
    return [f"{namespace}/{claim}" for _, claim in pod_claim_names(pod)]


class AttachDetachController(Controller):
    name: ClassVar[str] = "persistentvolume-attach-detach-controller"
    alias: ClassVar[str] = "attachdetach"
    queue_name: ClassVar[str | None] = "pvcs"
    default_workers: ClassVar[int] = 1
    timers: ClassVar[type[TimerConfig]] = TimerConfig

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        options = ctx.options
        self.recorder = ctx.events.recorder(EVENT_COMPONENT)
        informers = ctx.informers
        self.pods = informers.informer(PODS, indexers={POD_PVC_INDEX: pod_pvc_index})
        self.nodes = informers.informer(NODES)
        self.pvcs = informers.informer(PERSISTENTVOLUMECLAIMS)
        self.pvs = informers.informer(PERSISTENTVOLUMES)
        self.csi_nodes = informers.informer(CSINODES)
        self.csi_drivers = informers.informer(CSIDRIVERS)
        self.attachments = informers.informer(VOLUMEATTACHMENTS)
        self.dsw = DesiredStateOfWorld()
        self.asw = ActualStateOfWorld()
        metrics.watch_states(self.dsw, self.asw)
        self.executor = OperationExecutor(ctx.client, ctx.clock, self.recorder, self.attachments.store, self.log)
        self.status_updater = NodeStatusUpdater(ctx.client, self.nodes.store, self.asw, self.log)
        self.reconciler = Reconciler(
            clock=ctx.clock, loop_period=self.timers.reconciler_loop_period,
            max_wait_for_unmount=self.timers.max_wait_for_unmount,
            sync_period=float(options.get("attach_detach_reconcile_sync_period", 60.0)),
            disable_sync=bool(options.get("disable_attach_detach_reconcile_sync", False)),
            disable_force_detach_on_timeout=bool(options.get("disable_force_detach_on_timeout", False)),
            dsw=self.dsw, asw=self.asw, executor=self.executor, status_updater=self.status_updater,
            nodes=self.nodes.store, recorder=self.recorder, log=self.log)
        self.pods.add_handler(self._on_pod)
        self.nodes.add_handler(self._on_node)
        self.pvcs.add_handler(self._on_pvc)
        self.attachments.add_handler(self._on_attachment)

    # --- event handlers (synchronous) -------------------------------------------------------------

    def _process(self, pod: Obj, add: bool) -> None:
        process_pod_volumes(pod, add, self.dsw, self.pvcs.store, self.pvs.store, self.csi_drivers.store, self.log)

    def _on_pod(self, event: Event) -> None:
        if isinstance(event, Deleted):
            self._process(event.obj, False)
            return
        pod = event.new if isinstance(event, Updated) else event.obj
        if not (pod.get("spec") or {}).get("nodeName"):
            return  # not scheduled
        self._process(pod, determine_volume_action(pod, True))

    def _add_node_to_dsw(self, node: Obj) -> None:
        if CONTROLLER_MANAGED_ATTACH_ANNOTATION in (meta(node).get("annotations") or {}):
            self.dsw.add_node(str(meta(node).get("name")))

    def _on_node(self, event: Event) -> None:
        node = event.new if isinstance(event, Updated) else event.obj
        name = str(meta(node).get("name", ""))
        in_use = (node.get("status") or {}).get("volumesInUse") or ()
        if isinstance(event, Deleted):
            try:
                self.dsw.delete_node(name)
            except StateError as err:
                self.log.info("Error removing node from desired-state-of-world", node=name, err=str(err))
        else:
            self._add_node_to_dsw(node)
        self.asw.set_volumes_mounted_by_node(in_use, name)
        if isinstance(event, Added):
            # kubernetes/kubernetes#37586: a re-added Node may have lost volumesAttached; report it again.
            self.asw.set_node_status_update_needed(name)

    def _on_pvc(self, event: Event) -> None:
        if isinstance(event, Added):
            self.queue.add(key_of(event.obj))
        elif isinstance(event, Updated):
            self.queue.add(key_of(event.new))

    def _on_attachment(self, event: Event) -> None:
        obj = event.new if isinstance(event, Updated) else event.obj
        self.executor.attachment_changed(str(meta(obj).get("name", "")))

    # --- the pvcs queue ---------------------------------------------------------------------------

    async def sync(self, key: str) -> Result | None:
        claim = self.pvcs.store.get(key)
        if claim is None:
            return None
        if (claim.get("status") or {}).get("phase") != "Bound" or not (claim.get("spec") or {}).get("volumeName"):
            return None  # unbound claims have nothing to attach yet
        for pod in self.pods.store.by_index(POD_PVC_INDEX, key):
            if not (pod.get("spec") or {}).get("nodeName") or is_pod_terminated(pod):
                continue
            self._process(pod, determine_volume_action(pod, True))
        return None

    # --- start-up and the loops -------------------------------------------------------------------

    def populate_actual_state_of_world(self) -> None:
        for node in self.nodes.store.list():
            name = str(meta(node).get("name", ""))
            status = node.get("status") or {}
            for attached in status.get("volumesAttached") or ():
                try:
                    self.asw.mark_volume_as_attached(str(attached.get("name", "")), None, name,
                                                     str(attached.get("devicePath", "")))
                except StateError as err:
                    self.log.error("Failed to mark the volume as attached", err=str(err))
            self.asw.set_volumes_mounted_by_node(status.get("volumesInUse") or (), name)
            self._add_node_to_dsw(node)
        self._process_volume_attachments()

    def _process_volume_attachments(self) -> None:
        for attachment in self.attachments.store.list():
            spec = attachment.get("spec") or {}
            node = str(spec.get("nodeName") or "")
            pv_name = (spec.get("source") or {}).get("persistentVolumeName")
            if pv_name is None:
                self.log.info("Skipping the va as its pvName is nil", node=node, vaName=meta(attachment).get("name"))
                continue
            pv = self.pvs.store.get(str(pv_name))
            if pv is None:
                self.log.error("Unable to lookup pv object", PV=pv_name)
                continue
            volume = spec_from_volume(pv)
            if volume is None or not attachable(volume, self.csi_drivers.store):
                self.log.info("Skipping processing the volume on node, no attacher interface found", node=node,
                              PV=pv_name)
                continue
            if self.asw.get_attach_state(volume.unique_name, node) is AttachState.DETACHED:
                self.log.info("Marking volume attachment as uncertain as volume is not attached", node=node,
                              volumeName=volume.unique_name)
                self.asw.mark_volume_as_uncertain(volume.unique_name, volume, node)

    def populate_desired_state_of_world(self) -> None:
        for pod in self.pods.store.list():
            node_name = str((pod.get("spec") or {}).get("nodeName") or "")
            if node_name:
                self._process(pod, determine_volume_action(pod, True))
            for volume in (pod.get("spec") or {}).get("volumes") or ():
                try:
                    spec = create_volume_spec(volume, pod, self.pvcs.store, self.pvs.store)
                except SpecError as err:
                    self.log.error("Error creating spec for volume of pod", pod=key_of(pod),
                                   volumeName=volume.get("name"), err=str(err))
                    continue
                if spec is None or not attachable(spec, self.csi_drivers.store):
                    continue
                if self.asw.get_attach_state(spec.unique_name, node_name) is not AttachState.ATTACHED:
                    continue
                node = self.nodes.store.get(node_name) or {}
                device = next((v.get("devicePath", "") for v in (node.get("status") or {}).get("volumesAttached") or ()
                               if v.get("name") == spec.unique_name), None)
                if device is None:
                    self.log.error("Failed to find device path", node=node_name, volumeName=spec.unique_name)
                    continue
                self.asw.mark_volume_as_attached(spec.unique_name, spec, node_name, str(device))

    def find_and_remove_deleted_pods(self) -> None:
        for uid, pod, volume, node in self.dsw.pods_to_add():
            current = self.pods.store.get(key_of(pod))
            if current is not None and determine_volume_action(current, True) and meta(current).get("uid") == uid:
                continue
            self.log.info("Removing pod from dsw because it does not exist in pod informer", pod=key_of(pod),
                          podUID=uid)
            self.dsw.delete_pod(uid, volume, node)

    async def find_and_add_active_pods(self) -> None:
        """Every cached pod's volumes into the desired state again, ``POPULATOR_CHUNK`` pods per event-loop turn:
        at 150,000 pods the sweep (every 3 minutes) held the loop for seconds in one go. A pod replaced or gone
        since the sweep began was handled by its own event and is skipped."""
        pods = self.pods.store.list()
        store = self.pods.store
        for start in range(0, len(pods), POPULATOR_CHUNK):
            if start:
                await asyncio.sleep(0)
            for pod in pods[start:start + POPULATOR_CHUNK]:
                if not is_pod_terminated(pod) and store.get(key_of(pod)) is pod:
                    self._process(pod, True)

    async def _populator(self) -> None:
        last_list = float("-inf")
        while True:
            self.find_and_remove_deleted_pods()
            if self.ctx.clock.monotonic() - last_list >= self.timers.populator_list_pods_period:
                last_list = self.ctx.clock.monotonic()
                await self.find_and_add_active_pods()
            await self.ctx.clock.sleep(self.timers.populator_loop_period)

    async def run_background(self) -> None:
        self.populate_actual_state_of_world()
        self.populate_desired_state_of_world()
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self.reconciler.run(), name="attachdetach:reconciler")
                tg.create_task(self._populator(), name="attachdetach:populator")
        finally:
            await self.executor.stop()


