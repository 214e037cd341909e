"""Test doubles for the EndpointSlice controller: a client that keeps EndpointSlices in memory and records every
write (upstream's fake clientset with its generateName/generation reactors), object builders mirroring upstream's
test helpers (``newPod``, ``newServiceAndEndpointMeta``, ``newEmptyEndpointSlice``), and metric snapshots.
"""

from __future__ import annotations

import copy
import ipaddress
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller_manager.api.resources import Resource
from controller_manager.client.errors import ApiError, NotFound
from controller_manager.controllers.endpointslice import CONTROLLER_QUALIFIED_NAME, Reconciler
from controller_manager.controllers.endpointslice.util import service_controller_ref
from controller_manager.controllerutil.endpointslice import EndpointSliceTracker
from tests.prometheus import sample_value

CONTROLLER_NAME = CONTROLLER_QUALIFIED_NAME
Obj = dict[str, Any]


@dataclass
class FakeSliceClient:
    """EndpointSlices in memory; ``actions`` lists ``(verb, name)`` of every write, in order."""

    slices: dict[str, Obj] = field(default_factory=dict)
    actions: list[tuple[str, str]] = field(default_factory=list)
    fail: dict[str, ApiError] = field(default_factory=dict)  # verb -> error to raise
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def verbs(self) -> list[str]:
        return [verb for verb, _ in self.actions]

    def list(self) -> list[Obj]:
        return [copy.deepcopy(s) for s in self.slices.values()]

    def seed(self, slices: Sequence[Mapping[str, Any]]) -> None:
        """Store slices as they are (test setup: not recorded as actions)."""
        for s in slices:
            stored = copy.deepcopy(dict(s))
            stored["metadata"].setdefault("uid", f"uid-{stored['metadata']['name']}")
            stored["metadata"].setdefault("generation", 1)
            self.slices[stored["metadata"]["name"]] = stored

    async def create(self, res: Resource, obj: Mapping[str, Any], namespace: str | None = None) -> Obj:
        stored = copy.deepcopy(dict(obj))
        m = stored["metadata"]
        if not m.get("name"):
            m["name"] = f"{m.pop('generateName', '')}{next(self._ids):08d}"
        self.actions.append(("create", m["name"]))
        if "create" in self.fail:
            raise self.fail["create"]
        m["namespace"] = namespace or m.get("namespace")
        m["uid"] = f"uid-{m['name']}"
        m["generation"] = 1
        m["resourceVersion"] = str(next(self._ids))
        self.slices[m["name"]] = stored
        return copy.deepcopy(stored)

    async def update(self, res: Resource, obj: Mapping[str, Any]) -> Obj:
        stored = copy.deepcopy(dict(obj))
        m = stored["metadata"]
        self.actions.append(("update", m["name"]))
        if "update" in self.fail:
            raise self.fail["update"]
        old = self.slices.get(m["name"])
        if old is None:
            raise NotFound(404, "NotFound", f'endpointslices.discovery.k8s.io "{m["name"]}" not found')
        m["uid"] = old["metadata"]["uid"]
        m["generation"] = old["metadata"].get("generation", 0) + 1
        m["resourceVersion"] = str(next(self._ids))
        self.slices[m["name"]] = stored
        return copy.deepcopy(stored)

    async def delete(self, res: Resource, name: str, namespace: str | None = None, **_: Any) -> Obj:
        self.actions.append(("delete", name))
        if "delete" in self.fail:
            raise self.fail["delete"]
        if self.slices.pop(name, None) is None:
            raise NotFound(404, "NotFound", f'endpointslices.discovery.k8s.io "{name}" not found')
        return {"kind": "Status", "status": "Success"}


def new_pod(n: int, namespace: str = "test", ready: bool = True, terminating: bool = False) -> Obj:
    """``newPod``: pod<n> on node-1 with IP 1.2.3.4 + n, labels foo=bar. (Upstream writes ``1.2.3.<4+n>``, which
    is no IP at all past n = 251 and ends up as the address "<nil>"; this one stays valid.)"""
    meta: Obj = {"namespace": namespace, "name": f"pod{n}", "labels": {"foo": "bar"}, "resourceVersion": str(n)}
    if terminating:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    ip = str(ipaddress.IPv4Address("1.2.3.4") + n)
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": meta,
        "spec": {"containers": [{"name": "container-1"}], "nodeName": "node-1"},
        "status": {"podIP": ip, "podIPs": [{"ip": ip}],
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def new_service(name: str = "foo", namespace: str = "test") -> Obj:
    """``newServiceAndEndpointMeta``'s Service: port <name> -> 80/TCP, selector foo=bar, IPv4, no cluster IP."""
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "uid": f"{namespace}-{name}"},
        "spec": {"ports": [{"name": name, "targetPort": 80, "protocol": "TCP"}], "selector": {"foo": "bar"},
                 "ipFamilies": ["IPv4"]},
    }


