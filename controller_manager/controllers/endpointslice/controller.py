"""The EndpointSlice controller: keeps the EndpointSlices of every Service with a selector listing the pods it
selects (kube-controller-manager's ``endpointslice-controller``, ``pkg/controller/endpointslice``).

Guarantees:
- Services with a selector (not of type ExternalName) get discovery.k8s.io/v1 EndpointSlices labelled
  ``kubernetes.io/service-name`` and ``endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io``,
  controlled by the Service, packed as :mod:`.reconciler` describes (at most ``--max-endpoints-per-slice``,
  default 100, endpoints each). Services without a selector are left to whoever writes their slices.
- Never acts on a cache older than its own writes: a sync whose Service's slices in the cache lag behind what
  this controller created, updated or deleted fails as stale and is retried with backoff (1s doubling to
  1000s, at most 15 retries, then dropped until the next event), as upstream's queue does.
- Slice events that are echoes of its own writes are ignored; any other change to a slice it manages (or a
  managed-by/service-name label change) re-syncs the Service after at least a second (or the batch period).
- Pod events re-sync only the Services whose endpoints they can change (readiness, deletion, IPs, labels,
  hostname/subdomain), after ``--endpointslice-updates-batch-period`` (default 0: at once).
- A deleted Service's slices are left to the garbage collector (they are owned by it); its state here is
  forgotten. Errors of a sync are reported as a Warning event ``FailedToUpdateEndpointSlices`` on the Service,
  from component ``endpoint-slice-controller``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from controller_manager.api.meta import key_of, meta, split_key
from controller_manager.api.resources import ENDPOINTSLICES, NODES, PODS, SERVICES
from controller_manager.api.selectors import from_set
from controller_manager.controllerutil.endpoints import (
    TriggerTimeTracker,
    get_pod_service_memberships,
    get_services_to_update_on_pod_change,
)
from controller_manager.controllerutil.endpointslice import (
    LABEL_MANAGED_BY,
    LABEL_SERVICE_NAME,
    EndpointSliceTracker,
    StaleInformerCache,
    service_controller_key,
)
from controller_manager.runtime.controller import Controller, ControllerContext, Result
from controller_manager.runtime.informers import NAMESPACE_INDEX, Added, Deleted, Event, Updated
from controller_manager.runtime.informers.labelindex import NAMESPACE_LABEL_INDEX, namespace_label_index, select
from controller_manager.runtime.workqueue import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RateLimitingQueue,
)

from . import metrics
from .reconciler import ReconcileError, Reconciler

__all__ = [
    "CONTROLLER_QUALIFIED_NAME",
    "EndpointSliceController",
    "StaleInformerCache",
]

Obj = Mapping[str, Any]

# The managed-by label value of slices this controller owns.
CONTROLLER_QUALIFIED_NAME = "endpointslice-controller.k8s.io"
EVENT_COMPONENT = "endpoint-slice-controller"
MAX_RETRIES = 15
DEFAULT_SYNC_BACKOFF = 1.0
MAX_SYNC_BACKOFF = 1000.0
# Slice changes wait at least this long, so one sync sees a burst of them.
ENDPOINT_SLICE_CHANGE_MIN_SYNC_DELAY = 1.0
DEFAULT_MAX_ENDPOINTS_PER_SLICE = 100
SERVICE_INDEX = "endpointslice-service"

FAILED_TO_LIST_PODS = "FailedToListPods"
FAILED_TO_LIST_ENDPOINT_SLICES = "FailedToListEndpointSlices"
FAILED_TO_UPDATE_ENDPOINT_SLICES = "FailedToUpdateEndpointSlices"


def service_index(slice_: Obj) -> list[str]:
    """``namespace/service`` of a slice, for finding a Service's slices without a scan."""
    name = (meta(slice_).get("labels") or {}).get(LABEL_SERVICE_NAME)
    return [f"{meta(slice_).get('namespace') or ''}/{name}"] if name else []


