"""core/v1 and events.k8s.io/v1 Events: one store, two views."""

from __future__ import annotations

from typing import Any

from controller_manager.api.resources import EVENTS, EVENTS_V1
from controller_manager.clock import FakeClock
from controller_manager.sim.apiserver import ApiServer
from tests.sim.apiserver.conftest import Client

V1_URL = "/apis/events.k8s.io/v1/namespaces/default/events"
CORE_URL = "/api/v1/namespaces/default/events"


V1_EVENT: dict[str, Any] = {
    "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e1"},
    "eventTime": "2024-01-01T00:00:00.000000Z", "reportingController": "ctrl", "reportingInstance": "ctrl-1",
    "action": "Scale", "reason": "Scaled", "regarding": {"kind": "Deployment", "name": "web", "namespace": "default"},
    "note": "scaled up", "type": "Normal", "series": {"count": 2, "lastObservedTime": "2024-01-01T00:01:00.000000Z"}}


async def test_events_k8s_io_event_is_seen_as_core_event(client: Client) -> None:
    event = V1_EVENT
    code, created = await client.post(V1_URL, event)
    assert code == 201
    assert created["note"] == "scaled up"
    _, core = await client.get(f"{CORE_URL}/e1")
    assert core["apiVersion"] == "v1"
    assert core["message"] == "scaled up"
    assert core["involvedObject"] == event["regarding"]
    assert core["reportingComponent"] == "ctrl"
    assert core["series"] == event["series"]
    assert core["firstTimestamp"] is None
    _, listed = await client.get(CORE_URL, params={"fieldSelector": "involvedObject.name=web,reason=Scaled"})
    assert [e["metadata"]["name"] for e in listed["items"]] == ["e1"]
    _, listed_v1 = await client.get(V1_URL, params={"fieldSelector": "regarding.name=web"})
    assert listed_v1["items"][0]["regarding"]["name"] == "web"


async def test_core_event_is_seen_as_events_k8s_io(client: Client) -> None:
    event = {"metadata": {"name": "e2"}, "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
             "reason": "Started", "message": "started", "source": {"component": "kubelet", "host": "n1"},
             "firstTimestamp": "2024-01-01T00:00:00Z", "lastTimestamp": "2024-01-01T00:00:05Z", "count": 3,
             "type": "Normal"}
    code, _ = await client.post(CORE_URL, event)
    assert code == 201
    _, v1 = await client.get(f"{V1_URL}/e2")
    assert v1["apiVersion"] == "events.k8s.io/v1"
    assert v1["note"] == "started"
    assert v1["regarding"] == event["involvedObject"]
    assert v1["deprecatedSource"] == {"component": "kubelet", "host": "n1"}
    assert v1["deprecatedCount"] == 3
    assert v1["deprecatedFirstTimestamp"] == "2024-01-01T00:00:00Z"
    assert v1["deprecatedLastTimestamp"] == "2024-01-01T00:00:05Z"


async def test_watch_of_either_view_sees_both(api: ApiServer) -> None:
    core_watch = api.watch(EVENTS, "default")
    v1_watch = api.watch(EVENTS_V1, "default")
    api.create(EVENTS, {"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p"},
                        "reason": "R", "message": "m", "type": "Normal"}, "default")
    _, core = await core_watch.__anext__()
    _, v1 = await v1_watch.__anext__()
    assert core["message"] == "m"
    assert v1["note"] == "m"
    assert v1["apiVersion"] == "events.k8s.io/v1"
    core_watch.close()
    v1_watch.close()


# --- --event-ttl: Events expire as their etcd lease does (pkg/registry/core/event TTLFunc, etcd3 lease manager) ---

def core_event(name: str, count: int = 1) -> dict[str, Any]:
    return {"metadata": {"name": name}, "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
            "reason": "Started", "message": "started", "count": count, "type": "Normal"}