def service_ports(name: str = "foo") -> list[Obj]:
    """``newServiceAndEndpointMeta``'s endpoint ports."""
    return [{"name": name, "port": 80, "protocol": "TCP"}]


def new_empty_slice(n: int, service: Mapping[str, Any], ports: Sequence[Mapping[str, Any]] | None = None,
                    address_type: str = "IPv4") -> Obj:
    """``newEmptyEndpointSlice``: <service>-<n>, owned by the Service, no labels, no endpoints."""
    name = service["metadata"]["name"]
    return {
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": f"{name}-{n}", "namespace": service["metadata"]["namespace"],
                     "ownerReferences": [service_controller_ref(service)]},
        "ports": [dict(p) for p in (ports if ports is not None else service_ports(name))],
        "addressType": address_type,
        "endpoints": [],
    }


def node(name: str = "node-1", zone: str | None = None) -> Obj:
    labels = {"topology.kubernetes.io/zone": zone, "topology.kubernetes.io/region": "us-central1"} if zone else {}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


def new_reconciler(client: FakeSliceClient, nodes: Sequence[Mapping[str, Any]] | None = None,
                   max_endpoints: int = 100) -> Reconciler:
    by_name = {n["metadata"]["name"]: n for n in (nodes if nodes is not None else [node()])}
    return Reconciler(client, by_name.get, max_endpoints, EndpointSliceTracker(), CONTROLLER_NAME)


# --- metrics -----------------------------------------------------------------------------------------------

_SAMPLES: dict[str, tuple[str, dict[str, str]]] = {
    "desired_slices": ("endpoint_slice_controller_desired_endpoint_slices", {}),
    "actual_slices": ("endpoint_slice_controller_num_endpoint_slices", {}),
    "desired_endpoints": ("endpoint_slice_controller_endpoints_desired", {}),
    "added": ("endpoint_slice_controller_endpoints_added_per_sync_sum", {}),
    "removed": ("endpoint_slice_controller_endpoints_removed_per_sync_sum", {}),
    "created": ("endpoint_slice_controller_changes_total", {"operation": "create"}),
    "updated": ("endpoint_slice_controller_changes_total", {"operation": "update"}),
    "deleted": ("endpoint_slice_controller_changes_total", {"operation": "delete"}),
    "changed_per_sync": ("endpoint_slice_controller_endpointslices_changed_per_sync_sum",
                         {"topology": "Disabled", "traffic_distribution": ""}),
}
_GAUGES = frozenset({"desired_slices", "actual_slices", "desired_endpoints"})


def metric_snapshot() -> dict[str, float]:
    return {k: sample_value(n, labels) or 0.0 for k, (n, labels) in _SAMPLES.items()}


def metric_changes(before: Mapping[str, float]) -> dict[str, float]:
    """Gauges as they are now; counters and histogram sums as the change since ``before`` (upstream resets
    its metrics per test, which a shared registry cannot)."""
    now = metric_snapshot()
    return {k: now[k] if k in _GAUGES else now[k] - before[k] for k in now}


def expected_metrics(desired_slices: int, actual_slices: int, desired_endpoints: int, added: int = 0,
                     removed: int = 0, created: int = 0, updated: int = 0, deleted: int = 0,
                     changed_per_sync: int = 0) -> dict[str, float]:
    return {"desired_slices": desired_slices, "actual_slices": actual_slices, "desired_endpoints": desired_endpoints,
            "added": added, "removed": removed, "created": created, "updated": updated, "deleted": deleted,
            "changed_per_sync": changed_per_sync}


def lengths(slices: Sequence[Mapping[str, Any]]) -> list[int]:
    return sorted(len(s.get("endpoints") or []) for s in slices)
