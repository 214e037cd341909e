"""The HPA controller against an in-process kube-sim: a Deployment's replica count follows the simulated CPU usage
of its pods (the ``sim.controller-manager.io/cpu-millicores`` annotation), and the HPA's status, conditions and
events say what it did, as a client reads them."""

from __future__ import annotations

from typing import Any

from controller_manager.api.resources import DEPLOYMENTS, HORIZONTALPODAUTOSCALERS, PODS
from controller_manager.controllers.deployment.controller import DeploymentController
from controller_manager.controllers.podautoscaler import HorizontalController
from controller_manager.controllers.replicaset import ReplicaSetController
from tests.controllers.harness import Harness, controller_harness, wait_for

NS = "default"
CPU = "sim.controller-manager.io/cpu-millicores"
FAST = {"horizontal_pod_autoscaler_sync_period": 0.2, "horizontal_pod_autoscaler_downscale_stabilization": 1.0,
        "horizontal_pod_autoscaler_cpu_initialization_period": 0.0}


def deployment(name: str, replicas: int, cpu_usage: int | None = None) -> dict[str, Any]:
    annotations = {CPU: str(cpu_usage)} if cpu_usage is not None else {}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}, "annotations": annotations},
                                  "spec": {"containers": [{"name": "c", "image": "registry.example/app:1",
                                                           "resources": {"requests": {"cpu": "100m"}}}]}}}}


def hpa(name: str, target: str, *, utilization: int = 50, low: int = 1, high: int = 5,
        metrics: list[dict[str, Any]] | None = None, behavior: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
        "minReplicas": low, "maxReplicas": high,
        "metrics": metrics or [{"type": "Resource", "resource": {"name": "cpu", "target": {
            "type": "Utilization", "averageUtilization": utilization}}}]}
    if behavior is not None:
        spec["behavior"] = behavior
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": name},
            "spec": spec}


async def set_usage(h: Harness, app: str, millicores: int) -> None:
    for pod in await h.pods(NS, f"app={app}"):
        await h.client.patch(PODS, pod["metadata"]["name"], {"metadata": {"annotations": {CPU: str(millicores)}}},
                             NS, patch_type="merge")


async def replicas(h: Harness, name: str) -> int:
    return int((await h.client.get(DEPLOYMENTS, name, NS))["spec"]["replicas"])


async def hpa_status(h: Harness, name: str) -> dict[str, Any]:
    return dict((await h.client.get(HORIZONTALPODAUTOSCALERS, name, NS)).get("status") or {})


def condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or () if c["type"] == kind), {})


async def test_load_scales_a_deployment_up_and_down_after_the_window() -> None:
    async with controller_harness(DeploymentController, ReplicaSetController, HorizontalController,
                                  options=FAST) as h:
        await h.client.create(DEPLOYMENTS, deployment("web", 1, cpu_usage=20), NS)
        await h.client.create(HORIZONTALPODAUTOSCALERS, hpa("web", "web"), NS)

        async def steady() -> dict[str, Any] | None:
            status = await hpa_status(h, "web")
            metrics = status.get("currentMetrics") or []
            return status if metrics and metrics[0].get("resource", {}).get("current") else None

        status = await wait_for(steady, what="the HPA reads the pods' CPU")
        assert status["currentMetrics"] == [{"type": "Resource", "resource": {
            "name": "cpu", "current": {"averageValue": "20m", "averageUtilization": 20}}}]
        assert status["currentReplicas"] == 1
        assert status["desiredReplicas"] == 1
        assert condition(status, "AbleToScale")["reason"] == "ReadyForNewScale"
        assert condition(status, "ScalingActive")["reason"] == "ValidMetricFound"
        assert condition(status, "ScalingActive")["message"] == (
            "the HPA was able to successfully calculate a replica count from cpu resource utilization "
            "(percentage of request)")
        limited = condition(status, "ScalingLimited")
        assert (limited["status"], limited["reason"], limited["message"]) == (
            "False", "DesiredWithinRange", "the desired count is within the acceptable range")

        await set_usage(h, "web", 180)  # 180% of the request, target 50%: 4 pods (the scale-up limit)

        async def scaled_up() -> int | None:
            n = await replicas(h, "web")
            return n if n >= 4 else None

        assert await wait_for(scaled_up, what="scale up") >= 4

        async def rescale_events() -> list[dict[str, Any]]:
            return [e for e in await h.events_for("web") if e["reason"] == "SuccessfulRescale"]

        rescales = await wait_for(rescale_events, what="a SuccessfulRescale event")
        assert rescales[0]["message"] == ("New size: 4; reason: cpu resource utilization "
                                                       "(percentage of request) above target")
        assert rescales[0]["source"]["component"] == "horizontal-pod-autoscaler"
        assert (await hpa_status(h, "web")).get("lastScaleTime")

        await set_usage(h, "web", 5)

        async def scaled_down() -> bool:
            return await replicas(h, "web") == 1

        await wait_for(scaled_down, what="scale down after the stabilization window")

        async def scale_down_event() -> bool:
            return "New size: 1; reason: All metrics below target" in [e["message"] for e in await rescale_events()]

        await wait_for(scale_down_event, what="the scale-down event")


