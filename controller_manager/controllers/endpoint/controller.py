"""The Endpoints controller: the core/v1 Endpoints of every Service with a selector (kube-controller-manager's
``endpoints-controller``, ``pkg/controller/endpoint``).

Guarantees:
- A Service with a selector (not of type ExternalName) has an Endpoints of the same name listing the pods its
  selector matches (see :mod:`.pods` for which pods and which address and ports), ready ones under
  ``addresses`` and the others under ``notReadyAddresses`` (all under ``addresses`` when the Service publishes
  not-ready addresses), packed and ordered as :mod:`.subsets` describes. A headless Service without ports lists
  its pods with no ports; a Service with ports lists a pod under each port that resolves for it.
- The Endpoints carries the Service's labels plus ``endpoints.kubernetes.io/managed-by: endpoint-controller`` and,
  for a Service without a cluster IP, ``service.kubernetes.io/headless``; the annotation
  ``endpoints.kubernetes.io/last-change-trigger-time`` (RFC 3339, nanoseconds) says when the change it
  reflects happened (removed when no trigger time is known); beyond 1000 addresses it is truncated and
  annotated ``endpoints.kubernetes.io/over-capacity: truncated`` (the annotation is removed again below).
- It is written only when its subsets (targetRef resourceVersions aside), its labels or its capacity annotation
  are wrong: created when absent, updated (whole) otherwise. A sync whose cached Endpoints is one this
  controller has already replaced fails as stale and is retried with backoff.
- When a Service is gone its Endpoints is deleted; a Service without a selector is left alone (its Endpoints
  are someone else's). On start every Endpoints in the cache is looked at once, so ones whose Service went
  while the controller was down are deleted (leader-election records excepted).
- Pod events re-sync the Services they can change after ``--endpoint-updates-batch-period`` (default 0: at
  once); Service events and Endpoints deletions at once. ``--concurrent-endpoint-syncs`` workers (default 5);
  a Service failing 15 syncs in a row is dropped until its next event.
- A failed create or update is reported as a Warning event (``FailedToCreateEndpoint`` /
  ``FailedToUpdateEndpoint``) on the Endpoints, from component ``endpoint-controller``; a create refused because
  the namespace is terminating is dropped silently.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from controller_manager.api.endpoints import repack_subsets
from controller_manager.api.meta import deep_copy, key_of, meta, split_key
from controller_manager.api.pods import is_pod_ready, pod_ips
from controller_manager.api.resources import ENDPOINTS, PODS, SERVICES
from controller_manager.api.selectors import from_set
from controller_manager.client import ApiError, Forbidden, NotFound
from controller_manager.client.errors import NAMESPACE_TERMINATING_CAUSE, has_status_cause
from controller_manager.controllerutil.endpoints import (
    PortNotFound,
    TriggerTimeTracker,
    find_port,
    format_trigger_time,
    get_pod_service_memberships,
    get_services_to_update_on_pod_change,
    should_pod_be_in_endpoints,
)
from controller_manager.runtime.controller import Controller, ControllerContext, Result
from controller_manager.runtime.informers import NAMESPACE_INDEX, Deleted, Event, Updated
from controller_manager.runtime.informers.labelindex import NAMESPACE_LABEL_INDEX, namespace_label_index, select

from .pods import CLUSTER_IP_NONE, endpoint_port, pod_to_endpoint_address
from .subsets import (
    OVER_CAPACITY_ANNOTATION,
    capacity_annotation_set_correctly,
    subsets_equal_ignoring_resource_version,
    truncate_subsets,
)

__all__ = ["CONTROLLER_NAME", "LABEL_MANAGED_BY", "EndpointsController", "StaleEndpoints"]

Obj = Mapping[str, Any]

LABEL_MANAGED_BY = "endpoints.kubernetes.io/managed-by"
CONTROLLER_NAME = "endpoint-controller"  # the managed-by value, and the events' component
HEADLESS_LABEL = "service.kubernetes.io/headless"
LAST_CHANGE_TRIGGER_TIME = "endpoints.kubernetes.io/last-change-trigger-time"
TRUNCATED = "truncated"
# Endpoints holding a leader-election record have no Service and must not be deleted for it.
LEADER_ELECTION_RECORD_ANNOTATION = "control-plane.alpha.kubernetes.io/leader"
MAX_RETRIES = 15


class StaleEndpoints(Exception):
    """The cached Endpoints is one this controller has already replaced: wait for the cache to catch up."""


class EndpointsController(Controller):
    """Services -> Endpoints. Its queue holds Service keys (an Endpoints is named after its Service)."""

    name: ClassVar[str] = "endpoints-controller"
    alias: ClassVar[str] = "endpoint"
    queue_name: ClassVar[str | None] = "endpoint"
    max_retries: ClassVar[int | None] = MAX_RETRIES
    workers_option: ClassVar[str | None] = "concurrent-endpoint-syncs"
    default_workers: ClassVar[int] = 5

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        value = ctx.options.get("endpoint_updates_batch_period", ctx.options.get("endpoint-updates-batch-period"))
        # Delay of syncs triggered by pod changes, to fold bursts of them into one write.
        self.batch_period = float(value or 0.0)
        self.recorder = ctx.events.recorder(CONTROLLER_NAME)
        self.trigger_times = TriggerTimeTracker()
        # Per Endpoints key, the resourceVersion this controller last replaced (``staleEndpointsTracker``).
        self._stale: dict[str, str] = {}

        self.service_informer = ctx.informers.informer(SERVICES)
        self.pod_informer = ctx.informers.informer(PODS, indexers={NAMESPACE_LABEL_INDEX: namespace_label_index})
        self.endpoints_informer = ctx.informers.informer(ENDPOINTS)
        self.service_informer.add_handler(self._on_service)
        self.pod_informer.add_handler(self._on_pod)
        self.endpoints_informer.add_handler(self._on_endpoints)

    # --- events -----------------------------------------------------------------------------------

    def _on_service(self, event: Event) -> None:
        self.queue.add(key_of(event.new if isinstance(event, Updated) else event.obj))

    def _on_endpoints(self, event: Event) -> None:
        if isinstance(event, Deleted):
            self.queue.add(key_of(event.obj))  # recreate it if its Service still wants it

    def _on_pod(self, event: Event) -> None:
        if isinstance(event, Updated):
            services = self._services_to_update(event.old, event.new)
        else:
            services = self._pod_services(event.obj)
        for key in services:
            self.queue.add_after(key, self.batch_period)

    def _pod_services(self, pod: Obj) -> set[str]:
        """``GetPodServiceMemberships``: the Services of the pod's namespace selecting it."""
        return get_pod_service_memberships(self._services_in(str(meta(pod).get("namespace") or "")),
                                           meta(pod).get("labels") or {})

    def _services_in(self, namespace: str) -> Sequence[Obj]:
        return self.service_informer.store.by_index(NAMESPACE_INDEX, namespace)

    def _services_to_update(self, old: Obj, new: Obj) -> set[str]:
        """``GetServicesToUpdateOnPodChange``."""
        return get_services_to_update_on_pod_change(self._services_in, old, new)

    async def run_background(self) -> None:
        """``checkLeftoverEndpoints``: every cached Endpoints once, so those whose Service went while this
        controller was down are deleted."""
        for endpoints in list(self.endpoints_informer.store.list()):
            if LEADER_ELECTION_RECORD_ANNOTATION in (meta(endpoints).get("annotations") or {}):
                continue
            self.queue.add(key_of(endpoints))

    # --- sync -------------------------------------------------------------------------------------

    async def sync(self, key: str) -> Result | None:
        namespace, name = split_key(key)
        service = self.service_informer.store.get(key)
        if service is None:
            # The Service is gone: so is its Endpoints. (A Service deleted while we were down is found by the
            # start-up scan of the cached Endpoints.)
            try:
                await self.ctx.client.delete(ENDPOINTS, name, namespace)
            except NotFound:
                pass
            self.trigger_times.delete_service(namespace, name)
            self._stale.pop(key, None)
            return None
        spec = service.get("spec") or {}
        if spec.get("type") == "ExternalName":
            return None  # no endpoints for an ExternalName Service (issues.k8s.io/105986)
        selector = spec.get("selector")
        if selector is None:
            return None  # its Endpoints are written out of band, through the API

        pods = select(self.pod_informer.store, namespace, from_set(selector))
        # Computed before deciding whether to write, so the tracker moves on even when nothing is written.
        trigger_time = self.trigger_times.compute(namespace, service, pods)
        subsets = repack_subsets(self._subsets(service, pods))

        current = self.endpoints_informer.store.get(key)
        if current is not None and self._stale.get(key) == meta(current).get("resourceVersion"):
            raise StaleEndpoints(f"endpoints informer cache is out of date, resource version "
                                 f"{meta(current).get('resourceVersion')} already processed for endpoints {key}")
        service_labels = dict(meta(service).get("labels") or {})
        wanted_labels = {**service_labels, LABEL_MANAGED_BY: CONTROLLER_NAME}
        if current is not None:
            compare_labels = dict(meta(current).get("labels") or {})
            # The headless label is not on the Service: it must not count as a difference.
            compare_labels.pop(HEADLESS_LABEL, None)
            annotations = meta(current).get("annotations") or {}
            if (subsets_equal_ignoring_resource_version(current.get("subsets"), subsets)
                    and compare_labels == wanted_labels
                    and capacity_annotation_set_correctly(annotations, current.get("subsets") or [])):
                return None
        await self._write(service, current, subsets, wanted_labels, trigger_time)
        return None

    def _subsets(self, service: Obj, pods: Sequence[Obj]) -> list[dict[str, Any]]:
        """One subset per (pod, resolved port), before packing."""
        spec = service.get("spec") or {}
        publish_not_ready = bool(spec.get("publishNotReadyAddresses"))
        service_ports = [p for p in spec.get("ports") or () if isinstance(p, Mapping)]
        subsets: list[dict[str, Any]] = []
        for pod in pods:
            if not should_pod_be_in_endpoints(pod, publish_not_ready):
                continue
            address = pod_to_endpoint_address(service, pod)
            if address is None:
                self.log.debug("failed to find endpoint for service with ClusterIP on pod",
                               service=key_of(service), cluster_ip=spec.get("clusterIP"), pod=key_of(pod),
                               pod_ips=pod_ips(pod))
                continue
            ready = publish_not_ready or is_pod_ready(pod)
            field = "addresses" if ready else "notReadyAddresses"
            if not service_ports:
                # A headless Service may have no ports: its pods are listed without any.
                if spec.get("clusterIP") == CLUSTER_IP_NONE:
                    subsets.append({field: [address], "ports": []})
                continue
            for service_port in service_ports:
                try:
                    number = find_port(pod, service_port)
                except PortNotFound as err:
                    self.log.debug("failed to find port for service", service=key_of(service), error=str(err))
                    continue
                subsets.append({field: [address], "ports": [endpoint_port(service_port, number)]})
        return subsets

    async def _write(self, service: Obj, current: Obj | None, subsets: list[dict[str, Any]],
                     labels: dict[str, str], trigger_time: float | None) -> None:
        namespace, name = str(meta(service).get("namespace") or ""), str(meta(service).get("name") or "")
        creating = current is None or not meta(current).get("resourceVersion")
        if current is None:
            new: dict[str, Any] = {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": name}}
        else:
            new = deep_copy(dict(current))
            new.setdefault("apiVersion", "v1")
            new.setdefault("kind", "Endpoints")
            new["metadata"] = dict(new.get("metadata") or {})
        m = new["metadata"]
        annotations = dict(m.get("annotations") or {})
        if trigger_time is not None:
            annotations[LAST_CHANGE_TRIGGER_TIME] = format_trigger_time(trigger_time)
        else:
            annotations.pop(LAST_CHANGE_TRIGGER_TIME, None)
        subsets, truncated = truncate_subsets(subsets)
        if truncated:
            annotations[OVER_CAPACITY_ANNOTATION] = TRUNCATED
        else:
            annotations.pop(OVER_CAPACITY_ANNOTATION, None)
        if annotations:
            m["annotations"] = annotations
        else:
            m.pop("annotations", None)
        labels = dict(labels)
        if _is_service_ip_set(service):
            labels.pop(HEADLESS_LABEL, None)
        else:
            labels[HEADLESS_LABEL] = ""
        m["labels"] = labels
        if subsets:
            new["subsets"] = subsets
        else:
            new.pop("subsets", None)

        self.log.debug("update endpoints", service=f"{namespace}/{name}",
                       ready=sum(len(s.get("addresses") or ()) for s in subsets),
                       not_ready=sum(len(s.get("notReadyAddresses") or ()) for s in subsets))
        try:
            if creating:
                await self.ctx.client.create(ENDPOINTS, new, namespace)
                return
            updated = await self.ctx.client.update(ENDPOINTS, new)
        except ApiError as err:
            if creating and isinstance(err, Forbidden) and has_status_cause(err, NAMESPACE_TERMINATING_CAUSE):
                return  # creates keep failing in a terminating namespace: drop the item
            if creating:
                self.recorder.event(new, "Warning", "FailedToCreateEndpoint",
                                    f"Failed to create endpoint for service {namespace}/{name}: {err}")
            else:
                self.recorder.event(new, "Warning", "FailedToUpdateEndpoint",
                                    f"Failed to update endpoint {namespace}/{name}: {err}")
            raise
        assert current is not None
        # Until the cache shows the new version, the old one must not be acted on (a write that changes
        # nothing, e.g. through a webhook, keeps the resourceVersion and leaves nothing to wait for).
        old_version = meta(current).get("resourceVersion")
        if meta(updated).get("resourceVersion") != old_version:
            self._stale[key_of(current)] = str(old_version)


def _is_service_ip_set(service: Obj) -> bool:
    cluster_ip = (service.get("spec") or {}).get("clusterIP")
    return bool(cluster_ip) and cluster_ip != CLUSTER_IP_NONE
