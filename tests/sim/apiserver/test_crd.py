"""CustomResourceDefinitions through the HTTP API: the CRD's validation and status, serving its instances
(discovery, CRUD, schema validation, pruning, defaulting, subresources) and its deletion."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller_manager.sim.apiserver import ApiServerOptions
from tests.sim.apiserver import upstream_schema
from tests.sim.apiserver.conftest import Client

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
CRONTABS = "/apis/stable.example.com/v1/namespaces/default/crontabs"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {"type": "object", "required": ["cronSpec"], "properties": {
            "cronSpec": {"type": "string", "pattern": "^(\\d+|\\*)(/\\d+)?(\\s+(\\d+|\\*)(/\\d+)?){4}$"},
            "image": {"type": "string"},
            "replicas": {"type": "integer", "minimum": 1, "maximum": 10, "default": 1},
            "mode": {"type": "string", "enum": ["fast", "slow"]},
            "port": {"x-kubernetes-int-or-string": True},
            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        }},
        "status": {"type": "object", "properties": {"replicas": {"type": "integer"},
                                                   "selector": {"type": "string"}}},
    },
}


def crd(*, scope: str = "Namespaced", subresources: dict[str, Any] | None = None, **names: Any) -> dict[str, Any]:
    version: dict[str, Any] = {"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": copy.deepcopy(SCHEMA)},
                               "additionalPrinterColumns": [
                                   {"name": "Spec", "type": "string", "jsonPath": ".spec.cronSpec"},
                                   {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"}]}
    if subresources is not None:
        version["subresources"] = subresources
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "crontabs.stable.example.com"},
            "spec": {"group": "stable.example.com", "scope": scope, "versions": [version],
                     "names": {"plural": "crontabs", "kind": "CronTab", "shortNames": ["ct"], **names}}}


def crontab(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": name},
            "spec": {"cronSpec": "* * * * */5", **spec}}


def _condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    return next(c for c in obj["status"]["conditions"] if c["type"] == type_)


async def test_create_sets_names_and_conditions(client: Client) -> None:
    code, body = await client.post(CRDS, crd())
    assert code == 201, body
    assert body["metadata"]["generation"] == 1
    assert body["spec"]["names"]["singular"] == "crontab"
    assert body["spec"]["names"]["listKind"] == "CronTabList"
    assert body["spec"]["conversion"] == {"strategy": "None"}
    assert (body["spec"]["versions"][0]["served"], body["spec"]["versions"][0]["storage"]) == (True, True)
    status = body["status"]
    assert status["acceptedNames"] == {"plural": "crontabs", "singular": "crontab", "shortNames": ["ct"],
                                       "kind": "CronTab", "listKind": "CronTabList"}
    assert status["storedVersions"] == ["v1"]
    assert _condition(body, "NamesAccepted")["reason"] == "NoConflicts"
    established = _condition(body, "Established")
    assert (established["status"], established["reason"]) == ("True", "InitialNamesAccepted")


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda c: c["metadata"].update(name="other.stable.example.com"),
     'metadata.name: Invalid value: "other.stable.example.com": must be spec.names.plural+"."+spec.group'),
    (lambda c: c["spec"].update(scope="Global"),
     'spec.scope: Unsupported value: "Global": supported values: "Cluster", "Namespaced"'),
    (lambda c: c["spec"]["versions"][0].update(storage=False),
     "must have exactly one version marked as storage version"),
    (lambda c: c["spec"]["versions"][0].pop("schema"),
     "spec.versions[0].schema.openAPIV3Schema: Required value"),
    (lambda c: c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"].update(
        x={"description": "no type"}),
     "spec.validation.openAPIV3Schema.properties[spec].properties[x].type: Required value: "
     "must not be empty for specified object fields"),
    (lambda c: c["spec"]["versions"][0].update(subresources={"scale": {"specReplicasPath": ".replicas",
                                                                       "statusReplicasPath": ".status.replicas"}}),
     'spec.subresources.scale.specReplicasPath: Invalid value: ".replicas": should be a json path '
     "under .spec"),
    (lambda c: c["spec"].update(conversion={"strategy": "Magic"}),
     'spec.conversion.strategy: Unsupported value: "Magic": supported values: "None", "Webhook"'),
    (lambda c: c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"].update(uniqueItems=True),
     "spec.validation.openAPIV3Schema.properties[spec].uniqueItems: Forbidden: uniqueItems cannot be set "
     "to true since the runtime complexity becomes quadratic"),
    (lambda c: c["spec"]["versions"][0]["additionalPrinterColumns"][0].update(type="str"),
     'spec.additionalPrinterColumns[0].type: Invalid value: "str": must be one of boolean,date,integer,number,string'),
    (lambda c: c["spec"]["versions"][0]["additionalPrinterColumns"][0].update(format="uuid"),
     'spec.additionalPrinterColumns[0].format: Invalid value: "uuid": must be one of '
     "byte,date,date-time,double,float,int32,int64,password"),
    (lambda c: c["spec"]["versions"][0]["additionalPrinterColumns"][1].pop("jsonPath"),
     "spec.additionalPrinterColumns[1].JSONPath: Required value"),
    (lambda c: c["spec"]["versions"][0]["additionalPrinterColumns"][1].update(jsonPath="spec.replicas"),
     'spec.additionalPrinterColumns[1].JSONPath: Invalid value: "spec.replicas": must be a simple json path '
     "starting with ."),
    (lambda c: c["spec"]["versions"][0]["additionalPrinterColumns"][1].pop("type"),
     "spec.additionalPrinterColumns[1].type: Required value: must be one of boolean,date,integer,number,string"),
    (lambda c: c["spec"]["names"].update(kind="Cron_Tab"),
     'spec.names.kind: Invalid value: "Cron_Tab": may have mixed case, but should otherwise match: '),
])
async def test_invalid_definitions(client: Client, mutate: Any, message: str) -> None:
    body = crd()
    mutate(body)
    code, status = await client.post(CRDS, body)
    assert code == 422, status
    assert message in status["message"]
    assert status["details"]["kind"] == "CustomResourceDefinition"


def _two_versions(second: dict[str, Any]) -> dict[str, Any]:
    body = crd()
    v1beta1 = copy.deepcopy(body["spec"]["versions"][0])
    v1beta1.update(name="v1beta1", storage=False, **second)
    body["spec"]["versions"].append(v1beta1)
    return body


def _untyped(version_schema: dict[str, Any]) -> None:
    version_schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["x"] = {"description": "no type"}


async def test_error_paths_follow_where_the_real_server_moves_identical_per_version_fields(client: Client) -> None:
    """Identical per-version schemas and subresources are validated as spec.validation / spec.subresources (the
    internal version's top-level fields); different ones at their own version, and a missing schema always there."""
    untyped = ".openAPIV3Schema.properties[spec].properties[x].type: Required value"
    same = _two_versions({})
    for v in same["spec"]["versions"]:
        _untyped(v["schema"])
    code, status = await client.post(CRDS, same)
    assert code == 422, status
    assert f"spec.validation{untyped}" in status["message"]
    assert "spec.versions[" not in status["message"]

    differ = _two_versions({})
    _untyped(differ["spec"]["versions"][1]["schema"])
    code, status = await client.post(CRDS, differ)
    assert code == 422, status
    assert f"spec.versions[1].schema{untyped}" in status["message"]
    assert "spec.validation" not in status["message"]
    assert "spec.versions[0]" not in status["message"]

    missing = _two_versions({})
    del missing["spec"]["versions"][1]["schema"]
    _untyped(missing["spec"]["versions"][0]["schema"])
    code, status = await client.post(CRDS, missing)
    assert code == 422, status
    causes = [c["field"] for c in status["details"]["causes"]]
    assert causes == ["spec.versions[1].schema.openAPIV3Schema",  # first, as upstream checks it before the rest
                      "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[x].type"], causes

    scale = {"subresources": {"scale": {"specReplicasPath": ".replicas", "statusReplicasPath": ".status.replicas"}}}
    body = _two_versions(scale)
    body["spec"]["versions"][0].update(scale)
    code, status = await client.post(CRDS, body)
    assert code == 422, status
    assert [c["field"] for c in status["details"]["causes"]] == ["spec.subresources.scale.specReplicasPath"]


async def test_unserved_versions_are_written_false(client: Client) -> None:
    body = crd()
    v1beta1 = copy.deepcopy(body["spec"]["versions"][0])
    del v1beta1["storage"]
    del v1beta1["served"]
    v1beta1["name"] = "v1beta1"
    body["spec"]["versions"].append(v1beta1)
    code, created = await client.post(CRDS, body)
    assert code == 201, created
    assert (created["spec"]["versions"][1]["served"], created["spec"]["versions"][1]["storage"]) == (False, False)
    assert (await client.get("/apis/stable.example.com/v1beta1"))[0] == 404


async def test_name_conflict_is_not_established(client: Client) -> None:
    assert (await client.post(CRDS, crd()))[0] == 201
    other = crd(plural="crontabs2", singular="crontab2", shortNames=["ct2"], kind="CronTab")
    other["metadata"]["name"] = "crontabs2.stable.example.com"
    code, body = await client.post(CRDS, other)
    assert code == 201
    assert _condition(body, "NamesAccepted") | {"lastTransitionTime": ""} == {
        "type": "NamesAccepted", "status": "False", "reason": "KindConflict", "message": '"CronTab" is already in use',
        "lastTransitionTime": ""}
    assert _condition(body, "Established")["status"] == "False"
    code, _ = await client.get("/apis/stable.example.com/v1/namespaces/default/crontabs2")
    assert code == 404


async def test_discovery_lists_the_served_version(client: Client) -> None:
    assert (await client.get("/apis/stable.example.com/v1"))[0] == 404
    await client.post(CRDS, crd(subresources={"status": {}}))
    _, groups = await client.get("/apis")
    assert any(g["name"] == "stable.example.com" for g in groups["groups"])
    _, group = await client.get("/apis/stable.example.com")
    assert group["preferredVersion"]["groupVersion"] == "stable.example.com/v1"
    _, resources = await client.get("/apis/stable.example.com/v1")
    names = {r["name"]: r for r in resources["resources"]}
    assert names["crontabs"]["kind"] == "CronTab"
    assert names["crontabs"]["shortNames"] == ["ct"]
    assert names["crontabs"]["namespaced"] is True
    assert "crontabs/status" in names
    _, aggregated = await client.get("/apis", headers={
        "Accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"})
    group = next(g for g in aggregated["items"] if g["metadata"]["name"] == "stable.example.com")
    resource = group["versions"][0]["resources"][0]
    assert resource["resource"] == "crontabs"
    assert resource["responseKind"] == {"group": "stable.example.com", "version": "v1", "kind": "CronTab"}
    assert resource["scope"] == "Namespaced"
    assert [s["subresource"] for s in resource["subresources"]] == ["status"]
    await client.delete(f"{CRDS}/crontabs.stable.example.com")
    _, groups = await client.get("/apis")
    assert not any(g["name"] == "stable.example.com" for g in groups["groups"])


async def test_crud_with_defaults_and_pruning(client: Client) -> None:
    await client.post(CRDS, crd())
    code, body = await client.post(CRONTABS, crontab("a", unknown=1, extra={"free": {"x": 1}}))
    assert code == 201, body
    assert body["spec"] == {"cronSpec": "* * * * */5", "replicas": 1, "extra": {"free": {"x": 1}}}
    assert body["metadata"]["generation"] == 1
    code, body = await client.post(CRONTABS, crontab("b", unknown=1), params={"fieldValidation": "Strict"})
    assert code == 400
    assert body["message"] == ('CronTab in version "v1" cannot be handled as a CronTab: strict decoding error: '
                               'unknown field "spec.unknown"')
    code, body = await client.patch(f"{CRONTABS}/a", {"spec": {"image": "x"}})
    assert code == 200
    assert body["metadata"]["generation"] == 2
    code, listed = await client.get(CRONTABS)
    assert code == 200
    assert listed["kind"] == "CronTabList"
    assert [i["metadata"]["name"] for i in listed["items"]] == ["a"]
    code, _ = await client.delete(f"{CRONTABS}/a")
    assert code == 200
    assert (await client.get(f"{CRONTABS}/a"))[0] == 404


@pytest.mark.parametrize(("spec", "message"), [
    ({"replicas": "three"},
     'spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"'),
    ({"replicas": 0}, "spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1"),
    ({"replicas": 11}, "spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10"),
    ({"mode": "medium"}, 'spec.mode: Unsupported value: "medium": supported values: "fast", "slow"'),
    ({"cronSpec": "bad"}, 'spec.cronSpec: Invalid value: "bad": spec.cronSpec in body should match '),
    ({"port": True}, 'spec.port: Invalid value: "boolean": spec.port in body must be of type integer,string: '
                     '"boolean"'),
])
async def test_schema_validation(client: Client, spec: dict[str, Any], message: str) -> None:
    await client.post(CRDS, crd())
    code, body = await client.post(CRONTABS, crontab("a", **spec))
    assert code == 422, body
    assert body["message"].startswith('CronTab.stable.example.com "a" is invalid: ')
    assert message in body["message"]


async def test_required_field(client: Client) -> None:
    await client.post(CRDS, crd())
    code, body = await client.post(CRONTABS, {"apiVersion": "stable.example.com/v1", "kind": "CronTab",
                                              "metadata": {"name": "a"}, "spec": {"image": "x"}})
    assert code == 422
    assert body["message"] == 'CronTab.stable.example.com "a" is invalid: spec.cronSpec: Required value'


async def test_int_or_string_takes_both(client: Client) -> None:
    await client.post(CRDS, crd())
    assert (await client.post(CRONTABS, crontab("a", port=80)))[0] == 201
    assert (await client.post(CRONTABS, crontab("b", port="http")))[0] == 201


async def test_status_subresource_splits_spec_and_status(client: Client) -> None:
    await client.post(CRDS, crd(subresources={"status": {}}))
    code, body = await client.post(CRONTABS, {**crontab("a"), "status": {"replicas": 3}})
    assert code == 201
    assert "status" not in body
    code, body = await client.patch(f"{CRONTABS}/a/status", {"status": {"replicas": 2}, "spec": {"image": "y"}})
    assert code == 200, body
    assert body["status"] == {"replicas": 2}
    assert "image" not in body["spec"]
    assert body["metadata"]["generation"] == 1
    code, body = await client.patch(f"{CRONTABS}/a", {"status": {"replicas": 5}, "spec": {"image": "z"}})
    assert body["status"] == {"replicas": 2}
    assert body["spec"]["image"] == "z"
    assert body["metadata"]["generation"] == 2


async def test_scale_subresource(client: Client) -> None:
    await client.post(CRDS, crd(subresources={"scale": {"specReplicasPath": ".spec.replicas",
                                                        "statusReplicasPath": ".status.replicas",
                                                        "labelSelectorPath": ".status.selector"}}))
    await client.post(CRONTABS, crontab("a", replicas=2))
    code, scale = await client.get(f"{CRONTABS}/a/scale")
    assert code == 200, scale
    assert scale["kind"] == "Scale"
    assert scale["apiVersion"] == "autoscaling/v1"
    assert scale["spec"] == {"replicas": 2}
    assert scale["status"] == {"replicas": 0}
    code, scale = await client.patch(f"{CRONTABS}/a/scale", {"spec": {"replicas": 4}})
    assert code == 200, scale
    assert scale["spec"]["replicas"] == 4
    assert (await client.get(f"{CRONTABS}/a"))[1]["spec"]["replicas"] == 4


async def test_cluster_scoped(client: Client) -> None:
    await client.post(CRDS, crd(scope="Cluster"))
    code, body = await client.post("/apis/stable.example.com/v1/crontabs", crontab("a"))
    assert code == 201
    assert "namespace" not in body["metadata"]
    assert (await client.get("/apis/stable.example.com/v1/crontabs/a"))[0] == 200


async def test_table_uses_printer_columns(client: Client) -> None:
    await client.post(CRDS, crd())
    await client.post(CRONTABS, crontab("a", replicas=3))
    code, table = await client.get(CRONTABS, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    assert code == 200
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Spec", "Replicas"]
    assert table["rows"][0]["cells"][:3] == ["a", "* * * * */5", 3]


async def test_deleting_the_definition_deletes_instances(client: Client) -> None:
    await client.post(CRDS, crd())
    await client.post(CRONTABS, crontab("a"))
    await client.post(CRONTABS, {**crontab("b"), "metadata": {"name": "b", "finalizers": ["example.com/hold"]}})
    code, body = await client.delete(f"{CRDS}/crontabs.stable.example.com")
    assert code == 200
    code, crd_now = await client.get(f"{CRDS}/crontabs.stable.example.com")
    assert code == 200
    assert crd_now["metadata"]["finalizers"] == ["customresourcecleanup.apiextensions.k8s.io"]
    assert _condition(crd_now, "Terminating")["reason"] == "InstanceDeletionInProgress"
    code, body = await client.post(CRONTABS, crontab("c"))
    assert code == 405, body
    assert (await client.get(f"{CRONTABS}/a"))[0] == 404
    await client.patch(f"{CRONTABS}/b", {"metadata": {"finalizers": None}})
    assert (await client.get(f"{CRDS}/crontabs.stable.example.com"))[0] == 404
    assert (await client.get(CRONTABS))[0] == 404
    code, _ = await client.post(CRDS, crd())
    assert code == 201
    _, listed = await client.get(CRONTABS)
    assert listed["items"] == []


async def test_versions_share_objects_and_show_their_own_api_version(client: Client) -> None:
    body = crd()
    v1beta1 = copy.deepcopy(body["spec"]["versions"][0])
    v1beta1.update(name="v1beta1", storage=False)
    body["spec"]["versions"].insert(0, v1beta1)  # discovery still prefers v1
    await client.post(CRDS, body)
    code, created = await client.post("/apis/stable.example.com/v1beta1/namespaces/default/crontabs", {
        **crontab("a"), "apiVersion": "stable.example.com/v1beta1"})
    assert code == 201, created
    assert created["apiVersion"] == "stable.example.com/v1beta1"
    _, got = await client.get(f"{CRONTABS}/a")
    assert got["apiVersion"] == "stable.example.com/v1"
    assert got["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    _, groups = await client.get("/apis/stable.example.com")
    assert [v["version"] for v in groups["versions"]] == ["v1", "v1beta1"]
    assert groups["preferredVersion"]["version"] == "v1"


async def test_updating_the_definition_changes_what_is_served(client: Client) -> None:
    _, created = await client.post(CRDS, crd())
    assert (await client.get(f"{CRONTABS}/a/status"))[0] == 404
    updated = copy.deepcopy(created)
    updated["spec"]["versions"][0]["subresources"] = {"status": {}}
    code, body = await client.put(f"{CRDS}/crontabs.stable.example.com", updated)
    assert code == 200, body
    assert body["metadata"]["generation"] == 2
    await client.post(CRONTABS, crontab("a"))
    code, body = await client.patch(f"{CRONTABS}/a/status", {"status": {"replicas": 1}})
    assert code == 200, body
    assert body["status"] == {"replicas": 1}


async def test_watch_sees_custom_resources(client: Client) -> None:
    await client.post(CRDS, crd())
    await client.post(CRONTABS, crontab("a"))
    resp = await client.tc.get(CRONTABS, params={"watch": "1"}, headers={"Authorization": "Bearer admin-token"})
    assert resp.status == 200
    first = await resp.content.readline()
    resp.close()
    assert b'"type":"ADDED"' in first
    assert b'"name":"a"' in first


async def test_yaml_bodies(client: Client) -> None:
    await client.post(CRDS, crd())
    raw = (b"apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: yam\nspec:\n"
           b"  cronSpec: '* * * * *'\n")
    code, body = await client.call("POST", CRONTABS, raw=raw, content_type="application/yaml")
    assert code == 201, body["message"]
    code, _ = await client.call("POST", CRONTABS, raw=b"\x00", content_type="application/vnd.kubernetes.protobuf")
    assert code == 415


async def test_strategic_merge_patch_is_refused(client: Client) -> None:
    await client.post(CRDS, crd())
    await client.post(CRONTABS, crontab("a"))
    code, body = await client.patch(f"{CRONTABS}/a", {"spec": {"image": "x"}}, "strategic")
    assert code == 415, body
    assert body["message"] == ("the body of the request was in an unknown format - accepted media types include: "
                               "application/json-patch+json, application/merge-patch+json, "
                               "application/apply-patch+yaml")


async def test_openapi_v3_publishes_the_version_schema(client: Client) -> None:
    assert (await client.get("/openapi/v3/apis/stable.example.com/v1"))[0] == 404
    _, created = await client.post(CRDS, crd())
    _, listed = await client.get("/openapi/v3")
    assert "apis/stable.example.com/v1" in listed["paths"]
    code, doc = await client.get("/openapi/v3/apis/stable.example.com/v1")
    assert code == 200
    kind = doc["components"]["schemas"]["com.example.stable.v1.CronTab"]
    assert kind["x-kubernetes-group-version-kind"] == [{"group": "stable.example.com", "kind": "CronTab",
                                                        "version": "v1"}]
    assert kind["properties"]["spec"]["properties"]["replicas"] == {"type": "integer", "minimum": 1,
                                                                    "maximum": 10, "default": 1}
    assert "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" in doc["components"]["schemas"]
    assert "/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}" in doc["paths"]
    created["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["note"] = {
        "type": "string"}
    assert (await client.put(f"{CRDS}/crontabs.stable.example.com", created))[0] == 200
    _, doc = await client.get("/openapi/v3/apis/stable.example.com/v1")
    assert "note" in doc["components"]["schemas"]["com.example.stable.v1.CronTab"]["properties"]["spec"][
        "properties"]
    code, v2 = await client.get("/openapi/v2")
    assert code == 200
    assert "com.example.stable.v1.CronTabList" in v2["definitions"]


def test_kube_aware_version_order() -> None:
    from controller_manager.sim.apiserver.crd.definition import version_priority

    names = ["foo", "v1alpha1", "v1", "v2beta1", "v1beta2", "v2", "v1beta1", "v10", "bar"]
    assert sorted(names, key=version_priority) == ["v10", "v2", "v1", "v2beta1", "v1beta2", "v1beta1", "v1alpha1",
                                                   "bar", "foo"]


async def test_list_kind_and_field_selectors(client: Client) -> None:
    await client.post(CRDS, crd(listKind="CronTabCollection"))
    await client.post(CRONTABS, crontab("a"))
    await client.post(CRONTABS, crontab("b"))
    code, listed = await client.get(CRONTABS, params={"fieldSelector": "metadata.name=b"})
    assert code == 200, listed
    assert listed["kind"] == "CronTabCollection"
    assert [i["metadata"]["name"] for i in listed["items"]] == ["b"]


async def test_official_client_reads_definitions(client: Client) -> None:
    import kubernetes
    import orjson

    _, created = await client.post(CRDS, crd(subresources={"status": {}}))
    _, listed = await client.get(CRDS)
    upstream_schema.check(created)
    api_client = kubernetes.client.ApiClient()
    model = api_client.deserialize(orjson.dumps(created).decode(), "V1CustomResourceDefinition", "application/json")
    assert model.status.accepted_names.kind == "CronTab"
    assert [c.type for c in model.status.conditions] == ["NamesAccepted", "Established"]
    models = api_client.deserialize(orjson.dumps(listed).decode(), "V1CustomResourceDefinitionList",
                                    "application/json")
    assert [m.metadata.name for m in models.items] == ["crontabs.stable.example.com"]
    await client.post(CRONTABS, {**crontab("a"), "metadata": {"name": "a", "finalizers": ["example.com/hold"]}})
    await client.delete(f"{CRDS}/crontabs.stable.example.com")
    _, terminating = await client.get(f"{CRDS}/crontabs.stable.example.com")
    upstream_schema.check(terminating)


async def test_definition_status_writes_keep_spec_and_metadata(client: Client) -> None:
    _, created = await client.post(CRDS, crd())
    changed = copy.deepcopy(created)
    changed["metadata"]["labels"] = {"x": "y"}
    changed["spec"]["names"]["shortNames"] = ["zz"]
    changed["status"]["acceptedNames"]["shortNames"] = ["zz"]
    code, body = await client.put(f"{CRDS}/crontabs.stable.example.com/status", changed)
    assert code == 200, body
    assert "labels" not in body["metadata"]
    assert body["spec"]["names"]["shortNames"] == ["ct"]
    assert body["status"]["acceptedNames"]["shortNames"] == ["zz"]
    assert body["metadata"]["generation"] == 1


async def test_deletecollection_and_metadata_validation(client: Client) -> None:
    await client.post(CRDS, crd())
    for name, team in (("a", "x"), ("b", "x"), ("c", "y")):
        await client.post(CRONTABS, {**crontab(name), "metadata": {"name": name, "labels": {"team": team}}})
    code, body = await client.delete(CRONTABS, params={"labelSelector": "team=x"})
    assert code == 200, body
    assert body["kind"] == "CronTabList"
    _, listed = await client.get(CRONTABS)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["c"]
    code, body = await client.post(CRONTABS, {**crontab("Bad_Name")})
    assert code == 422
    assert body["message"].startswith('CronTab.stable.example.com "Bad_Name" is invalid: metadata.name: Invalid value: '
                                      '"Bad_Name": a lowercase RFC 1123 subdomain')


async def test_definition_bodies_are_decoded_strictly(client: Client) -> None:
    body = crd()
    body["spec"]["versions"][0]["servd"] = True
    body["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["typo"] = 1
    code, status = await client.post(CRDS, body, params={"fieldValidation": "Strict"})
    assert code == 400
    assert status["message"] == (
        'CustomResourceDefinition in version "v1" cannot be handled as a CustomResourceDefinition: strict decoding '
        'error: unknown field "spec.versions[0].schema.openAPIV3Schema.properties.spec.typo", unknown field '
        '"spec.versions[0].servd"')
    resp = await client.tc.post(CRDS, json=body, headers={"Authorization": "Bearer admin-token"})
    assert resp.status == 201
    assert resp.headers.getall("Warning") == [
        '299 - "unknown field \\"spec.versions[0].schema.openAPIV3Schema.properties.spec.typo\\""',
        '299 - "unknown field \\"spec.versions[0].servd\\""']
    created = await resp.json()
    assert "servd" not in created["spec"]["versions"][0]


async def test_schemas_under_items_and_additional_properties_are_decoded_leniently(client: Client) -> None:
    """JSONSchemaPropsOrArray/OrBool decode their schema with a plain json.Unmarshal upstream: unknown fields
    there are dropped without a report, while a wrong type is still encoding/json's 400 (named from that
    schema's own top)."""
    body = crd()
    spec = body["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["properties"]["tags"] = {"type": "array", "items": {"type": "string", "typo": 1}}
    spec["properties"]["labels"] = {"type": "object", "additionalProperties": {"type": "string", "typo2": 1}}
    code, created = await client.post(CRDS, body, params={"fieldValidation": "Strict"})
    assert code == 201, created
    stored = created["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert stored["tags"]["items"] == {"type": "string"}
    assert stored["labels"]["additionalProperties"] == {"type": "string"}
    await client.delete(f"{CRDS}/crontabs.stable.example.com")
    spec["properties"]["tags"]["items"] = {"type": "string", "maxLength": "3"}
    code, status = await client.post(CRDS, body)
    assert code == 400, status
    assert status["message"] == (
        'CustomResourceDefinition in version "v1" cannot be handled as a CustomResourceDefinition: json: cannot '
        "unmarshal string into Go struct field JSONSchemaProps.maxLength of type int64")
    spec["properties"]["tags"]["items"] = {"type": "string"}
    spec["properties"]["labels"]["additionalProperties"] = "yes"
    code, status = await client.post(CRDS, body)
    assert code == 400, status
    assert status["message"].endswith("cannot be handled as a CustomResourceDefinition: boolean or JSON schema "
                                      "expected")


async def test_ill_typed_schema_constraints_are_refused(client: Client) -> None:
    body = crd()
    body["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["replicas"][
        "minimum"] = "1"
    code, status = await client.post(CRDS, body)
    assert code == 400
    # encoding/json names the innermost struct and the path of struct fields from the top (map keys left out).
    assert status["message"] == (
        'CustomResourceDefinition in version "v1" cannot be handled as a CustomResourceDefinition: json: cannot '
        "unmarshal string into Go struct field JSONSchemaProps.spec.versions.schema.openAPIV3Schema.properties."
        "properties.minimum of type float64")


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=2),
                    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(
                        st.sampled_from(["type", "properties", "items", "minimum", "required", "enum", "x",
                                         "additionalProperties", "pattern", "maxLength", "default"]),
                        inner, max_size=3), max_leaves=10),
       st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=2),
                    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=2), inner,
                                                                                max_size=2), max_leaves=6))
