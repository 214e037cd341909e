"""managedFields and server-side apply through kube-sim's HTTP face, as kube-apiserver answers them."""

from __future__ import annotations

from typing import Any

import yaml

from controller_manager.clock import FakeClock

from .conftest import Client, deployment

DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
KUBECTL_UA = {"User-Agent": "kubectl/v1.37.0 (linux/amd64) kubernetes/abcdef0"}
APPLY = "application/apply-patch+yaml"


def _entries(obj: dict[str, Any]) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = obj["metadata"].get("managedFields", [])
    return entries


def _by_manager(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["manager"]: e for e in _entries(obj)}


async def _apply(client: Client, path: str, doc: dict[str, Any], manager: str | None = "kubectl",
                 **params: str) -> tuple[int, Any]:
    query = dict(params)
    if manager is not None:
        query["fieldManager"] = manager
    return await client.call("PATCH", path, raw=yaml.safe_dump(doc).encode(), content_type=APPLY, params=query)


def _cm(name: str, data: dict[str, str], **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **meta}, "data": data}


async def test_create_records_the_user_agent_as_manager(client: Client, clock: FakeClock) -> None:
    code, created = await client.post(DEPLOYMENTS, deployment("web"), headers=KUBECTL_UA)
    assert code == 201
    [entry] = _entries(created)
    assert list(entry) == ["manager", "operation", "apiVersion", "time", "fieldsType", "fieldsV1"]
    assert entry["manager"] == "kubectl"
    assert entry["operation"] == "Update"
    assert entry["apiVersion"] == "apps/v1"
    assert entry["time"] == created["metadata"]["creationTimestamp"]
    spec = entry["fieldsV1"]["f:spec"]
    assert spec["f:selector"] == {}  # LabelSelector is atomic
    assert spec["f:strategy"] == {"f:rollingUpdate": {".": {}, "f:maxSurge": {}, "f:maxUnavailable": {}},
                                  "f:type": {}}
    container = spec["f:template"]["f:spec"]["f:containers"]['k:{"name":"c"}']
    assert list(container) == [".", "f:image", "f:imagePullPolicy", "f:name", "f:resources",
                               "f:terminationMessagePath", "f:terminationMessagePolicy"]
    assert "f:status" not in entry["fieldsV1"]
    assert "f:metadata" not in entry["fieldsV1"]  # name and namespace are never owned


async def test_field_manager_parameter_wins_and_is_validated(client: Client) -> None:
    code, created = await client.post(CONFIGMAPS, _cm("a", {"k": "v"}), headers=KUBECTL_UA,
                                      params={"fieldManager": "tool"})
    assert code == 201
    assert [e["manager"] for e in _entries(created)] == ["tool"]
    code, body = await client.post(CONFIGMAPS, _cm("b", {"k": "v"}), params={"fieldManager": "x" * 129})
    assert code == 422
    assert body["message"] == ('CreateOptions.meta.k8s.io "" is invalid: fieldManager: Too long: may not be more '
                               'than 128 bytes')
    assert body["details"] == {"group": "meta.k8s.io", "kind": "CreateOptions", "causes": [
        {"reason": "FieldValueTooLong", "message": "Too long: may not be more than 128 bytes",
         "field": "fieldManager"}]}


async def test_an_update_takes_the_fields_it_changes_from_their_owner(client: Client, clock: FakeClock) -> None:
    _, created = await client.post(CONFIGMAPS, _cm("cm", {"a": "1", "b": "2"}), params={"fieldManager": "first"})
    clock.advance(5)
    changed = {**created, "data": {"a": "1", "b": "3", "c": "4"}}
    code, updated = await client.put(f"{CONFIGMAPS}/cm", changed, params={"fieldManager": "second"})
    assert code == 200
    managers = _by_manager(updated)
    assert managers["first"]["fieldsV1"] == {"f:data": {".": {}, "f:a": {}}}
    assert managers["second"]["fieldsV1"] == {"f:data": {"f:b": {}, "f:c": {}}}
    assert [e["manager"] for e in _entries(updated)] == ["first", "second"]  # by time
    # The same write again changes nothing: no new resourceVersion, the same entries.
    code, again = await client.put(f"{CONFIGMAPS}/cm", {**updated, "metadata": {**updated["metadata"],
                                                                                "resourceVersion": ""}},
                                   params={"fieldManager": "second"})
    assert again["metadata"]["resourceVersion"] == updated["metadata"]["resourceVersion"]
    assert _entries(again) == _entries(updated)
    # Removing a field takes it from its owner; an owner left with nothing is dropped.
    code, removed = await client.patch(f"{CONFIGMAPS}/cm", {"data": {"a": None}}, params={"fieldManager": "third"})
    assert code == 200
    assert _by_manager(removed)["first"]["fieldsV1"] == {"f:data": {}}  # it created .data itself
    assert "third" not in _by_manager(removed)  # removing owns nothing


