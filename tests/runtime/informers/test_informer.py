"""Informer behaviour as a controller sees it: events in order, re-list reconciliation, reconnects, bad objects."""

from __future__ import annotations

import asyncio

import pytest
import structlog

from controller_manager.api.resources import PODS
from controller_manager.clock import FakeClock
from controller_manager.runtime.informers import Added, Deleted, SharedInformerFactory, Updated

from .conftest import Runner
from .fakes import ConnectionLost, FakeServer, Gone, Recorder, advance_until, eventually, settle

pytestmark = pytest.mark.timeout(20)


def _describe(events: list[object]) -> list[tuple[str, ...]]:
    """Events as (kind, key, resourceVersion[s], flags) for readable comparisons."""
    out: list[tuple[str, ...]] = []
    for e in events:
        if isinstance(e, Added):
            out.append(("Added", _key(e.obj), e.obj["metadata"]["resourceVersion"]))
        elif isinstance(e, Updated):
            out.append(("Updated", _key(e.new), e.old["metadata"]["resourceVersion"],
                        e.new["metadata"]["resourceVersion"]))
        elif isinstance(e, Deleted):
            out.append(("Deleted", _key(e.obj), e.obj["metadata"]["resourceVersion"],
                        "unknown" if e.final_state_unknown else "final"))
        else:
            raise AssertionError(f"not an informer event: {e!r}")
    return out


def _key(obj: dict) -> str:
    m = obj["metadata"]
    return f"{m['namespace']}/{m['name']}"


def _set_node(node: str):
    def change(obj: dict) -> None:
        obj.setdefault("spec", {})["nodeName"] = node

    return change


async def test_list_then_watch_delivers_events_in_order(server: FakeServer, factory: SharedInformerFactory,
                                                        run: Runner) -> None:
    a = server.add("a")
    server.add("b")
    informer = factory.informer(PODS)
    seen = Recorder()
    informer.add_handler(seen)
    run(factory.run)
    assert await factory.wait_for_cache_sync()
    assert informer.has_synced
    assert _describe(seen.events) == [("Added", "default/a", "101"), ("Added", "default/b", "102")]
    await eventually(lambda: server.open_watches == 1)
    call = server.watch_calls[0]
    assert call["resource_version"] == "102"
    assert call["allow_bookmarks"] is True
    assert 300 <= call["timeout_seconds"] < 600

    seen.clear()
    server.add("c")
    server.update("default/a", lambda o: o.update(spec={"nodeName": "n1"}))
    server.delete("default/b")
    await eventually(lambda: len(seen.events) == 3)
    assert _describe(seen.events) == [
        ("Added", "default/c", "103"),
        ("Updated", "default/a", "101", "104"),
        ("Deleted", "default/b", "105", "final"),
    ]
    assert seen.events[1].old["metadata"] == {**a["metadata"]}
    assert sorted(informer.store.keys()) == ["default/a", "default/c"]
    assert informer.store.get("default/a")["spec"] == {"nodeName": "n1"}
    assert informer.last_sync_resource_version == "105"
    assert len(server.list_calls) == 1


async def test_handlers_see_the_store_already_updated(server: FakeServer, factory: SharedInformerFactory,
                                                      run: Runner) -> None:
    informer = factory.informer(PODS)
    observed: list[bool] = []

    def handler(event: object) -> None:
        if isinstance(event, Deleted):
            observed.append(informer.store.get(_key(event.obj)) is None)
        elif isinstance(event, Added | Updated):
            obj = event.obj if isinstance(event, Added) else event.new
            observed.append(informer.store.get(_key(obj)) is obj)

    informer.add_handler(handler)
    run(factory.run)
    await factory.wait_for_cache_sync()
    server.add("a")
    server.update("default/a", _set_node("n1"))
    server.delete("default/a")
    await eventually(lambda: len(observed) == 3)
    assert observed == [True, True, True]


