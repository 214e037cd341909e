"""Deletion semantics: graceful pod deletion, finalizers, propagation policies, preconditions, namespaces."""

from __future__ import annotations

import pytest

from controller_manager.api.resources import CONFIGMAPS, NAMESPACES, PODS
from controller_manager.clock import FakeClock
from controller_manager.sim.apiserver import ApiServer, StatusError
from tests.sim.apiserver.conftest import Client, configmap, pod

PODS_URL = "/api/v1/namespaces/default/pods"
CM_URL = "/api/v1/namespaces/default/configmaps"


async def test_bound_pod_waits_for_its_kubelet(client: Client, clock: FakeClock) -> None:
    await client.post(PODS_URL, pod("p", node="n1"))
    code, body = await client.delete(f"{PODS_URL}/p")
    assert code == 200
    meta = body["metadata"]
    assert meta["deletionGracePeriodSeconds"] == 30
    assert meta["generation"] == 2
    clock.advance(60)  # the grace elapsing does not delete it: only its kubelet does
    code, still = await client.get(f"{PODS_URL}/p")
    assert code == 200
    assert still["metadata"]["deletionTimestamp"] == meta["deletionTimestamp"]
    code, _ = await client.delete(f"{PODS_URL}/p", {"gracePeriodSeconds": 0})
    assert code == 200
    assert (await client.get(f"{PODS_URL}/p"))[0] == 404


async def test_second_delete_may_only_shorten_grace(client: Client) -> None:
    await client.post(PODS_URL, pod("p", node="n1"))
    _, first = await client.delete(f"{PODS_URL}/p", params={"gracePeriodSeconds": "20"})
    _, longer = await client.delete(f"{PODS_URL}/p", params={"gracePeriodSeconds": "60"})
    assert longer["metadata"]["deletionGracePeriodSeconds"] == 20
    assert longer["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    _, shorter = await client.delete(f"{PODS_URL}/p", params={"gracePeriodSeconds": "5"})
    assert shorter["metadata"]["deletionGracePeriodSeconds"] == 5


@pytest.mark.parametrize("spec", [
    pytest.param({}, id="unbound"),
    pytest.param({"node": "n1", "status": "Succeeded"}, id="terminated"),
])
async def test_unbound_or_finished_pod_goes_at_once(client: Client, spec: dict[str, str]) -> None:
    await client.post(PODS_URL, pod("p", node=spec.get("node")))
    if "status" in spec:
        await client.patch(f"{PODS_URL}/p/status", {"status": {"phase": spec["status"]}})
    code, body = await client.delete(f"{PODS_URL}/p")
    assert code == 200
    assert body["kind"] == "Pod"  # pods return the deleted object
    assert (await client.get(f"{PODS_URL}/p"))[0] == 404


async def test_finalizers_hold_the_object_until_the_last_is_removed(client: Client) -> None:
    await client.post(CM_URL, configmap("cm", finalizers=["example.com/a", "example.com/b"]))
    code, body = await client.delete(f"{CM_URL}/cm")
    assert code == 200
    assert body["metadata"]["deletionGracePeriodSeconds"] == 0
    assert body["metadata"]["deletionTimestamp"]
    _, after = await client.patch(f"{CM_URL}/cm", {"metadata": {"finalizers": ["example.com/b"]}})
    assert after["metadata"]["finalizers"] == ["example.com/b"]
    assert (await client.get(f"{CM_URL}/cm"))[0] == 200
    code, _ = await client.patch(f"{CM_URL}/cm", {"metadata": {"finalizers": None}})
    assert code == 200
    assert (await client.get(f"{CM_URL}/cm"))[0] == 404


async def test_delete_without_finalizers_returns_success_status(client: Client) -> None:
    _, cm = await client.post(CM_URL, configmap("cm"))
    code, body = await client.delete(f"{CM_URL}/cm")
    assert code == 200
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                    "details": {"name": "cm", "kind": "configmaps", "uid": cm["metadata"]["uid"]}, "code": 200}


@pytest.mark.parametrize(("delete_options", "finalizers"), [
    pytest.param({"propagationPolicy": "Foreground"}, ["foregroundDeletion"], id="foreground"),
    pytest.param({"propagationPolicy": "Orphan"}, ["orphan"], id="orphan"),
    pytest.param({"orphanDependents": True}, ["orphan"], id="legacy-orphan"),
])
async def test_propagation_policy_finalizers(client: Client, delete_options: dict[str, object],
                                             finalizers: list[str]) -> None:
    await client.post("/apis/apps/v1/namespaces/default/replicasets", {
        "metadata": {"name": "rs"}, "spec": {"selector": {"matchLabels": {"a": "b"}},
                                             "template": {"metadata": {"labels": {"a": "b"}},
                                                          "spec": {"containers": [{"name": "c", "image": "i"}]}}}})
    code, body = await client.delete("/apis/apps/v1/namespaces/default/replicasets/rs", delete_options)
    assert code == 200
    assert body["metadata"]["finalizers"] == finalizers
    assert body["metadata"]["generation"] == 2