async def test_an_event_is_deleted_ttl_after_its_last_write(api: ApiServer, clock: FakeClock, client: Client) -> None:
    api.options.event_ttl = 100.0  # leases of 100 s + 5 s of reuse, as kube-apiserver's lease manager grants them
    _, listed = await client.get(CORE_URL)
    start_rv = listed["metadata"]["resourceVersion"]
    assert (await client.post(CORE_URL, core_event("first")))[0] == 201
    clock.advance(3)
    assert (await client.post(V1_URL, {**V1_EVENT, "metadata": {"name": "second"}}))[0] == 201
    clock.advance(47)
    # A count bump rewrites the Event: its lease starts again from this write
    code, bumped = await client.patch(f"{CORE_URL}/first", {"count": 2})
    assert code == 200
    clock.advance(54.9)  # 104.9 s after the first write
    assert (await client.get(f"{CORE_URL}/second"))[0] == 200
    clock.advance(0.2)  # the shared lease lapses 105 s after it was granted
    assert (await client.get(f"{V1_URL}/second"))[0] == 404
    assert (await client.get(f"{CORE_URL}/first"))[0] == 200
    clock.advance(50)  # 105 s after the update
    assert (await client.get(f"{CORE_URL}/first"))[0] == 404
    _, listed = await client.get(CORE_URL)
    assert listed["items"] == []

    # Watchers saw each expiry as a deletion: DELETED with the last state, at the expiry's resourceVersion
    events = await client.watch(CORE_URL, {"resourceVersion": start_rv}, n=5)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "first"), ("ADDED", "second"), ("MODIFIED", "first"), ("DELETED", "second"),
        ("DELETED", "first")]
    assert events[4]["object"]["count"] == 2
    assert int(events[4]["object"]["metadata"]["resourceVersion"]) > int(bumped["metadata"]["resourceVersion"])
    v1_events = await client.watch(V1_URL, {"resourceVersion": start_rv}, n=5)
    assert v1_events[3]["type"] == "DELETED"
    assert v1_events[3]["object"]["apiVersion"] == "events.k8s.io/v1"
    assert v1_events[3]["object"]["note"] == V1_EVENT["note"]


async def test_events_sharing_a_lease_expire_in_one_revision(api: ApiServer, clock: FakeClock) -> None:
    api.options.event_ttl = 3600.0  # the default: 60 s of lease reuse
    for i in range(5):
        api.create(EVENTS, core_event(f"e{i}"), "default")
        clock.advance(10)
    assert api.event_leases.leases == 1  # one lease (and one timer) for writes within its reuse window
    written = api.current_rv()
    clock.advance(3600 + 60 - 50 - 0.1)
    assert len(api.list(EVENTS, "default")[0]) == 5
    clock.advance(0.1)
    watch = api.watch(EVENTS, "default", resource_version=str(written))  # the watch cache's history of them
    deleted = [await watch.__anext__() for _ in range(5)]
    watch.close()
    assert [(t, o["metadata"]["name"]) for t, o in deleted] == [("DELETED", f"e{i}") for i in range(5)]
    assert len({o["metadata"]["resourceVersion"] for _, o in deleted}) == 1
    assert api.event_leases.leases == 0
    assert len(api.event_leases) == 0


async def test_a_deleted_event_leaves_its_lease_and_ttl_zero_keeps_events(api: ApiServer, clock: FakeClock) -> None:
    api.options.event_ttl = 10.0
    api.create(EVENTS, core_event("gone"), "default")
    api.delete(EVENTS, "default", "gone")
    assert len(api.event_leases) == 0
    api.create(EVENTS, core_event("gone"), "default")  # the same name again: a fresh lease
    clock.advance(9)
    api.options.event_ttl = 0.5  # under a second: kube-apiserver passes whole seconds, and 0 attaches no lease
    api.create(EVENTS, core_event("kept"), "default")
    clock.advance(2)
    names = [e["metadata"]["name"] for e in api.list(EVENTS, "default")[0]]
    assert names == ["kept"]
    clock.advance(7200)
    assert [e["metadata"]["name"] for e in api.list(EVENTS, "default")[0]] == ["kept"]
    assert api.event_leases.leases == 0
