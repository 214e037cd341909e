"""Turns an Endpoints into its mirrored EndpointSlices (``pkg/controller/endpointslicemirroring/reconciler.go``
and ``reconciler_helpers.go``).

Guarantees of :meth:`Reconciler.reconcile`:
- The Endpoints' subsets are repacked first (``RepackSubsets``), then every subset maps to one slice per address
  family and port list: ``addresses`` become endpoints with ``ready: true``, ``notReadyAddresses`` with
  ``ready: false``. At most ``max_endpoints_per_subset`` addresses of a subset are mirrored (ready ones first);
  the rest, and addresses that are not IPs, are skipped, counted in ``addresses_skipped_per_sync`` and reported
  on the Endpoints as Warning events ``InvalidIPAddress`` (``Skipped N invalid IP addresses when mirroring to
  EndpointSlices``) and ``TooManyAddressesToMirror`` (when more were skipped than were invalid).
- Per group, the first existing slice is kept and rewritten in place if its endpoints, labels or annotations
  differ from what the Endpoints says, or it names another Endpoints (of the same name) as owner (left alone
  otherwise); further slices of the group are deleted; a group
  without slices gets a new one (``generateName`` from the Endpoints' name). Groups no longer desired, and
  groups left with no endpoints, lose their slices. A create paired with a delete of the same address type
  becomes an update of the slice to delete.
- Writes are sequential: creates (none while the Endpoints is being deleted; a create refused because the
  namespace is terminating ends the sync quietly), then updates, then deletes; the first failure stops the rest
  and is raised. Every successful write is recorded in the :class:`EndpointSliceTracker`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from controller_manager.api.endpoints import repack_subsets
from controller_manager.api.meta import meta
from controller_manager.api.resources import ENDPOINTS, ENDPOINTSLICES
from controller_manager.client.errors import NAMESPACE_TERMINATING_CAUSE, ApiError, has_status_cause
from controller_manager.controllerutil.endpointslice import (
    ADDRESS_TYPE_IPV4,
    ADDRESS_TYPE_IPV6,
    LABEL_MANAGED_BY,
    LABEL_SERVICE_NAME,
    EndpointSet,
    EndpointSliceTracker,
    SliceWriter,
    endpoints_equal_beyond_hash,
)
from controller_manager.runtime.events import EventRecorder

from . import metrics
from .utils import (
    AddrTypePortMapKey,
    addr_type_port_map_key,
    address_to_endpoint,
    clone_and_remove_keys,
    ep_ports_to_eps_ports,
    mirrored_annotations,
    new_endpoint_slice,
)

Obj = Mapping[str, Any]

INVALID_IP_ADDRESS = "InvalidIPAddress"
TOO_MANY_ADDRESSES_TO_MIRROR = "TooManyAddressesToMirror"

_log = structlog.get_logger("controller_manager.endpointslicemirroring")


@dataclass
class SlicesByAction:
    to_create: list[dict[str, Any]] = field(default_factory=list)
    to_update: list[dict[str, Any]] = field(default_factory=list)
    to_delete: list[Obj] = field(default_factory=list)

    def extend(self, other: SlicesByAction) -> None:
        self.to_create.extend(other.to_create)
        self.to_update.extend(other.to_update)
        self.to_delete.extend(other.to_delete)


@dataclass
class TotalsByAction:
    added: int = 0
    updated: int = 0
    removed: int = 0

    def add(self, other: TotalsByAction) -> None:
        self.added += other.added
        self.updated += other.updated
        self.removed += other.removed


@dataclass
class DesiredCalc:
    """The endpoints and ports wanted, by (address type, port list) (``desiredCalc``)."""

    ports_by_key: dict[AddrTypePortMapKey, list[dict[str, Any]]] = field(default_factory=dict)
    endpoints_by_key: dict[AddrTypePortMapKey, EndpointSet] = field(default_factory=dict)
    num_desired_endpoints: int = 0

    def init_ports(self, subset_ports: Sequence[Any] | None) -> dict[str, AddrTypePortMapKey]:
        """Register a subset's ports under both address types; the key of each type."""
        ports = ep_ports_to_eps_ports(subset_ports)
        keys: dict[str, AddrTypePortMapKey] = {}
        for address_type in (ADDRESS_TYPE_IPV4, ADDRESS_TYPE_IPV6):
            key = addr_type_port_map_key(ports, address_type)
            keys[address_type] = key
            self.endpoints_by_key.setdefault(key, EndpointSet())
            self.ports_by_key[key] = ports
        return keys

    def add_address(self, address: Obj, keys: Mapping[str, AddrTypePortMapKey], ready: bool) -> bool:
        """Add an address as an endpoint; False (nothing added) when its IP is invalid."""
        converted = address_to_endpoint(address, ready)
        if converted is None:
            return False
        endpoint, address_type = converted
        self.endpoints_by_key[keys[address_type]].insert(endpoint)
        self.num_desired_endpoints += 1
        return True


