"""The small wire facts real clients notice: dry-run answers, gzip, reads of future resourceVersions,
ListOptions validation, and PUT creating the kinds that allow it."""

from __future__ import annotations

import asyncio
import gzip
from typing import Any

import orjson
import pytest
from aiohttp import web

from controller_manager.api.resources import CONFIGMAPS
from controller_manager.sim.apiserver import ApiServer, compression
from tests.sim.apiserver.conftest import ADMIN, Client, configmap

CM_URL = "/api/v1/namespaces/default/configmaps"
PODS_URL = "/api/v1/namespaces/default/pods"
LEASES_URL = "/apis/coordination.k8s.io/v1/namespaces/default/leases"


# --- dryRun ------------------------------------------------------------------------------------------


async def test_dry_run_update_and_patch_answer_the_stored_resource_version(client: Client, api: ApiServer) -> None:
    _, cm = await client.post(CM_URL, configmap("cm"))
    rv = cm["metadata"]["resourceVersion"]
    before = api.current_rv()
    cm["data"] = {"k": "changed"}
    code, body = await client.put(f"{CM_URL}/cm", cm, params={"dryRun": "All"})
    assert code == 200
    assert (body["metadata"]["resourceVersion"], body["data"]) == (rv, {"k": "changed"})
    code, body = await client.patch(f"{CM_URL}/cm", {"data": {"k": "patched"}}, params={"dryRun": "All"})
    assert code == 200
    assert (body["metadata"]["resourceVersion"], body["data"]) == (rv, {"k": "patched"})
    assert api.current_rv() == before
    _, stored = await client.get(f"{CM_URL}/cm")
    assert stored["data"] == {"k": "v"}
    # No event came of them: a watch from the create's version sees only the next real write.
    await client.patch(f"{CM_URL}/cm", {"data": {"k": "real"}})
    events = await client.watch(CM_URL, {"resourceVersion": rv}, 1)
    assert [(e["type"], e["object"]["data"]) for e in events] == [("MODIFIED", {"k": "real"})]


async def test_dry_run_create_has_no_resource_version(client: Client, api: ApiServer) -> None:
    before = api.current_rv()
    code, body = await client.post(CM_URL, configmap("dry"), params={"dryRun": "All"})
    assert code == 201
    assert "resourceVersion" not in body["metadata"]
    assert body["metadata"]["uid"]
    assert api.current_rv() == before


@pytest.mark.parametrize(("method", "kind"), [("POST", "CreateOptions"), ("PUT", "UpdateOptions"),
                                              ("PATCH", "PatchOptions"), ("DELETE", "DeleteOptions")])
async def test_unknown_dry_run_value_is_the_options_422(client: Client, method: str, kind: str) -> None:
    await client.post(CM_URL, configmap("cm"))
    path = CM_URL if method == "POST" else f"{CM_URL}/cm"
    ctype = "application/merge-patch+json" if method == "PATCH" else "application/json"
    code, body = await client.call(method, path, configmap("cm"), params={"dryRun": "Yes"}, content_type=ctype)
    assert code == 422
    assert body == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": f'{kind}.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["Yes"]: supported values: "All"',
        "reason": "Invalid",
        "details": {"name": "", "group": "meta.k8s.io", "kind": kind,
                    "causes": [{"reason": "FieldValueNotSupported",
                                "message": 'Unsupported value: ["Yes"]: supported values: "All"',
                                "field": "dryRun"}]},
        "code": 422}


async def test_dry_run_on_get_is_ignored(client: Client) -> None:
    await client.post(CM_URL, configmap("cm"))
    code, _ = await client.get(f"{CM_URL}/cm", params={"dryRun": "Yes"})
    assert code == 200


# --- gzip --------------------------------------------------------------------------------------------


async def _big_list(client: Client) -> None:
    value = "x" * 20_000
    for i in range(8):
        code, _ = await client.post(CM_URL, {**configmap(f"big-{i}"), "data": {"k": value}})
        assert code == 201


async def test_large_answers_are_gzipped_when_asked(client: Client) -> None:
    await _big_list(client)
    resp = await client.tc.get(CM_URL, headers={**ADMIN, "Accept-Encoding": "gzip"}, auto_decompress=False)
    raw = await resp.read()
    assert resp.headers["Content-Encoding"] == "gzip"
    assert resp.headers["Vary"] == "Accept-Encoding"
    body = orjson.loads(gzip.decompress(raw))
    assert len(body["items"]) == 8
    # Not asked (or asked with parameters, which the apiserver does not parse): plain.
    for encoding in ("identity", "gzip;q=1.0", "deflate"):
        resp = await client.tc.get(CM_URL, headers={**ADMIN, "Accept-Encoding": encoding}, auto_decompress=False)
        assert "Content-Encoding" not in resp.headers, encoding
        assert len(orjson.loads(await resp.read())["items"]) == 8


