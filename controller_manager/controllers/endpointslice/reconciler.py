"""Turns the pods a Service selects into its EndpointSlices with as few writes as possible
(``staging/src/k8s.io/endpointslice/reconciler.go``).

Guarantees of :meth:`Reconciler.reconcile`:
- One set of slices per address type the Service has (``ipFamilies``); slices of another type are deleted.
  Within a type, pods are grouped by their resolved port list: each group has its own slices.
- Packing, per group: existing slices keep the endpoints still desired (updated in place when an endpoint's
  conditions, node or zone changed); a slice left empty is deleted; endpoints not yet placed go first into the
  slices already being updated (fullest first), then into the one unchanged slice they would leave closest to
  full (only when fewer than ``max_endpoints_per_slice`` are left), then into new slices of at most
  ``max_endpoints_per_slice``. Slices whose only change is the Service's labels are updated.
- A Service with no endpoints of a type keeps exactly one empty placeholder slice of that type (an identical
  existing placeholder is left alone). Slices not owned by this Service (an older Service of the same name)
  are replaced; a create paired with a delete becomes an update of the slice to delete.
- A Service being deleted gets no new slices (the garbage collector is removing them); updates and deletes go on.
  A create refused because the namespace is terminating is dropped silently.
- Writes are sequential: creates, then updates, then deletes; the first failure stops the rest and is reported.
  Every successful write is recorded in the :class:`EndpointSliceTracker`. Cached objects are never mutated.
- A pod on a node missing from the cache is left out (and reported as an error, so the Service is retried),
  unless the Service publishes not-ready addresses. All errors are raised together as :class:`ReconcileError`
  after every address type was reconciled.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from controller_manager.api.meta import meta
from controller_manager.api.resources import ENDPOINTSLICES
from controller_manager.client.errors import NAMESPACE_TERMINATING_CAUSE, ApiError, NotFound, has_status_cause
from controller_manager.controllerutil.endpoints import should_pod_be_in_endpoints
from controller_manager.controllerutil.endpointslice import (
    LABEL_MANAGED_BY,
    EndpointSet,
    EndpointSliceTracker,
    PortMapKey,
    SliceWriter,
    endpoints_equal_beyond_hash,
    port_map_key,
)

from . import metrics
from .util import (
    address_types_for_service,
    get_endpoint_ports,
    get_slice_to_fill,
    new_endpoint_slice,
    owned_by,
    placeholder_slice_equal,
    pod_to_endpoint,
    set_endpoint_slice_labels,
    slice_endpoints,
    with_trigger_time,
)

Obj = Mapping[str, Any]
NodeGetter = Callable[[str], Obj | None]

_log = structlog.get_logger("controller_manager.endpointslice")


class ReconcileError(Exception):
    """Every error of one reconcile (``utilerrors.NewAggregate``: one message alone, several as ``[a, b]``)."""

    def __init__(self, errors: Sequence[BaseException | str]) -> None:
        self.errors = [str(e) for e in errors]
        super().__init__(self.errors[0] if len(self.errors) == 1 else f"[{', '.join(self.errors)}]")


@dataclass
class Plan:
    """The writes one address type needs, and the figures upstream records about it."""

    to_create: list[dict[str, Any]] = field(default_factory=list)
    to_update: list[dict[str, Any]] = field(default_factory=list)
    to_delete: list[Obj] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    added: int = 0
    removed: int = 0
    efficiency: dict[PortMapKey, metrics.EfficiencyInfo] = field(default_factory=dict)


def _name(obj: Obj) -> str:
    return str(meta(obj).get("name") or "")


def _svc(service: Obj) -> str:
    return f"{meta(service).get('namespace') or ''}/{_name(service)}"


class Reconciler:
    """``endpointslice.Reconciler`` without topology hints: see the module docstring."""

    def __init__(self, client: SliceWriter, get_node: NodeGetter, max_endpoints_per_slice: int,
                 tracker: EndpointSliceTracker, controller_name: str) -> None:
        self.client = client
        self.get_node = get_node
        self.max_endpoints_per_slice = max_endpoints_per_slice
        self.tracker = tracker
        self.controller_name = controller_name
        self.metrics_cache = metrics.MetricsCache(max_endpoints_per_slice)

    # --- the whole Service ------------------------------------------------------------------------

    async def reconcile(self, service: Obj, pods: Sequence[Obj], existing: Sequence[Obj],
                        trigger_time: float | None) -> None:
        """Bring the Service's slices in line with ``pods``; raises :class:`ReconcileError`."""
        errors: list[str] = []
        supported = address_types_for_service(service)
        by_type: dict[str, list[Obj]] = {t: [] for t in supported}
        unsupported: list[Obj] = []
        for slice_ in existing:
            bucket = by_type.get(str(slice_.get("addressType") or ""))
            if bucket is None:
                unsupported.append(slice_)
            else:
                bucket.append(slice_)
        efficiency: dict[tuple[str, PortMapKey], metrics.EfficiencyInfo] = {}
        for address_type in supported:
            errors.extend(await self.reconcile_by_address_type(service, pods, by_type[address_type], trigger_time,
                                                               address_type, efficiency))
        ns = str(meta(service).get("namespace") or "")
        self.metrics_cache.update_service((ns, _name(service)), efficiency)
        for slice_ in unsupported:
            try:
                await self._delete(service, slice_)
            except ApiError as err:
                errors.append(f"error deleting {_name(slice_)} EndpointSlice for Service {_svc(service)}: {err}")
        if errors:
            raise ReconcileError(errors)

    def delete_service(self, namespace: str, name: str) -> None:
        self.metrics_cache.delete_service((namespace, name))

    def managed_by_controller(self, slice_: Obj) -> bool:
        labels = meta(slice_).get("labels") or {}
        return bool(labels.get(LABEL_MANAGED_BY) == self.controller_name)

    def managed_by_changed(self, a: Obj, b: Obj) -> bool:
        return self.managed_by_controller(a) != self.managed_by_controller(b)

    # --- one address type -------------------------------------------------------------------------

    async def reconcile_by_address_type(
        self, service: Obj, pods: Sequence[Obj], existing: Sequence[Obj], trigger_time: float | None,
        address_type: str, efficiency: dict[tuple[str, PortMapKey], metrics.EfficiencyInfo] | None = None,
    ) -> list[str]:
        """Plan and write one address type's slices; the errors met (writes stop at the first failure).
        ``efficiency`` collects the figures of the type's port lists for the metrics cache."""
        plan = self.plan(service, pods, existing, address_type)
        metrics.ENDPOINTS_ADDED_PER_SYNC.observe(plan.added)
        metrics.ENDPOINTS_REMOVED_PER_SYNC.observe(plan.removed)
        if efficiency is not None:
            efficiency.update(((address_type, key), info) for key, info in plan.efficiency.items())
        error = await self.finalize(service, plan.to_create, plan.to_update, plan.to_delete, trigger_time)
        return [*plan.errors, *([str(error)] if error is not None else [])]

    def plan(self, service: Obj, pods: Sequence[Obj], existing: Sequence[Obj], address_type: str) -> Plan:
        """The creates, updates and deletes that make ``existing`` list ``pods`` (no I/O)."""
        plan = Plan()
        existing_by_ports: dict[PortMapKey, list[Obj]] = {}
        for slice_ in existing:
            if owned_by(slice_, service):
                existing_by_ports.setdefault(port_map_key(slice_.get("ports")), []).append(slice_)
            else:
                plan.to_delete.append(slice_)

        desired_by_ports: dict[PortMapKey, EndpointSet] = {}
        ports_by_key: dict[PortMapKey, list[dict[str, Any]]] = {}
        publish_not_ready = bool((service.get("spec") or {}).get("publishNotReadyAddresses"))
        for pod in pods:
            if not should_pod_be_in_endpoints(pod, True):
                continue
            ports = get_endpoint_ports(service, pod)
            key = port_map_key(ports)
            desired = desired_by_ports.setdefault(key, EndpointSet())
            ports_by_key.setdefault(key, ports)
            node_name = str((pod.get("spec") or {}).get("nodeName") or "")
            node = self.get_node(node_name)
            if node is None and not publish_not_ready:
                # Retry later, but do not let a pod bound to a vanished node hold the others back.
                _log.info("skipping Pod for Service, Node not found", pod=f"{meta(pod).get('namespace')}/"
                          f"{_name(pod)}", service=_svc(service), node=node_name)
                plan.errors.append(f"skipping Pod {_name(pod)} for Service {_svc(service)}: "
                                   f"Node {node_name} Not Found")
                continue
            endpoint = pod_to_endpoint(pod, node, service, address_type)
            if endpoint["addresses"]:
                desired.insert(endpoint)

        for key, desired in desired_by_ports.items():
            count = len(desired)
            create, update, delete, added, removed = self.reconcile_by_port_mapping(
                service, existing_by_ports.get(key, []), desired, ports_by_key[key], address_type)
            plan.added += added
            plan.removed += removed
            plan.efficiency[key] = metrics.EfficiencyInfo(
                count, len(existing_by_ports.get(key, [])) + len(create) - len(delete))
            plan.to_create.extend(create)
            plan.to_update.extend(update)
            plan.to_delete.extend(delete)
        # Port lists no pod resolves to any more: their slices go.
        for key, slices in existing_by_ports.items():
            if key not in desired_by_ports:
                plan.to_delete.extend(slices)

        if len(existing) == len(plan.to_delete) and not plan.to_create:
            placeholder = new_endpoint_slice(service, [], address_type, self.controller_name)
            if len(plan.to_delete) == 1 and placeholder_slice_equal(plan.to_delete[0], placeholder):
                plan.to_delete.clear()  # the placeholder we would recreate is already there
            else:
                plan.to_create.append(placeholder)
            plan.efficiency[port_map_key([])] = metrics.EfficiencyInfo(0, 1)

        changed = {_name(s) for s in plan.to_update} | {_name(s) for s in plan.to_delete}
        unchanged = [s for s in existing if _name(s) not in changed]
        plan.to_update.extend(_without_hints(unchanged))
        return plan

    def reconcile_by_port_mapping(
        self, service: Obj, existing: Sequence[Obj], desired: EndpointSet, ports: Sequence[Mapping[str, Any]],
        address_type: str,
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[Obj], int, int]:
        """(to create, to update, to delete, endpoints added, endpoints removed) for one port list.

        ``desired`` is consumed."""
        by_name: dict[str, Obj] = {}
        unchanged: dict[str, None] = {}  # insertion-ordered sets of slice names
        to_update: dict[str, None] = {}
        to_delete: dict[str, None] = {}
        removed = 0

        # 1. Keep the endpoints still desired in the slices holding them; update those that changed.
        for slice_ in existing:
            name = _name(slice_)
            by_name[name] = slice_
            kept: list[Mapping[str, Any]] = []
            endpoint_changed = False
            for endpoint in slice_endpoints(slice_):
                wanted = desired.get(endpoint)
                if wanted is not None:
                    kept.append(wanted)
                    if not endpoints_equal_beyond_hash(wanted, endpoint):
                        endpoint_changed = True
                    desired.delete(endpoint)
            labels, labels_changed = set_endpoint_slice_labels(slice_, service, self.controller_name)
            current = len(slice_.get("endpoints") or ())
            if endpoint_changed or current != len(kept):
                removed += max(current - len(kept), 0)
                if not kept:
                    to_delete[name] = None
                else:
                    by_name[name] = _with(slice_, kept, labels)
                    to_update[name] = None
            elif labels_changed:
                by_name[name] = _with(slice_, slice_endpoints(slice_), labels)
                to_update[name] = None
            else:
                unchanged[name] = None

        added = len(desired)
        limit = self.max_endpoints_per_slice

        # 2. Top up the slices being written anyway, fullest first.
        if desired and to_update:
            for slice_ in sorted((by_name[n] for n in to_update), key=lambda s: -len(s["endpoints"])):
                endpoints = slice_["endpoints"]
                while desired and len(endpoints) < limit:
                    endpoints.append(desired.pop_any())

        # 3. Put what is left into the unchanged slice it fills best, or into new slices.
        to_create: list[dict[str, Any]] = []
        while desired:
            target: dict[str, Any] | None = None
            if len(desired) < limit and unchanged:
                fill = get_slice_to_fill([by_name[n] for n in unchanged], len(desired), limit)
                if fill is not None:
                    target = _with(fill, slice_endpoints(fill), None)
                    by_name[_name(fill)] = target
            if target is None:
                target = new_endpoint_slice(service, ports, address_type, self.controller_name)
            endpoints = target["endpoints"]
            while desired and len(endpoints) < limit:
                endpoints.append(desired.pop_any())
            name = _name(target)
            if name:
                to_update[name] = None
                unchanged.pop(name, None)
            else:
                to_create.append(target)

        return (to_create, [dict(by_name[n]) for n in to_update], [by_name[n] for n in to_delete], added, removed)

    # --- writes -----------------------------------------------------------------------------------

    async def finalize(self, service: Obj, to_create: Sequence[dict[str, Any]], to_update: Sequence[dict[str, Any]],
                       to_delete: Sequence[Obj], trigger_time: float | None) -> Exception | None:
        """Write the plan; the first failure is returned (and stops the remaining writes)."""
        creates, updates, deletes = list(to_create), list(to_update), list(to_delete)
        # A create and a delete of the same type become one update of the slice to delete. Only slices of this
        # Service: one of an older Service of the same name is being garbage collected.
        i = 0
        while i < len(deletes) and creates:
            victim, new = deletes[i], creates[-1]
            if victim.get("addressType") == new.get("addressType") and owned_by(victim, service):
                creates.pop()
                updates.append({**new, "metadata": {**new["metadata"], "name": _name(victim)}})
                deletes.pop(i)
            else:
                i += 1

        namespace = str(meta(service).get("namespace") or "")
        if meta(service).get("deletionTimestamp") is None:
            # No creates for a Service being deleted: the garbage collector would race them.
            for slice_ in creates:
                try:
                    created = await self.client.create(ENDPOINTSLICES, with_trigger_time(slice_, trigger_time),
                                                       namespace)
                except ApiError as err:
                    if has_status_cause(err, NAMESPACE_TERMINATING_CAUSE):
                        return None  # every create will fail until the namespace is gone
                    return ReconcileError([f"failed to create EndpointSlice for Service {_svc(service)}: {err}"])
                self.tracker.update(created)
                metrics.ENDPOINT_SLICE_CHANGES.labels("create").inc()

        for slice_ in updates:
            try:
                updated = await self.client.update(ENDPOINTSLICES, with_trigger_time(slice_, trigger_time))
            except ApiError as err:
                return ReconcileError([f"failed to update {_name(slice_)} EndpointSlice for Service "
                                       f"{_svc(service)}: {err}"])
            self.tracker.update(updated)
            metrics.ENDPOINT_SLICE_CHANGES.labels("update").inc()

        for victim in deletes:
            try:
                await self._delete(service, victim)
            except ApiError as err:
                return ReconcileError([f"failed to delete {_name(victim)} EndpointSlice for Service "
                                       f"{_svc(service)}: {err}"])

        changed = len(creates) + len(updates) + len(deletes)
        metrics.ENDPOINT_SLICES_CHANGED_PER_SYNC.labels("Disabled", "").observe(changed)
        return None

    async def _delete(self, service: Obj, slice_: Obj) -> None:
        """Delete a slice; one already gone is fine (and not expected to show a deletion)."""
        try:
            await self.client.delete(ENDPOINTSLICES, _name(slice_), str(meta(service).get("namespace") or ""))
        except NotFound:
            return
        self.tracker.expect_deletion(slice_)
        metrics.ENDPOINT_SLICE_CHANGES.labels("delete").inc()


def _with(slice_: Obj, endpoints: Sequence[Mapping[str, Any]], labels: dict[str, str] | None) -> dict[str, Any]:
    """A private copy of ``slice_`` with its own endpoint list (and new labels), safe to fill."""
    out = dict(slice_)
    out["endpoints"] = list(endpoints)
    if labels is not None:
        out["metadata"] = {**meta(slice_), "labels": labels}
    return out


def _without_hints(unchanged: Sequence[Obj]) -> list[dict[str, Any]]:
    """Unchanged slices still carrying topology hints, with the hints removed (``RemoveHintsFromSlices``): this
    controller sets no hints, so hints left by an earlier configuration would mislead proxies."""
    out: list[dict[str, Any]] = []
    for slice_ in unchanged:
        endpoints = slice_endpoints(slice_)
        if any("hints" in e for e in endpoints):
            out.append(_with(slice_, [{k: v for k, v in e.items() if k != "hints"} for e in endpoints], None))
    return out