def _name(obj: Obj) -> str:
    return str(meta(obj).get("name") or "")


def _key(obj: Obj) -> str:
    return f"{meta(obj).get('namespace') or ''}/{_name(obj)}"


def _labels(obj: Obj) -> dict[str, str]:
    labels = meta(obj).get("labels")
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping) else {}


def _annotations(obj: Obj) -> dict[str, str]:
    annotations = meta(obj).get("annotations")
    return {str(k): str(v) for k, v in annotations.items()} if isinstance(annotations, Mapping) else {}


def total_changes(existing: Obj, desired: EndpointSet) -> TotalsByAction:
    """``totalChanges``: what turning ``existing``'s endpoints into ``desired`` adds, updates and removes."""
    totals = TotalsByAction()
    matches = 0
    for endpoint in existing.get("endpoints") or ():
        got = desired.get(endpoint)
        if got is None:
            totals.removed += 1
        else:
            matches += 1
            if not endpoints_equal_beyond_hash(got, endpoint):
                totals.updated += 1
    totals.added = len(desired) - matches
    return totals


def owned_by_other_endpoints(slice_: Obj, endpoints: Obj) -> bool:
    """The slice names an Endpoints owner other than this one (an earlier Endpoints of the same name): it is
    rewritten, which gives it this Endpoints as owner."""
    uid = meta(endpoints).get("uid")
    return any(isinstance(ref, Mapping) and ref.get("kind") == "Endpoints" and ref.get("uid") != uid
               for ref in meta(slice_).get("ownerReferences") or ())


def endpoint_slices_by_key(slices: Sequence[Obj]) -> dict[AddrTypePortMapKey, list[Obj]]:
    by_key: dict[AddrTypePortMapKey, list[Obj]] = {}
    for slice_ in slices:
        key = addr_type_port_map_key(slice_.get("ports"), str(slice_.get("addressType") or ""))
        by_key.setdefault(key, []).append(slice_)
    return by_key


def recycle_slices(slices: SlicesByAction) -> None:
    """``recycleSlices``: pair creates with deletes of the same address type; each pair becomes an update of the
    slice that would have been deleted."""
    types = list(dict.fromkeys(str(s.get("addressType") or "") for s in slices.to_create))
    for address_type in types:
        creates = [s for s in slices.to_create if s.get("addressType") == address_type]
        deletes = [s for s in slices.to_delete if s.get("addressType") == address_type]
        for create, victim in zip(creates, deletes, strict=False):
            slices.to_create.remove(create)
            slices.to_delete.remove(victim)
            metadata = {k: v for k, v in create["metadata"].items() if k != "generateName"}
            metadata["name"] = _name(victim)
            slices.to_update.append({**create, "metadata": metadata})