async def test_background_is_the_default_and_deletes_at_once(client: Client) -> None:
    await client.post(CM_URL, configmap("cm"))
    await client.delete(f"{CM_URL}/cm", {"propagationPolicy": "Background"})
    assert (await client.get(f"{CM_URL}/cm"))[0] == 404


@pytest.mark.parametrize(("field", "message"), [
    pytest.param("uid", "the UID in the precondition (wrong) does not match the UID in record ({uid}). "
                        "The object might have been deleted and then recreated", id="uid"),
    pytest.param("resourceVersion", "the ResourceVersion in the precondition (wrong) does not match the "
                                    "ResourceVersion in record ({rv}). The object might have been modified", id="rv"),
])
async def test_delete_preconditions(client: Client, field: str, message: str) -> None:
    _, p = await client.post(PODS_URL, pod("p"))
    code, body = await client.delete(f"{PODS_URL}/p", {"preconditions": {field: "wrong"}})
    assert code == 409
    expected = message.format(uid=p["metadata"]["uid"], rv=p["metadata"]["resourceVersion"])
    assert body["message"] == f'Operation cannot be fulfilled on Pod "p": {expected}'


async def test_dry_run_delete_keeps_the_object(client: Client) -> None:
    await client.post(CM_URL, configmap("cm"))
    code, _ = await client.delete(f"{CM_URL}/cm", params={"dryRun": "All"})
    assert code == 200
    assert (await client.get(f"{CM_URL}/cm"))[0] == 200


async def test_namespace_lifecycle(client: Client) -> None:
    code, ns = await client.post("/api/v1/namespaces", {"metadata": {"name": "team"}})
    assert code == 201
    assert ns["spec"] == {"finalizers": ["kubernetes"]}
    assert ns["status"] == {"phase": "Active"}
    await client.post("/api/v1/namespaces/team/configmaps", configmap("before"))
    code, terminating = await client.delete("/api/v1/namespaces/team")
    assert code == 200
    assert terminating["status"]["phase"] == "Terminating"
    assert terminating["metadata"]["deletionTimestamp"]
    code, refused = await client.post("/api/v1/namespaces/team/configmaps", configmap("after"))
    assert code == 403
    assert refused["message"] == ('configmaps "after" is forbidden: unable to create new content in namespace team '
                                  "because it is being terminated")
    assert refused["details"]["causes"] == [{"reason": "NamespaceTerminating", "message":
                                             "namespace team is being terminated", "field": "metadata.namespace"}]
    # a second delete does not remove it while spec.finalizers remain
    await client.delete("/api/v1/namespaces/team")
    assert (await client.get("/api/v1/namespaces/team"))[0] == 200
    _, current = await client.get("/api/v1/namespaces/team")
    code, _ = await client.put("/api/v1/namespaces/team/finalize", {**current, "spec": {"finalizers": []}})
    assert code == 200
    assert (await client.get("/api/v1/namespaces/team"))[0] == 404


async def test_main_update_cannot_drop_namespace_finalizers(client: Client) -> None:
    _, ns = await client.post("/api/v1/namespaces", {"metadata": {"name": "team"}})
    _, out = await client.put("/api/v1/namespaces/team", {**ns, "spec": {"finalizers": []}})
    assert out["spec"]["finalizers"] == ["kubernetes"]


async def test_immortal_namespace_cannot_be_deleted(client: Client) -> None:
    code, body = await client.delete("/api/v1/namespaces/default")
    assert code == 403
    assert body["message"] == 'namespaces "default" is forbidden: this namespace may not be deleted'


def test_in_process_graceful_deletion_emits_events(api: ApiServer) -> None:
    api.create(PODS, pod("p", node="n1"), "default")
    marked = api.delete(PODS, "default", "p")
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 30
    with pytest.raises(StatusError) as info:
        api.create(PODS, pod("p"), "default")
    assert info.value.status["message"] == 'object is being deleted: pods "p" already exists'
    api.delete(PODS, "default", "p", grace_period_seconds=0)
    with pytest.raises(StatusError):
        api.get(PODS, "default", "p")
    assert api.get(NAMESPACES, None, "default")["status"]["phase"] == "Active"
    assert api.list(CONFIGMAPS, "default")[0] == []
