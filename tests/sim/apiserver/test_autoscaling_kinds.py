"""ReplicationControllers and HorizontalPodAutoscalers (autoscaling/v2 and v1 over one store) through the API."""

from __future__ import annotations

import json
from typing import Any

from controller_manager.sim.apiserver import hpa
from tests.sim.apiserver.conftest import Client
from tests.sim.apiserver.test_kubectl import DEPLOYMENT, Kubectl, kubectl  # noqa: F401

RCS = "/api/v1/namespaces/default/replicationcontrollers"
V2 = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers"
V1 = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers"
REF = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}


def rc(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"template": {"metadata": {"labels": {"app": name}}, "spec": {
        "containers": [{"name": "c", "image": "nginx"}]}}, **spec}}


async def test_rc_defaults_selector_and_labels_from_template(client: Client) -> None:
    status, body = await client.post(RCS, rc("web"))
    assert status == 201, body
    assert body["spec"]["selector"] == {"app": "web"}
    assert body["spec"]["replicas"] == 1
    assert body["metadata"]["labels"] == {"app": "web"}
    assert body["metadata"]["generation"] == 1
    assert body["status"] == {"replicas": 0}


async def test_rc_validation(client: Client) -> None:
    status, body = await client.post(RCS, rc("bad", selector={"app": "other"}))
    assert status == 422
    assert body["message"] == ('ReplicationController "bad" is invalid: spec.template.metadata.labels: Invalid value: '
                               '{"app":"bad"}: `selector` does not match template `labels`')
    body = rc("never")
    body["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    status, out = await client.post(RCS, body)
    assert status == 422
    assert 'spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"' in out["message"]


async def test_rc_scale_and_status(client: Client) -> None:
    await client.post(RCS, rc("web"))
    status, scale = await client.get(f"{RCS}/web/scale")
    assert status == 200
    assert scale["spec"] == {"replicas": 1}
    assert scale["status"]["selector"] == "app=web"
    scale["spec"]["replicas"] = 3
    status, scale = await client.put(f"{RCS}/web/scale", scale)
    assert status == 200
    assert scale["spec"]["replicas"] == 3
    status, obj = await client.get(f"{RCS}/web")
    assert obj["spec"]["replicas"] == 3
    assert obj["metadata"]["generation"] == 2
    obj["status"] = {"replicas": 3, "readyReplicas": 3}
    obj["spec"]["replicas"] = 9
    status, obj = await client.put(f"{RCS}/web/status", obj)
    assert status == 200
    assert obj["status"]["readyReplicas"] == 3
    assert obj["spec"]["replicas"] == 3


async def test_hpa_v2_defaults(client: Client) -> None:
    status, body = await client.post(V2, {"metadata": {"name": "h"}, "spec": {"scaleTargetRef": REF,
                                                                             "maxReplicas": 3, "behavior": {}}})
    assert status == 201, body
    spec = body["spec"]
    assert spec["minReplicas"] == 1
    assert spec["metrics"] == [{"type": "Resource", "resource": {"name": "cpu", "target": {
        "type": "Utilization", "averageUtilization": 80}}}]
    assert spec["behavior"]["scaleDown"] == {"selectPolicy": "Max",
                                             "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}
    assert spec["behavior"]["scaleUp"]["policies"] == [{"type": "Pods", "value": 4, "periodSeconds": 15},
                                                       {"type": "Percent", "value": 100, "periodSeconds": 15}]


async def test_hpa_v1_and_v2_share_one_store(client: Client) -> None:
    status, v1 = await client.post(V1, {"metadata": {"name": "h"}, "spec": {
        "scaleTargetRef": REF, "maxReplicas": 4, "targetCPUUtilizationPercentage": 50}})
    assert status == 201, v1
    assert v1["apiVersion"] == "autoscaling/v1"
    assert v1["spec"] == {"scaleTargetRef": REF, "minReplicas": 1, "maxReplicas": 4,
                          "targetCPUUtilizationPercentage": 50}
    status, v2 = await client.get(f"{V2}/h")
    assert v2["spec"]["metrics"] == [{"type": "Resource", "resource": {"name": "cpu", "target": {
        "type": "Utilization", "averageUtilization": 50}}}]
    # A v2 metric v1 cannot express travels in the annotation, and comes back on a v1 update.
    v2["spec"]["metrics"].insert(0, {"type": "Resource", "resource": {"name": "memory", "target": {
        "type": "AverageValue", "averageValue": "200Mi"}}})
    status, v2 = await client.put(f"{V2}/h", v2)
    assert status == 200, v2
    status, v1 = await client.get(f"{V1}/h")
    assert json.loads(v1["metadata"]["annotations"][hpa.METRICS_ANNOTATION]) == [
        {"type": "Resource", "resource": {"name": "memory", "targetAverageValue": "200Mi"}}]
    v1["spec"]["maxReplicas"] = 6
    status, v1 = await client.put(f"{V1}/h", v1)
    assert status == 200, v1
    status, v2 = await client.get(f"{V2}/h")
    assert v2["spec"]["maxReplicas"] == 6
    assert [m["resource"]["name"] for m in v2["spec"]["metrics"]] == ["memory", "cpu"]
    assert "annotations" not in v2["metadata"]
    status, listed = await client.get(V1)
    assert listed["items"][0]["spec"]["targetCPUUtilizationPercentage"] == 50


async def test_hpa_status_in_both_versions(client: Client) -> None:
    await client.post(V2, {"metadata": {"name": "h"}, "spec": {"scaleTargetRef": REF, "maxReplicas": 3}})
    status, v2 = await client.get(f"{V2}/h")
    v2["status"] = {"currentReplicas": 2, "desiredReplicas": 3, "currentMetrics": [
        {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 90,
                                                                     "averageValue": "450m"}}}],
        "conditions": [{"type": "AbleToScale", "status": "True", "reason": "ReadyForNewScale",
                        "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    status, v2 = await client.put(f"{V2}/h/status", v2)
    assert status == 200, v2
    _, v1 = await client.get(f"{V1}/h")
    assert v1["status"] == {"currentReplicas": 2, "desiredReplicas": 3, "currentCPUUtilizationPercentage": 90}
    assert json.loads(v1["metadata"]["annotations"][hpa.CONDITIONS_ANNOTATION])[0]["type"] == "AbleToScale"


async def test_hpa_validation(client: Client) -> None:
    status, body = await client.post(V2, {"metadata": {"name": "h"}, "spec": {
        "scaleTargetRef": REF, "minReplicas": 5, "maxReplicas": 3}})
    assert status == 422
    assert body["message"] == ('HorizontalPodAutoscaler.autoscaling "h" is invalid: spec.maxReplicas: Invalid value: '
                               '3: must be greater than or equal to `minReplicas`')
    status, body = await client.post(V1, {"metadata": {"name": "h"}, "spec": {
        "scaleTargetRef": {"kind": "Deployment"}, "minReplicas": 0, "maxReplicas": 3}})
    assert status == 422
    fields = [c["field"] for c in body["details"]["causes"]]
    assert fields == ["spec.scaleTargetRef.name", "spec.minReplicas"]


async def test_discovery_lists_both_versions(client: Client) -> None:
    _, group = await client.get("/apis/autoscaling")
    assert [v["version"] for v in group["versions"]] == ["v2", "v1"]
    assert group["preferredVersion"]["version"] == "v2"
    _status, v1 = await client.get("/apis/autoscaling/v1")
    hpa_doc = next(r for r in v1["resources"] if r["name"] == "horizontalpodautoscalers")
    assert hpa_doc["shortNames"] == ["hpa"]
    assert hpa_doc["categories"] == ["all"]


async def test_kubectl_autoscale(kubectl: Kubectl) -> None:  # noqa: F811
    await kubectl("apply", "-f", "-", stdin=DEPLOYMENT.format(replicas=1))
    out = await kubectl("autoscale", "deployment", "web", "--min=1", "--max=3", "--cpu=50%")
    assert out.strip() == "horizontalpodautoscaler.autoscaling/web autoscaled"
    got = json.loads(await kubectl("get", "hpa", "web", "-o", "json"))
    assert got["apiVersion"] == "autoscaling/v2"
    assert got["spec"]["metrics"] == [{"type": "Resource", "resource": {"name": "cpu", "target": {
        "type": "Utilization", "averageUtilization": 50}}}]
    assert got["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
    v1 = json.loads(await kubectl("get", "horizontalpodautoscalers.v1.autoscaling", "web", "-o", "json"))
    assert v1["spec"]["targetCPUUtilizationPercentage"] == 50


async def test_kubectl_scale_rc(kubectl: Kubectl) -> None:  # noqa: F811
    await kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "ReplicationController",
                                                        **rc("web")}))
    assert (await kubectl("scale", "rc", "web", "--replicas=4")).strip() == "replicationcontroller/web scaled"
    assert await kubectl("get", "rc", "web", "-o", "jsonpath={.spec.replicas}") == "4"


async def test_hpa_behavior_validation(client: Client) -> None:
    status, body = await client.post(V2, {"metadata": {"name": "h"}, "spec": {
        "scaleTargetRef": REF, "maxReplicas": 3, "behavior": {
            "scaleUp": {"stabilizationWindowSeconds": 3601, "selectPolicy": "Sometimes",
                        "policies": [{"type": "Cheese", "value": 0, "periodSeconds": 1801}]}}}})
    assert status == 422, body
    causes = [(c["field"], c["message"]) for c in body["details"]["causes"]]
    assert causes == [
        ("spec.behavior.scaleUp.stabilizationWindowSeconds", "Invalid value: 3601: must be less than or equal to 3600"),
        ("spec.behavior.scaleUp.selectPolicy", 'Unsupported value: "Sometimes": supported values: "Disabled", "Max", '
                                               '"Min"'),
        ("spec.behavior.scaleUp.policies[0].type", 'Unsupported value: "Cheese": supported values: "Percent", '
                                                   '"Pods"'),
        ("spec.behavior.scaleUp.policies[0].value", "Invalid value: 0: must be greater than zero"),
        ("spec.behavior.scaleUp.policies[0].periodSeconds", "Invalid value: 1801: must be less than or equal to 1800"),
    ]