@settings(max_examples=150, deadline=None)
def test_any_schema_and_body_answer_a_status(schema: Any, value: Any) -> None:
    """Nothing in a CRD's schema or a custom resource's body makes the server fail other than with a Status."""
    from controller_manager.sim.apiserver import ApiServer, codec, errors
    from controller_manager.sim.apiserver.crd import CUSTOMRESOURCEDEFINITIONS

    api = ApiServer(options=ApiServerOptions(bootstrap_rbac=False))
    body = crd()
    body["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] = schema
    try:
        api.create(CUSTOMRESOURCEDEFINITIONS, codec.typed(CUSTOMRESOURCEDEFINITIONS, body, "Strict").obj)
    except errors.StatusError:
        return
    res = api.lookup("stable.example.com", "v1", "crontabs")
    assert res is not None
    try:
        decoded = codec.typed(res, {**crontab("a"), "spec": value}, "Warn").obj
        api.create(res, decoded)
    except errors.StatusError:
        pass


async def test_defaults_added_later_show_on_read(client: Client) -> None:
    _, created = await client.post(CRDS, crd())
    await client.post(CRONTABS, crontab("a"))
    schema = created["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    schema["properties"]["spec"]["properties"]["image"]["default"] = "nginx"
    assert (await client.put(f"{CRDS}/crontabs.stable.example.com", created))[0] == 200
    _, got = await client.get(f"{CRONTABS}/a")
    assert got["spec"]["image"] == "nginx"
    _, listed = await client.get(CRONTABS)
    assert listed["items"][0]["spec"]["image"] == "nginx"