async def test_managed_fields_sent_back_empty_clear_them(client: Client) -> None:
    _, created = await client.post(CONFIGMAPS, _cm("cm", {"a": "1"}), params={"fieldManager": "first"})
    cleared_body = {**created, "metadata": {**created["metadata"], "managedFields": []}}
    code, cleared = await client.put(f"{CONFIGMAPS}/cm", cleared_body, params={"fieldManager": "second"})
    assert code == 200
    assert "managedFields" not in cleared["metadata"]
    # An object nobody tracks stays untracked by updates...
    code, updated = await client.put(f"{CONFIGMAPS}/cm", {**cleared, "data": {"a": "2"}},
                                     params={"fieldManager": "second"})
    assert "managedFields" not in updated["metadata"]
    # ...until it is applied: what was there belongs to "before-first-apply".
    code, applied = await _apply(client, f"{CONFIGMAPS}/cm", _cm("cm", {"b": "x"}))
    assert code == 200
    managers = _by_manager(applied)
    assert managers["before-first-apply"]["fieldsV1"] == {"f:data": {".": {}, "f:a": {}}}
    assert managers["kubectl"]["operation"] == "Apply"
    assert managers["kubectl"]["fieldsV1"] == {"f:data": {"f:b": {}}}


async def test_invalid_managed_fields_sent_are_replaced_by_the_stored_ones(client: Client) -> None:
    _, created = await client.post(CONFIGMAPS, _cm("cm", {"a": "1"}), params={"fieldManager": "first"})
    bad = [{"manager": "x", "operation": "Delete", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {}}]
    code, updated = await client.put(f"{CONFIGMAPS}/cm", {**created, "metadata": {**created["metadata"],
                                                                                  "managedFields": bad}})
    assert code == 200
    assert _entries(updated) == _entries(created)


async def test_status_writes_are_recorded_with_their_subresource(client: Client) -> None:
    _, created = await client.post(DEPLOYMENTS, deployment("web"), params={"fieldManager": "creator"})
    status = {**created, "status": {"replicas": 1, "observedGeneration": 1}}
    code, updated = await client.put(f"{DEPLOYMENTS}/web/status", status,
                                     headers={"User-Agent": "kube-controller-manager/v1.37.0 (linux/amd64) "
                                                            "kubernetes/abc/deployment-controller"})
    assert code == 200
    entry = _by_manager(updated)["kube-controller-manager"]
    assert entry["subresource"] == "status"
    assert list(entry)[-1] == "subresource"
    assert entry["fieldsV1"] == {"f:status": {"f:observedGeneration": {}, "f:replicas": {}}}


async def test_scale_writes_are_recorded_under_scale(client: Client) -> None:
    await client.post(DEPLOYMENTS, deployment("web"), params={"fieldManager": "creator"})
    code, _ = await client.patch(f"{DEPLOYMENTS}/web/scale", {"spec": {"replicas": 3}}, headers=KUBECTL_UA)
    assert code == 200
    _, obj = await client.get(f"{DEPLOYMENTS}/web")
    entry = _by_manager(obj)["kubectl"]
    assert entry["subresource"] == "scale"
    assert entry["fieldsV1"] == {"f:spec": {"f:replicas": {}}}
    assert "f:replicas" not in _by_manager(obj)["creator"]["fieldsV1"]["f:spec"]


async def test_more_than_ten_update_managers_merge_the_oldest(client: Client, clock: FakeClock) -> None:
    _, obj = await client.post(CONFIGMAPS, _cm("cm", {"k0": "v"}), params={"fieldManager": "m0"})
    for i in range(1, 12):
        clock.advance(1)
        data = {**obj["data"], f"k{i}": "v"}
        _, obj = await client.put(f"{CONFIGMAPS}/cm", {**obj, "data": data}, params={"fieldManager": f"m{i}"})
    managers = [e["manager"] for e in _entries(obj)]
    assert len(managers) == 10
    assert managers[0] == "ancient-changes"
    assert _by_manager(obj)["ancient-changes"]["fieldsV1"] == {"f:data": {".": {}, "f:k0": {}, "f:k1": {},
                                                                          "f:k2": {}}}


# --- server-side apply ------------------------------------------------------------------------------------

