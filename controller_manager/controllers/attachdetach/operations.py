"""Attach and detach operations: the operation executor with the CSI attacher behind it
(``pkg/volume/util/operationexecutor``, ``nestedpendingoperations``, ``pkg/volume/csi/csi_attacher.go``).

Guarantees:
- At most one operation runs per volume and node; for a volume that may not be attached to several nodes,
  per volume (an operation keyed with no node covers every node). A failed operation may not run again
  before its exponential backoff passes: 500 ms, doubling up to 2 m 2 s; a success resets it.
- Attach: create the VolumeAttachment ``csi-<sha256(handle+driver+node)>`` (attacher = driver, nodeName, source
  = the PV; an existing one is fine), then wait (up to 2 minutes) until the informer shows it attached. Success
  marks the volume attached in the actual state and records ``SuccessfulAttachVolume`` (``AttachVolume.Attach
  succeeded for volume "<pv>" ``) on each scheduled pod; failure (the attacher's ``attachError`` message, a
  deleted or deleting attachment, or ``timed out waiting for external-attacher of <driver> CSI driver to attach
  volume <handle>``) marks the attachment uncertain and records ``FailedAttachVolume`` (``AttachVolume.Attach
  failed for volume "<pv>" : <error>``).
- Detach: unless forced, the Node (read from the API) must not list the volume in ``volumesInUse``; then delete
  the VolumeAttachment (not found: done) and wait until it is gone (its ``detachError`` fails it). Success
  marks the volume detached; failure puts it back in the node's ``volumesAttached`` report.
- Verify (the periodic sync): an attachment whose VolumeAttachment exists but is not attached is marked detached.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from controller_manager.api.csi import attachment_name, split_unique_volume_name
from controller_manager.api.meta import meta
from controller_manager.api.resources import NODES, VOLUMEATTACHMENTS
from controller_manager.client.errors import ApiError
from controller_manager.clock import Clock
from controller_manager.controllers.attachdetach.cache import ActualStateOfWorld, AttachedVolume, VolumeToAttach

__all__ = ["AlreadyRunning", "BackingOff", "OperationExecutor"]

INITIAL_BACKOFF = 0.5
MAX_BACKOFF = 2 * 60 + 2.0
CSI_TIMEOUT = 120.0


class AlreadyRunning(Exception):
    pass


class BackingOff(Exception):
    pass


class OperationError(Exception):
    pass


@dataclass(slots=True)
class _Operation:
    volume: str
    node: str  # "" covers every node
    running: bool = True
    failed_at: float | None = None
    backoff: float = 0.0


def _matches(op: _Operation, volume: str, node: str) -> bool:
    return op.volume == volume and (op.node == node or not op.node or not node)


class OperationExecutor:
    def __init__(self, client: Any, clock: Clock, recorder: Any, attachments: Any, log: Any) -> None:
        self._client = client
        self._clock = clock
        self._recorder = recorder
        self._attachments = attachments  # the VolumeAttachment informer's store
        self._log = log
        self._ops: list[_Operation] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._waiters: dict[str, asyncio.Event] = {}

    # --- nestedpendingoperations

    def is_operation_pending(self, volume: str, node: str) -> bool:
        return any(op.running and _matches(op, volume, node) for op in self._ops)

    def _in_backoff(self, op: _Operation) -> bool:
        return op.failed_at is not None and self._clock.monotonic() < op.failed_at + op.backoff

    def is_operation_safe_to_retry(self, volume: str, node: str) -> bool:
        return not any(_matches(op, volume, node) and (op.running or self._in_backoff(op)) for op in self._ops)

    def _run(self, volume: str, node: str, work: Callable[[], Awaitable[None]]) -> None:
        existing = next((op for op in self._ops if _matches(op, volume, node)), None)
        if existing is not None:
            if existing.running:
                raise AlreadyRunning(f'An operation with key "{volume}" is already in progress')
            if self._in_backoff(existing):
                raise BackingOff(f'Operation for "{volume}" failed. No retries permitted until backoff expires')
            self._ops.remove(existing)
        op = _Operation(volume, node, backoff=existing.backoff if existing else 0.0,
                        failed_at=existing.failed_at if existing else None)
        self._ops.append(op)

        async def run() -> None:
            try:
                await work()
            except asyncio.CancelledError:
                self._ops.remove(op)
                raise
            except Exception as err:
                op.running = False
                op.failed_at = self._clock.monotonic()
                op.backoff = min(op.backoff * 2, MAX_BACKOFF) if op.backoff else INITIAL_BACKOFF
                self._log.info("operation failed", volumeName=volume, node=node or None, err=str(err),
                               retryAfter=op.backoff)
            else:
                self._ops.remove(op)
        task = asyncio.create_task(run(), name=f"attachdetach:{volume}:{node}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # --- VolumeAttachment updates from the informer

    def attachment_changed(self, name: str) -> None:
        waiter = self._waiters.get(name)
        if waiter is not None:
            waiter.set()

    async def _wait_for(self, name: str, done: Callable[[Mapping[str, Any] | None], bool], timeout: float) -> bool:
        """Wait until ``done(the cached attachment)`` is true (raising is a failure); False on timeout."""
        deadline = self._clock.monotonic() + timeout
        waiter = self._waiters.setdefault(name, asyncio.Event())
        try:
            while True:
                waiter.clear()
                if done(self._attachments.get(name)):
                    return True
                remaining = deadline - self._clock.monotonic()
                if remaining <= 0:
                    return False
                sleeper = asyncio.ensure_future(self._clock.sleep(remaining))
                woken = asyncio.ensure_future(waiter.wait())
                try:
                    await asyncio.wait({sleeper, woken}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    sleeper.cancel()
                    woken.cancel()
        finally:
            if self._waiters.get(name) is waiter:
                del self._waiters[name]

    # --- attach

    def attach_volume(self, volume: VolumeToAttach, asw: ActualStateOfWorld) -> None:
        key_node = "" if not volume.spec.multi_attach_allowed else volume.node_name
        self._run(volume.volume_name, key_node, lambda: self._attach(volume, asw))

    async def _attach(self, volume: VolumeToAttach, asw: ActualStateOfWorld) -> None:
        spec = volume.spec
        name = attachment_name(spec.volume_handle, spec.driver, volume.node_name)
        try:
            await self._create_attachment(name, volume)
            if not await self._wait_for(name, _attached, CSI_TIMEOUT):
                raise OperationError(f"timed out waiting for external-attacher of {spec.driver} CSI driver to attach "
                                     f"volume {spec.volume_handle}")
        except (OperationError, ApiError) as err:
            asw.mark_volume_as_uncertain(volume.volume_name, spec, volume.node_name)
            message = volume.message("AttachVolume.Attach failed", f": {err}")
            for pod in volume.scheduled_pods:
                self._recorder.event(pod, "Warning", "FailedAttachVolume", message)
            raise
        message = volume.message("AttachVolume.Attach succeeded", "")
        for pod in volume.scheduled_pods:
            self._recorder.event(pod, "Normal", "SuccessfulAttachVolume", message)
        self._log.info("AttachVolume.Attach succeeded", volumeName=volume.volume_name, node=volume.node_name)
        asw.mark_volume_as_attached("", spec, volume.node_name, "")

    async def _create_attachment(self, name: str, volume: VolumeToAttach) -> None:
        body = {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "VolumeAttachment",
            "metadata": {"name": name},
            "spec": {"attacher": volume.spec.driver, "nodeName": volume.node_name,
                     "source": {"persistentVolumeName": volume.spec.name}},
        }
        try:
            await self._client.create(VOLUMEATTACHMENTS, body)
        except ApiError as err:
            if err.status != 409:
                raise OperationError(f"attacher.Attach failed: {err}") from None

    # --- detach

    def detach_volume(self, volume: AttachedVolume, verify_safe: bool, asw: ActualStateOfWorld) -> None:
        multi = volume.spec.multi_attach_allowed if volume.spec is not None else True
        self._run(volume.volume_name, volume.node_name if multi else "",
                  lambda: self._detach(volume, verify_safe, asw))

    async def _detach(self, volume: AttachedVolume, verify_safe: bool, asw: ActualStateOfWorld) -> None:
        try:
            if verify_safe:
                await self._verify_safe_to_detach(volume)
            await self._delete_attachment(volume)
        except (OperationError, ApiError):
            asw.add_volume_to_report_as_attached(volume.volume_name, volume.node_name)
            raise
        self._log.info("DetachVolume.Detach succeeded", volumeName=volume.volume_name, node=volume.node_name)
        asw.mark_volume_as_detached(volume.volume_name, volume.node_name)

    async def _verify_safe_to_detach(self, volume: AttachedVolume) -> None:
        try:
            node = await self._client.get(NODES, volume.node_name)
        except ApiError as err:
            if err.status == 404:
                return  # the node is gone: nothing can be mounted there
            raise OperationError(f"DetachVolume failed fetching node from API server: {err}") from None
        if volume.volume_name in ((node.get("status") or {}).get("volumesInUse") or ()):
            raise OperationError("DetachVolume failed: volume is still in use by node, according to Node status")

    async def _delete_attachment(self, volume: AttachedVolume) -> None:
        parts = split_unique_volume_name(volume.volume_name)
        if parts is None:
            raise OperationError(f"unexpected volume name: {volume.volume_name}")
        driver, handle = parts
        name = attachment_name(handle, driver, volume.node_name)
        try:
            await self._client.delete(VOLUMEATTACHMENTS, name)
        except ApiError as err:
            if err.status == 404:
                return  # deleted, or never made
            raise OperationError(f"detacher.Detach failed to delete VolumeAttachment [{name}]: {err}") from None
        if not await self._wait_for(name, _detached, CSI_TIMEOUT):
            raise OperationError(f"timed out waiting for external-attacher of {driver} CSI driver to detach volume "
                                 f"{handle}")

    # --- verify

    async def verify_volumes_are_attached(self, per_node: Mapping[str, list[AttachedVolume]],
                                          asw: ActualStateOfWorld) -> None:
        for node, volumes in per_node.items():
            for volume in volumes:
                if volume.spec is None:
                    continue
                name = attachment_name(volume.spec.volume_handle, volume.spec.driver, node)
                try:
                    attachment = await self._client.get(VOLUMEATTACHMENTS, name)
                except ApiError as err:
                    self._log.info("attacher.VolumesAreAttached failed", attachment=name, err=str(err))
                    continue
                if not (attachment.get("status") or {}).get("attached"):
                    self._log.info("Volume is not attached to node any more: marking it detached",
                                   volumeName=volume.volume_name, node=node)
                    asw.mark_volume_as_detached(volume.volume_name, node)


def _attached(attachment: Mapping[str, Any] | None) -> bool:
    if attachment is None:
        return False  # not in the cache yet
    if meta(attachment).get("deletionTimestamp"):
        raise OperationError("volume attachment is being deleted")
    status = attachment.get("status") or {}
    if status.get("attached"):
        return True
    error = status.get("attachError")
    if isinstance(error, Mapping):
        raise OperationError(str(error.get("message", "")))
    return False


def _detached(attachment: Mapping[str, Any] | None) -> bool:
    if attachment is None:
        return True
    error = (attachment.get("status") or {}).get("detachError")
    if isinstance(error, Mapping):
        raise OperationError(str(error.get("message", "")))
    return False