async def test_gone_mid_watch_relists_and_delivers_exactly_the_differences(
        server: FakeServer, factory: SharedInformerFactory, clock: FakeClock, run: Runner) -> None:
    server.add("keep")
    server.add("change")
    server.add("remove")
    informer = factory.informer(PODS)
    seen = Recorder()
    informer.add_handler(seen)
    run(factory.run)
    await factory.wait_for_cache_sync()
    await eventually(lambda: server.open_watches == 1)
    kept = informer.store.get("default/keep")
    seen.clear()

    # The watch lags: these changes never reach it, then the server says its resourceVersion is gone.
    server.hold()
    server.add("new")
    server.update("default/change", _set_node("n2"))
    server.delete("default/remove")
    server.compact()
    server.end_watches(Gone("too old resource version"))

    await settle()
    assert len(server.list_calls) == 1  # backs off first (client-go's BackoffUntil): [0.8 s, 1.6 s)
    await advance_until(clock, lambda: len(server.list_calls) == 2)
    await settle()
    # New and changed objects in list order, then what the list no longer has.
    assert _describe(seen.events) == [
        ("Updated", "default/change", "102", "105"),
        ("Added", "default/new", "104"),
        ("Deleted", "default/remove", "103", "unknown"),
    ]
    # Unchanged objects keep their cached instance and produce no event.
    assert informer.store.get("default/keep") is kept
    assert sorted(informer.store.keys()) == ["default/change", "default/keep", "default/new"]
    # The new watch starts from the new list's resourceVersion.
    await eventually(lambda: len(server.watch_calls) == 2)
    assert server.watch_calls[1]["resource_version"] == "106"


async def test_object_deleted_while_watch_was_down_arrives_with_final_state_unknown(
        server: FakeServer, factory: SharedInformerFactory, clock: FakeClock, run: Runner) -> None:
    server.add("a")
    server.add("b")
    informer = factory.informer(PODS)
    seen = Recorder()
    informer.add_handler(seen)
    run(factory.run)
    await factory.wait_for_cache_sync()
    await eventually(lambda: server.open_watches == 1)
    last_known = informer.store.get("default/b")
    seen.clear()

    server.end_watches(ConnectionLost("connection reset by peer"))
    await settle()
    server.delete("default/b")
    server.compact()  # by the time the reflector is back, its resourceVersion is too old

    await advance_until(clock, lambda: len(seen.events) == 1)
    [event] = seen.events
    assert isinstance(event, Deleted)
    assert event.final_state_unknown is True
    assert event.obj is last_known
    assert informer.store.keys() == ["default/a"]
    assert len(server.list_calls) == 2


async def test_bookmarks_move_the_resource_version_the_next_watch_starts_from(
        server: FakeServer, factory: SharedInformerFactory, run: Runner) -> None:
    server.add("a")
    informer = factory.informer(PODS)
    seen = Recorder()
    informer.add_handler(seen)
    run(factory.run)
    await factory.wait_for_cache_sync()
    await eventually(lambda: server.open_watches == 1)
    seen.clear()

    server.bump(50)
    server.bookmark()
    await eventually(lambda: informer.last_sync_resource_version == "151")
    assert seen.events == []  # a bookmark is not an object change
    assert len(informer.store) == 1

    server.end_watches()  # a normal end (the server-side timeout): re-watch at once, from the bookmark
    await eventually(lambda: len(server.watch_calls) == 2)
    assert server.watch_calls[1]["resource_version"] == "151"
    assert len(server.list_calls) == 1


async def test_watch_that_ends_normally_is_reopened_from_the_last_resource_version(
        server: FakeServer, factory: SharedInformerFactory, run: Runner) -> None:
    informer = factory.informer(PODS)
    seen = Recorder()
    informer.add_handler(seen)
    run(factory.run)
    await factory.wait_for_cache_sync()
    await eventually(lambda: server.open_watches == 1)
    server.add("a")
    await eventually(lambda: len(seen.events) == 1)
    server.end_watches()
    await eventually(lambda: len(server.watch_calls) == 2)
    assert server.watch_calls[1]["resource_version"] == "101"
    server.add("b")
    await eventually(lambda: len(seen.events) == 2)
    assert _describe(seen.events) == [("Added", "default/a", "101"), ("Added", "default/b", "102")]
    assert len(server.list_calls) == 1


