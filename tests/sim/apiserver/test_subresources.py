"""/scale, pods/binding and pods/eviction."""

from __future__ import annotations

import pytest

from controller_manager.api.resources import PODDISRUPTIONBUDGETS
from controller_manager.sim.apiserver import ApiServer
from controller_manager.sim.apiserver.errors import StatusError
from tests.sim.apiserver.conftest import Client, deployment, pod

PODS_URL = "/api/v1/namespaces/default/pods"
DEPLOY_URL = "/apis/apps/v1/namespaces/default/deployments"


async def test_scale_get_and_update(client: Client) -> None:
    await client.post(DEPLOY_URL, deployment("web", 2))
    code, scale = await client.get(f"{DEPLOY_URL}/web/scale")
    assert code == 200
    assert scale["kind"] == "Scale"
    assert scale["apiVersion"] == "autoscaling/v1"
    assert scale["spec"] == {"replicas": 2}
    assert scale["status"] == {"replicas": 0, "selector": "app=web"}
    code, out = await client.put(f"{DEPLOY_URL}/web/scale", {**scale, "spec": {"replicas": 5}})
    assert code == 200
    assert out["spec"] == {"replicas": 5}
    _, d = await client.get(f"{DEPLOY_URL}/web")
    assert d["spec"]["replicas"] == 5
    assert d["metadata"]["generation"] == 2
    code, stale = await client.put(f"{DEPLOY_URL}/web/scale", {**scale, "spec": {"replicas": 1}})
    assert code == 409
    assert stale["reason"] == "Conflict"


async def test_scale_patch_and_invalid_replicas(client: Client) -> None:
    await client.post(DEPLOY_URL, deployment("web", 2))
    code, out = await client.patch(f"{DEPLOY_URL}/web/scale", {"spec": {"replicas": 4}})
    assert code == 200
    assert out["spec"]["replicas"] == 4
    code, bad = await client.patch(f"{DEPLOY_URL}/web/scale", {"spec": {"replicas": -1}})
    assert code == 422
    assert bad["reason"] == "Invalid"


async def test_binding_sets_node_and_condition(client: Client) -> None:
    await client.post(PODS_URL, pod("p"))
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p", "annotations": {"a": "b"}},
               "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}}
    code, status = await client.post(f"{PODS_URL}/p/binding", binding)
    assert code == 201
    assert status == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
    _, p = await client.get(f"{PODS_URL}/p")
    assert p["spec"]["nodeName"] == "n1"
    assert p["metadata"]["annotations"] == {"a": "b"}
    assert p["metadata"]["generation"] == 1
    assert [c["type"] for c in p["status"]["conditions"]] == ["PodScheduled"]
    code, again = await client.post(f"{PODS_URL}/p/binding", {**binding, "target": {"kind": "Node", "name": "n2"}})
    assert code == 409
    assert again["message"] == ('Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to '
                                'node "n1"')


async def test_eviction_without_pdb_deletes(client: Client) -> None:
    await client.post(PODS_URL, pod("p", node="n1"))
    await client.patch(f"{PODS_URL}/p/status", {"status": {"phase": "Running"}})
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p", "namespace": "default"}}
    code, status = await client.post(f"{PODS_URL}/p/eviction", eviction)
    assert code == 201
    assert status["status"] == "Success"
    _, p = await client.get(f"{PODS_URL}/p")
    assert p["metadata"]["deletionTimestamp"]  # graceful: the kubelet finishes it
    # addConditionAndDeletePod: the pod says why it goes before it is deleted.
    disruption = [c for c in p["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert [(c["status"], c["reason"], c["message"]) for c in disruption] == [
        ("True", "EvictionByEvictionAPI", "Eviction API: evicting")]


async def test_eviction_dry_run_changes_nothing(client: Client) -> None:
    await client.post(PODS_URL, pod("p", node="n1"))
    await client.patch(f"{PODS_URL}/p/status", {"status": {"phase": "Running"}})
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p"},
                "deleteOptions": {"dryRun": ["All"]}}
    code, _ = await client.post(f"{PODS_URL}/p/eviction", eviction)
    assert code == 201
    _, p = await client.get(f"{PODS_URL}/p")
    assert "deletionTimestamp" not in p["metadata"]
    assert all(c["type"] != "DisruptionTarget" for c in p["status"].get("conditions") or ())


def test_a_new_budget_shows_zero_counts_and_both_budgets_are_refused(api: ApiServer) -> None:
    created = api.create(PODDISRUPTIONBUDGETS, {"metadata": {"name": "b"}, "spec": {
        "minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}}}}, "default")
    assert created["status"] == {"currentHealthy": 0, "desiredHealthy": 0, "disruptionsAllowed": 0,
                                 "expectedPods": 0}
    with pytest.raises(StatusError) as both:
        api.create(PODDISRUPTIONBUDGETS, {"metadata": {"name": "c"}, "spec": {
            "minAvailable": 1, "maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}}, "default")
    assert "minAvailable and maxUnavailable cannot be both set" in both.value.status["message"]
    with pytest.raises(StatusError) as pct:
        api.create(PODDISRUPTIONBUDGETS, {"metadata": {"name": "d"}, "spec": {
            "maxUnavailable": "150%", "selector": {"matchLabels": {"app": "web"}}}}, "default")
    assert "must not be greater than 100%" in pct.value.status["message"]


async def test_eviction_refused_by_pdb(client: Client, api: ApiServer) -> None:
    await client.post(PODS_URL, pod("p", labels={"app": "web"}, node="n1"))
    await client.patch(f"{PODS_URL}/p/status", {"status": {"phase": "Running"}})
    pdb = api.create(PODDISRUPTIONBUDGETS, {"metadata": {"name": "budget"},
                                            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}},
                     "default")
    status = {"observedGeneration": 1, "disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1,
              "expectedPods": 1}
    pdb = api.update(PODDISRUPTIONBUDGETS, {**pdb, "status": status}, subresource="status")
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p"}}
    code, body = await client.post(f"{PODS_URL}/p/eviction", eviction)
    assert code == 429
    assert body["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert body["details"]["causes"] == [{"reason": "DisruptionBudget",
                                          "message": "The disruption budget budget needs 1 healthy pods and has 1 "
                                                     "currently"}]
    api.update(PODDISRUPTIONBUDGETS, {**pdb, "status": {**status, "disruptionsAllowed": 1}}, subresource="status")
    code, _ = await client.post(f"{PODS_URL}/p/eviction", eviction)
    assert code == 201
    after = api.get(PODDISRUPTIONBUDGETS, "default", "budget")["status"]
    assert after["disruptionsAllowed"] == 0
    assert list(after["disruptedPods"]) == ["p"]
