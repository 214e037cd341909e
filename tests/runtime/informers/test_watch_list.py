"""Streaming lists (WatchListClient): an informer syncs through one watch, falls back to pages when refused.

Against the scripted fake server: it serves ``send_initial_events`` watches as the API server does (the state as
ADDED, then the BOOKMARK annotated ``k8s.io/initial-events-end``, then live events) and can hold that bookmark.
"""

from __future__ import annotations

import random

import pytest
from prometheus_client import REGISTRY

from controller_manager.api.resources import PODS
from controller_manager.clock import FakeClock
from controller_manager.runtime.informers import Added, Deleted, SharedInformerFactory, Updated

from .conftest import Runner
from .fakes import FakeServer, Gone, Recorder, Refused, WatchListFakeClient, advance_until, eventually, settle

pytestmark = pytest.mark.timeout(20)


def _factory(server: FakeServer, clock: FakeClock, *, watch_list: bool = True) -> SharedInformerFactory:
    return SharedInformerFactory(WatchListFakeClient(server), clock, rng=random.Random(7), watch_list=watch_list)


def _metric(name: str) -> float:
    return REGISTRY.get_sample_value(name, {"name": "v1/pods"}) or 0.0


def _streamed(call: dict) -> bool:
    return bool(call.get("send_initial_events"))


def _names(events: list[object]) -> list[tuple[str, str]]:
    out = []
    for e in events:
        if isinstance(e, Updated):
            out.append(("Updated", e.new["metadata"]["name"]))
        elif isinstance(e, Added):
            out.append(("Added", e.obj["metadata"]["name"]))
        else:
            assert isinstance(e, Deleted)
            out.append(("Deleted" + (" (unknown)" if e.final_state_unknown else ""), e.obj["metadata"]["name"]))
    return out


async def test_syncs_through_one_watch_with_no_list(server: FakeServer, clock: FakeClock, run: Runner) -> None:
    server.add("a")
    server.add("b")
    factory = _factory(server, clock)
    informer = factory.informer(PODS)
    seen = Recorder()
    informer.add_handler(seen)
    lists_before = _metric("reflector_lists_total")
    run(factory.run)
    assert await factory.wait_for_cache_sync(timeout=5)
    assert server.list_calls == []
    [call] = server.watch_calls
    assert _streamed(call)
    assert call["resource_version"] == ""
    assert call["allow_bookmarks"] is True
    assert 300 <= call["timeout_seconds"] < 600
    assert _names(seen.events) == [("Added", "a"), ("Added", "b")]
    assert informer.last_sync_resource_version == "102"
    assert _metric("reflector_lists_total") == lists_before + 1  # counted as a list, as a paged one is

    # The same stream goes on as the watch: a later change arrives without a second request.
    seen.clear()
    server.add("c")
    await eventually(lambda: len(seen.events) == 1)
    assert _names(seen.events) == [("Added", "c")]
    assert len(server.watch_calls) == 1
    assert server.list_calls == []
    assert informer.last_sync_resource_version == "103"


async def test_relist_after_410_replaces_the_cache_only_at_the_end_bookmark(
        server: FakeServer, clock: FakeClock, run: Runner) -> None:
    for name in ("a", "b", "c"):
        server.add(name)
    factory = _factory(server, clock)
    informer = factory.informer(PODS)
    seen = Recorder()
    informer.add_handler(seen)
    run(factory.run)
    assert await factory.wait_for_cache_sync(timeout=5)
    await eventually(lambda: server.open_watches == 1)
    relists_before = _metric("reflector_relists_total")

    # The watch falls behind, the history is compacted, and the server says 410.
    server.hold()
    server.update("default/a", lambda o: o.setdefault("spec", {}).update(nodeName="n1"))
    server.delete("default/b")
    server.add("d")
    server.compact()
    server.initial_events_end.clear()  # the next streaming list stops short of its end bookmark
    seen.clear()
    server.end_watches(Gone("too old resource version"))
    await advance_until(clock, lambda: len(server.watch_calls) == 2)
    relist = server.watch_calls[1]
    assert _streamed(relist)
    assert relist["resource_version"] == "103"
    await eventually(lambda: server.open_watches == 1)
    await settle()
    # Every object has streamed in, but until the bookmark the cache is the old one and nobody heard a thing.
    assert seen.events == []
    assert sorted(informer.store.keys()) == ["default/a", "default/b", "default/c"]
    assert "nodeName" not in informer.store.get("default/a").get("spec", {})

    server.initial_events_end.set()
    await eventually(lambda: len(seen.events) == 3)
    assert sorted(_names(seen.events)) == [("Added", "d"), ("Deleted (unknown)", "b"), ("Updated", "a")]
    assert sorted(informer.store.keys()) == ["default/a", "default/c", "default/d"]
    assert server.list_calls == []
    assert _metric("reflector_relists_total") == relists_before + 1


