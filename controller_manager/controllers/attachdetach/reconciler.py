"""The reconciler: detach what is attached but no longer desired, attach what is desired, report
(``pkg/controller/volume/attachdetach/reconciler``).

Guarantees (one :meth:`Reconciler.reconcile` pass, run every ``loop_period``):
- Detaches come first. An attachment not in the desired state is left alone while an operation for it runs or
  backs off. Otherwise its detach request time is set (once); it is not detached while the node reports it
  mounted (``volumesInUse``), unless the node is not Ready and ``max_wait_for_unmount`` (6 minutes) has passed
  since the first request (and force detach is not disabled), or the node is tainted
  ``node.kubernetes.io/out-of-service``. Before detaching, the volume leaves the node's ``volumesAttached``
  (the node status is patched first; if that fails the detach waits). A forced detach skips the
  safe-to-detach check and counts in ``attachdetach_controller_forced_detaches``.
- Then attaches: a desired volume with no operation pending (per volume, for a volume that may not be attached
  to several nodes) that is attached already only has its detach request time reset; one that is exclusively
  attached to another node records the ``FailedAttachVolume`` Multi-Attach error once on each pod that wants
  it (naming the pods in the same namespace that hold it); otherwise its attach starts.
- Then every node whose report changed gets its ``volumesAttached`` patched.
- Every ``sync_period`` (unless disabled or under a second) the attachments are verified against their
  VolumeAttachments (:meth:`~.operations.OperationExecutor.verify_volumes_are_attached`).
"""

from __future__ import annotations

from typing import Any

from controller_manager.clock import Clock
from controller_manager.controllers.attachdetach import metrics
from controller_manager.controllers.attachdetach.cache import (
    ActualStateOfWorld,
    AttachState,
    DesiredStateOfWorld,
    StateError,
    VolumeToAttach,
)
from controller_manager.controllers.attachdetach.operations import AlreadyRunning, BackingOff, OperationExecutor
from controller_manager.controllers.attachdetach.statusupdater import NodeStatusUpdater

__all__ = ["OUT_OF_SERVICE_TAINT", "Reconciler"]

OUT_OF_SERVICE_TAINT = "node.kubernetes.io/out-of-service"


