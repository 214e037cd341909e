"""The factory: one informer per resource, run as named tasks, cache-sync waits; and the metrics."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controller_manager.api.resources import DEPLOYMENTS, PODS, Resource
from controller_manager.clock import FakeClock
from controller_manager.runtime.informers import SharedInformerFactory, default_transform
from tests.prometheus import sample_value

from .conftest import Runner
from .fakes import FakeClient, FakeServer, Gone, Recorder, advance_until, eventually, settle

pytestmark = pytest.mark.timeout(20)


def test_one_informer_per_resource(factory: SharedInformerFactory) -> None:
    pods = factory.informer(PODS)
    assert factory.informer(PODS) is pods
    # Equal descriptors from elsewhere (discovery) map to the same informer.
    assert factory.informer(Resource("", "v1", "pods", "Pod", True)) is pods
    assert factory.informer(PODS, metadata_only=True) is not pods
    assert factory.informer(PODS, metadata_only=True) is factory.informer(PODS, metadata_only=True)
    assert factory.informer(DEPLOYMENTS) is not pods
    assert len(factory.informers()) == 3


def test_indexers_accumulate_and_transforms_must_agree(factory: SharedInformerFactory) -> None:
    def by_app(obj: dict[str, Any]) -> list[str]:
        return [obj["metadata"].get("labels", {}).get("app", "")]

    pods = factory.informer(PODS, indexers={"app": by_app})
    assert factory.informer(PODS, indexers={"app": by_app}) is pods  # the same function again is fine
    assert "app" in pods.store.indexers
    with pytest.raises(ValueError, match="indexer conflict"):
        factory.informer(PODS, indexers={"app": lambda o: []})
    assert factory.informer(PODS, transform=default_transform) is pods
    with pytest.raises(ValueError, match="another transform"):
        factory.informer(PODS, transform=lambda o: o)


async def test_run_starts_informers_made_before_and_after(server: FakeServer, factory: SharedInformerFactory,
                                                          run: Runner) -> None:
    server.add("a")
    pods = factory.informer(PODS)
    task = run(factory.run)
    assert await factory.wait_for_cache_sync()
    names = {t.get_name() for t in asyncio.all_tasks()}
    assert "informer:v1/pods" in names

    late = factory.informer(PODS, metadata_only=True)
    assert await factory.wait_for_cache_sync()
    assert late.has_synced
    assert pods.has_synced
    assert "informer:v1/pods:metadata" in {t.get_name() for t in asyncio.all_tasks()}

    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await settle()
    assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("informer:")]


async def test_run_twice_is_an_error(factory: SharedInformerFactory, run: Runner) -> None:
    run(factory.run)
    await settle()
    with pytest.raises(RuntimeError, match="already running"):
        await factory.run()


async def test_wait_for_cache_sync_times_out_on_the_injected_clock(server: FakeServer,
                                                                   factory: SharedInformerFactory,
                                                                   clock: FakeClock, run: Runner) -> None:
    factory.informer(PODS)
    for _ in range(10):
        server.list_failures.append(Gone("nothing to list today"))
    run(factory.run)
    waiter = asyncio.create_task(factory.wait_for_cache_sync(timeout=0.5), name="wait-for-sync")
    await settle()
    assert not waiter.done()
    clock.advance(0.5)
    assert await waiter is False


async def test_wait_for_cache_sync_with_nothing_to_wait_for(factory: SharedInformerFactory) -> None:
    assert await factory.wait_for_cache_sync(timeout=0)


async def test_wait_for_cache_sync_with_a_zero_timeout_does_not_wait(factory: SharedInformerFactory) -> None:
    factory.informer(PODS)  # never run
    assert await factory.wait_for_cache_sync(timeout=0) is False


async def test_wait_for_cache_sync_is_cancellable(factory: SharedInformerFactory) -> None:
    factory.informer(PODS)  # never run, so never synced
    waiter = asyncio.create_task(factory.wait_for_cache_sync(), name="waiter")
    await settle()
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter


def _sample(name: str, labels: dict[str, str]) -> float:
    value = sample_value(name, labels)
    return 0.0 if value is None else value


async def test_metrics(clock: FakeClock, run: Runner) -> None:
    # A kind no other test uses, so the scrape-time gauge sees only this informer.
    widgets = Resource("example.com", "v1", "widgets", "Widget", True)
    labels = {"name": "example.com/v1/widgets"}
    cached = {**labels, "selector": ""}
    before = {m: _sample(m, labels) for m in (
        "reflector_lists_total", "reflector_watches_total", "reflector_watch_errors_total",
        "reflector_relists_total", "reflector_malformed_objects_total", "reflector_list_errors_total")}
    widget_server = FakeServer(widgets)
    widget_server.add("d1")
    factory = SharedInformerFactory(FakeClient(widget_server), clock)
    informer = factory.informer(widgets)
    seen = Recorder()
    informer.add_handler(seen)
    run(factory.run)
    await factory.wait_for_cache_sync()
    await eventually(lambda: widget_server.open_watches == 1)
    assert _sample("informer_cached_objects", cached) == 1
    widget_server.add("d2")
    widget_server.send_raw("ADDED", {"bad": True})
    await eventually(lambda: len(informer.store) == 2)
    assert _sample("informer_cached_objects", cached) == 2
    widget_server.end_watches(Gone("expired"))
    await advance_until(clock, lambda: widget_server.open_watches == 1 and len(widget_server.list_calls) == 2)

    def delta(metric: str) -> float:
        return _sample(metric, labels) - before[metric]

    assert delta("reflector_lists_total") == 2
    assert delta("reflector_watches_total") == 2
    assert delta("reflector_watch_errors_total") == 1
    assert delta("reflector_relists_total") == 1
    assert delta("reflector_malformed_objects_total") == 1
    assert delta("reflector_list_errors_total") == 0


async def test_cached_objects_gauge_tells_selected_informers_apart(clock: FakeClock, run: Runner) -> None:
    # A shard member's informers (--sharding) select by label: the gauge reports them apart from an unfiltered
    # informer of the same kind, as the leader holds both.
    gadgets = Resource("example.com", "v1", "gadgets", "Gadget", True)
    selector = "shard.controller-manager.io/ring=member-a"
    server = FakeServer(gadgets)
    server.add("a", labels={"shard.controller-manager.io/ring": "member-a"})
    for name in ("b", "c"):
        server.add(name)
    cluster_wide = SharedInformerFactory(FakeClient(server), clock)
    shard = SharedInformerFactory(FakeClient(server), clock, selector_for=lambda res: selector)
    cluster_wide.informer(gadgets)
    shard.informer(gadgets)
    run(cluster_wide.run)
    run(shard.run)
    assert await cluster_wide.wait_for_cache_sync()
    assert await shard.wait_for_cache_sync()
    name = "example.com/v1/gadgets"
    assert _sample("informer_cached_objects", {"name": name, "selector": ""}) == 3
    assert _sample("informer_cached_objects", {"name": name, "selector": selector}) == 1
    assert [c.get("label_selector") for c in server.list_calls] == [None, selector]
