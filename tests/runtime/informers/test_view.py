"""A label-selected informer served from a wider informer's cache (view.py, ``SharedInformer.follow``,
``SharedInformerFactory.serve_from``).

- The view's events are those a label-selected watch gives (checked with hypothesis against a reference informer
  fed what kube-apiserver sends a selected watcher), its store the same objects as the source's selection.
- The hand-over from the informer's own watch waits until the source has read at least as far, then switches in
  one step with nothing missed or repeated; the own watch closes.
- When the source stops, the informer lists and watches on its own again.
"""

from __future__ import annotations

import asyncio
import copy
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller_manager.api.meta import key_of
from controller_manager.api.resources import Resource
from controller_manager.api.selectors import parse
from controller_manager.clock import FakeClock
from controller_manager.runtime.informers import Added, Deleted, Event, SharedInformer, SharedInformerFactory, Updated
from controller_manager.runtime.informers.informer import builtin_indexers
from controller_manager.runtime.informers.store import Store
from controller_manager.runtime.informers.view import SelectionView
from tests.prometheus import sample_value

from .conftest import Runner
from .fakes import FakeClient, FakeServer, Recorder, advance_until, eventually, selected_event, settle

LABEL = "shard.controller-manager.io/ring"
SELECTOR = f"{LABEL}=member-a"
MINE = {LABEL: "member-a"}
OTHER = {LABEL: "member-b"}
# Kinds no other test uses, so the scrape-time gauges see only these tests' informers.
SPROCKETS = Resource("example.com", "v1", "sprockets", "Sprocket", True)
COGS = Resource("example.com", "v1", "cogs", "Cog", True)
# For the tests that read no gauge (their informers may outlive them until a garbage collection).
GIZMOS = Resource("example.com", "v1", "gizmos", "Gizmo", True)
DOODADS = Resource("example.com", "v1", "doodads", "Doodad", True)


def _rv(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["resourceVersion"])


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    return dict(obj["metadata"].get("labels") or {})


def describe(event: Event) -> tuple[Any, ...]:
    """An event as a comparable tuple: kind, key, versions, and for a deletion its flag and labels."""
    if isinstance(event, Added):
        return "Added", key_of(event.obj), _rv(event.obj)
    if isinstance(event, Updated):
        return "Updated", key_of(event.new), _rv(event.old), _rv(event.new)
    return "Deleted", key_of(event.obj), _rv(event.obj), event.final_state_unknown, _labels(event.obj)


def contents(store: Store) -> dict[str, str]:
    return {key_of(o): _rv(o) for o in store.list()}


# -- the translation, against a reference selected informer (no event loop: the sinks are driven directly) ----

NAMES = st.sampled_from(["p0", "p1", "p2", "p3"])
SHARDS = st.sampled_from([None, "member-a", "member-b"])
OPS = st.lists(st.one_of(
    st.tuples(st.just("put"), NAMES, SHARDS),  # create, or update with this shard label (None: no label)
    st.tuples(st.just("touch"), NAMES),  # an update that leaves the labels alone
    st.tuples(st.just("delete"), NAMES),
    st.tuples(st.just("down")),  # watches break: changes from here are not delivered ...
    st.tuples(st.just("relist")),  # ... until both re-list (after 410 Gone) and watch again
), max_size=40)