async def test_refused_stream_falls_back_to_a_paged_list_for_that_sync_only(
        server: FakeServer, clock: FakeClock, run: Runner) -> None:
    server.add("a")
    server.watch_failures.append(Refused(422, "sendInitialEvents is forbidden for watch unless the WatchList "
                                              "feature gate is enabled"))
    factory = _factory(server, clock)
    informer = factory.informer(PODS)
    fallbacks_before = _metric("reflector_watch_list_fallbacks_total")
    lists_before = _metric("reflector_lists_total")
    run(factory.run)
    assert await factory.wait_for_cache_sync(timeout=5)
    assert len(server.list_calls) == 1
    assert sorted(informer.store.keys()) == ["default/a"]
    await eventually(lambda: len(server.watch_calls) == 2)
    assert _streamed(server.watch_calls[0])
    assert not _streamed(server.watch_calls[1])
    assert server.watch_calls[1]["resource_version"] == "101"
    assert _metric("reflector_watch_list_fallbacks_total") == fallbacks_before + 1
    assert _metric("reflector_lists_total") == lists_before + 2  # the refused stream, then the paged list

    # The next re-list tries streaming again (client-go falls back per ListAndWatch, not for good).
    await eventually(lambda: server.open_watches == 1)
    server.compact()
    server.end_watches(Gone("too old resource version"))
    await advance_until(clock, lambda: len(server.watch_calls) == 3)
    assert _streamed(server.watch_calls[2])
    await settle()
    assert len(server.list_calls) == 1


async def test_a_stream_refused_for_its_resource_version_restarts_from_the_latest(
        server: FakeServer, clock: FakeClock, run: Runner) -> None:
    server.add("a")
    factory = _factory(server, clock)
    informer = factory.informer(PODS)
    run(factory.run)
    assert await factory.wait_for_cache_sync(timeout=5)
    await eventually(lambda: server.open_watches == 1)
    server.add("b")
    await eventually(lambda: informer.last_sync_resource_version == "102")
    server.compact()
    server.watch_failures.append(Gone("too old resource version: 102 (200)"))  # the streaming re-list from 102
    server.end_watches(Gone("too old resource version"))
    await advance_until(clock, lambda: len(server.watch_calls) == 3)
    assert [(_streamed(c), c["resource_version"]) for c in server.watch_calls] == [
        (True, ""), (True, "102"), (True, "")]
    await eventually(lambda: server.open_watches == 1)
    assert server.list_calls == []


async def test_429_backs_off_and_streams_again(server: FakeServer, clock: FakeClock, run: Runner) -> None:
    server.add("a")
    server.watch_failures.append(Refused(429, "Too many requests"))
    factory = _factory(server, clock)
    informer = factory.informer(PODS)
    run(factory.run)
    await eventually(lambda: len(server.watch_calls) == 1)
    await settle()
    assert len(server.watch_calls) == 1
    assert not informer.has_synced
    waited = await advance_until(clock, lambda: informer.has_synced)
    assert waited >= 0.8  # client-go's first backoff step
    assert [_streamed(c) for c in server.watch_calls] == [True, True]
    assert server.list_calls == []


async def test_stream_ending_before_its_bookmark_is_streamed_again(
        server: FakeServer, clock: FakeClock, run: Runner) -> None:
    server.add("a")
    server.initial_events_end.clear()
    factory = _factory(server, clock)
    informer = factory.informer(PODS)
    run(factory.run)
    await eventually(lambda: server.open_watches == 1)
    await settle()
    clock.advance(2.0)  # not a "very short" watch: it delivered an event
    server.end_watches()
    server.initial_events_end.set()
    assert await factory.wait_for_cache_sync(timeout=5)
    assert [_streamed(c) for c in server.watch_calls] == [True, True]
    assert server.list_calls == []
    assert sorted(informer.store.keys()) == ["default/a"]


async def test_very_short_empty_stream_falls_back_to_a_paged_list(
        server: FakeServer, clock: FakeClock, run: Runner) -> None:
    server.initial_events_end.clear()  # nothing to send and no bookmark: a server that just closes
    factory = _factory(server, clock)
    factory.informer(PODS)
    run(factory.run)
    await eventually(lambda: server.open_watches == 1)
    server.end_watches()
    assert await factory.wait_for_cache_sync(timeout=5)
    assert len(server.list_calls) == 1


async def test_gate_off_lists_in_pages(server: FakeServer, clock: FakeClock, run: Runner) -> None:
    server.add("a")
    factory = _factory(server, clock, watch_list=False)
    informer = factory.informer(PODS)
    run(factory.run)
    assert await factory.wait_for_cache_sync(timeout=5)
    assert len(server.list_calls) == 1
    await eventually(lambda: len(server.watch_calls) == 1)
    assert not _streamed(server.watch_calls[0])
    assert sorted(informer.store.keys()) == ["default/a"]


async def test_client_without_streaming_lists_is_listed_in_pages(server: FakeServer, clock: FakeClock,
                                                                 factory: SharedInformerFactory,
                                                                 run: Runner) -> None:
    server.add("a")  # the conftest factory: gate on (the default), but a client that does not say it streams
    factory.informer(PODS)
    run(factory.run)
    assert await factory.wait_for_cache_sync(timeout=5)
    assert len(server.list_calls) == 1
    await eventually(lambda: len(server.watch_calls) == 1)
    assert not _streamed(server.watch_calls[0])