def _node_ready(node: Any) -> bool:
    for condition in (node.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


class Reconciler:
    def __init__(self, *, clock: Clock, loop_period: float, max_wait_for_unmount: float, sync_period: float,
                 disable_sync: bool, disable_force_detach_on_timeout: bool, dsw: DesiredStateOfWorld,
                 asw: ActualStateOfWorld, executor: OperationExecutor, status_updater: NodeStatusUpdater,
                 nodes: Any, recorder: Any, log: Any) -> None:
        self.clock = clock
        self.loop_period = loop_period
        self.max_wait_for_unmount = max_wait_for_unmount
        self.sync_period = sync_period
        self.disable_sync = disable_sync
        self.disable_force_detach_on_timeout = disable_force_detach_on_timeout
        self.dsw, self.asw, self.executor = dsw, asw, executor
        self.status_updater = status_updater
        self.nodes = nodes
        self.recorder = recorder
        self.log = log
        self.last_sync = clock.monotonic()

    async def run(self) -> None:
        while True:
            await self.step()
            await self.clock.sleep(self.loop_period)

    async def step(self) -> None:
        await self.reconcile()
        if self.disable_sync or self.sync_period < 1.0:
            return
        if self.clock.monotonic() - self.last_sync > self.sync_period:
            try:
                await self.executor.verify_volumes_are_attached(self.asw.attached_volumes_per_node(), self.asw)
            finally:
                self.last_sync = self.clock.monotonic()

    def _node_health(self, node_name: str) -> tuple[bool, bool]:
        """(Ready, tainted out-of-service); a node missing from the cache is neither."""
        node = self.nodes.get(node_name)
        if node is None:
            self.log.error("Failed to get health of node", node=node_name)
            return False, False
        taints = (node.get("spec") or {}).get("taints") or ()
        return _node_ready(node), any(t.get("key") == OUT_OF_SERVICE_TAINT for t in taints)

    async def reconcile(self) -> None:
        for attached in self.asw.attached_volumes():
            if self.dsw.volume_exists(attached.volume_name, attached.node_name):
                continue
            multi = attached.spec.multi_attach_allowed if attached.spec is not None else True
            if not self.executor.is_operation_safe_to_retry(attached.volume_name, attached.node_name if multi else ""):
                continue
            if self.asw.get_attach_state(attached.volume_name, attached.node_name) is AttachState.DETACHED:
                continue
            try:
                elapsed = self.asw.set_detach_request_time(attached.volume_name, attached.node_name,
                                                           self.clock.monotonic())
            except StateError as err:
                self.log.error("Cannot trigger detach because it fails to set detach request time with error",
                               err=str(err))
                continue
            expired = elapsed > self.max_wait_for_unmount
            healthy, out_of_service = self._node_health(attached.node_name)
            force_timeout = expired and not self.disable_force_detach_on_timeout
            force = not healthy and force_timeout
            if attached.mounted_by_node and not force and not out_of_service:
                continue  # still mounted: wait for the node to unmount it
            try:
                self.asw.remove_volume_from_report_as_attached(attached.volume_name, attached.node_name)
            except StateError as err:
                self.log.debug("RemoveVolumeFromReportAsAttached failed while removing volume from node",
                               node=attached.node_name, volumeName=attached.volume_name, err=str(err))
            error = await self.status_updater.update_node_status_for_node(attached.node_name)
            if error is not None:
                self.log.error("UpdateNodeStatusForNode failed while attempting to report volume as attached",
                               node=attached.node_name, volumeName=attached.volume_name, err=str(error))
                self.asw.add_volume_to_report_as_attached(attached.volume_name, attached.node_name)
                continue
            verify_safe = not (force_timeout or out_of_service)
            try:
                self.executor.detach_volume(attached, verify_safe, self.asw)
            except (AlreadyRunning, BackingOff) as err:
                self.asw.add_volume_to_report_as_attached(attached.volume_name, attached.node_name)
                if isinstance(err, AlreadyRunning):
                    self.log.error("attacherDetacher.DetachVolume failed to start", node=attached.node_name,
                                   volumeName=attached.volume_name, err=str(err))
                continue
            if verify_safe:
                self.log.info("attacherDetacher.DetachVolume started", node=attached.node_name,
                              volumeName=attached.volume_name)
            elif force_timeout:
                metrics.FORCED_DETACHES.labels(metrics.REASON_TIMEOUT).inc()
                self.log.info("attacherDetacher.DetachVolume started: this volume is not safe to detach, but "
                              "maxWaitForUnmountDuration expired, force detaching",
                              duration=self.max_wait_for_unmount, node=attached.node_name,
                              volumeName=attached.volume_name)
            else:
                metrics.FORCED_DETACHES.labels(metrics.REASON_OUT_OF_SERVICE).inc()
                self.log.info("attacherDetacher.DetachVolume started: node has out-of-service taint, force detaching",
                              node=attached.node_name, volumeName=attached.volume_name)
        self._attach_desired_volumes()
        for error in await self.status_updater.update_node_statuses():
            self.log.info("UpdateNodeStatuses failed", err=str(error))

    def _attach_desired_volumes(self) -> None:
        for volume in self.dsw.volumes_to_attach():
            multi = volume.spec.multi_attach_allowed
            if self.executor.is_operation_pending(volume.volume_name, volume.node_name if multi else ""):
                continue
            if self.asw.get_attach_state(volume.volume_name, volume.node_name) is AttachState.ATTACHED:
                self.asw.reset_detach_request_time(volume.volume_name, volume.node_name)
                continue
            if not multi:
                nodes = self.asw.nodes_for_attached_volume(volume.volume_name)
                if nodes:
                    if not volume.multi_attach_error_reported:
                        self._report_multi_attach_error(volume, nodes)
                        self.dsw.set_multi_attach_error(volume.volume_name, volume.node_name)
                    continue
            try:
                self.executor.attach_volume(volume, self.asw)
            except BackingOff:
                continue
            except AlreadyRunning as err:
                self.log.error("attacherDetacher.AttachVolume failed to start", volumeName=volume.volume_name,
                               nodeName=volume.node_name, err=str(err))
                continue
            self.log.info("attacherDetacher.AttachVolume started", volumeName=volume.volume_name,
                          nodeName=volume.node_name)

    def _report_multi_attach_error(self, volume: VolumeToAttach, nodes: list[str]) -> None:
        others = [n for n in nodes if n != volume.node_name]
        pods = self.dsw.volume_pods_on_nodes(others, volume.volume_name)
        if not pods:
            message = volume.message("Multi-Attach error", "Volume is already exclusively attached to one node and "
                                     "can't be attached to another")
            for pod in volume.scheduled_pods:
                self.recorder.event(pod, "Warning", "FailedAttachVolume", message)
            self.log.info("Multi-Attach error: volume is already exclusively attached and can't be attached to "
                          "another node", attachedTo=others, volumeName=volume.volume_name)
            return
        for scheduled in volume.scheduled_pods:
            namespace = (scheduled.get("metadata") or {}).get("namespace")
            local = [str((p.get("metadata") or {}).get("name")) for p in pods
                     if (p.get("metadata") or {}).get("namespace") == namespace]
            elsewhere = len(pods) - len(local)
            if local:
                text = f"Volume is already used by pod(s) {', '.join(local)}"
                if elsewhere:
                    text = f"{text} and {elsewhere} pod(s) in different namespaces"
            else:
                text = f"Volume is already used by {elsewhere} pod(s) in different namespaces"
            self.recorder.event(scheduled, "Warning", "FailedAttachVolume", volume.message("Multi-Attach error", text))
        self.log.info("Multi-Attach error: volume is already used by pods", attachedTo=others,
                      volumeName=volume.volume_name)