class EndpointSliceController(Controller):
    """Services -> EndpointSlices. Its queue holds Service keys."""

    name: ClassVar[str] = "endpointslice-controller"
    alias: ClassVar[str] = "endpointslice"
    queue_name: ClassVar[str | None] = "endpoint_slice"
    max_retries: ClassVar[int | None] = MAX_RETRIES
    workers_option: ClassVar[str | None] = "concurrent-service-endpoint-syncs"
    default_workers: ClassVar[int] = 5

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        # Upstream backs off far more than the default limiter (1s, not 5ms): a Service's sync can rewrite
        # many slices, and retrying it fast would hammer the API server.
        self.queue = RateLimitingQueue(
            "endpoint_slice",
            rate_limiter=MaxOfRateLimiter(ItemExponentialFailureRateLimiter(DEFAULT_SYNC_BACKOFF, MAX_SYNC_BACKOFF),
                                          BucketRateLimiter(10.0, 100, clock=ctx.clock)),
            clock=ctx.clock)
        self.max_endpoints_per_slice = int(self._option("max-endpoints-per-slice", DEFAULT_MAX_ENDPOINTS_PER_SLICE))
        # Delay of syncs triggered by pod changes, to fold bursts of them into one write.
        self.batch_period = float(self._option("endpointslice-updates-batch-period", 0.0))
        self.recorder = ctx.events.recorder(EVENT_COMPONENT)
        self.tracker = EndpointSliceTracker()
        self.trigger_times = TriggerTimeTracker()

        self.service_informer = ctx.informers.informer(SERVICES)
        self.pod_informer = ctx.informers.informer(PODS, indexers={NAMESPACE_LABEL_INDEX: namespace_label_index})
        self.node_informer = ctx.informers.informer(NODES)
        self.slice_informer = ctx.informers.informer(ENDPOINTSLICES, indexers={SERVICE_INDEX: service_index})
        self.reconciler = Reconciler(ctx.client, self.node_informer.store.get, self.max_endpoints_per_slice,
                                     self.tracker, CONTROLLER_QUALIFIED_NAME)
        self.service_informer.add_handler(self._on_service)
        self.pod_informer.add_handler(self._on_pod)
        self.slice_informer.add_handler(self._on_slice)

    def _option(self, flag: str, default: Any) -> Any:
        options = self.ctx.options
        value = options.get(flag.replace("-", "_"), options.get(flag))
        return default if value is None else value

    # --- Services ---------------------------------------------------------------------------------

    def _on_service(self, event: Event) -> None:
        self.queue.add(key_of(event.new if isinstance(event, Updated) else event.obj))

    # --- pods -------------------------------------------------------------------------------------

    def _on_pod(self, event: Event) -> None:
        pod = event.new if isinstance(event, Updated) else event.obj
        if not self.service_informer.store.index_count(NAMESPACE_INDEX, str(meta(pod).get("namespace") or "")):
            return  # no Service in the pod's namespace: no slice can change (most pods of most rollouts)
        if isinstance(event, Updated):
            services = self._services_to_update(event.old, event.new)
        else:
            # A pod seen for the first time or gone: every Service selecting it.
            services = self._pod_services(event.obj)
        for key in services:
            if self.batch_period > 0:
                self.queue.add_after(key, self.batch_period)
            else:
                self.queue.add(key)

    def _pod_services(self, pod: Obj) -> set[str]:
        """``GetPodServiceMemberships``: keys of the Services of the pod's namespace selecting it."""
        return get_pod_service_memberships(self._services_in(str(meta(pod).get("namespace") or "")),
                                           meta(pod).get("labels") or {})

    def _services_in(self, namespace: str) -> Sequence[Obj]:
        return self.service_informer.store.by_index(NAMESPACE_INDEX, namespace)

    def _services_to_update(self, old: Obj, new: Obj) -> set[str]:
        """``GetServicesToUpdateOnPodChange``: the Services a pod update can change the endpoints of."""
        return get_services_to_update_on_pod_change(self._services_in, old, new)

    # --- EndpointSlices ---------------------------------------------------------------------------

    def _on_slice(self, event: Event) -> None:
        if isinstance(event, Added):
            if self.reconciler.managed_by_controller(event.obj) and self.tracker.should_sync(event.obj):
                self._queue_for_slice(event.obj)
        elif isinstance(event, Updated):
            old, new = event.old, event.new
            old_name = (meta(old).get("labels") or {}).get(LABEL_SERVICE_NAME)
            new_name = (meta(new).get("labels") or {}).get(LABEL_SERVICE_NAME)
            if old_name != new_name:
                # Someone relabelled it: both Services must look again.
                self.log.info("label changed", label=LABEL_SERVICE_NAME, old_service=old_name, new_service=new_name,
                              endpointslice=key_of(new))
                self._queue_for_slice(new)
                self._queue_for_slice(old)
                return
            if self.reconciler.managed_by_changed(old, new) or (
                    self.reconciler.managed_by_controller(new) and self.tracker.should_sync(new)):
                self._queue_for_slice(new)
        elif isinstance(event, Deleted):
            slice_ = event.obj
            # handle_deletion is False for a deletion we did not make: recreate what is missing.
            if (self.reconciler.managed_by_controller(slice_) and self.tracker.has(slice_)
                    and not self.tracker.handle_deletion(slice_)):
                self._queue_for_slice(slice_)

    def _queue_for_slice(self, slice_: Obj) -> None:
        try:
            key = service_controller_key(slice_)
        except ValueError as err:
            self.log.error("couldn't get key for EndpointSlice", endpointslice=key_of(slice_), error=str(err))
            return
        self.queue.add_after(key, max(ENDPOINT_SLICE_CHANGE_MIN_SYNC_DELAY, self.batch_period))

    # --- sync -------------------------------------------------------------------------------------

    async def sync(self, key: str) -> Result | None:
        try:
            await self._sync_service(key)
        except Exception as err:
            stale = isinstance(err, StaleInformerCache)
            metrics.ENDPOINT_SLICE_SYNCS.labels(metrics.SYNC_STALE if stale else metrics.SYNC_ERROR).inc()
            raise  # the runner logs it and retries with backoff, dropping the key after max_retries in a row
        metrics.ENDPOINT_SLICE_SYNCS.labels(metrics.SYNC_SUCCESS).inc()
        return None

    async def _sync_service(self, key: str) -> None:
        namespace, name = split_key(key)
        service = self.service_informer.store.get(key)
        if service is None:
            # Its slices are owned by it: the garbage collector removes them.
            self.trigger_times.delete_service(namespace, name)
            self.reconciler.delete_service(namespace, name)
            self.tracker.delete_service(namespace, name)
            return
        spec = service.get("spec") or {}
        if spec.get("type") == "ExternalName":
            return  # an ExternalName Service has no endpoints
        selector = spec.get("selector")
        if selector is None:
            return  # slices of a Service without selector are written by someone else (or mirrored)

        pods = select(self.pod_informer.store, namespace, from_set(selector))
        slices = [s for s in self.slice_informer.store.by_index(SERVICE_INDEX, key)
                  if (meta(s).get("labels") or {}).get(LABEL_MANAGED_BY) == CONTROLLER_QUALIFIED_NAME
                  # A slice already being deleted must not keep the controller waiting on it.
                  and meta(s).get("deletionTimestamp") is None]
        if self.tracker.stale_slices(service, slices):
            raise StaleInformerCache("EndpointSlice informer cache is out of date")

        # Computed before reconciling so the tracker's state moves on even when nothing is written.
        trigger_time = self.trigger_times.compute(namespace, service, pods)
        try:
            await self.reconciler.reconcile(service, pods, slices, trigger_time)
        except ReconcileError as err:
            self.recorder.event(service, "Warning", FAILED_TO_UPDATE_ENDPOINT_SLICES,
                                f"Error updating Endpoint Slices for Service {namespace}/{name}: {err}",
                                resource=SERVICES)
            raise