async def test_apply_creates_then_is_a_no_op_when_repeated(client: Client) -> None:
    doc = deployment("web", replicas=2)
    code, created = await _apply(client, f"{DEPLOYMENTS}/web", doc)
    assert code == 201
    [entry] = _entries(created)
    assert (entry["manager"], entry["operation"], entry["apiVersion"]) == ("kubectl", "Apply", "apps/v1")
    spec = entry["fieldsV1"]["f:spec"]
    assert set(spec) == {"f:replicas", "f:selector", "f:template"}  # defaults are nobody's
    assert created["spec"]["strategy"]["type"] == "RollingUpdate"
    code, again = await _apply(client, f"{DEPLOYMENTS}/web", doc)
    assert code == 200
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_apply_requires_a_field_manager(client: Client) -> None:
    code, body = await _apply(client, f"{DEPLOYMENTS}/web", deployment("web"), manager=None)
    assert code == 422
    assert body["message"] == ('PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required '
                               'for apply patch')
    code, body = await client.patch(f"{CONFIGMAPS}/x", {}, params={"force": "true"})
    assert code == 422
    assert body["message"] == ('PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified '
                               'for non-apply patch')


async def test_apply_conflicts_with_another_manager(client: Client) -> None:
    await client.post(DEPLOYMENTS, deployment("web", replicas=1), params={"fieldManager": "kubectl-client-side-apply"})
    code, body = await _apply(client, f"{DEPLOYMENTS}/web", deployment("web", replicas=3))
    assert code == 409
    assert body == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using apps/v1: '
                   ".spec.replicas",
        "reason": "Conflict",
        "details": {"causes": [{"reason": "FieldManagerConflict",
                                "message": 'conflict with "kubectl-client-side-apply" using apps/v1',
                                "field": ".spec.replicas"}]},
        "code": 409}
    # The same values are shared, not conflicting.
    code, shared = await _apply(client, f"{DEPLOYMENTS}/web", deployment("web", replicas=1))
    assert code == 200
    assert "f:replicas" in _by_manager(shared)["kubectl"]["fieldsV1"]["f:spec"]
    assert "f:replicas" in _by_manager(shared)["kubectl-client-side-apply"]["fieldsV1"]["f:spec"]
    # force takes the field.
    code, forced = await _apply(client, f"{DEPLOYMENTS}/web", deployment("web", replicas=3), force="true")
    assert code == 200
    assert forced["spec"]["replicas"] == 3
    assert "f:replicas" not in _by_manager(forced)["kubectl-client-side-apply"]["fieldsV1"]["f:spec"]


async def test_apply_conflict_message_for_several_fields(client: Client) -> None:
    await client.post(CONFIGMAPS, _cm("cm", {"a": "1", "b": "2"}), params={"fieldManager": "other"})
    code, body = await _apply(client, f"{CONFIGMAPS}/cm", _cm("cm", {"a": "x", "b": "y"}))
    assert code == 409
    assert body["message"] == ('Apply failed with 2 conflicts: conflicts with "other" using v1:\n- .data.a\n'
                               "- .data.b")
    assert [c["field"] for c in body["details"]["causes"]] == [".data.a", ".data.b"]


async def test_apply_removes_what_the_applier_no_longer_applies(client: Client) -> None:
    await _apply(client, f"{CONFIGMAPS}/cm", _cm("cm", {"a": "1", "b": "2"}, labels={"x": "1", "y": "2"}))
    await client.patch(f"{CONFIGMAPS}/cm", {"data": {"c": "3"}}, params={"fieldManager": "other"})
    code, obj = await _apply(client, f"{CONFIGMAPS}/cm", _cm("cm", {"a": "1"}, labels={"x": "1"}))
    assert code == 200
    assert obj["data"] == {"a": "1", "c": "3"}
    assert obj["metadata"]["labels"] == {"x": "1"}
    # A field another manager also owns stays when the applier lets go of it.
    await _apply(client, f"{CONFIGMAPS}/cm", _cm("cm", {}, labels={"x": "1"}), manager="other-applier")
    code, obj = await _apply(client, f"{CONFIGMAPS}/cm", _cm("cm", {"a": "1"}))
    assert obj["metadata"]["labels"] == {"x": "1"}


async def test_apply_merges_lists_by_key(client: Client) -> None:
    await _apply(client, f"{DEPLOYMENTS}/web", deployment("web"))
    sidecar = deployment("web")
    sidecar["spec"]["template"]["spec"]["containers"] = [{"name": "log", "image": "busybox"}]
    code, obj = await _apply(client, f"{DEPLOYMENTS}/web", sidecar, manager="sidecar-injector")
    assert code == 200
    assert [c["name"] for c in obj["spec"]["template"]["spec"]["containers"]] == ["c", "log"]


async def test_apply_dry_run_stores_nothing(client: Client) -> None:
    code, obj = await _apply(client, f"{CONFIGMAPS}/cm", _cm("cm", {"a": "1"}), dryRun="All")
    assert code == 201
    assert obj["data"] == {"a": "1"}
    code, _ = await client.get(f"{CONFIGMAPS}/cm")
    assert code == 404


