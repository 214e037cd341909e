"""Server-side apply of an autoscaling/v1 Scale to ``/scale``: the Scale's managers are the owners of the
parent's ``spec.replicas`` (ScaleHandler.ToSubresource), conflicts are theirs, and ownership goes back to the
parent with the applier recorded under subresource ``scale`` (ToParent)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from .conftest import Client, deployment

APPLY = "application/apply-patch+yaml"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
REPLICASETS = "/apis/apps/v1/namespaces/default/replicasets"
STATEFULSETS = "/apis/apps/v1/namespaces/default/statefulsets"
RCS = "/api/v1/namespaces/default/replicationcontrollers"


def _scale(replicas: int, name: str = "web") -> dict[str, Any]:
    return {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": name},
            "spec": {"replicas": replicas}}


async def _apply(client: Client, path: str, doc: dict[str, Any], manager: str, force: bool = False) -> tuple[int, Any]:
    params = {"fieldManager": manager, **({"force": "true"} if force else {})}
    return await client.call("PATCH", path, raw=yaml.safe_dump(doc).encode(), content_type=APPLY, params=params)


def _by_manager(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["manager"]: e for e in obj["metadata"].get("managedFields", [])}


async def test_apply_to_scale_conflicts_with_the_replicas_owner_then_takes_them(client: Client) -> None:
    code, _ = await client.post(DEPLOYMENTS, deployment("web", replicas=2), params={"fieldManager": "creator"})
    assert code == 201
    code, body = await _apply(client, f"{DEPLOYMENTS}/web/scale", _scale(5), "scaler")
    assert code == 409, body
    assert body["message"] == 'Apply failed with 1 conflict: conflict with "creator" using apps/v1: .spec.replicas'
    code, scale = await _apply(client, f"{DEPLOYMENTS}/web/scale", _scale(5), "scaler", force=True)
    assert code == 200, scale
    assert scale["kind"] == "Scale"
    assert scale["spec"]["replicas"] == 5
    _, got = await client.get(f"{DEPLOYMENTS}/web")
    assert got["spec"]["replicas"] == 5
    entries = _by_manager(got)
    assert entries["scaler"] == {"manager": "scaler", "operation": "Apply", "apiVersion": "apps/v1",
                                 "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}},
                                 "subresource": "scale"}
    assert "f:replicas" not in entries["creator"]["fieldsV1"]["f:spec"]
    assert "f:selector" in entries["creator"]["fieldsV1"]["f:spec"]


async def test_the_scale_applier_may_apply_again_and_a_main_apply_then_conflicts(client: Client) -> None:
    code, _ = await client.post(DEPLOYMENTS, deployment("web"), params={"fieldManager": "creator"})
    assert code == 201
    code, _ = await _apply(client, f"{DEPLOYMENTS}/web/scale", _scale(3), "scaler", force=True)
    assert code == 200
    code, scale = await _apply(client, f"{DEPLOYMENTS}/web/scale", _scale(4), "scaler")
    assert code == 200, scale
    assert scale["spec"]["replicas"] == 4
    doc = {**deployment("web", replicas=1)}
    code, body = await _apply(client, f"{DEPLOYMENTS}/web", doc, "creator")
    assert code == 409, body
    assert body["message"].endswith('conflict with "scaler" with subresource "scale": .spec.replicas')


@pytest.mark.parametrize("path", [REPLICASETS, STATEFULSETS, RCS])
async def test_apply_to_scale_of_other_kinds(client: Client, path: str) -> None:
    labels = {"app": "web"}
    template = {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    if path == RCS:
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "web"},
                                "spec": {"replicas": 1, "selector": labels, "template": template}}
    else:
        kind = "ReplicaSet" if path == REPLICASETS else "StatefulSet"
        body = {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": "web"},
                "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": template}}
    code, created = await client.post(path, body, params={"fieldManager": "creator"})
    assert code == 201, created
    code, scale = await _apply(client, f"{path}/web/scale", _scale(2), "scaler", force=True)
    assert code == 200, scale
    _, got = await client.get(f"{path}/web")
    assert got["spec"]["replicas"] == 2
    assert _by_manager(got)["scaler"]["subresource"] == "scale"
    assert _by_manager(got)["scaler"]["apiVersion"] == body["apiVersion"]


async def test_apply_to_scale_wants_a_scale(client: Client) -> None:
    code, _ = await client.post(DEPLOYMENTS, deployment("web"))
    assert code == 201
    code, body = await _apply(client, f"{DEPLOYMENTS}/web/scale", deployment("web"), "scaler")
    assert code == 400, body
    assert body["message"] == "invalid object type: apps/v1, Kind=Deployment"
    code, body = await _apply(client, f"{DEPLOYMENTS}/absent/scale", _scale(1, "absent"), "scaler")
    assert code == 404, body


CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
_POOL_SCHEMA = {"openAPIV3Schema": {"type": "object", "properties": {
    "spec": {"type": "object", "properties": {
        "image": {"type": "string"},
        "workers": {"type": "object", "properties": {"count": {"type": "integer"}}}}},
    "status": {"type": "object", "properties": {"workers": {"type": "integer"}}}}}}


def _pool_crd(*, v2: bool = False) -> dict[str, Any]:
    """Pools keep the Scale's replicas at ``.spec.workers.count``; a second version v2, if asked for, serves
    the same fields without a /scale."""
    versions: list[dict[str, Any]] = [
        {"name": "v1", "served": True, "storage": True, "schema": _POOL_SCHEMA,
         "subresources": {"scale": {"specReplicasPath": ".spec.workers.count",
                                    "statusReplicasPath": ".status.workers"}}}]
    if v2:
        versions.append({"name": "v2", "served": True, "storage": False, "schema": _POOL_SCHEMA})
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "pools.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced", "versions": versions,
                     "names": {"plural": "pools", "singular": "pool", "kind": "Pool"}}}


def _pool(count: int, version: str = "v1") -> dict[str, Any]:
    return {"apiVersion": f"example.com/{version}", "kind": "Pool", "metadata": {"name": "p"},
            "spec": {"image": "nginx", "workers": {"count": count}}}


POOLS = "/apis/example.com/v1/namespaces/default/pools"


async def test_apply_to_a_custom_resources_scale_maps_ownership_to_its_replicas_path(client: Client) -> None:
    code, body = await client.post(CRDS, _pool_crd())
    assert code == 201, body
    code, body = await _apply(client, f"{POOLS}/p", _pool(2), "creator")
    assert code == 201, body
    code, body = await _apply(client, f"{POOLS}/p/scale", _scale(5, "p"), "scaler")
    assert code == 409, body
    assert body["message"] == 'Apply failed with 1 conflict: conflict with "creator": .spec.replicas'
    assert body["details"]["causes"] == [{"reason": "FieldManagerConflict", "message": 'conflict with "creator"',
                                          "field": ".spec.replicas"}]
    code, scale = await _apply(client, f"{POOLS}/p/scale", _scale(5, "p"), "scaler", force=True)
    assert code == 200, scale
    assert (scale["kind"], scale["spec"], scale["status"]) == ("Scale", {"replicas": 5}, {"replicas": 0})
    _, got = await client.get(f"{POOLS}/p")
    assert got["spec"] == {"image": "nginx", "workers": {"count": 5}}
    entries = _by_manager(got)
    assert entries["scaler"] == {"manager": "scaler", "operation": "Apply", "apiVersion": "example.com/v1",
                                 "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:workers": {"f:count": {}}}},
                                 "subresource": "scale"}
    assert entries["creator"]["fieldsV1"] == {"f:spec": {"f:image": {}}}
    code, scale = await _apply(client, f"{POOLS}/p/scale", _scale(6, "p"), "scaler")
    assert code == 200, scale
    assert scale["spec"]["replicas"] == 6
    code, body = await _apply(client, f"{POOLS}/p", _pool(2), "creator")
    assert code == 409, body
    assert body["message"] == ('Apply failed with 1 conflict: conflict with "scaler" with subresource "scale": '
                               ".spec.workers.count")
    code, body = await _apply(client, f"{POOLS}/p", _pool(6), "creator")  # the same value: co-owned
    assert code == 200, body
    code, scale = await _apply(client, f"{POOLS}/p/scale", _scale(7, "p"), "scaler")
    assert code == 409, scale
    assert scale["message"] == 'Apply failed with 1 conflict: conflict with "creator": .spec.replicas'


async def test_a_version_without_scale_keeps_its_managers(client: Client) -> None:
    """Upstream maps each version of the CRD to its replicas path, none for a version without /scale: a
    manager that wrote the replicas through such a version is no owner of the Scale's replicas and keeps its
    entry untouched. The Scale then has no managers at all, so its first apply meets the fields' stand-in
    owner, before-first-apply, as any first apply to an unmanaged object does."""
    code, body = await client.post(CRDS, _pool_crd(v2=True))
    assert code == 201, body
    code, body = await _apply(client, "/apis/example.com/v2/namespaces/default/pools/p", _pool(2, "v2"), "other")
    assert code == 201, body
    code, body = await _apply(client, "/apis/example.com/v2/namespaces/default/pools/p/scale", _scale(3, "p"),
                              "scaler")
    assert code == 404, body
    code, scale = await _apply(client, f"{POOLS}/p/scale", _scale(3, "p"), "scaler")
    assert code == 409, scale
    assert scale["message"] == ('Apply failed with 1 conflict: conflict with "before-first-apply" with subresource '
                                '"scale" using autoscaling/v1: .spec.replicas')
    code, scale = await _apply(client, f"{POOLS}/p/scale", _scale(3, "p"), "scaler", force=True)
    assert code == 200, scale
    _, got = await client.get(f"{POOLS}/p")
    assert got["spec"]["workers"] == {"count": 3}
    entries = _by_manager(got)
    assert entries["other"]["apiVersion"] == "example.com/v2"
    assert entries["other"]["fieldsV1"] == {"f:spec": {"f:image": {}, "f:workers": {"f:count": {}}}}
    assert entries["scaler"]["fieldsV1"] == {"f:spec": {"f:workers": {"f:count": {}}}}
    assert set(entries) == {"other", "scaler"}