async def test_small_answers_and_watches_are_not_gzipped(client: Client) -> None:
    await client.post(CM_URL, configmap("small"))
    resp = await client.tc.get(f"{CM_URL}/small", headers={**ADMIN, "Accept-Encoding": "gzip"},
                               auto_decompress=False)
    assert "Content-Encoding" not in resp.headers
    await _big_list(client)
    resp = await client.tc.get(CM_URL, params={"watch": "true"}, headers={**ADMIN, "Accept-Encoding": "gzip"},
                               auto_decompress=False)
    try:
        assert resp.status == 200
        assert "Content-Encoding" not in resp.headers
        line = await asyncio.wait_for(resp.content.readline(), 2)
        assert orjson.loads(line)["type"] == "ADDED"
    finally:
        resp.close()


@pytest.mark.parametrize(("size", "gzipped"), [(compression.GZIP_THRESHOLD_BYTES, False),
                                               (compression.GZIP_THRESHOLD_BYTES + 1, True)])
def test_gzip_threshold_is_strictly_more_than_128_kib(size: int, gzipped: bool) -> None:
    resp = web.Response(body=b"a" * size)
    compression.maybe_gzip(resp, "deflate, gzip")
    assert ("Content-Encoding" in resp.headers) == gzipped
    assert isinstance(resp.body, bytes)
    assert (gzip.decompress(resp.body) if gzipped else resp.body) == b"a" * size


# --- reads of a resourceVersion the store has not reached -------------------------------------------


async def test_list_at_a_future_resource_version_waits_for_it(client: Client, api: ApiServer) -> None:
    target = api.current_rv() + 1
    pending = asyncio.ensure_future(client.get(CM_URL, params={"resourceVersion": str(target)}))
    deadline = asyncio.get_running_loop().time() + 2
    while not api.freshness.waiting and not pending.done():  # the request reaches its wait
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.005)
    assert not pending.done()
    await client.post(CM_URL, configmap("late"))
    code, body = await asyncio.wait_for(pending, 2)
    assert code == 200
    assert int(body["metadata"]["resourceVersion"]) >= target
    assert [c["metadata"]["name"] for c in body["items"]] == ["late"]


@pytest.mark.parametrize("params", [{}, {"resourceVersionMatch": "NotOlderThan"}, {"resourceVersionMatch": "Exact"}])
async def test_list_at_a_future_resource_version_times_out_with_504(client: Client, api: ApiServer,
                                                                     params: dict[str, str]) -> None:
    api.options.fresh_wait = 0.2
    current = api.current_rv()
    code, body = await client.get(CM_URL, params={"resourceVersion": str(current + 10), **params})
    assert code == 504
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": f"Too large resource version: {current + 10}, current: {current}",
                    "reason": "Timeout",
                    "details": {"causes": [{"reason": "ResourceVersionTooLarge",
                                            "message": "Too large resource version"}],
                                "retryAfterSeconds": 1},
                    "code": 504}


async def test_get_at_a_future_resource_version_times_out_with_retry_after(client: Client, api: ApiServer) -> None:
    await client.post(CM_URL, configmap("cm"))
    api.options.fresh_wait = 0.2
    current = api.current_rv()
    resp = await client.tc.get(f"{CM_URL}/cm", params={"resourceVersion": str(current + 1)}, headers=ADMIN)
    assert resp.status == 504
    assert resp.headers["Retry-After"] == "1"
    body = await resp.json()
    assert body["message"] == f"Too large resource version: {current + 1}, current: {current}"
    code, _ = await client.get(f"{CM_URL}/cm", params={"resourceVersion": str(current)})
    assert code == 200


async def test_a_watch_from_a_future_resource_version_sends_what_comes_after_it(client: Client, api: ApiServer) -> None:
    target = api.current_rv() + 2
    resp = await client.tc.get(CM_URL, params={"watch": "true", "resourceVersion": str(target)}, headers=ADMIN)
    try:
        assert resp.status == 200
        for name in ("one", "two", "three"):
            await client.post(CM_URL, configmap(name))
        line = await asyncio.wait_for(resp.content.readline(), 2)
        event = orjson.loads(line)
        assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "three")
        assert int(event["object"]["metadata"]["resourceVersion"]) == target + 1
    finally:
        resp.close()