async def test_pods_and_external_metrics_without_their_apis_report_upstream_errors() -> None:
    async with controller_harness(DeploymentController, ReplicaSetController, HorizontalController,
                                  options=FAST) as h:
        await h.client.create(DEPLOYMENTS, deployment("api", 2), NS)
        pods_metric = [{"type": "Pods", "pods": {"metric": {"name": "http_requests"},
                                                 "target": {"type": "AverageValue", "averageValue": "10"}}}]
        await h.client.create(HORIZONTALPODAUTOSCALERS, hpa("api", "api", metrics=pods_metric), NS)

        async def failed() -> dict[str, Any] | None:
            status = await hpa_status(h, "api")
            return status if condition(status, "ScalingActive").get("status") == "False" else None

        status = await wait_for(failed, what="ScalingActive=False")
        active = condition(status, "ScalingActive")
        assert active["reason"] == "FailedGetPodsMetric"
        assert active["message"] == (
            "the HPA was unable to compute the replica count: unable to get metric http_requests: unable to fetch "
            "metrics from custom metrics API: no custom metrics API (custom.metrics.k8s.io) registered")
        assert status["currentMetrics"] == [{"type": ""}]
        assert condition(status, "AbleToScale")["reason"] == "SucceededGetScale"

        async def warned() -> bool:
            reasons = {e["reason"] for e in await h.events_for("api")}
            return {"FailedGetPodsMetric", "FailedComputeMetricsReplicas"} <= reasons

        await wait_for(warned, what="the warning events")
        assert await replicas(h, "api") == 2


WORKERS = "/apis/example.com/v1/namespaces/default/workers"


def worker_crd() -> dict[str, Any]:
    schema = {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
        "status": {"type": "object", "properties": {"replicas": {"type": "integer"},
                                                    "selector": {"type": "string"}}}}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "workers.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "workers", "singular": "worker", "kind": "Worker", "listKind": "WorkerList"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": schema},
                                   "subresources": {"status": {}, "scale": {
                                       "specReplicasPath": ".spec.replicas",
                                       "statusReplicasPath": ".status.replicas",
                                       "labelSelectorPath": ".status.selector"}}}]}}


async def test_a_custom_resource_is_scaled_through_its_scale_subresource() -> None:
    async with controller_harness(HorizontalController, options=FAST) as h:
        await h.client.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=worker_crd())

        async def served() -> bool:
            try:
                await h.client.request("GET", WORKERS)
            except Exception:
                return False
            return True

        await wait_for(served, what="the Worker kind to be served")
        await h.client.request("POST", WORKERS, body={"apiVersion": "example.com/v1", "kind": "Worker",
                                                      "metadata": {"name": "w"}, "spec": {"replicas": 2}})
        await h.client.request("PATCH", f"{WORKERS}/w/status", body={"status": {"replicas": 2, "selector": "app=w"}},
                               content_type="application/merge-patch+json")
        for i in range(2):  # the Worker's pods (no controller runs Workers here: the test makes them)
            await h.client.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {
                "name": f"w-{i}", "labels": {"app": "w"}, "annotations": {CPU: "100"}}, "spec": {"containers": [
                    {"name": "c", "image": "registry.example/app:1", "resources": {"requests": {"cpu": "100m"}}}]}},
                NS)
        body = hpa("w", "w")
        body["spec"]["scaleTargetRef"] = {"apiVersion": "example.com/v1", "kind": "Worker", "name": "w"}
        await h.client.create(HORIZONTALPODAUTOSCALERS, body, NS)

        async def scaled() -> int | None:
            worker = await h.client.request("GET", f"{WORKERS}/w")
            n = int(worker["spec"]["replicas"])
            return n if n != 2 else None

        assert await wait_for(scaled, what="the Worker to be scaled") == 4  # 100% against 50%: twice as many
        status = await hpa_status(h, "w")
        assert condition(status, "AbleToScale")["reason"] == "SucceededRescale"