async def test_reconnects_after_connection_loss_with_exponential_backoff(
        server: FakeServer, factory: SharedInformerFactory, clock: FakeClock, run: Runner) -> None:
    server.add("a")
    informer = factory.informer(PODS)
    seen = Recorder()
    informer.add_handler(seen)
    run(factory.run)
    await factory.wait_for_cache_sync()
    await eventually(lambda: server.open_watches == 1)

    server.end_watches(ConnectionLost("EOF"))
    server.add("b")  # happens while disconnected: must arrive after the reconnect
    await settle()
    clock.advance(0.79)  # first delay is in [0.8 s, 1.6 s)
    await settle()
    assert len(server.watch_calls) == 1
    clock.advance(0.82)
    await eventually(lambda: len(server.watch_calls) == 2)
    assert server.watch_calls[1]["resource_version"] == "101"
    await eventually(lambda: len(seen.events) == 2)
    assert _describe(seen.events)[1] == ("Added", "default/b", "102")

    # The next failure, straight away, doubles the delay: [1.6 s, 3.2 s).
    server.end_watches(ConnectionLost("EOF"))
    await settle()
    clock.advance(1.59)
    await settle()
    assert len(server.watch_calls) == 2
    clock.advance(1.62)
    await eventually(lambda: len(server.watch_calls) == 3)
    assert len(server.list_calls) == 1  # reconnects resume the watch, they do not re-list


async def test_very_short_empty_watch_is_backed_off(server: FakeServer, factory: SharedInformerFactory,
                                                    clock: FakeClock, run: Runner) -> None:
    factory.informer(PODS)
    run(factory.run)
    await factory.wait_for_cache_sync()
    await eventually(lambda: server.open_watches == 1)
    server.end_watches()  # ends at once, nothing delivered: a broken server, not a timeout
    await settle()
    assert len(server.watch_calls) == 1
    await advance_until(clock, lambda: len(server.watch_calls) == 2)


async def test_failed_list_is_retried_after_backoff(server: FakeServer, factory: SharedInformerFactory,
                                                   clock: FakeClock, run: Runner) -> None:
    server.add("a")
    server.list_failures.append(ConnectionLost("connection refused"))
    informer = factory.informer(PODS)
    run(factory.run)
    await eventually(lambda: len(server.list_calls) == 1)
    await settle()
    assert not informer.has_synced
    await advance_until(clock, lambda: informer.has_synced)
    assert len(server.list_calls) == 2
    assert informer.store.keys() == ["default/a"]


@pytest.mark.parametrize(
    ("event_type", "obj", "problem"),
    [
        pytest.param("ADDED", "not an object", "object is a str, not a JSON object", id="string"),
        pytest.param("ADDED", ["a", "list"], "object is a list, not a JSON object", id="list"),
        pytest.param("ADDED", {"kind": "Pod"}, "metadata is missing or not an object", id="no-metadata"),
        pytest.param("MODIFIED", {"metadata": {"namespace": "default", "resourceVersion": "7"}},
                     "metadata.name is missing or empty", id="no-name"),
        pytest.param("ADDED", {"metadata": {"name": "x", "resourceVersion": "7"}},
                     "metadata.namespace is missing on a namespaced resource", id="no-namespace"),
        pytest.param("ADDED", {"metadata": {"name": "x", "namespace": "default"}},
                     "metadata.resourceVersion is missing or empty", id="no-resource-version"),
        pytest.param("ADDED", {"kind": "Node", "metadata": {"name": "x", "namespace": "d", "resourceVersion": "7"}},
                     "kind is 'Node', expected 'Pod'", id="wrong-kind"),
        pytest.param("SURPRISE", {"metadata": {}}, "unknown watch event type 'SURPRISE'", id="unknown-type"),
        pytest.param("BOOKMARK", {"metadata": {}}, "metadata.resourceVersion is missing or empty", id="bad-bookmark"),
    ],
)
async def test_malformed_watch_object_is_logged_and_skipped(
        server: FakeServer, factory: SharedInformerFactory, run: Runner,
        event_type: str, obj: object, problem: str) -> None:
    informer = factory.informer(PODS)
    seen = Recorder()
    informer.add_handler(seen)
    run(factory.run)
    await factory.wait_for_cache_sync()
    await eventually(lambda: server.open_watches == 1)
    with structlog.testing.capture_logs() as logs:
        server.send_raw(event_type, obj)
        server.add("good")
        await eventually(lambda: len(seen.events) == 1)
    assert _describe(seen.events) == [("Added", "default/good", "101")]
    assert informer.store.keys() == ["default/good"]
    bad = [entry for entry in logs if entry["event"] == "skipping malformed object"]
    assert len(bad) == 1
    assert bad[0]["problem"] == problem
    assert bad[0]["resource"] == "v1/pods"
    assert bad[0]["log_level"] == "error"
    assert len(server.watch_calls) == 1  # the watch kept going