async def test_a_watch_list_from_a_future_resource_version_ends_with_the_timeout_error(client: Client,
                                                                                       api: ApiServer) -> None:
    api.options.fresh_wait = 0.2
    current = api.current_rv()
    params = {"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan", "allowWatchBookmarks": "true",
              "resourceVersion": str(current + 5)}
    events = await client.watch(CM_URL, params, 2)
    assert len(events) == 1
    assert events[0]["type"] == "ERROR"
    assert events[0]["object"]["code"] == 504
    assert events[0]["object"]["message"] == f"Too large resource version: {current + 5}, current: {current}"


# --- ListOptions validation --------------------------------------------------------------------------

_NOT_SUPPORTED_LIST = 'Unsupported value: "Newest": supported values: "Exact", "NotOlderThan", ""'


@pytest.mark.parametrize(("params", "causes"), [
    ({"resourceVersionMatch": "NotOlderThan"},
     [("FieldValueForbidden", "resourceVersionMatch",
       "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided")]),
    ({"resourceVersionMatch": "Exact", "resourceVersion": "0"},
     [("FieldValueForbidden", "resourceVersionMatch",
       'Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"')]),
    ({"resourceVersionMatch": "Newest", "resourceVersion": "1"},
     [("FieldValueNotSupported", "resourceVersionMatch", _NOT_SUPPORTED_LIST)]),
    ({"resourceVersionMatch": "Exact", "resourceVersion": "1", "continue": "abc"},
     [("FieldValueForbidden", "resourceVersionMatch",
       "Forbidden: resourceVersionMatch is forbidden when continue is provided")]),
    ({"sendInitialEvents": "true"},
     [("FieldValueForbidden", "sendInitialEvents", "Forbidden: sendInitialEvents is forbidden for list")]),
    ({"watch": "true", "sendInitialEvents": "true"},
     [("FieldValueForbidden", "resourceVersionMatch",
       "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan")]),
    ({"watch": "true", "resourceVersionMatch": "NotOlderThan", "resourceVersion": "5"},
     [("FieldValueForbidden", "resourceVersionMatch",
       "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided")]),
    ({"watch": "true", "sendInitialEvents": "false", "resourceVersionMatch": "Exact"},
     [("FieldValueForbidden", "resourceVersionMatch",
       "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"),
      ("FieldValueNotSupported", "resourceVersionMatch",
       'Unsupported value: "Exact": supported values: "NotOlderThan"')]),
])
async def test_list_options_are_validated(client: Client, params: dict[str, str],
                                          causes: list[tuple[str, str, str]]) -> None:
    code, body = await client.get(PODS_URL, params=params)
    assert code == 422
    texts = [f"{f}: {m}" for _, f, m in causes]
    joined = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    assert body["message"] == f'ListOptions.meta.k8s.io "" is invalid: {joined}'
    assert body["reason"] == "Invalid"
    assert body["details"] == {"name": "", "group": "meta.k8s.io", "kind": "ListOptions",
                               "causes": [{"reason": r, "message": m, "field": f} for r, f, m in causes]}


async def test_watch_list_ends_initial_events_with_the_annotated_bookmark(client: Client) -> None:
    await client.post(CM_URL, configmap("a"))
    await client.post(CM_URL, configmap("b"))
    params = {"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan", "allowWatchBookmarks": "true"}
    events = await client.watch(CM_URL, params, 3)
    assert [e["type"] for e in events] == ["ADDED", "ADDED", "BOOKMARK"]
    assert events[2]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert events[2]["object"]["kind"] == "ConfigMap"


async def test_a_watch_from_nothing_is_defaulted_to_a_watch_list(client: Client, api: ApiServer) -> None:
    # SetListOptionsDefaults (WatchList on): a watch from "" or "0" is sendInitialEvents=true, NotOlderThan.
    await client.post(CM_URL, configmap("a"))
    for rv in ("", "0"):
        events = await client.watch(CM_URL, {"resourceVersion": rv, "allowWatchBookmarks": "true"}, 2)
        assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
        assert events[1]["object"]["metadata"] == {"resourceVersion": str(api.current_rv()),
                                                   "annotations": {"k8s.io/initial-events-end": "true"}}


# --- PUT creating ------------------------------------------------------------------------------------


def _lease(name: str) -> dict[str, Any]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
            "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15}}


async def test_put_creates_a_lease(client: Client) -> None:
    code, body = await client.put(f"{LEASES_URL}/l1", _lease("l1"))
    assert code == 201
    assert body["metadata"]["uid"]
    assert body["metadata"]["resourceVersion"]
    assert body["metadata"]["namespace"] == "default"
    meta = {"name": "l1", "resourceVersion": body["metadata"]["resourceVersion"]}
    code, again = await client.put(f"{LEASES_URL}/l1", {**_lease("l1"), "metadata": meta})
    assert code == 200
    assert again["metadata"]["uid"] == body["metadata"]["uid"]


