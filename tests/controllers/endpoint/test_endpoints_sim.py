"""The Endpoints controller against an in-process kube-sim: what any client sees of a Service's Endpoints.

kube-sim's kubelets run the pods and set them Ready (a readiness gate holds one back until the test flips it),
allocate their IPs and report their nodes; kube-sim allocates the Services' cluster IPs and defaults their
ports (targetPort, protocol) and IP families, as a real API server does.
"""

from __future__ import annotations

from typing import Any

from controller_manager.api.resources import ENDPOINTS, PODS, SERVICES
from controller_manager.client.errors import NotFound
from controller_manager.controllers.endpoint import EndpointsController
from tests.controllers.harness import Harness, controller_harness, wait_for

NS = "default"
GATE = "example.com/gate"
MANAGED_BY = "endpoints.kubernetes.io/managed-by"


def _service(name: str = "web", selector: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"ports": [{"name": "http", "port": 80, "targetPort": "http"}], **spec}
    if selector is not None:
        body["selector"] = selector
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": NS, "labels": {"tier": "fe"}}, "spec": body}


def _pod(name: str, app: str = "web", gate: bool = False, port: int = 8080) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "web", "image": "nginx",
                                            "ports": [{"name": "http", "containerPort": port}]}]}
    if gate:
        spec["readinessGates"] = [{"conditionType": GATE}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, "labels": {"app": app}},
            "spec": spec}


async def _set_gate(h: Harness, pod: str, status: str) -> None:
    await h.client.patch(PODS, pod, {"status": {"conditions": [{"type": GATE, "status": status}]}}, NS,
                         patch_type="strategic", subresource="status")


async def _endpoints(h: Harness, name: str = "web") -> dict[str, Any] | None:
    try:
        return await h.client.get(ENDPOINTS, name, NS)
    except NotFound:
        return None


def _names(ep: dict[str, Any] | None, field: str) -> list[str]:
    return sorted(a["targetRef"]["name"] for s in (ep or {}).get("subsets") or () for a in s.get(field) or ())


async def _until(h: Harness, ready: list[str], not_ready: list[str], name: str = "web") -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        ep = await _endpoints(h, name)
        ok = ep is not None and _names(ep, "addresses") == ready and _names(ep, "notReadyAddresses") == not_ready
        return ep if ok else None

    return await wait_for(check, what=f"{name}: ready {ready}, not ready {not_ready}")


async def test_endpoints_follow_pod_readiness() -> None:
    async with controller_harness(EndpointsController) as h:
        await h.client.create(SERVICES, _service(selector={"app": "web"}), NS)
        await h.client.create(SERVICES, _service("manual"), NS)  # no selector: not ours
        for i in range(3):
            await h.client.create(PODS, _pod(f"web-{i}", gate=i == 2), NS)
        await h.client.create(PODS, _pod("other", app="other"), NS)

        ep = await _until(h, ["web-0", "web-1"], ["web-2"])
        m = ep["metadata"]
        assert m["labels"] == {"tier": "fe", MANAGED_BY: "endpoint-controller"}
        [subset] = ep["subsets"]
        assert subset["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
        pods = {p["metadata"]["name"]: p for p in await h.pods(NS)}
        for address in subset["addresses"] + subset["notReadyAddresses"]:
            pod = pods[address["targetRef"]["name"]]
            assert address == {"ip": pod["status"]["podIP"], "nodeName": pod["spec"]["nodeName"],
                               "targetRef": {"kind": "Pod", "namespace": NS, "name": pod["metadata"]["name"],
                                             "uid": pod["metadata"]["uid"]}}
        assert await _endpoints(h, "manual") is None

        await _set_gate(h, "web-2", "True")
        await _until(h, ["web-0", "web-1", "web-2"], [])
        await _set_gate(h, "web-2", "False")
        await _until(h, ["web-0", "web-1"], ["web-2"])
        await h.client.delete(PODS, "web-0", NS)
        await _until(h, ["web-1"], ["web-2"])

        # The Service goes: so does its Endpoints.
        await h.client.delete(SERVICES, "web", NS)
        await wait_for(lambda: _gone(h, "web"), what="the Endpoints deleted")


async def _gone(h: Harness, name: str) -> bool:
    return await _endpoints(h, name) is None


async def test_publish_not_ready_headless_and_named_ports() -> None:
    async with controller_harness(EndpointsController) as h:
        await h.client.create(PODS, _pod("a", gate=True, port=8080), NS)
        await h.client.create(PODS, _pod("b", port=9090), NS)
        await h.client.create(SERVICES, _service("all", {"app": "web"}, publishNotReadyAddresses=True), NS)
        await h.client.create(SERVICES, {"apiVersion": "v1", "kind": "Service",
                                         "metadata": {"name": "bare", "namespace": NS},
                                         "spec": {"clusterIP": "None", "selector": {"app": "web"}}}, NS)
        ep = await _until(h, ["a", "b"], [], name="all")
        assert sorted((s["ports"][0]["port"], _names({"subsets": [s]}, "addresses")[0]) for s in ep["subsets"]) == [
            (8080, "a"), (9090, "b")]  # each pod's own port for the named target
        bare = await _until(h, ["b"], ["a"], name="bare")
        assert bare["metadata"]["labels"] == {MANAGED_BY: "endpoint-controller", "service.kubernetes.io/headless": ""}
        assert all("ports" not in s for s in bare["subsets"])


async def test_leftover_endpoints_are_deleted_at_start_and_custom_ones_kept() -> None:
    async with controller_harness(EndpointsController) as h:
        await h.client.create(PODS, _pod("a"), NS)
        await h.client.create(SERVICES, _service(selector={"app": "web"}), NS)
        await _until(h, ["a"], [])
        await h.stop()
        await h.client.delete(SERVICES, "web", NS)  # while the controller is down
        custom = {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "manual", "namespace": NS},
                  "subsets": [{"addresses": [{"ip": "10.9.9.9"}], "ports": [{"port": 80}]}]}
        await h.client.create(SERVICES, _service("manual"), NS)
        await h.client.create(ENDPOINTS, custom, NS)
        await h.start()
        await wait_for(lambda: _gone(h, "web"), what="the leftover Endpoints deleted")
        kept = await _endpoints(h, "manual")
        assert kept is not None
        assert kept["subsets"] == [{"addresses": [{"ip": "10.9.9.9"}], "ports": [{"port": 80, "protocol": "TCP"}]}]
