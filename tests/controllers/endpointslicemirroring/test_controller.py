"""Upstream's controller tables (``endpointslicemirroring_controller_test.go``): TestSyncEndpoints (one sync of a
key against objects stored in an in-process kube-sim, counting the slice writes it makes), TestShouldMirror and
TestEndpointSlicesMirroredForService."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from controller_manager.api.resources import ENDPOINTS, ENDPOINTSLICES, SERVICES, Resource
from controller_manager.controllers.endpointslicemirroring import CONTROLLER_NAME, EndpointSliceMirroringController
from controller_manager.controllers.endpointslicemirroring.controller import mirrored_index
from controller_manager.controllers.endpointslicemirroring.utils import (
    LABEL_SKIP_MIRROR,
    LEADER_ELECTION_ANNOTATION,
    should_mirror,
)
from controller_manager.controllerutil.endpointslice import LABEL_MANAGED_BY, LABEL_SERVICE_NAME
from controller_manager.runtime.controller import ControllerContext
from controller_manager.runtime.events import EventBroadcaster
from controller_manager.runtime.informers import SharedInformerFactory
from tests.controllers.harness import Harness, controller_harness, wait_for

Obj = dict[str, Any]
NS = "default"
NAME = "testing-sync-endpoints"


class RecordingWriter:
    """Wraps the controller's client: counts the slice writes of a sync (upstream's ``client.Actions()``)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.actions: list[str] = []

    async def create(self, res: Resource, obj: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]:
        self.actions.append("create")
        result: dict[str, Any] = await self.inner.create(res, obj, namespace)
        return result

    async def update(self, res: Resource, obj: Mapping[str, Any]) -> dict[str, Any]:
        self.actions.append("update")
        result: dict[str, Any] = await self.inner.update(res, obj)
        return result

    async def delete(self, res: Resource, name: str, namespace: str | None = None) -> Any:
        self.actions.append("delete")
        return await self.inner.delete(res, name, namespace)


@contextlib.asynccontextmanager
async def synced_controller(h: Harness) -> AsyncIterator[tuple[EndpointSliceMirroringController, RecordingWriter]]:
    """A controller whose caches hold what the cluster has, run by no worker: the test calls ``sync``."""
    factory = SharedInformerFactory(h.client, h.clock)
    events = EventBroadcaster(h.client, h.clock)
    ctrl = EndpointSliceMirroringController(ControllerContext(client=h.client, informers=factory, clock=h.clock,
                                                              events=events, options={}))
    writer = RecordingWriter(h.client)
    ctrl.reconciler.client = writer
    tasks = [asyncio.create_task(factory.run()), asyncio.create_task(events.run())]
    try:
        assert await factory.wait_for_cache_sync(timeout=15.0)
        yield ctrl, writer
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def addresses(n: int) -> list[Obj]:
    """``generateAddresses``."""
    return [{"ip": f"10.0.{i // 255}.{i % 255}"} for i in range(n)]


@dataclass
class SyncCase:
    name: str
    service: Obj | None
    subsets: list[Obj]
    endpoints_labels: dict[str, str] = field(default_factory=dict)
    slices: list[Obj] = field(default_factory=list)
    actions: int = 0
    num_slices: int = 0
    event: str | None = None


PORT_80 = [{"port": 80}]
ONE_ADDRESS = [{"ports": PORT_80, "addresses": [{"ip": "10.0.0.1"}]}]


def _slice(labels: dict[str, str]) -> Obj:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": f"{NAME}-1", "labels": labels}, "addressType": "IPv4", "endpoints": []}


SYNC_CASES = [
    SyncCase("Endpoints with no addresses", {}, [{"ports": PORT_80}]),
    SyncCase("Endpoints with skip label true", {}, ONE_ADDRESS, {LABEL_SKIP_MIRROR: "true"}),
    SyncCase("Endpoints with skip label false", {}, ONE_ADDRESS, {LABEL_SKIP_MIRROR: "false"}, actions=1,
             num_slices=1),
    SyncCase("Endpoints with missing Service", None, ONE_ADDRESS),
    SyncCase("Endpoints with Service with selector specified", {"selector": {"foo": "bar"}}, ONE_ADDRESS),
    SyncCase("Existing EndpointSlices that need to be cleaned up", {}, [{"ports": PORT_80}],
             slices=[_slice({LABEL_SERVICE_NAME: NAME, LABEL_MANAGED_BY: CONTROLLER_NAME})], actions=1),
    SyncCase("Existing EndpointSlices managed by a different controller, no addresses to sync", {},
             [{"ports": PORT_80}], slices=[_slice({LABEL_MANAGED_BY: "something-else"})]),
    SyncCase("Endpoints with 1000 addresses", {}, [{"ports": PORT_80, "addresses": addresses(1000)}], actions=1,
             num_slices=1),
    SyncCase("Endpoints with 1001 addresses - 1 should not be mirrored", {},
             [{"ports": PORT_80, "addresses": addresses(1001)}], actions=1, num_slices=1,
             event="A max of 1000 addresses can be mirrored to EndpointSlices per Endpoints subset. 1 addresses were "
                   "skipped"),
]