async def test_put_create_wipes_system_metadata_and_dry_run_stores_nothing(client: Client, api: ApiServer) -> None:
    lease = _lease("l2")
    lease["metadata"].update({"resourceVersion": "999", "creationTimestamp": "2001-01-01T00:00:00Z"})
    before = api.current_rv()
    code, body = await client.put(f"{LEASES_URL}/l2", lease, params={"dryRun": "All"})
    assert code == 201
    assert "resourceVersion" not in body["metadata"]
    assert body["metadata"]["creationTimestamp"] != "2001-01-01T00:00:00Z"
    assert api.current_rv() == before
    code, _ = await client.get(f"{LEASES_URL}/l2")
    assert code == 404


@pytest.mark.parametrize(("url", "body"), [
    ("/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles/r",
     {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r"}, "rules": []}),
    ("/apis/rbac.authorization.k8s.io/v1/clusterroles/cr",
     {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "cr"}}),
    ("/api/v1/namespaces/default/endpoints/ep",
     {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "ep"}}),
    ("/api/v1/namespaces/default/services/svc",
     {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"},
      "spec": {"ports": [{"port": 80}], "selector": {"app": "x"}}}),
])
async def test_put_creates_the_kinds_that_allow_it(client: Client, url: str, body: dict[str, Any]) -> None:
    code, created = await client.put(url, body)
    assert code == 201, created
    code, _ = await client.get(url)
    assert code == 200


@pytest.mark.parametrize(("url", "body"), [
    (f"{CM_URL}/nope", configmap("nope")),
    ("/apis/apps/v1/namespaces/default/deployments/nope",
     {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "nope"}}),
    ("/apis/scheduling.k8s.io/v1/priorityclasses/nope",
     {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "nope"}, "value": 1}),
])
async def test_put_to_a_missing_name_of_other_kinds_is_404(client: Client, url: str, body: dict[str, Any]) -> None:
    code, status = await client.put(url, body)
    assert code == 404
    assert status["reason"] == "NotFound"


async def test_put_create_with_a_uid_fails_its_precondition(client: Client) -> None:
    lease = _lease("l3")
    lease["metadata"]["uid"] = "abc"
    code, body = await client.put(f"{LEASES_URL}/l3", lease)
    assert code == 409
    assert body["message"] == ('Operation cannot be fulfilled on leases.coordination.k8s.io "l3": Precondition '
                               "failed: UID in precondition: abc, UID in object meta: ")


async def test_a_lease_is_not_updated_without_a_resource_version(client: Client) -> None:
    """Lease's strategy refuses unconditional updates: the generic store's 422, naming the resource."""
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "held"},
             "spec": {"holderIdentity": "a"}}
    status, created = await client.post(LEASES_URL, lease)
    assert status == 201, created
    status, body = await client.put(f"{LEASES_URL}/held", {**lease, "spec": {"holderIdentity": "b"}})
    assert status == 422, body
    assert body["message"] == ('leases.coordination.k8s.io "held" is invalid: metadata.resourceVersion: '
                               "Invalid value: 0: must be specified for an update")
    status, body = await client.put(f"{LEASES_URL}/held", {**created, "spec": {"holderIdentity": "b"}})
    assert status == 200, body
    # ConfigMaps allow unconditional updates.
    await client.post(CM_URL, configmap("free"))
    status, body = await client.put(f"{CM_URL}/free", configmap("free"))
    assert status == 200, body


# --- field order --------------------------------------------------------------------------------------


async def test_a_new_objects_metadata_is_written_in_object_metas_field_order(client: Client, api: ApiServer) -> None:
    """Go writes a struct's fields in declaration order: a created object's resourceVersion comes after its uid,
    not after the fields the create brought (get, list and watch alike)."""
    body = configmap("cm", labels={"a": "b"}, finalizers=["example.com/f"])
    code, created = await client.post(CM_URL, body)
    assert code == 201, created
    order = ["name", "namespace", "uid", "resourceVersion", "creationTimestamp", "labels", "finalizers",
             "managedFields"]
    assert list(created["metadata"]) == order
    _, got = await client.get(f"{CM_URL}/cm")
    assert list(got["metadata"]) == order
    _, listed = await client.get(CM_URL)
    assert list(listed["items"][0]["metadata"]) == order
    watcher = api.watch(CONFIGMAPS, "default", resource_version="0")
    try:
        batch = await watcher.next_batch()
        assert batch is not None
        assert [list(orjson.loads(raw)["metadata"]) for _, _, raw in batch] == [order]
    finally:
        watcher.close()