class Scripted:
    """A server's objects and resourceVersions; each change feeds the source's sink and, filtered as the API
    server filters for a selected watcher, the reference's."""

    def __init__(self, source: SharedInformer, reference: SharedInformer) -> None:
        self.source = source
        self.reference = reference
        self.selector = parse(SELECTOR)
        self.objects: dict[str, dict[str, Any]] = {}
        self.rv = 100
        self.up = True

    def change(self, event_type: str, obj: dict[str, Any], prev: dict[str, Any] | None) -> None:
        if not self.up:
            return
        self.source.apply(event_type, copy.deepcopy(obj))
        seen = selected_event(self.selector, event_type, obj, prev)
        if seen is not None:
            self.reference.apply(seen[0], copy.deepcopy(seen[1]))

    def run(self, op: tuple[Any, ...]) -> None:
        kind = op[0]
        if kind == "down":
            self.up = False
            return
        if kind == "relist":
            self.up = True
            rv = str(self.rv)
            everything = [copy.deepcopy(o) for o in self.objects.values()]
            self.source.replace(everything, rv)
            self.reference.replace([o for o in everything if self.selector.matches(_labels(o))], rv)
            return
        key = f"default/{op[1]}"
        prev = self.objects.get(key)
        if kind == "delete":
            if prev is None:
                return
            del self.objects[key]
            self.rv += 1
            final = copy.deepcopy(prev)
            final["metadata"]["resourceVersion"] = str(self.rv)
            self.change("DELETED", final, prev)
            return
        if kind == "touch" and prev is None:
            return
        self.rv += 1
        obj: dict[str, Any] = copy.deepcopy(prev) if prev is not None else {
            "apiVersion": GIZMOS.api_version, "kind": GIZMOS.kind,
            "metadata": {"name": op[1], "namespace": "default", "uid": f"uid-{op[1]}"}}
        obj["metadata"]["resourceVersion"] = str(self.rv)
        obj["spec"] = {"generation": self.rv}
        if kind == "put":
            obj["metadata"].pop("labels", None)
            if op[2] is not None:
                obj["metadata"]["labels"] = {LABEL: op[2]}
        self.objects[key] = obj
        self.change("MODIFIED" if prev is not None else "ADDED", obj, prev)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_the_view_shows_what_a_selected_watch_shows(ops: list[tuple[Any, ...]]) -> None:
    clock = FakeClock()
    client = FakeClient(FakeServer(GIZMOS))  # never called: the sinks are driven directly
    source = SharedInformer(client, GIZMOS, clock=clock)
    reference = SharedInformer(client, GIZMOS, clock=clock, label_selector=SELECTOR)
    viewed: list[Event] = []
    expected: list[Event] = []
    reference.add_handler(expected.append)
    view = SelectionView(Store(builtin_indexers(GIZMOS)), SELECTOR, viewed.append)
    source.add_handler(view, replay=False)
    script = Scripted(source, reference)
    for op in ops:
        viewed.clear()
        expected.clear()
        script.run(op)
        if op[0] == "relist":
            # A re-list reports what changed while the watch was down; the view learns it object by object
            # from the source's re-list (a relabelled-out object as a deletion at its new version), the
            # reference from its own, so only what happened to which key must agree.
            assert sorted(describe(e)[:2] for e in viewed) == sorted(describe(e)[:2] for e in expected), op
        else:
            assert [describe(e) for e in viewed] == [describe(e) for e in expected], op
        assert contents(view.store) == contents(reference.store)
        for key in view.store:
            assert view.store.get(key) is source.store.get(key)  # the same objects, not copies
        assert sorted(view.store.index_keys("namespace", "default")) == sorted(view.store.keys())


def test_the_sources_resyncs_are_not_passed_on() -> None:
    seen = Recorder()
    view = SelectionView(Store(), SELECTOR, seen)
    obj = {"metadata": {"name": "a", "namespace": "default", "resourceVersion": "5", "labels": MINE}}
    view(Added(obj))
    view(Updated(obj, obj))
    assert [type(e) for e in seen.events] == [Added]