@pytest.mark.parametrize("case", SYNC_CASES, ids=[c.name for c in SYNC_CASES])
async def test_sync_endpoints(case: SyncCase) -> None:
    async with controller_harness(nodes=0, start=False) as h:
        if case.service is not None:
            spec = {"ports": [{"port": 80}], **case.service}
            await h.client.create(SERVICES, {"metadata": {"name": NAME}, "spec": spec}, NS)
        # A Service with a selector gets its Endpoints from the endpoints controller (not running here): this
        # one is written by hand either way, as the table's is.
        await h.client.create(ENDPOINTS, {"metadata": {"name": NAME, "labels": case.endpoints_labels},
                                          "subsets": case.subsets}, NS)
        for s in case.slices:
            await h.client.create(ENDPOINTSLICES, s, NS)
        async with synced_controller(h) as (ctrl, writer):
            await ctrl.sync(f"{NS}/{NAME}")
            assert len(writer.actions) == case.actions, writer.actions
            mirrored = await h.list_objects(ENDPOINTSLICES, NS,
                                            label_selector=f"{LABEL_MANAGED_BY}={CONTROLLER_NAME}")
            assert len(mirrored) == case.num_slices
            if case.num_slices:
                [s] = mirrored
                mirrored_ips = sorted(e["addresses"][0] for e in s["endpoints"])
                listed = [a["ip"] for sub in case.subsets for a in sub.get("addresses", ())]
                assert len(mirrored_ips) == min(len(listed), 1000)
                assert set(mirrored_ips) <= set(listed)
            if case.event is not None:
                async def warned() -> Obj | None:
                    events = await h.events_for(NAME, NS)
                    return next((e for e in events if e["reason"] == "TooManyAddressesToMirror"), None)

                event = await wait_for(warned, what="the TooManyAddressesToMirror event")
                assert (event["type"], event["message"]) == ("Warning", case.event)
                assert event["involvedObject"]["kind"] == "Endpoints"
                assert event["source"]["component"] == "endpoint-slice-mirroring-controller"


@pytest.mark.parametrize(("labels", "annotations", "expected"), [
    ({}, {}, True),
    ({LABEL_SKIP_MIRROR: "true"}, {}, False),
    ({LABEL_SKIP_MIRROR: "invalid"}, {}, True),
    ({}, {LEADER_ELECTION_ANNOTATION: ""}, False),
], ids=["Standard Endpoints", "Endpoints with skip-mirror=true", "Endpoints with skip-mirror=invalid",
        "Endpoints with leader election annotation"])
def test_should_mirror(labels: dict[str, str], annotations: dict[str, str], expected: bool) -> None:
    ep = {"metadata": {"name": "test-endpoints", "labels": labels, "annotations": annotations}}
    assert should_mirror(ep) is expected


@pytest.mark.parametrize(("namespace", "labels", "expected"), [
    ("ns1", {LABEL_SERVICE_NAME: "svc1", LABEL_MANAGED_BY: CONTROLLER_NAME}, True),
    ("ns2", {LABEL_SERVICE_NAME: "svc1", LABEL_MANAGED_BY: CONTROLLER_NAME}, False),
    ("ns1", {LABEL_SERVICE_NAME: "svc2", LABEL_MANAGED_BY: CONTROLLER_NAME}, False),
    ("ns1", {LABEL_SERVICE_NAME: "svc1", LABEL_MANAGED_BY: CONTROLLER_NAME + "foo"}, False),
    ("ns1", {LABEL_SERVICE_NAME: "svc1"}, False),
    ("ns1", {LABEL_MANAGED_BY: CONTROLLER_NAME}, False),
], ids=["Service with matching EndpointSlice", "Service with EndpointSlice that has different namespace",
        "Service with EndpointSlice that has different service name",
        "Service with EndpointSlice that has different controller name",
        "Service with EndpointSlice that has missing controller name",
        "Service with EndpointSlice that has missing service name"])
def test_endpoint_slices_mirrored_for_service(namespace: str, labels: dict[str, str], expected: bool) -> None:
    """``endpointSlicesMirroredForService`` is the informer index: ns1/svc1 lists the slice or not."""
    slice_ = {"metadata": {"name": "example-1", "namespace": namespace, "labels": labels}}
    assert ("ns1/svc1" in mirrored_index(slice_)) is expected
