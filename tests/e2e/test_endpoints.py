"""The daemon's Endpoints controller as users see it: ``kubectl apply`` a Service and pods, ``kubectl get
endpoints`` lists the Ready pods' addresses; a pod held back by a readiness gate is listed as not ready until
``kubectl patch --subresource=status`` opens the gate, and leaves again when it closes; deleting the Service
deletes its Endpoints."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import Kubectl, KubeSim, Processes, start_manager, wait_for_default_service_account, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e-light")]

GATE = "example.com/in-rotation"


def manifest() -> list[dict[str, Any]]:
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "labels": {"app": "web"}},
               "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}}
    pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"web-{i}", "labels": {"app": "web"}},
             "spec": {"readinessGates": [{"conditionType": GATE}] if i == 1 else [],
                      "containers": [{"name": "nginx", "image": "nginx",
                                      "ports": [{"name": "http", "containerPort": 8080}]}]}}
            for i in range(2)]
    return [service, *pods]


async def get_endpoints(kubectl: Kubectl) -> dict[str, Any] | None:
    code, out = await kubectl("get", "endpoints", "web", "-o", "json")
    return json.loads(out) if code == 0 else None


def names(ep: dict[str, Any] | None, field: str) -> list[str]:
    return sorted(a["targetRef"]["name"] for s in (ep or {}).get("subsets") or () for a in s.get(field) or ())


async def until(kubectl: Kubectl, ready: list[str], not_ready: list[str]) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        ep = await get_endpoints(kubectl)
        return ep if names(ep, "addresses") == ready and names(ep, "notReadyAddresses") == not_ready else None

    return await wait_until(check, timeout=30, what=f"endpoints ready={ready} notReady={not_ready}")


async def gate(kubectl: Kubectl, status: str) -> None:
    await kubectl.ok("patch", "pod", "web-1", "--subresource=status", "--type=strategic",
                     "-p", json.dumps({"status": {"conditions": [{"type": GATE, "status": status}]}}))


async def test_endpoints_follow_readiness(processes: Processes, sim: KubeSim, kubectl: Kubectl) -> None:
    # The service-account controller gives the namespace the "default" ServiceAccount pods need.
    await start_manager(processes, sim, "--controllers=endpoint,serviceaccount")
    await wait_for_default_service_account(kubectl)
    path = processes.directory / "web.yaml"
    path.write_text(yaml.safe_dump_all(manifest()))
    await kubectl.ok("apply", "-f", str(path))

    ep = await until(kubectl, ["web-0"], ["web-1"])
    assert ep["metadata"]["labels"] == {"app": "web", "endpoints.kubernetes.io/managed-by": "endpoint-controller"}
    assert [p["port"] for s in ep["subsets"] for p in s["ports"]] == [8080]
    pod_ip = json.loads(await kubectl.ok("get", "pod", "web-0", "-o", "json"))["status"]["podIP"]
    table = await kubectl.ok("get", "endpoints", "web")
    assert f"{pod_ip}:8080" in table

    await gate(kubectl, "True")
    await until(kubectl, ["web-0", "web-1"], [])
    await gate(kubectl, "False")
    await until(kubectl, ["web-0"], ["web-1"])

    await kubectl.ok("delete", "service", "web")

    async def gone() -> bool:
        return await get_endpoints(kubectl) is None

    await wait_until(gone, timeout=30, what="the Endpoints deleted with its Service")