def test_reconcile_gives_relist_events_and_takes_the_sources_instances() -> None:
    def obj(name: str, rv: str, labels: dict[str, str]) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": "default", "resourceVersion": rv, "labels": labels}}

    seen = Recorder()
    view = SelectionView(Store(), SELECTOR, seen)
    own = {"same": obj("same", "5", MINE), "changed": obj("changed", "5", MINE), "gone": obj("gone", "5", MINE),
           "left": obj("left", "5", MINE)}
    for o in own.values():
        view.store._put(key_of(o), o)
    source = [obj("same", "5", MINE), obj("changed", "9", MINE), obj("left", "9", OTHER), obj("new", "8", MINE)]
    assert view.reconcile(source) == (1, 1, 2)
    assert sorted(describe(e)[:2] for e in seen.events) == [
        ("Added", "default/new"), ("Deleted", "default/gone"), ("Deleted", "default/left"),
        ("Updated", "default/changed")]
    assert all(e.final_state_unknown for e in seen.events if isinstance(e, Deleted))
    assert view.store.get("default/same") is source[0]  # unchanged: no event, but the source's instance now


def test_follow_refuses_a_source_of_another_shape() -> None:
    clock = FakeClock()
    client = FakeClient(FakeServer(GIZMOS))
    informer = SharedInformer(client, GIZMOS, clock=clock, label_selector=SELECTOR)
    with pytest.raises(ValueError, match="not a cluster-wide source"):
        informer.follow(SharedInformer(client, GIZMOS, clock=clock, label_selector=SELECTOR))
    with pytest.raises(ValueError, match="another resource or shape"):
        informer.follow(SharedInformer(client, GIZMOS, clock=clock, metadata_only=True))
    with pytest.raises(ValueError, match="another resource or shape"):
        informer.follow(SharedInformer(client, DOODADS, clock=clock))
    with pytest.raises(ValueError, match="another resource or shape"):
        informer.follow(SharedInformer(client, GIZMOS, clock=clock, transform=lambda o: o))


# -- the hand-over, with real reflectors over the fake server -----------------------------------------------

def _gauge(name: str, res: Resource, selector: str) -> float:
    return sample_value(name, {"name": f"{res.api_version}/{res.plural}", "selector": selector}) or 0.0


async def test_the_hand_over_waits_for_the_source_then_serves_its_objects(clock: FakeClock, run: Runner) -> None:
    server = FakeServer(SPROCKETS)
    server.add("p1", labels=MINE)
    server.add("p2", labels=OTHER)
    server.add("p3", labels=MINE)
    wide = SharedInformerFactory(FakeClient(server), clock, rng=random.Random(1))
    source = wide.informer(SPROCKETS)
    run(wide.run)
    assert await wide.wait_for_cache_sync()
    await eventually(lambda: server.open_watches == 1)
    server.streams[0].held = True  # the source's watch lags: it will not see the next change in time

    shard = SharedInformerFactory(FakeClient(server), clock, rng=random.Random(2), selector_for=lambda _: SELECTOR)
    informer = shard.informer(SPROCKETS)
    seen = Recorder()
    informer.add_handler(seen)
    run(shard.run)
    assert await shard.wait_for_cache_sync()
    await eventually(lambda: server.open_watches == 2)
    server.update("default/p1", lambda o: o.setdefault("spec", {}).update(replicas=2))
    await eventually(lambda: _rv(informer.store.get("default/p1") or {"metadata": {"resourceVersion": ""}}) == "104")

    assert shard.serve_from(wide) == 1
    # The source is behind this informer's own watch: switching now would take p1 back to an older version.
    for _ in range(5):
        clock.advance(0.1)
        await settle()
    assert not informer.is_view
    assert _gauge("informer_cached_objects", SPROCKETS, SELECTOR) == 2

    server.end_watches()  # both watch again; the source's replays what it missed and catches up
    await advance_until(clock, lambda: informer.is_view)
    assert informer.last_sync_resource_version == source.last_sync_resource_version == "104"
    assert {k: informer.store.get(k) is source.store.get(k) for k in informer.store} == {
        "default/p1": True, "default/p3": True}
    assert [describe(e)[:3] for e in seen.events] == [
        ("Added", "default/p1", "101"), ("Added", "default/p3", "103"), ("Updated", "default/p1", "101")]
    await advance_until(clock, lambda: server.open_watches == 1)  # its own watch is closed
    assert _gauge("informer_cached_objects", SPROCKETS, SELECTOR) == 0
    assert _gauge("informer_view_objects", SPROCKETS, SELECTOR) == 2
    assert _gauge("informer_cached_objects", SPROCKETS, "") == 3

    seen.clear()
    server.update("default/p2", lambda o: o["metadata"].update(labels=MINE))  # moves in
    server.update("default/p1", lambda o: o["metadata"].update(labels=OTHER))  # moves out
    server.delete("default/p3")
    server.add("p4", labels=OTHER)
    await eventually(lambda: source.last_sync_resource_version == "108")
    assert [describe(e) for e in seen.events] == [
        ("Added", "default/p2", "105"),
        ("Deleted", "default/p1", "106", False, MINE),  # as it was while selected, at the change's version
        ("Deleted", "default/p3", "107", False, MINE),
    ]
    assert sorted(informer.store.keys()) == ["default/p2"]
    assert len(server.list_calls) == 2  # one list each: the view listed nothing more