async def test_apply_refuses_other_kinds_and_managed_fields(client: Client) -> None:
    code, body = await _apply(client, f"{CONFIGMAPS}/cm", {"apiVersion": "v1", "kind": "Secret",
                                                            "metadata": {"name": "cm"}})
    assert (code, body["message"]) == (400, "invalid object type: /v1, Kind=Secret")
    code, body = await _apply(client, f"{CONFIGMAPS}/cm", _cm("cm", {}, managedFields=[{"manager": "x"}]))
    assert (code, body["message"]) == (400, "metadata.managedFields must be nil")
    code, body = await client.call("PATCH", f"{CONFIGMAPS}/cm", raw=b"a: [", content_type=APPLY,
                                   params={"fieldManager": "x"})
    assert code == 400
    assert body["message"].startswith("error decoding YAML: ")


async def test_what_the_registry_fills_in_is_nobodys(client: Client) -> None:
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
           "spec": {"selector": {"app": "a"}, "ports": [{"port": 80}]}}
    code, created = await client.post("/api/v1/namespaces/default/services", svc, headers=KUBECTL_UA)
    assert code == 201
    assert created["spec"]["clusterIP"]
    spec = _by_manager(created)["kubectl"]["fieldsV1"]["f:spec"]
    assert "f:clusterIP" not in spec
    assert "f:clusterIPs" not in spec
    assert {"f:internalTrafficPolicy", "f:sessionAffinity", "f:type"} <= set(spec)  # defaults are the creator's
    # The port list is keyed by port and protocol, the protocol defaulting to TCP.
    assert 'k:{"port":80,"protocol":"TCP"}' in spec["f:ports"]
    code, ns = await client.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                        "metadata": {"name": "team"}}, headers=KUBECTL_UA)
    assert code == 201
    assert ns["spec"]["finalizers"] == ["kubernetes"]
    # The name label is a default (the creator's); the finalizer is the registry's.
    assert _by_manager(ns)["kubectl"]["fieldsV1"] == {
        "f:metadata": {"f:labels": {".": {}, "f:kubernetes.io/metadata.name": {}}}}


async def test_apply_refuses_what_the_schema_does_not_declare(client: Client) -> None:
    doc = deployment("web")
    doc["metadata"]["namespace"] = "default"
    doc["spec"]["foo"] = 1
    code, body = await _apply(client, f"{DEPLOYMENTS}/web", doc)
    assert code == 500
    assert body["message"] == ("failed to create typed patch object (default/web; apps/v1, Kind=Deployment): "
                               ".spec.foo: field not declared in schema")
    assert "reason" not in body
    doc = deployment("web")
    doc["spec"]["template"]["spec"]["containers"].append({"name": "c", "image": "other"})
    code, body = await _apply(client, f"{DEPLOYMENTS}/web", doc)
    assert code == 500
    assert body["message"].endswith(': .spec.template.spec.containers: duplicate entries for key [name="c"]')


async def test_managed_fields_sent_replace_the_recorded_ones(client: Client) -> None:
    _, created = await client.post(CONFIGMAPS, _cm("cm", {"a": "1", "b": "2"}), params={"fieldManager": "first"})
    mine = [{"manager": "mine", "operation": "Apply", "apiVersion": "v1", "time": "2020-01-01T00:00:00Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}}}}]
    code, updated = await client.put(f"{CONFIGMAPS}/cm", {**created, "metadata": {**created["metadata"],
                                                                                  "managedFields": mine}},
                                     params={"fieldManager": "first"})
    assert code == 200
    assert _entries(updated) == mine


async def test_a_patch_may_clear_managed_fields(client: Client) -> None:
    await client.post(CONFIGMAPS, _cm("cm", {"a": "1"}), params={"fieldManager": "first"})
    code, patched = await client.patch(f"{CONFIGMAPS}/cm", {"metadata": {"labels": {"x": "1"}}},
                                       params={"fieldManager": "second"})
    assert code == 200
    assert set(_by_manager(patched)) == {"first", "second"}
    code, cleared = await client.patch(f"{CONFIGMAPS}/cm", {"metadata": {"managedFields": []}})
    assert code == 200
    assert "managedFields" not in cleared["metadata"]


async def test_apply_to_status(client: Client) -> None:
    await client.post(DEPLOYMENTS, deployment("web"), params={"fieldManager": "creator"})
    doc = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
           "spec": {"replicas": 9}, "status": {"observedGeneration": 1, "replicas": 1}}
    code, obj = await _apply(client, f"{DEPLOYMENTS}/web/status", doc, manager="status-writer")
    assert code == 200
    assert obj["spec"]["replicas"] == 1  # /status leaves the spec alone
    assert obj["status"]["replicas"] == 1
    entry = _by_manager(obj)["status-writer"]
    assert (entry["operation"], entry["subresource"]) == ("Apply", "status")
    assert entry["fieldsV1"] == {"f:status": {"f:observedGeneration": {}, "f:replicas": {}}}
