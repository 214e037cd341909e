"""Which informer events queue which Services, and when: upstream's TestPodUpdatesBatching, TestPodAddsBatching and
TestPodDeleteBatching (on a FakeClock instead of real sleeps), and the pod/Service membership rules."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from controller_manager.api.resources import PODS
from controller_manager.runtime.informers import Added, Deleted, Updated

from .fakes import Env, make_pod, new_env, service


async def drain(env: Env) -> list[str]:
    """Keys the queue hands out now (each marked done)."""
    await asyncio.sleep(0)
    keys = []
    while len(env.ctrl.queue):
        key = await env.ctrl.queue.get()
        assert key is not None
        keys.append(key)
        env.ctrl.queue.done(key)
    return keys


def with_ip(pod: dict[str, Any], ip: str, rv: int) -> dict[str, Any]:
    new = copy.deepcopy(pod)
    new["status"]["podIP"] = ip
    new["status"]["podIPs"] = [{"ip": ip}]
    new["metadata"]["resourceVersion"] = str(rv)
    return new


def setup(batch: float) -> tuple[Env, list[dict[str, Any]]]:
    env = new_env(batch)
    env.add_service(service("other", selector={"foo": "bar"}, ports=[{"port": 80}]))
    pods = [make_pod("other", i, 1, True) for i in range(10)]
    env.add(PODS, *pods)
    return env, pods


# (delay before each event, in seconds) -> syncs of the Service
SCHEDULES = [
    pytest.param(0.0, [0.2, 0.1, 0.1], 3, id="three with no batching"),
    pytest.param(1.0, [0.2, 0.1, 0.1], 1, id="three in one batch"),
    pytest.param(1.0, [0.2, 0.1, 1.0], 2, id="three in two batches"),
]


async def run_schedule(env: Env, delays: list[float], events: list[Any]) -> int:
    syncs = 0
    for delay, event in zip(delays, events, strict=True):
        env.clock.advance(delay)
        syncs += len(await drain(env))
        env.ctrl._on_pod(event)
        syncs += len(await drain(env))
    for _ in range(30):
        env.clock.advance(0.1)
        syncs += len(await drain(env))
    return syncs


@pytest.mark.parametrize(("batch", "delays", "syncs"), SCHEDULES)
async def test_pod_updates_batching(batch: float, delays: list[float], syncs: int) -> None:
    env, pods = setup(batch)
    events = [Updated(pods[i], with_ip(pods[i], f"10.0.0.{i}", 100 + i)) for i in range(3)]
    assert await run_schedule(env, delays, events) == syncs


@pytest.mark.parametrize(("batch", "delays", "syncs"), SCHEDULES)
async def test_pod_adds_batching(batch: float, delays: list[float], syncs: int) -> None:
    env, pods = setup(batch)
    assert await run_schedule(env, delays, [Added(p) for p in pods[:3]]) == syncs


@pytest.mark.parametrize(("batch", "delays", "syncs"), SCHEDULES)
async def test_pod_delete_batching(batch: float, delays: list[float], syncs: int) -> None:
    env, pods = setup(batch)
    events = [Deleted(p, final_state_unknown=i == 2) for i, p in enumerate(pods[:3])]
    assert await run_schedule(env, delays, events) == syncs


async def test_pod_update_relevance() -> None:
    env = new_env()
    env.add_service(service("ns", selector={"foo": "bar"}, name="a"))
    env.add_service(service("ns", selector={"app": "x"}, name="b"))
    env.add_service(service("ns", name="manual"))  # no selector: selects nothing
    env.add_service(service("other", selector={"foo": "bar"}, name="c"))
    pod = make_pod("ns", 0, 1, True)

    def update(mutate: Any, rv: str = "2") -> list[str]:
        new = copy.deepcopy(pod)
        new["metadata"]["resourceVersion"] = rv
        mutate(new)
        return sorted(env.ctrl._services_to_update(pod, new))

    assert update(lambda p: None, rv="0") == []  # a resync
    assert update(lambda p: p["metadata"].setdefault("annotations", {}).update(a="b")) == []  # irrelevant
    assert update(lambda p: p["status"]["conditions"][0].update(status="False")) == ["ns/a"]
    assert update(lambda p: p["metadata"].update(deletionTimestamp="2024-01-01T00:00:00Z")) == ["ns/a"]
    # Labels moved it from a to b: both; a hostname change alone re-syncs its Services.
    assert update(lambda p: p["metadata"].update(labels={"app": "x"})) == ["ns/a", "ns/b"]
    assert update(lambda p: p["spec"].update(hostname="h")) == []  # same Services: symmetric difference empty
    assert update(lambda p: (p["metadata"].update(labels={"app": "x"}),
                             p["status"]["conditions"][0].update(status="False"))) == ["ns/a", "ns/b"]


async def test_service_events_queue_at_once() -> None:
    env = new_env(batch_period=5.0)
    svc = service("ns", selector={"foo": "bar"})
    env.ctrl._on_service(Added(svc))
    env.ctrl._on_service(Updated(svc, svc))
    env.ctrl._on_service(Deleted(svc))
    assert await drain(env) == ["ns/foo"]