async def test_a_view_whose_source_stops_lists_and_watches_on_its_own_again(clock: FakeClock, run: Runner) -> None:
    server = FakeServer(COGS)
    server.add("c1", labels=MINE)
    server.add("c2", labels=OTHER)
    wide = SharedInformerFactory(FakeClient(server), clock, rng=random.Random(3))
    wide.informer(COGS)
    wide_task = run(wide.run)
    assert await wide.wait_for_cache_sync()
    shard = SharedInformerFactory(FakeClient(server), clock, rng=random.Random(4), selector_for=lambda _: SELECTOR)
    informer = shard.informer(COGS)
    shard.serve_from(wide)  # offered before it runs: it still syncs, then switches
    seen = Recorder()
    informer.add_handler(seen)
    run(shard.run)
    await advance_until(clock, lambda: informer.is_view)
    assert sorted(informer.store.keys()) == ["default/c1"]

    wide_task.cancel()
    await asyncio.gather(wide_task, return_exceptions=True)
    server.update("default/c2", lambda o: o["metadata"].update(labels=MINE))  # while neither watches
    seen.clear()
    await advance_until(clock, lambda: "default/c2" in informer.store)
    assert not informer.is_view
    assert [describe(e)[:2] for e in seen.events] == [("Added", "default/c2")]
    assert server.list_calls[-1].get("label_selector") == SELECTOR
    server.update("default/c1", lambda o: o["metadata"].update(labels=OTHER))
    await advance_until(clock, lambda: "default/c1" not in informer.store)
    assert describe(seen.events[-1])[:2] == ("Deleted", "default/c1")
    assert _gauge("informer_cached_objects", COGS, SELECTOR) == 1
    assert _gauge("informer_view_objects", COGS, SELECTOR) == 0


async def test_serve_from_offers_same_shaped_informers_made_before_and_after(clock: FakeClock, run: Runner) -> None:
    server = FakeServer(DOODADS)
    server.add("d1", labels=MINE)
    server.add("d2", labels=OTHER)
    wide = SharedInformerFactory(FakeClient(server), clock, rng=random.Random(5))
    source = wide.informer(DOODADS)
    shard = SharedInformerFactory(FakeClient(server), clock, rng=random.Random(6), selector_for=lambda _: SELECTOR)
    metadata = shard.informer(DOODADS, metadata_only=True)  # another shape: keeps its own watch
    with pytest.raises(ValueError, match="itself"):
        shard.serve_from(shard)
    assert shard.serve_from(wide) == 0
    later = shard.informer(DOODADS)  # made after serve_from: offered as it is made
    run(wide.run)
    run(shard.run)
    await advance_until(clock, lambda: later.is_view)
    assert later.store.get("default/d1") is source.store.get("default/d1")
    assert sorted(later.store.keys()) == ["default/d1"]
    assert not metadata.is_view
    assert sorted(metadata.store.keys()) == ["default/d1"]