async def test_malformed_list_item_is_skipped_and_the_rest_cached(server: FakeServer,
                                                                 factory: SharedInformerFactory, run: Runner) -> None:
    server.add("a")
    server.objects["default/broken"] = {"metadata": {"namespace": "default", "resourceVersion": "9"}}
    informer = factory.informer(PODS)
    run(factory.run)
    with structlog.testing.capture_logs() as logs:
        await factory.wait_for_cache_sync()
    assert informer.store.keys() == ["default/a"]
    assert [e["problem"] for e in logs if e["event"] == "skipping malformed object"] == [
        "metadata.name is missing or empty"
    ]


async def test_late_handler_first_gets_the_cache_replayed(server: FakeServer, factory: SharedInformerFactory,
                                                          run: Runner) -> None:
    server.add("a")
    server.add("b")
    informer = factory.informer(PODS)
    early = Recorder()
    informer.add_handler(early)
    run(factory.run)
    await factory.wait_for_cache_sync()
    await eventually(lambda: server.open_watches == 1)

    late = Recorder()
    informer.add_handler(late)
    assert sorted(_describe(late.events)) == [("Added", "default/a", "101"), ("Added", "default/b", "102")]
    assert all(e.obj is informer.store.get(_key(e.obj)) for e in late.events)
    assert len(early.events) == 2  # the replay went to the new handler only
    server.add("c")
    await eventually(lambda: len(late.events) == 3)
    assert _describe(late.events)[2] == ("Added", "default/c", "103")
    assert len(early.events) == 3


async def test_failing_handler_is_logged_and_the_others_still_run(
        server: FakeServer, factory: SharedInformerFactory, run: Runner) -> None:
    informer = factory.informer(PODS)
    before, after = Recorder(), Recorder()

    def broken(event: object) -> None:
        raise RuntimeError("handler bug")

    informer.add_handler(before)
    informer.add_handler(broken)
    informer.add_handler(after)
    run(factory.run)
    await factory.wait_for_cache_sync()
    with structlog.testing.capture_logs() as logs:
        server.add("a")
        server.add("b")
        await eventually(lambda: len(after.events) == 2)
    assert len(before.events) == 2
    failures = [e for e in logs if e["event"] == "event handler failed"]
    assert len(failures) == 2
    assert failures[0]["key"] == "default/a"
    assert "broken" in failures[0]["handler"]


async def test_async_handler_is_reported_not_leaked(server: FakeServer, factory: SharedInformerFactory,
                                                    run: Runner) -> None:
    informer = factory.informer(PODS)

    async def wrong(event: object) -> None:
        raise AssertionError("never runs")

    informer.add_handler(wrong)  # type: ignore[arg-type]
    run(factory.run)
    with structlog.testing.capture_logs() as logs:
        server.add("a")
        await factory.wait_for_cache_sync()
    assert [e["event"] for e in logs if e["log_level"] == "error"] == [
        "event handler is a coroutine function; handlers must be synchronous"
    ]


async def test_resync_redelivers_every_cached_object_as_an_update(server: FakeServer, clock: FakeClock,
                                                                  run: Runner) -> None:
    from .fakes import FakeClient

    server.add("a")
    server.add("b")
    factory = SharedInformerFactory(FakeClient(server), clock, resync_period=60.0)
    informer = factory.informer(PODS)
    seen = Recorder()
    informer.add_handler(seen)
    run(factory.run)
    await factory.wait_for_cache_sync()
    seen.clear()
    clock.advance(59.9)  # the period is jittered within [60 s, 120 s)
    await settle()
    assert seen.events == []
    clock.advance(60.2)
    await eventually(lambda: len(seen.events) == 2)
    assert all(isinstance(e, Updated) and e.old is e.new for e in seen.events)
    assert sorted(_key(e.new) for e in seen.events) == ["default/a", "default/b"]
    seen.clear()
    clock.advance(120.1)  # and again, every period
    await eventually(lambda: len(seen.events) == 2)


