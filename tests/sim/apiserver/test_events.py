"""core/v1 and events.k8s.io/v1 Events: one store, two views."""

from __future__ import annotations

from controller_manager.api.resources import EVENTS, EVENTS_V1
from controller_manager.sim.apiserver import ApiServer
from tests.sim.apiserver.conftest import Client

V1_URL = "/apis/events.k8s.io/v1/namespaces/default/events"
CORE_URL = "/api/v1/namespaces/default/events"


async def test_events_k8s_io_event_is_seen_as_core_event(client: Client) -> None:
    event = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e1"},
             "eventTime": "2024-01-01T00:00:00.000000Z", "reportingController": "ctrl", "reportingInstance": "ctrl-1",
             "action": "Scale", "reason": "Scaled", "regarding": {"kind": "Deployment", "name": "web",
                                                                 "namespace": "default"},
             "note": "scaled up", "type": "Normal", "series": {"count": 2,
                                                                "lastObservedTime": "2024-01-01T00:01:00.000000Z"}}
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
