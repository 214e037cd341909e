"""Test doubles and builders for the mirroring controller's tables: upstream's Endpoints subsets and existing
slices written compactly, the in-memory slice client shared with the EndpointSlice controller's tests, and
metric snapshots of the ``endpoint_slice_mirroring_controller_*`` series."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from controller_manager.controllers.endpointslicemirroring import Reconciler
from controller_manager.controllerutil.endpointslice import EndpointSliceTracker
from tests.controllers.endpointslice.fakes import FakeSliceClient
from tests.prometheus import sample_value

__all__ = ["FakeSliceClient", "addr", "endpoints", "metric_changes", "metric_snapshot", "new_reconciler", "port",
           "slice_", "subset"]

Obj = dict[str, Any]
NS = "test"


def port(name: str, number: int, protocol: str = "TCP", app_protocol: str | None = None) -> Obj:
    p: Obj = {"name": name, "port": number, "protocol": protocol}
    if app_protocol is not None:
        p["appProtocol"] = app_protocol
    return p


HTTP = port("http", 80)
HTTPS_UDP = port("https", 443, "UDP")


def addr(ip: str, hostname: str = "", node: str | None = None) -> Obj:
    a: Obj = {"ip": ip}
    if hostname:
        a["hostname"] = hostname
    if node is not None:
        a["nodeName"] = node
    return a


def subset(ports: Sequence[Obj], ready: Sequence[Obj] = (), not_ready: Sequence[Obj] = ()) -> Obj:
    s: Obj = {"ports": [dict(p) for p in ports]}
    if ready:
        s["addresses"] = [dict(a) for a in ready]
    if not_ready:
        s["notReadyAddresses"] = [dict(a) for a in not_ready]
    return s


def endpoints(subsets: Sequence[Obj], name: str = "test-ep", labels: dict[str, str] | None = None,
              annotations: dict[str, str] | None = None, uid: str = "") -> Obj:
    metadata: Obj = {"name": name, "namespace": NS}
    if labels is not None:
        metadata["labels"] = dict(labels)
    if annotations is not None:
        metadata["annotations"] = dict(annotations)
    if uid:
        metadata["uid"] = uid
    return {"apiVersion": "v1", "kind": "Endpoints", "metadata": metadata, "subsets": [dict(s) for s in subsets]}


def slice_(name: str, ports: Sequence[Obj], endpoints_: Sequence[Obj] = (), address_type: str = "IPv4",
           annotations: dict[str, str] | None = None, owner_uid: str | None = None) -> Obj:
    """An existing EndpointSlice as upstream's tables write one (``ready`` given per endpoint)."""
    metadata: Obj = {"name": name, "namespace": NS}
    if annotations is not None:
        metadata["annotations"] = dict(annotations)
    if owner_uid is not None:
        metadata["ownerReferences"] = [{"apiVersion": "v1", "kind": "Endpoints", "name": "test-ep",
                                        "uid": owner_uid}]
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": metadata,
            "addressType": address_type, "ports": [dict(p) for p in ports], "endpoints": [dict(e) for e in endpoints_]}


def new_reconciler(client: FakeSliceClient, max_endpoints_per_subset: int = 1000) -> Reconciler:
    return Reconciler(client, EndpointSliceTracker(), None, max_endpoints_per_subset)


_PREFIX = "endpoint_slice_mirroring_controller_"
_SERIES = {
    "added": ("endpoints_added_per_sync_sum", {}),
    "updated": ("endpoints_updated_per_sync_sum", {}),
    "removed": ("endpoints_removed_per_sync_sum", {}),
    "skipped": ("addresses_skipped_per_sync_sum", {}),
    "created": ("changes_total", {"operation": "create"}),
    "updated_slices": ("changes_total", {"operation": "update"}),
    "deleted": ("changes_total", {"operation": "delete"}),
}
_GAUGES = {"desired_slices": "desired_endpoint_slices", "actual_slices": "num_endpoint_slices",
           "desired_endpoints": "endpoints_desired"}


def metric_snapshot() -> dict[str, float]:
    """The cumulative series (sums of histograms, counters) now; compare two with :func:`metric_changes`."""
    return {key: sample_value(_PREFIX + name, labels) or 0.0 for key, (name, labels) in _SERIES.items()}


def metric_changes(before: dict[str, float]) -> dict[str, float]:
    """What moved since ``before``, plus the gauges' current values (upstream's ``expectMetrics``)."""
    after = metric_snapshot()
    out = {key: after[key] - before[key] for key in after}
    out.update({key: sample_value(_PREFIX + name) or 0.0 for key, name in _GAUGES.items()})
    return out
