"""Upstream's TestPCRCleaner table (``pkg/controller/certificates/cleaner/pcrcleaner_test.go``): one pass of the
cleaner at 00:30 deletes the requests created at 00:14:59 and keeps those created at 00:15:01, pending or
terminal; and the cleaner run by the manager against an in-process kube-sim, with its clock moved on."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any

import pytest

from controller_manager.api.resources import PODCERTIFICATEREQUESTS, Resource
from controller_manager.client.errors import NotFound
from controller_manager.clock import FakeClock
from controller_manager.controllers.certificates import PCRCleanerController
from controller_manager.controllers.certificates.pcrcleaner import POLLING_INTERVAL, THRESHOLD
from controller_manager.runtime.controller import ControllerContext
from controller_manager.runtime.events import EventBroadcaster
from controller_manager.runtime.informers import SharedInformerFactory
from tests.controllers.harness import controller_harness, wait_for

Obj = dict[str, Any]


def at(stamp: str) -> float:
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


NOW = at("2025-01-01T00:30:00Z")


def pcr(name: str = "bar", created: str = "2025-01-01T00:15:01Z", status: Obj | None = None) -> Obj:
    obj: Obj = {"apiVersion": "certificates.k8s.io/v1", "kind": "PodCertificateRequest",
                "metadata": {"namespace": "foo", "name": name, "uid": f"uid-{name}", "resourceVersion": "1"},
                "spec": {"signerName": "foo.com/abc", "podName": "pod-1", "podUID": "pod-1-uid",
                         "serviceAccountName": "sa-1", "serviceAccountUID": "sa-uid-1", "nodeName": "node-1",
                         "nodeUID": "node-uid-1", "maxExpirationSeconds": 86400, "stubPKCS10Request": "AAAA"}}
    if created:
        obj["metadata"]["creationTimestamp"] = created
    if status is not None:
        obj["status"] = status
    return obj


DENIED = {"conditions": [{"type": "Denied", "status": "True", "reason": "Foo", "message": "abc"}]}


@dataclass
class DeleteRecorder:
    deleted: list[tuple[str, str, str | None]] = field(default_factory=list)
    missing: bool = False

    async def delete(self, res: Resource, name: str, namespace: str | None = None, **options: Any) -> Obj:
        self.deleted.append((str(namespace), name, options.get("uid")))
        if self.missing:
            raise NotFound(404, "NotFound", f'podcertificaterequests.certificates.k8s.io "{name}" not found')
        return {}


def new_controller(client: DeleteRecorder) -> PCRCleanerController:
    clock = FakeClock(NOW)
    ctx = ControllerContext(client=client, informers=SharedInformerFactory(client, clock),  # type: ignore[arg-type]
                            clock=clock, events=EventBroadcaster(client, clock))  # type: ignore[arg-type]
    return PCRCleanerController(ctx)


@pytest.mark.parametrize(("obj", "deleted"), [
    (pcr(created="2025-01-01T00:15:01Z"), False),
    (pcr(created="2025-01-01T00:14:59Z"), True),
    (pcr(created="2025-01-01T00:15:01Z", status=DENIED), False),
    (pcr(created="2025-01-01T00:14:59Z", status=DENIED), True),
], ids=["Pending request within the threshold should be left alone",
        "Pending request outside the threshold should be deleted",
        "Terminal request within the threshold should be left alone",
        "Terminal request outside the threshold should be deleted"])
async def test_pcr_cleaner(obj: Obj, deleted: bool) -> None:
    client = DeleteRecorder()
    controller = new_controller(client)
    controller.informer.store._put("foo/bar", obj)
    await controller.clean_once()
    # The UID rides along as a precondition: a request recreated under the name is not taken for this one.
    assert client.deleted == ([("foo", "bar", "uid-bar")] if deleted else [])


async def test_a_request_already_gone_is_fine() -> None:
    client = DeleteRecorder(missing=True)
    controller = new_controller(client)
    for name in ("a", "b"):
        controller.informer.store._put(f"foo/{name}", pcr(name, created="2025-01-01T00:00:00Z"))
    await controller.clean_once()
    assert sorted(n for _, n, _ in client.deleted) == ["a", "b"]


async def test_manager_deletes_requests_fifteen_minutes_old() -> None:
    """Against kube-sim: the requests' creation times are the server's; the controller's clock starts 14 minutes
    later (first pass: nothing old enough), then moves one polling interval on (second pass: both go)."""
    start = datetime.datetime.now(datetime.UTC).timestamp()
    clock = FakeClock(start + THRESHOLD - 60)
    async with controller_harness(PCRCleanerController, nodes=0, start=False, controller_clock=clock) as h:
        for name in ("pending", "denied"):
            created = await h.client.create(PODCERTIFICATEREQUESTS, {**pcr(name, created=""), "metadata": {
                "name": name}}, "default")
        await h.client.patch(PODCERTIFICATEREQUESTS, "denied", {"status": DENIED | {"conditions": [
            {**DENIED["conditions"][0], "lastTransitionTime": created["metadata"]["creationTimestamp"]}]}},
            "default", subresource="status")
        await h.start()

        async def listed() -> list[Obj]:
            return await h.list_objects(PODCERTIFICATEREQUESTS, "default")

        async def slept() -> bool:
            return clock.pending_timers() > 0  # the first pass is done: the loop sleeps

        await wait_for(slept, what="the cleaner's first pass")
        assert len(await listed()) == 2
        clock.advance(POLLING_INTERVAL)

        async def gone() -> bool:
            return not await listed()

        await wait_for(gone, what="both requests deleted")
