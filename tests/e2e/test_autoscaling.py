"""The horizontal pod autoscaler as it runs, driven by real kubectl against kube-sim: ``kubectl autoscale`` on a
Deployment, simulated CPU load raised (the pods' ``sim.controller-manager.io/cpu-millicores`` annotation) scales it
up, and lowered, scales it back down once the downscale stabilization window has passed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.conftest import Kubectl, KubeSim, Processes, start_manager, wait_for_default_service_account, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e-light")]

CPU = "sim.controller-manager.io/cpu-millicores"


def _deployment(directory: Path) -> str:
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}, "annotations": {CPU: "10"}},
                              "spec": {"containers": [{"name": "nginx", "image": "nginx",
                                                       "resources": {"requests": {"cpu": "100m"}}}]}}}}
    path = directory / "web.json"
    path.write_text(json.dumps(deployment))
    return str(path)


async def test_kubectl_autoscale_scales_with_load_and_back_after_the_window(
        processes: Processes, sim: KubeSim, kubectl: Kubectl, tmp_path: Path) -> None:
    await start_manager(processes, sim, "--controllers=deployment,replicaset,horizontalpodautoscaling,serviceaccount",
                        "--horizontal-pod-autoscaler-sync-period=1s",
                        "--horizontal-pod-autoscaler-downscale-stabilization=5s")
    await wait_for_default_service_account(kubectl)
    await kubectl.ok("create", "-f", _deployment(tmp_path))
    out = await kubectl.ok("autoscale", "deployment", "web", "--cpu=50%", "--min=1", "--max=5")
    assert "horizontalpodautoscaler.autoscaling/web autoscaled" in out, out

    async def replicas() -> int:
        return int((await kubectl.ok("get", "deployment", "web", "-o", "jsonpath={.spec.replicas}")).strip() or 0)

    async def utilization() -> str | None:
        out = await kubectl.ok("get", "hpa", "web", "-o",
                               "jsonpath={.status.currentMetrics[0].resource.current.averageUtilization}")
        return out.strip() or None

    assert await wait_until(utilization, timeout=60.0, what="the HPA to read the pods' CPU") == "10"

    # load: 200% of the request against a 50% target -> 4 replicas (twice the current count, at least 4)
    await kubectl.ok("annotate", "pods", "-l", "app=web", f"{CPU}=200", "--overwrite")

    async def scaled_up() -> int | None:
        n = await replicas()
        return n if n > 1 else None

    assert await wait_until(scaled_up, timeout=60.0, what="the Deployment to scale up") == 4
    described = await kubectl.ok("describe", "hpa", "web")
    assert ("New size: 4; reason: cpu resource utilization (percentage of request) above target"
            in " ".join(described.split())), described

    # the load goes away: after the 5s stabilization window the Deployment is back at minReplicas
    await kubectl.ok("annotate", "pods", "-l", "app=web", f"{CPU}=10", "--overwrite")

    async def scaled_down() -> bool:
        return await replicas() == 1

    await wait_until(scaled_down, timeout=60.0, what="the Deployment to scale back down")

    async def scale_down_event() -> bool:
        events = await kubectl.ok("get", "events", "--field-selector", "involvedObject.kind=HorizontalPodAutoscaler",
                                  "-o", "jsonpath={range .items[*]}{.reason}: {.message}{\"\\n\"}{end}")
        return "SuccessfulRescale: New size: 1; reason: All metrics below target" in events

    await wait_until(scale_down_event, timeout=30.0, what="the scale-down event")

    # A pod Ready for less than one metric window (10s) has no usable CPU sample yet (upstream's readiness rule):
    # right after the scale-down the HPA may briefly have none; then it reads the survivor again.
    async def settled() -> dict[str, object] | None:
        status: dict[str, object] = json.loads(
            await kubectl.ok("get", "hpa.v2.autoscaling", "web", "-o", "json"))["status"]
        reasons = {c["type"]: c["reason"] for c in status["conditions"]}  # type: ignore[attr-defined]
        # A reconcile after the scale-down (the one that rescaled wrote currentReplicas 4, the size it found).
        return status if reasons["ScalingActive"] == "ValidMetricFound" and status["currentReplicas"] == 1 else None

    status = await wait_until(settled, timeout=30.0, what="the HPA to read the remaining pod")
    assert status["currentReplicas"] == 1
    assert status["desiredReplicas"] == 1
    assert status.get("lastScaleTime")