async def test_resync_yields_to_the_loop_between_chunks_and_never_redelivers_a_replaced_object(
        factory: SharedInformerFactory) -> None:
    from controller_manager.runtime.informers.informer import RESYNC_CHUNK

    informer = factory.informer(PODS)
    count = 2 * RESYNC_CHUNK + 5
    pods = [{"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": f"p{i:04d}", "namespace": "default", "resourceVersion": str(10 + i)}}
            for i in range(count)]
    informer.replace(pods, str(10 + count))
    seen = Recorder()
    informer.add_handler(seen)
    seen.clear()
    # What another task sees each time it gets the loop while the pass runs: how far the pass has got. It also
    # changes the last pod once the pass has begun (its watch event arriving mid-pass).
    progress: list[int] = []

    async def meanwhile() -> None:
        while len(seen.events) < count:
            progress.append(len(seen.events))
            if len(seen.events) > 0 and informer.store.get("default/p" + f"{count - 1:04d}")["metadata"][
                    "resourceVersion"] == str(10 + count - 1):
                informer.apply("MODIFIED", {**pods[-1], "metadata": {**pods[-1]["metadata"], "resourceVersion": "999"}})
            await asyncio.sleep(0)

    other = asyncio.create_task(meanwhile())
    await asyncio.sleep(0)
    await informer.resync_once()
    other.cancel()
    # The other task ran between chunks, not only before and after the whole pass.
    assert any(0 < n < count for n in progress)
    resyncs = [e for e in seen.events if isinstance(e, Updated) and e.old is e.new]
    assert len(resyncs) == count - 1
    last = f"default/p{count - 1:04d}"
    assert all(_key(e.new) != last for e in resyncs)  # never its older copy, after the newer one was delivered
    assert [_describe([e]) for e in seen.events if _key(e.new) == last] == [[("Updated", last, str(9 + count), "999")]]


async def test_metadata_only_informer_asks_the_client_for_metadata(server: FakeServer,
                                                                  factory: SharedInformerFactory,
                                                                  run: Runner) -> None:
    informer = factory.informer(PODS, metadata_only=True)
    run(factory.run)
    await factory.wait_for_cache_sync()
    await eventually(lambda: server.open_watches == 1)
    assert server.list_calls[0]["metadata_only"] is True
    assert server.watch_calls[0]["metadata_only"] is True
    assert informer.name == "v1/pods:metadata"
    server.send_raw("ADDED", {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                              "metadata": {"name": "m", "namespace": "default", "resourceVersion": "200"}})
    await eventually(lambda: len(informer.store) == 1)


async def test_a_write_of_this_process_is_unseen_until_the_store_applies_it(
        server: FakeServer, factory: SharedInformerFactory, run: Runner) -> None:
    informer = factory.informer(PODS)
    run(factory.run)
    await factory.wait_for_cache_sync()
    server.add("a")
    seen = server.add("b")
    await eventually(lambda: informer.store.get("default/b") is not None)
    informer.wrote(seen)  # already applied: nothing to wait for
    assert informer.unseen_write("default/b") is None
    await eventually(lambda: server.open_watches == 1)
    server.hold()  # the watch lags: the write below is not delivered
    written = server.update("default/a", _set_node("n1"))
    informer.wrote(written)
    informer.wrote({**written, "metadata": {**written["metadata"], "resourceVersion": "1"}})  # older: kept newest
    informer.wrote({"metadata": {"name": "c", "namespace": "default", "resourceVersion": "not-a-number"}})
    assert informer.unseen_write("default/a") == written["metadata"]["resourceVersion"]
    assert informer.unseen_write("default/c") is None  # not comparable: never waited on
    assert informer.store.get("default/a")["metadata"]["resourceVersion"] != written["metadata"]["resourceVersion"]
    server.end_watches()  # the reflector watches again from where it was, and gets the write
    await eventually(lambda: informer.unseen_write("default/a") is None)
    assert informer.store.get("default/a")["metadata"]["resourceVersion"] == written["metadata"]["resourceVersion"]