class Reconciler:
    """``reconciler``: see the module docstring."""

    def __init__(self, client: SliceWriter, tracker: EndpointSliceTracker, recorder: EventRecorder | None,
                 max_endpoints_per_subset: int) -> None:
        self.client = client
        self.tracker = tracker
        self.recorder = recorder
        self.max_endpoints_per_subset = max_endpoints_per_subset
        self.metrics_cache = metrics.MetricsCache(max_endpoints_per_subset)

    def _event(self, endpoints: Obj, reason: str, message: str) -> None:
        if self.recorder is not None:
            self.recorder.event(endpoints, "Warning", reason, message, resource=ENDPOINTS)

    async def reconcile(self, endpoints: Obj, existing: Sequence[Obj]) -> None:
        """Bring the mirrored slices ``existing`` in line with ``endpoints``; raises on the first failed write."""
        desired = DesiredCalc()
        invalid = 0
        skipped = 0
        for subset in repack_subsets(endpoints.get("subsets") or ()):
            keys = desired.init_ports(subset.get("ports"))
            total = len(subset.get("addresses") or ()) + len(subset.get("notReadyAddresses") or ())
            added = 0
            for field_name, ready in (("addresses", True), ("notReadyAddresses", False)):
                for address in subset.get(field_name) or ():
                    # At most max_endpoints_per_subset per subset: one subset, one slice.
                    if added >= self.max_endpoints_per_subset:
                        break
                    if desired.add_address(address, keys, ready):
                        added += 1
                    else:
                        invalid += 1
                        _log.info("Address in Endpoints is not a valid IP, it will not be mirrored to an "
                                  "EndpointSlice", endpoints=_key(endpoints), IP=address.get("ip"))
            skipped += total - added

        metrics.ADDRESSES_SKIPPED_PER_SYNC.observe(skipped)
        if invalid > 0:
            self._event(endpoints, INVALID_IP_ADDRESS,
                        f"Skipped {invalid} invalid IP addresses when mirroring to EndpointSlices")
        if skipped > invalid:
            _log.info("Addresses in Endpoints were skipped due to exceeding MaxEndpointsPerSubset",
                      skippedAddresses=skipped, endpoints=_key(endpoints))
            self._event(endpoints, TOO_MANY_ADDRESSES_TO_MIRROR,
                        f"A max of {self.max_endpoints_per_subset} addresses can be mirrored to EndpointSlices per "
                        f"Endpoints subset. {skipped} addresses were skipped")

        existing_by_key = endpoint_slices_by_key(existing)
        efficiency: dict[AddrTypePortMapKey, metrics.EfficiencyInfo] = {}
        totals = TotalsByAction()
        slices = SlicesByAction()
        for key, desired_set in desired.endpoints_by_key.items():
            count = len(desired_set)
            group = existing_by_key.get(key, [])
            pm_slices, pm_totals = self.reconcile_by_port_mapping(
                endpoints, group, desired_set, desired.ports_by_key[key], key[0])
            slices.extend(pm_slices)
            totals.add(pm_totals)
            efficiency[key] = metrics.EfficiencyInfo(
                count, len(group) + len(pm_slices.to_create) - len(pm_slices.to_delete))
        # Port lists (or address types) nothing wants any more.
        for key, group in existing_by_key.items():
            if key not in desired.endpoints_by_key:
                slices.to_delete.extend(group)

        metrics.ENDPOINTS_ADDED_PER_SYNC.observe(totals.added)
        metrics.ENDPOINTS_UPDATED_PER_SYNC.observe(totals.updated)
        metrics.ENDPOINTS_REMOVED_PER_SYNC.observe(totals.removed)
        self.metrics_cache.update_endpoint_port_cache(
            (str(meta(endpoints).get("namespace") or ""), _name(endpoints)), efficiency)
        await self.finalize(endpoints, slices)

    def reconcile_by_port_mapping(self, endpoints: Obj, existing: Sequence[Obj], desired: EndpointSet,
                                  ports: Sequence[Mapping[str, Any]],
                                  address_type: str) -> tuple[SlicesByAction, TotalsByAction]:
        """The writes one group needs (``reconcileByPortMapping``). ``desired`` is consumed."""
        slices = SlicesByAction()
        if len(desired) == 0:
            slices.to_delete = list(existing)
            return slices, TotalsByAction(removed=sum(len(s.get("endpoints") or ()) for s in existing))

        if not existing:
            totals = TotalsByAction(added=len(desired))
        else:
            slices.to_delete = list(existing[1:])
            first = existing[0]
            totals = total_changes(first, desired)
            # Unchanged only if the endpoints, the labels and the annotations all still match.
            compare_labels = clone_and_remove_keys(_labels(first), LABEL_MANAGED_BY, LABEL_SERVICE_NAME)
            if (totals == TotalsByAction() and _labels(endpoints) == compare_labels
                    and mirrored_annotations(endpoints) == _annotations(first)
                    and not owned_by_other_endpoints(first, endpoints)):
                return slices, totals

        new_slice = new_endpoint_slice(endpoints, ports, address_type, _name(existing[0]) if existing else "")
        while len(desired) > 0 and len(new_slice["endpoints"]) < self.max_endpoints_per_subset:
            new_slice["endpoints"].append(desired.pop_any())
        if meta(new_slice).get("name"):
            slices.to_update = [new_slice]
        else:
            slices.to_create = [new_slice]
        return slices, totals

    async def finalize(self, endpoints: Obj, slices: SlicesByAction) -> None:
        """Write the plan: creates, updates, deletes; raises on the first failure (``finalize``)."""
        recycle_slices(slices)
        namespace = str(meta(endpoints).get("namespace") or "")
        ep = _key(endpoints)
        if meta(endpoints).get("deletionTimestamp") is None:
            # No new slices for an Endpoints being deleted.
            for slice_ in slices.to_create:
                try:
                    created = await self.client.create(ENDPOINTSLICES, slice_, namespace)
                except ApiError as err:
                    if has_status_cause(err, NAMESPACE_TERMINATING_CAUSE):
                        return  # every create fails until the namespace is gone: drop the item
                    raise ReconcileError(f"failed to create EndpointSlice for Endpoints {ep}: {err}") from err
                self.tracker.update(created)
                metrics.ENDPOINT_SLICE_CHANGES.labels("create").inc()

        for slice_ in slices.to_update:
            try:
                updated = await self.client.update(ENDPOINTSLICES, slice_)
            except ApiError as err:
                raise ReconcileError(
                    f"failed to update {_name(slice_)} EndpointSlice for Endpoints {ep}: {err}") from err
            self.tracker.update(updated)
            metrics.ENDPOINT_SLICE_CHANGES.labels("update").inc()

        for victim in slices.to_delete:
            try:
                await self.client.delete(ENDPOINTSLICES, _name(victim), namespace)
            except ApiError as err:
                raise ReconcileError(
                    f"failed to delete {_name(victim)} EndpointSlice for Endpoints {ep}: {err}") from err
            self.tracker.expect_deletion(victim)
            metrics.ENDPOINT_SLICE_CHANGES.labels("delete").inc()

    async def delete_endpoints(self, namespace: str, name: str, slices: Sequence[Obj]) -> None:
        """Delete every mirrored slice of an Endpoints and forget its figures (``deleteEndpoints``); the errors
        are reported together after trying them all."""
        self.metrics_cache.delete_endpoints((namespace, name))
        errors: list[ApiError] = []
        for slice_ in slices:
            try:
                await self.client.delete(ENDPOINTSLICES, _name(slice_), namespace)
            except ApiError as err:
                errors.append(err)
        if errors:
            raise ReconcileError(f"error(s) deleting {len(errors)}/{len(slices)} EndpointSlices for "
                                 f"{namespace}/{name} Endpoints, including: {errors[0]}")


class ReconcileError(Exception):
    """A failed write of a sync, worded as upstream's error."""
