"""List and watch: selectors, paging, metadata-only, 410 on old versions, bookmarks, selector transitions,
slow watchers, timeouts."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controller_manager.api.resources import CONFIGMAPS, PODS
from controller_manager.clock import FakeClock
from controller_manager.sim.apiserver import ApiServer, ApiServerOptions, StatusError, Watcher
from tests.sim.apiserver.conftest import ADMIN, Client, configmap, pod

PODS_URL = "/api/v1/namespaces/default/pods"
PARTIAL_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"


async def _events(watcher: Watcher, n: int) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for _ in range(n):
        out.append(await asyncio.wait_for(watcher.__anext__(), 2))
    return out


async def test_list_shape_and_resource_version(client: Client, api: ApiServer) -> None:
    await client.post(PODS_URL, pod("a"))
    code, body = await client.get(PODS_URL)
    assert code == 200
    assert (body["kind"], body["apiVersion"]) == ("PodList", "v1")
    assert body["metadata"] == {"resourceVersion": str(api.rv)}
    assert [p["metadata"]["name"] for p in body["items"]] == ["a"]


async def test_label_and_field_selectors(client: Client) -> None:
    await client.post(PODS_URL, pod("a", labels={"app": "web", "tier": "front"}, node="n1"))
    await client.post(PODS_URL, pod("b", labels={"app": "web"}))
    await client.post(PODS_URL, pod("c", labels={"app": "db"}, node="n1"))
    cases = [({"labelSelector": "app=web"}, ["a", "b"]), ({"labelSelector": "app in (db),!tier"}, ["c"]),
             ({"fieldSelector": "spec.nodeName=n1"}, ["a", "c"]), ({"fieldSelector": "spec.nodeName="}, ["b"]),
             ({"fieldSelector": "metadata.name!=a", "labelSelector": "app=web"}, ["b"]),
             ({"fieldSelector": "status.phase=Pending"}, ["a", "b", "c"])]
    for params, names in cases:
        _, body = await client.get(PODS_URL, params=params)
        assert [p["metadata"]["name"] for p in body["items"]] == names, params


async def test_unsupported_field_is_400(client: Client) -> None:
    code, body = await client.get("/api/v1/namespaces/default/configmaps", params={"fieldSelector": "data.k=v"})
    assert code == 400
    assert body["message"] == "field label not supported: data.k"


async def test_paging_is_a_consistent_snapshot(client: Client) -> None:
    for i in range(5):
        await client.post(PODS_URL, pod(f"p{i}"))
    _, page1 = await client.get(PODS_URL, params={"limit": "2"})
    assert [p["metadata"]["name"] for p in page1["items"]] == ["p0", "p1"]
    assert page1["metadata"]["remainingItemCount"] == 3
    list_rv = page1["metadata"]["resourceVersion"]
    await client.delete(f"{PODS_URL}/p3")
    await client.post(PODS_URL, pod("p5"))
    _, page2 = await client.get(PODS_URL, params={"limit": "2", "continue": page1["metadata"]["continue"]})
    assert [p["metadata"]["name"] for p in page2["items"]] == ["p2", "p3"]
    assert page2["metadata"]["resourceVersion"] == list_rv
    _, page3 = await client.get(PODS_URL, params={"limit": "2", "continue": page2["metadata"]["continue"]})
    assert [p["metadata"]["name"] for p in page3["items"]] == ["p4"]
    assert "continue" not in page3["metadata"]


async def test_continue_after_history_is_lost_is_410(client: Client, api: ApiServer) -> None:
    for i in range(3):
        await client.post(PODS_URL, pod(f"p{i}"))
    _, page1 = await client.get(PODS_URL, params={"limit": "1"})
    await client.post(PODS_URL, pod("later"))
    api.forget_history()
    code, body = await client.get(PODS_URL, params={"limit": "1", "continue": page1["metadata"]["continue"]})
    assert code == 410
    assert body["reason"] == "Expired"


async def test_metadata_only_list_and_get(client: Client) -> None:
    await client.post(PODS_URL, pod("a", labels={"x": "y"}))
    _, body = await client.get(PODS_URL, headers={"Accept": PARTIAL_LIST})
    assert (body["kind"], body["apiVersion"]) == ("PartialObjectMetadataList", "meta.k8s.io/v1")
    item = body["items"][0]
    assert set(item) == {"kind", "apiVersion", "metadata"}
    assert item["kind"] == "PartialObjectMetadata"
    assert item["metadata"]["labels"] == {"x": "y"}
    _, one = await client.get(f"{PODS_URL}/a", headers={
        "Accept": "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"})
    assert one["kind"] == "PartialObjectMetadata"
    assert "spec" not in one


async def test_watch_from_zero_sends_state_then_changes(client: Client) -> None:
    await client.post(PODS_URL, pod("a"))

    async def change() -> None:
        await asyncio.sleep(0.05)
        await client.patch(f"{PODS_URL}/a", {"metadata": {"labels": {"v": "2"}}})

    task = asyncio.create_task(change(), name="change")
    events = await client.watch(PODS_URL, {"resourceVersion": "0"}, 2)
    await task
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "a"), ("MODIFIED", "a")]


async def test_watch_from_version_replays_history(client: Client) -> None:
    _, a = await client.post(PODS_URL, pod("a"))
    await client.post(PODS_URL, pod("b"))
    await client.delete(f"{PODS_URL}/a")
    events = await client.watch(PODS_URL, {"resourceVersion": a["metadata"]["resourceVersion"]}, 3)
    # Deleting a pod first writes its deletionTimestamp (grace 0 for an unbound pod), then removes it.
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "a")]
    deleted = events[2]["object"]
    assert int(deleted["metadata"]["resourceVersion"]) > int(a["metadata"]["resourceVersion"])


async def test_too_old_resource_version_is_an_error_event(client: Client, api: ApiServer) -> None:
    _, a = await client.post(PODS_URL, pod("a"))
    await client.post(PODS_URL, pod("b"))
    api.forget_history()
    old = a["metadata"]["resourceVersion"]
    events = await client.watch(PODS_URL, {"resourceVersion": old}, 2)
    assert len(events) == 1
    assert events[0]["type"] == "ERROR"
    assert events[0]["object"] == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                   "message": f"too old resource version: {old} ({api.rv})", "reason": "Expired",
                                   "code": 410}


def test_history_is_bounded(clock: FakeClock) -> None:
    api = ApiServer(clock=clock, options=ApiServerOptions(watch_history_size=3))
    first = api.create(CONFIGMAPS, configmap("c0"), "default")
    for i in range(1, 5):
        api.create(CONFIGMAPS, configmap(f"c{i}"), "default")
    with pytest.raises(StatusError) as info:
        api.watch(CONFIGMAPS, "default", resource_version=first["metadata"]["resourceVersion"])
    assert info.value.code == 410


async def test_bookmarks(api: ApiServer, clock: FakeClock) -> None:
    watcher = api.watch(PODS, "default", resource_version=str(api.rv), allow_bookmarks=True)
    clock.advance(5)
    [(kind, obj)] = await _events(watcher, 1)
    assert kind == "BOOKMARK"
    assert obj == {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": str(api.rv)}}
    watcher.close()


async def test_send_initial_events_ends_with_annotated_bookmark(api: ApiServer) -> None:
    api.create(PODS, pod("a"), "default")
    watcher = api.watch(PODS, "default", send_initial_events=True, allow_bookmarks=True)
    events = await _events(watcher, 2)
    assert events[0][0] == "ADDED"
    assert events[1][0] == "BOOKMARK"
    assert events[1][1]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    watcher.close()


async def test_watch_selector_transitions(api: ApiServer) -> None:
    api.create(PODS, pod("p", labels={"app": "web"}), "default")
    watcher = api.watch(PODS, "default", resource_version=str(api.rv), label_selector="app=web")
    left = api.patch(PODS, "default", "p", {"metadata": {"labels": {"app": "db"}}}, "merge")
    api.patch(PODS, "default", "p", {"metadata": {"labels": {"app": "web"}}}, "merge")
    api.patch(PODS, "default", "p", {"metadata": {"annotations": {"a": "b"}}}, "merge")
    events = await _events(watcher, 3)
    assert [t for t, _ in events] == ["DELETED", "ADDED", "MODIFIED"]
    gone = events[0][1]
    assert gone["metadata"]["labels"] == {"app": "web"}  # the state it left with
    assert gone["metadata"]["resourceVersion"] == left["metadata"]["resourceVersion"]
    watcher.close()


async def test_slow_watcher_is_closed_without_blocking_others(clock: FakeClock) -> None:
    api = ApiServer(clock=clock, options=ApiServerOptions(watch_buffer_size=5))
    slow = api.watch(CONFIGMAPS, "default", resource_version=str(api.rv))
    fast = api.watch(CONFIGMAPS, "default", resource_version=str(api.rv))
    received = []
    for i in range(20):
        api.create(CONFIGMAPS, configmap(f"c{i}"), "default")
        received.extend(await _events(fast, 1))
    assert len(received) == 20
    assert slow.closed
    assert slow.close_reason == "too slow"
    with pytest.raises(StopAsyncIteration):
        await slow.__anext__()
    fast.close()


async def test_namespace_scoped_watch(api: ApiServer) -> None:
    api.create(CONFIGMAPS, configmap("other"), "kube-system")
    watcher = api.watch(CONFIGMAPS, "default")
    api.create(CONFIGMAPS, configmap("mine"), "default")
    api.create(CONFIGMAPS, configmap("theirs"), "kube-system")
    api.create(CONFIGMAPS, configmap("mine2"), "default")
    events = await _events(watcher, 2)
    assert [o["metadata"]["name"] for _, o in events] == ["mine", "mine2"]
    watcher.close()


async def test_watch_timeout_ends_the_stream(api: ApiServer, clock: FakeClock) -> None:
    watcher = api.watch(PODS, timeout_seconds=10)
    clock.advance(10)
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(watcher.__anext__(), 2)


async def test_http_watch_timeout_seconds(client: Client, clock: FakeClock) -> None:
    resp = await client.tc.get(PODS_URL, params={"watch": "1", "timeoutSeconds": "3"}, headers=ADMIN)
    clock.advance(3)
    assert await asyncio.wait_for(resp.content.read(), 2) == b""
    resp.close()


async def test_many_watchers_share_encoded_bytes(api: ApiServer) -> None:
    watchers = [api.watch(PODS, resource_version=str(api.rv)) for _ in range(50)]
    api.create(PODS, pod("a"), "default")
    objects = [(await _events(w, 1))[0][1] for w in watchers]
    assert all(o is objects[0] for o in objects)  # one stored version, shared
    for w in watchers:
        w.close()


async def test_metadata_only_watch(client: Client) -> None:
    await client.post(PODS_URL, pod("a"))
    events = await client.watch(PODS_URL, {}, 1, headers={
        "Accept": "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"})
    assert events[0]["object"]["kind"] == "PartialObjectMetadata"
