"""The EndpointSlice mirroring controller: EndpointSlices mirrored from the Endpoints of Services without a
selector (kube-controller-manager's ``endpointslice-mirroring-controller``,
``pkg/controller/endpointslicemirroring``).

Guarantees:
- An Endpoints is mirrored while a Service of the same name exists with no selector, the Endpoints is not
  labelled ``endpointslice.kubernetes.io/skip-mirror: "true"`` and is not a leader-election lock. Its slices are
  labelled ``kubernetes.io/service-name`` and ``endpointslice.kubernetes.io/managed-by:
  endpointslicemirroring-controller.k8s.io``, controlled by the Endpoints, and packed as :mod:`.reconciler`
  describes (at most ``--mirroring-max-endpoints-per-subset``, default 1000, addresses per subset).
- When the Endpoints goes, stops being mirrored, its Service goes or gains a selector, every slice mirrored for it
  is deleted by this controller.
- Never acts on a cache older than its own writes: a sync whose slices in the cache lag behind what this
  controller created, updated or deleted fails as stale and is retried with backoff (1s doubling to 100s, at
  most 15 retries, then dropped until the next event), as upstream's queue does.
- Slice events that are echoes of its own writes are ignored; any other change to a slice it manages (or a
  managed-by/service-name label change, or an unexpected deletion) re-syncs the Endpoints after
  ``--mirroring-endpointslice-updates-batch-period`` (default 0: at once).
- Events (component ``endpoint-slice-mirroring-controller``) are Warnings on the Endpoints: ``InvalidIPAddress``
  and ``TooManyAddressesToMirror``. Each sync's duration is observed in
  ``endpoint_slice_mirroring_controller_endpoints_sync_duration``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, ClassVar

from controller_manager.api.meta import key_of, meta, split_key
from controller_manager.api.resources import ENDPOINTS, ENDPOINTSLICES, SERVICES
from controller_manager.controllerutil.endpointslice import (
    LABEL_MANAGED_BY,
    LABEL_SERVICE_NAME,
    EndpointSliceTracker,
    StaleInformerCache,
    service_controller_key,
)
from controller_manager.runtime.controller import Controller, ControllerContext, Result
from controller_manager.runtime.informers import Added, Deleted, Event, Updated
from controller_manager.runtime.workqueue import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RateLimitingQueue,
)

from . import metrics
from .reconciler import Reconciler
from .utils import CONTROLLER_NAME, managed_by_changed, managed_by_controller, should_mirror

__all__ = ["EndpointSliceMirroringController"]

Obj = Mapping[str, Any]

EVENT_COMPONENT = "endpoint-slice-mirroring-controller"
MAX_RETRIES = 15
DEFAULT_SYNC_BACKOFF = 1.0
MAX_SYNC_BACKOFF = 100.0
DEFAULT_MAX_ENDPOINTS_PER_SUBSET = 1000
MIRRORED_INDEX = "endpointslicemirroring-endpoints"


def mirrored_index(slice_: Obj) -> list[str]:
    """``namespace/name`` of the Endpoints a slice was mirrored from (only slices this controller manages)."""
    labels = meta(slice_).get("labels") or {}
    name = labels.get(LABEL_SERVICE_NAME)
    if not name or labels.get(LABEL_MANAGED_BY) != CONTROLLER_NAME:
        return []
    return [f"{meta(slice_).get('namespace') or ''}/{name}"]


def _has_selector(service: Obj) -> bool:
    # A nil selector (absent or null) is "no selector"; an empty map is a selector (matching nothing).
    return (service.get("spec") or {}).get("selector") is not None


class EndpointSliceMirroringController(Controller):
    """Endpoints -> mirrored EndpointSlices. Its queue holds Endpoints (= Service) keys."""

    name: ClassVar[str] = "endpointslice-mirroring-controller"
    alias: ClassVar[str] = "endpointslicemirroring"
    queue_name: ClassVar[str | None] = "endpoint_slice_mirroring"
    max_retries: ClassVar[int | None] = MAX_RETRIES
    workers_option: ClassVar[str | None] = "mirroring-concurrent-service-endpoint-syncs"
    default_workers: ClassVar[int] = 5

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        # A far slower backoff than the default (1s, not 5ms): one sync can rewrite many slices.
        self.queue = RateLimitingQueue(
            "endpoint_slice_mirroring",
            rate_limiter=MaxOfRateLimiter(ItemExponentialFailureRateLimiter(DEFAULT_SYNC_BACKOFF, MAX_SYNC_BACKOFF),
                                          BucketRateLimiter(10.0, 100, clock=ctx.clock)),
            clock=ctx.clock)
        options = ctx.options
        self.max_endpoints_per_subset = int(options.get("mirroring_max_endpoints_per_subset")
                                            or DEFAULT_MAX_ENDPOINTS_PER_SUBSET)
        self.batch_period = float(options.get("mirroring_endpointslice_updates_batch_period") or 0.0)
        self.recorder = ctx.events.recorder(EVENT_COMPONENT)
        self.tracker = EndpointSliceTracker()

        self.endpoints_informer = ctx.informers.informer(ENDPOINTS)
        self.slice_informer = ctx.informers.informer(ENDPOINTSLICES, indexers={MIRRORED_INDEX: mirrored_index})
        self.service_informer = ctx.informers.informer(SERVICES)
        self.reconciler = Reconciler(ctx.client, self.tracker, self.recorder, self.max_endpoints_per_subset)
        self.endpoints_informer.add_handler(self._on_endpoints)
        self.slice_informer.add_handler(self._on_slice)
        self.service_informer.add_handler(self._on_service)

    # --- Services ---------------------------------------------------------------------------------

    def _on_service(self, event: Event) -> None:
        if isinstance(event, Updated):
            # Only gaining or losing a selector matters.
            if _has_selector(event.old) != _has_selector(event.new):
                self.queue.add(key_of(event.new))
        elif not _has_selector(event.obj):
            self.queue.add(key_of(event.obj))

    # --- Endpoints --------------------------------------------------------------------------------

    def _on_endpoints(self, event: Event) -> None:
        if isinstance(event, Updated):
            if not should_mirror(event.new) and not should_mirror(event.old):
                return
            self.queue.add(key_of(event.new))
        elif should_mirror(event.obj):
            self.queue.add(key_of(event.obj))

    # --- EndpointSlices ---------------------------------------------------------------------------

    def _on_slice(self, event: Event) -> None:
        if isinstance(event, Added):
            if managed_by_controller(event.obj) and self.tracker.should_sync(event.obj):
                self._queue_for_slice(event.obj)
        elif isinstance(event, Updated):
            old, new = event.old, event.new
            # The generation does not move with labels: a relabelled slice is looked at by both names.
            old_name = (meta(old).get("labels") or {}).get(LABEL_SERVICE_NAME)
            new_name = (meta(new).get("labels") or {}).get(LABEL_SERVICE_NAME)
            if old_name != new_name:
                self.log.info("LabelServiceName changed", labelServiceName=LABEL_SERVICE_NAME, oldName=old_name,
                              newName=new_name, endpointSlice=key_of(new))
                self._queue_for_slice(new)
                self._queue_for_slice(old)
                return
            if managed_by_changed(old, new) or (managed_by_controller(new) and self.tracker.should_sync(new)):
                self._queue_for_slice(new)
        elif isinstance(event, Deleted):
            slice_ = event.obj
            # handle_deletion is False for a deletion this controller did not make: re-sync to recreate it.
            if managed_by_controller(slice_) and self.tracker.has(slice_) and not self.tracker.handle_deletion(slice_):
                self._queue_for_slice(slice_)

    def _queue_for_slice(self, slice_: Obj) -> None:
        try:
            key = service_controller_key(slice_)
        except ValueError as err:
            self.log.error("couldn't get key for EndpointSlice", endpointslice=key_of(slice_), error=str(err))
            return
        self.queue.add_after(key, self.batch_period)

    # --- sync -------------------------------------------------------------------------------------

    async def sync(self, key: str) -> Result | None:
        start = time.perf_counter()
        try:
            await self._sync_endpoints(key)
        finally:
            metrics.ENDPOINTS_SYNC_DURATION.observe(time.perf_counter() - start)
        return None

    async def _sync_endpoints(self, key: str) -> None:
        namespace, name = split_key(key)
        endpoints = self.endpoints_informer.store.get(key)
        if endpoints is None:
            self.log.debug("Endpoints not found, cleaning up any mirrored EndpointSlices", endpoints=key)
            await self._delete_mirrored_slices(namespace, name)
            return
        if not should_mirror(endpoints):
            self.log.debug("Endpoints should not be mirrored, cleaning up any mirrored EndpointSlices", endpoints=key)
            await self._delete_mirrored_slices(namespace, name)
            return
        service = self.service_informer.store.get(key)
        if service is None:
            self.log.debug("Service not found, cleaning up any mirrored EndpointSlices", service=key)
            await self._delete_mirrored_slices(namespace, name)
            return
        if _has_selector(service):
            self.log.debug("Service now has selector, cleaning up any mirrored EndpointSlices", service=key)
            await self._delete_mirrored_slices(namespace, name)
            return

        slices = self.slice_informer.store.by_index(MIRRORED_INDEX, key)
        if self.tracker.stale_slices(service, slices):
            raise StaleInformerCache("EndpointSlice informer cache is out of date")
        await self.reconciler.reconcile(endpoints, slices)

    async def _delete_mirrored_slices(self, namespace: str, name: str) -> None:
        """``deleteMirroredSlices``: every slice mirrored for this name goes, and the tracker forgets it."""
        slices = self.slice_informer.store.by_index(MIRRORED_INDEX, f"{namespace}/{name}")
        self.tracker.delete_service(namespace, name)
        await self.reconciler.delete_endpoints(namespace, name, slices)
