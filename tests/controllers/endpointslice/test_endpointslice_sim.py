"""The EndpointSlice controller against an in-process kube-sim: what any client sees of a Service's slices.

kube-sim allocates the Services' cluster IPs and defaults their IP families at create, and maintains the
EndpointSlices' ``metadata.generation`` (on which the controller's stale-cache guard rests), as a real API server
does; the cached pods keep their container ports, needed to resolve named target ports.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from controller_manager.api.resources import ENDPOINTSLICES, EVENTS, PODS, SERVICES
from controller_manager.controllers.endpointslice import CONTROLLER_QUALIFIED_NAME, EndpointSliceController
from tests.controllers.harness import Harness, controller_harness, wait_for

NS = "default"
GATE = "example.com/gate"


def _service(name: str = "web", selector: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"ports": [{"name": "http", "port": 80, "targetPort": "http"}]}
    if selector is not None:
        spec["selector"] = selector
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": NS, "labels": {"tier": "fe"}}, "spec": spec}


def _pod(name: str, app: str = "web", gate: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "web", "image": "nginx",
                                            "ports": [{"name": "http", "containerPort": 8080}]}]}
    if gate:
        spec["readinessGates"] = [{"conditionType": GATE}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, "labels": {"app": app}},
            "spec": spec}


async def _slices(h: Harness, service: str = "web") -> list[dict[str, Any]]:
    return await h.list_objects(ENDPOINTSLICES, NS, label_selector=f"kubernetes.io/service-name={service}")


async def _set_gate(h: Harness, pod: str, status: str) -> None:
    await h.client.patch(PODS, pod, {"status": {"conditions": [{"type": GATE, "status": status}]}}, NS,
                         patch_type="strategic", subresource="status")


def _by_pod(slices: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["targetRef"]["name"]: e for s in slices for e in s.get("endpoints") or ()}


async def test_service_gets_one_slice_of_ready_endpoints_and_follows_readiness() -> None:
    async with controller_harness(EndpointSliceController) as h:
        await h.client.create(SERVICES, _service(selector={"app": "web"}), NS)
        await h.client.create(SERVICES, _service("manual"), NS)  # no selector: not ours
        for i in range(3):
            await h.client.create(PODS, _pod(f"web-{i}", gate=i == 2), NS)
        await h.client.create(PODS, _pod("other", app="other"), NS)
        await _set_gate(h, "web-2", "True")

        async def three_ready() -> list[dict[str, Any]] | None:
            slices = await _slices(h)
            endpoints = _by_pod(slices)
            ok = len(endpoints) == 3 and all(e["conditions"]["ready"] for e in endpoints.values())
            return slices if ok else None

        [slice_] = await wait_for(three_ready, what="one slice with three ready endpoints")
        m = slice_["metadata"]
        assert m["name"].startswith("web-")
        assert m["labels"] == {"kubernetes.io/service-name": "web", "tier": "fe",
                               "endpointslice.kubernetes.io/managed-by": CONTROLLER_QUALIFIED_NAME}
        svc = await h.client.get(SERVICES, "web", NS)
        [owner] = m["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == ("Service", "web",
                                                                                    svc["metadata"]["uid"], True)
        assert slice_["addressType"] == "IPv4"
        assert slice_["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
        pods = {p["metadata"]["name"]: p for p in await h.pods(NS)}
        for name, endpoint in _by_pod([slice_]).items():
            pod = pods[name]
            assert endpoint["addresses"] == [pod["status"]["podIP"]]
            assert endpoint["nodeName"] == pod["spec"]["nodeName"]
            assert endpoint["targetRef"] == {"kind": "Pod", "namespace": NS, "name": name,
                                             "uid": pod["metadata"]["uid"]}
            assert endpoint["conditions"] == {"ready": True, "serving": True, "terminating": False}

        await _set_gate(h, "web-2", "False")

        async def web2_unready() -> bool:
            endpoints = _by_pod(await _slices(h))
            return len(endpoints) == 3 and endpoints["web-2"]["conditions"] == {
                "ready": False, "serving": False, "terminating": False}

        await wait_for(web2_unready, what="web-2's endpoint to turn unready")
        # Updated in place: still one slice, the other endpoints untouched.
        slices = await _slices(h)
        assert [s["metadata"]["name"] for s in slices] == [m["name"]]
        assert await _slices(h, "manual") == []


async def test_250_pods_are_packed_100_100_50() -> None:
    """The pods run before the Service exists, so one sync sees all 250 (slices filled while pods come up one by
    one are packed differently, by design: upstream never repacks slices just to tidy them)."""
    async with controller_harness(EndpointSliceController) as h:
        limit = asyncio.Semaphore(20)

        async def create(i: int) -> None:
            async with limit:
                await h.client.create(PODS, _pod(f"web-{i}"), NS)

        await asyncio.gather(*(create(i) for i in range(250)))

        async def all_running() -> bool:
            return sum(1 for p in await h.pods(NS) if (p.get("status") or {}).get("podIP")) == 250

        await wait_for(all_running, timeout=60.0, what="250 pods with an IP")
        await h.client.create(SERVICES, _service(selector={"app": "web"}), NS)

        async def packed() -> list[int] | None:
            sizes = sorted(len(s.get("endpoints") or ()) for s in await _slices(h))
            return sizes if sizes == [50, 100, 100] else None

        await wait_for(packed, timeout=30.0, what="three slices of 100, 100 and 50")
        slices = await _slices(h)
        assert len(_by_pod(slices)) == 250


async def test_deleted_service_slices_are_left_to_gc_and_replaced_for_a_new_service() -> None:
    async with controller_harness(EndpointSliceController) as h:
        await h.client.create(SERVICES, _service(selector={"app": "web"}), NS)
        await h.client.create(PODS, _pod("web-0"), NS)

        async def one_endpoint() -> list[dict[str, Any]] | None:
            slices = await _slices(h)
            return slices if len(_by_pod(slices)) == 1 else None

        [old] = await wait_for(one_endpoint, what="the first Service's slice")
        await h.client.delete(SERVICES, "web", NS)
        # The controller itself never deletes a gone Service's slices (they are the garbage collector's); it
        # forgets the Service. A new Service of the same name does not adopt them: they are replaced.
        await h.client.create(SERVICES, _service(selector={"app": "web"}), NS)
        new_uid = (await h.client.get(SERVICES, "web", NS))["metadata"]["uid"]

        async def replaced() -> list[dict[str, Any]] | None:
            slices = await _slices(h)
            owners = {ref["uid"] for s in slices for ref in s["metadata"]["ownerReferences"]}
            return slices if owners == {new_uid} and len(_by_pod(slices)) == 1 else None

        [new] = await wait_for(replaced, what="the old slice replaced by one of the new Service")
        # The old slice was turned into the new one (a create paired with a delete is an update), or deleted.
        assert new["metadata"]["ownerReferences"][0]["uid"] != old["metadata"]["ownerReferences"][0]["uid"]
        events = [e for e in await h.list_objects(EVENTS, NS) if e.get("reason") == "FailedToUpdateEndpointSlices"]
        assert events == []
