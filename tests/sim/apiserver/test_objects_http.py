"""Create / get / update / patch through HTTP: resourceVersion, conflicts, generation, status, error shapes."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.api.resources import DEPLOYMENTS, PODS
from controller_manager.sim.apiserver import ApiServer, StatusError
from tests.sim.apiserver.conftest import Client, configmap, deployment, pod

PODS_URL = "/api/v1/namespaces/default/pods"
DEPLOY_URL = "/apis/apps/v1/namespaces/default/deployments"
CM_URL = "/api/v1/namespaces/default/configmaps"


async def test_create_fills_system_metadata(client: Client) -> None:
    code, body = await client.post(PODS_URL, pod("p"))
    assert code == 201
    meta = body["metadata"]
    assert meta["namespace"] == "default"
    assert len(meta["uid"]) == 36
    assert meta["creationTimestamp"].endswith("Z")
    assert int(meta["resourceVersion"]) > 0
    assert meta["generation"] == 1
    assert body["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    code, got = await client.get(f"{PODS_URL}/p")
    assert code == 200
    assert got == body


async def test_create_without_kind_takes_it_from_the_url(client: Client) -> None:
    code, body = await client.post(CM_URL, {"metadata": {"name": "c"}, "data": {}})
    assert code == 201
    assert (body["kind"], body["apiVersion"]) == ("ConfigMap", "v1")


async def test_generate_name_appends_five_chars_of_the_apiserver_alphabet(client: Client) -> None:
    code, body = await client.post(CM_URL, configmap("", generateName="web-"))
    assert code == 201
    name = body["metadata"]["name"]
    assert name.startswith("web-")
    assert len(name) == len("web-") + 5
    assert set(name[4:]) <= set("bcdfghjklmnpqrstvwxz2456789")


async def test_resource_versions_are_one_cluster_wide_counter(client: Client) -> None:
    _, a = await client.post(CM_URL, configmap("a"))
    _, b = await client.post(PODS_URL, pod("b"))
    _, c = await client.post(CM_URL, configmap("c"))
    rvs = [int(x["metadata"]["resourceVersion"]) for x in (a, b, c)]
    assert rvs == [rvs[0], rvs[0] + 1, rvs[0] + 2]


async def test_create_existing_name_is_409_already_exists(client: Client) -> None:
    await client.post(CM_URL, configmap("dup"))
    code, body = await client.post(CM_URL, configmap("dup"))
    assert code == 409
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": 'configmaps "dup" already exists', "reason": "AlreadyExists",
                    "details": {"name": "dup", "kind": "configmaps"}, "code": 409}


async def test_get_missing_is_404_with_group_in_the_message(client: Client) -> None:
    code, body = await client.get(f"{DEPLOY_URL}/nope")
    assert code == 404
    assert body["message"] == 'deployments.apps "nope" not found'
    assert body["details"] == {"name": "nope", "group": "apps", "kind": "deployments"}
    assert body["reason"] == "NotFound"


async def test_update_with_stale_resource_version_is_409_conflict(client: Client) -> None:
    _, cm = await client.post(CM_URL, configmap("cm"))
    _, newer = await client.put(f"{CM_URL}/cm", {**cm, "data": {"k": "2"}})
    assert int(newer["metadata"]["resourceVersion"]) > int(cm["metadata"]["resourceVersion"])
    code, body = await client.put(f"{CM_URL}/cm", {**cm, "data": {"k": "3"}})
    assert code == 409
    assert body["reason"] == "Conflict"
    assert body["message"] == ('Operation cannot be fulfilled on configmaps "cm": the object has been modified; '
                               "please apply your changes to the latest version and try again")


async def test_update_without_resource_version_is_unconditional(client: Client) -> None:
    _, cm = await client.post(CM_URL, configmap("cm"))
    await client.put(f"{CM_URL}/cm", {**cm, "data": {"k": "2"}})
    body = {**cm, "metadata": {k: v for k, v in cm["metadata"].items() if k != "resourceVersion"},
            "data": {"k": "3"}}
    code, out = await client.put(f"{CM_URL}/cm", body)
    assert code == 200
    assert out["data"] == {"k": "3"}


async def test_noop_update_keeps_resource_version(client: Client) -> None:
    _, cm = await client.post(CM_URL, configmap("cm"))
    code, out = await client.put(f"{CM_URL}/cm", cm)
    assert code == 200
    assert out["metadata"]["resourceVersion"] == cm["metadata"]["resourceVersion"]


async def test_update_cannot_change_uid_or_creation_timestamp(client: Client) -> None:
    _, cm = await client.post(CM_URL, configmap("cm"))
    meta = {**cm["metadata"], "creationTimestamp": "2000-01-01T00:00:00Z"}
    _, out = await client.put(f"{CM_URL}/cm", {**cm, "metadata": meta, "data": {"k": "9"}})
    assert out["metadata"]["creationTimestamp"] == cm["metadata"]["creationTimestamp"]
    assert out["metadata"]["uid"] == cm["metadata"]["uid"]


async def test_name_mismatch_with_url_is_400(client: Client) -> None:
    _, cm = await client.post(CM_URL, configmap("cm"))
    code, body = await client.put(f"{CM_URL}/other", cm)
    assert code == 400
    assert body["message"] == "the name of the object (cm) does not match the name on the URL (other)"


@pytest.mark.parametrize(("change", "bumps"), [
    pytest.param({"spec": {"replicas": 3}}, True, id="spec-change"),
    pytest.param({"metadata": {"labels": {"x": "y"}}}, False, id="label-change"),
    pytest.param({"metadata": {"annotations": {"x": "y"}}}, True, id="deployment-annotation-change"),
    pytest.param({"status": {"replicas": 7}}, False, id="status-ignored-on-main-resource"),
])
async def test_deployment_generation(client: Client, change: dict[str, Any], bumps: bool) -> None:
    _, d = await client.post(DEPLOY_URL, deployment("d"))
    assert d["metadata"]["generation"] == 1
    code, out = await client.patch(f"{DEPLOY_URL}/d", change)
    assert code == 200, out
    assert out["metadata"]["generation"] == (2 if bumps else 1)
    assert out["status"] == {}


async def test_pod_label_change_keeps_generation(client: Client) -> None:
    await client.post(PODS_URL, pod("p"))
    _, out = await client.patch(f"{PODS_URL}/p", {"metadata": {"labels": {"a": "b"}}})
    assert out["metadata"]["generation"] == 1


async def test_status_subresource_changes_only_status(client: Client) -> None:
    _, d = await client.post(DEPLOY_URL, deployment("d"))
    change = {**d, "spec": {**d["spec"], "replicas": 9}, "status": {"replicas": 1, "observedGeneration": 1},
              "metadata": {**d["metadata"], "labels": {"new": "label"}, "annotations": {"a": "b"}}}
    code, out = await client.put(f"{DEPLOY_URL}/d/status", change)
    assert code == 200
    assert out["status"] == {"replicas": 1, "observedGeneration": 1}
    assert out["spec"]["replicas"] == 1
    assert "labels" not in out["metadata"]  # the deployment status strategy resets labels
    assert out["metadata"]["annotations"] == {"a": "b"}
    assert out["metadata"]["generation"] == 1


async def test_pod_status_patch(client: Client) -> None:
    await client.post(PODS_URL, pod("p"))
    code, out = await client.patch(f"{PODS_URL}/p/status", {"status": {"phase": "Running"},
                                                              "spec": {"nodeName": "sneaky"}})
    assert code == 200
    assert out["status"]["phase"] == "Running"
    assert "nodeName" not in out["spec"]
    _, got = await client.get(f"{PODS_URL}/p/status")
    assert got["status"]["phase"] == "Running"


@pytest.mark.parametrize(("patch_type", "patch"), [
    pytest.param("merge", {"data": {"k": "m"}}, id="merge"),
    pytest.param("json", [{"op": "replace", "path": "/data/k", "value": "m"}], id="json"),
    pytest.param("strategic", {"data": {"k": "m"}}, id="strategic"),
])
async def test_patch_types(client: Client, patch_type: str, patch: Any) -> None:
    await client.post(CM_URL, configmap("cm"))
    code, out = await client.patch(f"{CM_URL}/cm", patch, patch_type)
    assert code == 200
    assert out["data"] == {"k": "m"}


async def test_patch_with_stale_resource_version_conflicts(client: Client) -> None:
    _, cm = await client.post(CM_URL, configmap("cm"))
    await client.patch(f"{CM_URL}/cm", {"data": {"k": "1"}})
    code, body = await client.patch(f"{CM_URL}/cm", {"metadata": {"resourceVersion": cm["metadata"]["resourceVersion"]},
                                                     "data": {"k": "2"}})
    assert code == 409
    assert body["reason"] == "Conflict"


async def test_dry_run_create_stores_nothing(client: Client) -> None:
    code, body = await client.post(CM_URL, configmap("dry"), params={"dryRun": "All"})
    assert code == 201
    assert body["metadata"]["name"] == "dry"
    code, _ = await client.get(f"{CM_URL}/dry")
    assert code == 404


async def test_create_in_missing_namespace_is_404_namespace(client: Client) -> None:
    code, body = await client.post("/api/v1/namespaces/nope/configmaps", configmap("c"))
    assert code == 404
    assert body["message"] == 'namespaces "nope" not found'
    assert body["details"] == {"name": "nope", "kind": "namespaces"}


def test_in_process_calls_share_semantics(api: ApiServer) -> None:
    created = api.create(DEPLOYMENTS, deployment("d"), "default")
    created["spec"]["replicas"] = 5  # callers own the dicts they get back
    assert api.get(DEPLOYMENTS, "default", "d")["spec"]["replicas"] == 1
    updated = api.update(DEPLOYMENTS, created)
    assert updated["metadata"]["generation"] == 2
    with pytest.raises(StatusError) as info:
        api.update(DEPLOYMENTS, created)
    assert info.value.code == 409
    items, rv = api.list(PODS)
    assert items == []
    assert int(rv) == api.rv
