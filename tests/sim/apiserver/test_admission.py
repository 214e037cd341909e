"""Admission as a client sees it: ResourceQuota, LimitRanger and Priority on creates, with upstream's messages."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller_manager.api.quantity import parse_quantity
from controller_manager.api.resources import PODS as PODS_RES
from controller_manager.api.resources import RESOURCEQUOTAS
from controller_manager.sim.apiserver import ApiServer
from controller_manager.sim.apiserver.errors import StatusError
from tests.sim.apiserver.conftest import Client, configmap, pod

QUOTAS = "/api/v1/namespaces/default/resourcequotas"
LIMITS = "/api/v1/namespaces/default/limitranges"
PODS = "/api/v1/namespaces/default/pods"
CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"


def sized_pod(name: str, *, cpu: str | None = None, memory: str | None = None, limit_cpu: str | None = None,
              **spec: Any) -> dict[str, Any]:
    body = pod(name, **spec)
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    resources: dict[str, Any] = {"requests": requests} if requests else {}
    if limit_cpu is not None:
        resources["limits"] = {"cpu": limit_cpu}
    body["spec"]["containers"][0]["resources"] = resources
    return body


async def make_quota(client: Client, name: str, hard: dict[str, str], used: dict[str, str] | None = None,
                     **spec: Any) -> dict[str, Any]:
    """A quota with its status as the resourcequota controller would write it."""
    status, created = await client.post(QUOTAS, {"metadata": {"name": name}, "spec": {"hard": hard, **spec}})
    assert status == 201, created
    used = used if used is not None else {k: "0" for k in hard}
    created["status"] = {"hard": hard, "used": used}
    status, updated = await client.put(f"{QUOTAS}/{name}/status", created)
    assert status == 200, updated
    return updated  # type: ignore[no-any-return]


async def test_quota_without_status_does_not_limit(client: Client) -> None:
    status, _ = await client.post(QUOTAS, {"metadata": {"name": "q"}, "spec": {"hard": {"pods": "0"}}})
    assert status == 201
    status, _ = await client.post(PODS, pod("a"))
    assert status == 201


async def test_quota_exceeded_is_forbidden_with_upstream_message(client: Client) -> None:
    await make_quota(client, "compute", {"requests.cpu": "1", "pods": "5"}, {"requests.cpu": "600m", "pods": "1"})
    status, body = await client.post(PODS, sized_pod("big", cpu="500m", memory="1Gi"))
    assert status == 403, body
    assert body["reason"] == "Forbidden"
    assert body["message"] == ('pods "big" is forbidden: exceeded quota: compute, requested: requests.cpu=500m, '
                               'used: requests.cpu=600m, limited: requests.cpu=1')
    status, body = await client.post(PODS, sized_pod("small", cpu="400m"))
    assert status == 201, body
    status, q = await client.get(f"{QUOTAS}/compute")
    assert q["status"]["used"] == {"pods": "2", "requests.cpu": "1"}


async def test_quota_on_compute_requires_each_container_to_state_it(client: Client) -> None:
    await make_quota(client, "q", {"requests.memory": "1Gi", "limits.cpu": "2"})
    status, body = await client.post(PODS, sized_pod("p", cpu="1"))
    assert status == 403
    assert body["message"] == 'pods "p" is forbidden: failed quota: q: must specify limits.cpu for: c; ' \
                              'requests.memory for: c'


async def test_quota_status_unknown(client: Client) -> None:
    await make_quota(client, "q", {"pods": "2", "count/configmaps": "1"}, {"pods": "0"})
    status, body = await client.post(PODS, pod("p"))
    assert status == 403
    assert body["message"] == 'pods "p" is forbidden: status unknown for quota: q'


async def test_object_counts(client: Client) -> None:
    await make_quota(client, "counts", {"count/configmaps": "1", "configmaps": "5"})
    assert (await client.post("/api/v1/namespaces/default/configmaps", configmap("one")))[0] == 201
    status, body = await client.post("/api/v1/namespaces/default/configmaps", configmap("two"))
    assert status == 403
    assert body["message"] == ('configmaps "two" is forbidden: exceeded quota: counts, requested: count/configmaps=1, '
                               'used: count/configmaps=1, limited: count/configmaps=1')
    await make_quota(client, "deploys", {"count/deployments.apps": "0"})
    status, body = await client.post("/apis/apps/v1/namespaces/default/deployments", {
        "metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
            "metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}})
    assert status == 403
    assert "exceeded quota: deploys, requested: count/deployments.apps=1" in body["message"]


async def test_service_node_ports_counted(client: Client) -> None:
    await make_quota(client, "svc", {"services.nodeports": "1"})
    status, body = await client.post("/api/v1/namespaces/default/services", {
        "metadata": {"name": "s"}, "spec": {"type": "NodePort", "ports": [{"name": "a", "port": 80},
                                                                       {"name": "b", "port": 81}]}})
    assert status == 403
    assert body["message"].endswith("requested: services.nodeports=2, used: services.nodeports=0, "
                                    "limited: services.nodeports=1")


async def test_scoped_quota_matches_only_its_pods(client: Client) -> None:
    await make_quota(client, "best-effort", {"pods": "0"}, scopes=["BestEffort"])
    assert (await client.post(PODS, sized_pod("burstable", cpu="100m")))[0] == 201
    status, body = await client.post(PODS, pod("be"))
    assert status == 403
    assert "exceeded quota: best-effort" in body["message"]
    await make_quota(client, "critical", {"pods": "0"},
                     scopeSelector={"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In",
                                                          "values": ["system-cluster-critical"]}]})
    status, body = await client.post(PODS, sized_pod("crit", cpu="1", priorityClassName="system-cluster-critical"))
    assert status == 403
    assert "exceeded quota: critical" in body["message"]


async def test_dry_run_does_not_charge(client: Client) -> None:
    await make_quota(client, "q", {"pods": "1"})
    status, _ = await client.post(PODS, pod("p"), params={"dryRun": "All"})
    assert status == 201
    assert (await client.get(f"{QUOTAS}/q"))[1]["status"]["used"] == {"pods": "0"}


async def test_quota_validation(client: Client) -> None:
    status, body = await client.post(QUOTAS, {"metadata": {"name": "bad"},
                                              "spec": {"hard": {"pods": "-1"}, "scopes": ["Nope"]}})
    assert status == 422
    assert [c["field"] for c in body["details"]["causes"]] == ["spec.hard[pods]", "spec.scopes[0]"]


# --- LimitRanger ----------------------------------------------------------------------------------------

async def test_limit_range_defaults_and_pod_defaults(client: Client) -> None:
    status, lr = await client.post(LIMITS, {"metadata": {"name": "lr"}, "spec": {"limits": [
        {"type": "Container", "max": {"cpu": "1"}, "min": {"memory": "64Mi"}}]}})
    assert status == 201, lr
    assert lr["spec"]["limits"][0] == {"type": "Container", "max": {"cpu": "1"}, "min": {"memory": "64Mi"},
                                       "default": {"cpu": "1"},
                                       "defaultRequest": {"cpu": "1", "memory": "64Mi"}}
    status, p = await client.post(PODS, pod("p"))
    assert status == 201, p
    assert p["spec"]["containers"][0]["resources"] == {"limits": {"cpu": "1"},
                                                       "requests": {"cpu": "1", "memory": "64Mi"}}
    assert p["metadata"]["annotations"]["kubernetes.io/limit-ranger"] == (
        "LimitRanger plugin set: cpu, memory request for container c; cpu limit for container c")
    assert p["status"]["qosClass"] == "Burstable"


async def test_limit_range_max_and_min(client: Client) -> None:
    await client.post(LIMITS, {"metadata": {"name": "lr"}, "spec": {"limits": [
        {"type": "Container", "max": {"cpu": "1"}, "min": {"cpu": "100m"}}]}})
    status, body = await client.post(PODS, sized_pod("p", cpu="50m", limit_cpu="2"))
    assert status == 403
    assert body["message"] == ('pods "p" is forbidden: [minimum cpu usage per Container is 100m, but request is 50m, '
                               'maximum cpu usage per Container is 1, but limit is 2]')
    status, body = await client.post(PODS, sized_pod("q", cpu="200m", limit_cpu="500m"))
    assert status == 201, body


async def test_limit_range_pod_and_ratio(client: Client) -> None:
    await client.post(LIMITS, {"metadata": {"name": "lr"}, "spec": {"limits": [
        {"type": "Pod", "max": {"cpu": "1"}}, {"type": "Container", "maxLimitRequestRatio": {"cpu": "2"}}]}})
    status, body = await client.post(PODS, sized_pod("p", cpu="100m", limit_cpu="300m"))
    assert status == 403
    assert body["message"] == 'pods "p" is forbidden: cpu max limit to request ratio per Container is 2, but ' \
                              'provided ratio is 3.000000'
    two = sized_pod("two", cpu="600m", limit_cpu="1")
    two["spec"]["containers"].append({"name": "d", "image": "i", "resources": {"requests": {"cpu": "600m"},
                                                                               "limits": {"cpu": "1"}}})
    status, body = await client.post(PODS, two)
    assert status == 403
    assert body["message"] == 'pods "two" is forbidden: maximum cpu usage per Pod is 1, but limit is 2'


async def test_limit_range_validation(client: Client) -> None:
    status, body = await client.post(LIMITS, {"metadata": {"name": "bad"}, "spec": {"limits": [
        {"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}},
        {"type": "Pod", "default": {"cpu": "1"}}]}})
    assert status == 422
    messages = [c["message"] for c in body["details"]["causes"]]
    assert any("min value 2 is greater than max value 1" in m for m in messages)
    assert "Forbidden: may not be specified when `type` is 'Pod'" in messages


# --- Priority ---------------------------------------------------------------------------------------------

async def test_system_classes_exist(client: Client) -> None:
    _status, body = await client.get(CLASSES)
    by_name = {pc["metadata"]["name"]: pc for pc in body["items"]}
    assert by_name["system-cluster-critical"]["value"] == 2000000000
    assert by_name["system-node-critical"]["value"] == 2000001000
    assert by_name["system-node-critical"]["preemptionPolicy"] == "PreemptLowerPriority"


async def test_pod_priority_from_class(client: Client) -> None:
    status, p = await client.post(PODS, pod("crit", priorityClassName="system-cluster-critical"))
    assert status == 201, p
    assert p["spec"]["priority"] == 2000000000
    status, p = await client.post(PODS, pod("plain"))
    assert p["spec"]["priority"] == 0
    assert p["spec"]["preemptionPolicy"] == "PreemptLowerPriority"
    status, body = await client.post(PODS, pod("x", priorityClassName="foo"))
    assert status == 403
    assert body["message"] == 'pods "x" is forbidden: no PriorityClass with name foo was found'
    status, body = await client.post(PODS, pod("y", priorityClassName="system-node-critical", priority=5))
    assert status == 403
    assert body["message"] == ('pods "y" is forbidden: the integer value of priority (5) must not be provided in pod '
                               'spec; priority admission controller computed 2000001000 from the given PriorityClass '
                               'name')


async def test_global_default_class(client: Client) -> None:
    status, pc = await client.post(CLASSES, {"metadata": {"name": "low"}, "value": 10, "globalDefault": True,
                                             "preemptionPolicy": "Never"})
    assert status == 201, pc
    status, p = await client.post(PODS, pod("p"))
    assert (p["spec"]["priorityClassName"], p["spec"]["priority"], p["spec"]["preemptionPolicy"]) == (
        "low", 10, "Never")
    status, body = await client.post(CLASSES, {"metadata": {"name": "other"}, "value": 1, "globalDefault": True})
    assert status == 403
    assert body["message"] == ('priorityclasses.scheduling.k8s.io "other" is forbidden: PriorityClass low is already '
                               'marked as default. Only one default can exist')


async def test_priority_class_validation(client: Client) -> None:
    status, body = await client.post(CLASSES, {"metadata": {"name": "huge"}, "value": 2000000000})
    assert status == 422
    assert body["details"]["causes"][0]["message"] == (
        "Forbidden: maximum allowed value of a user defined priority is 1000000000")
    status, body = await client.post(CLASSES, {"metadata": {"name": "system-mine"}, "value": 1})
    assert status == 422
    assert "reserved for system use only. error: system-mine is not a known system priority class" in body["message"]
    status, pc = await client.post(CLASSES, {"metadata": {"name": "mine"}, "value": 1})
    pc["value"] = 2
    status, body = await client.put(f"{CLASSES}/mine", pc)
    assert status == 422
    assert "value: Forbidden: may not be changed in an update." in body["message"]


async def test_service_update_charged_its_difference(client: Client) -> None:
    await make_quota(client, "svc", {"services.nodeports": "1", "services": "5"})
    svcs = "/api/v1/namespaces/default/services"
    status, svc = await client.post(svcs, {"metadata": {"name": "s"}, "spec": {"ports": [
        {"name": "a", "port": 80}, {"name": "b", "port": 81}]}})
    assert status == 201, svc
    status, body = await client.patch(f"{svcs}/s", {"spec": {"type": "NodePort"}})
    assert status == 403
    assert body["message"] == ('services "s" is forbidden: exceeded quota: svc, requested: services.nodeports=2, '
                               'used: services.nodeports=0, limited: services.nodeports=1')
    status, svc = await client.patch(f"{svcs}/s", {"metadata": {"labels": {"a": "b"}}})
    assert status == 200
    assert (await client.get(f"{QUOTAS}/svc"))[1]["status"]["used"] == {"services": "1", "services.nodeports": "0"}


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 1500), min_size=1, max_size=12), st.integers(0, 4000))
def test_admitted_usage_never_exceeds_the_quota(requests: list[int], hard_millis: int) -> None:
    """Whatever the order and sizes of creates, what the quota admits stays within it and status.used is its sum."""
    api = ApiServer()
    api.create(RESOURCEQUOTAS, {"metadata": {"name": "q"}, "spec": {"hard": {"requests.cpu": f"{hard_millis}m"}}},
               "default")
    stored = api.get(RESOURCEQUOTAS, "default", "q")
    stored["status"] = {"hard": {"requests.cpu": f"{hard_millis}m"}, "used": {"requests.cpu": "0"}}
    api.update(RESOURCEQUOTAS, stored, subresource="status")
    admitted = 0
    for i, millis in enumerate(requests):
        if admitted + millis > hard_millis:
            with pytest.raises(StatusError) as refused:
                api.create(PODS_RES, sized_pod(f"p{i}", cpu=f"{millis}m"), "default")
            assert refused.value.code == 403
            continue
        api.create(PODS_RES, sized_pod(f"p{i}", cpu=f"{millis}m"), "default")
        admitted += millis
    assert admitted <= hard_millis
    used = api.get(RESOURCEQUOTAS, "default", "q")["status"]["used"]["requests.cpu"]
    assert parse_quantity(used) * 1000 == admitted


async def test_limit_range_defaults_count_toward_quota(client: Client) -> None:
    await client.post(LIMITS, {"metadata": {"name": "lr"}, "spec": {"limits": [
        {"type": "Container", "defaultRequest": {"cpu": "300m"}, "default": {"cpu": "500m"}}]}})
    await make_quota(client, "q", {"requests.cpu": "500m", "limits.cpu": "1"})
    assert (await client.post(PODS, pod("a")))[0] == 201  # LimitRanger ran first: the quota's cpu is stated
    status, body = await client.post(PODS, pod("b"))
    assert status == 403
    assert body["message"] == ('pods "b" is forbidden: exceeded quota: q, requested: requests.cpu=300m, '
                               'used: requests.cpu=300m, limited: requests.cpu=500m')


async def test_limit_range_on_claims(client: Client) -> None:
    await client.post(LIMITS, {"metadata": {"name": "lr"}, "spec": {"limits": [
        {"type": "PersistentVolumeClaim", "min": {"storage": "1Gi"}, "max": {"storage": "10Gi"}}]}})
    claims = "/api/v1/namespaces/default/persistentvolumeclaims"
    status, body = await client.post(claims, {"metadata": {"name": "big"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "20Gi"}}}})
    assert status == 403
    assert body["message"] == ('persistentvolumeclaims "big" is forbidden: maximum storage usage per '
                               'PersistentVolumeClaim is 10Gi, but request is 20Gi')
    status, _ = await client.post(claims, {"metadata": {"name": "ok"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "5Gi"}}}})
    assert status == 201
