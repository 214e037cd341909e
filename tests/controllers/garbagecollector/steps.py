"""The step language of upstream's TestConflictingData (makeNode, makeAddEvent, processEvent,
processAttemptToDelete, processPendingGraphChanges, insertEvent, createObjectInClient, assertState), for the
collector's graph builder and attempt-to-delete worker on fakes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller_manager.api.resources import Resource
from controller_manager.controllers.garbagecollector import GarbageCollector
from controller_manager.controllers.garbagecollector.graph import ObjectReference
from controller_manager.controllers.garbagecollector.graph_builder import GraphEvent
from tests.controllers.garbagecollector.fakes import FakeClient, FakeRecorder, TrackingQueue, metadata_obj


@dataclass(frozen=True)
class N:
    """makeNode: an expected node (identity, the owners it lists, virtual)."""

    identity: ObjectReference
    owners: tuple[ObjectReference, ...] = ()
    virtual: bool = False


def n(identity: ObjectReference, *owners: ObjectReference, virtual: bool = False) -> N:
    return N(identity, owners, virtual)


def v(identity: ObjectReference) -> N:
    return N(identity, (), True)


@dataclass(frozen=True)
class Ev:
    type: str
    identity: ObjectReference
    owners: tuple[ObjectReference, ...] = ()
    virtual: bool = False

    def make(self) -> GraphEvent:
        api_version, kind = self.identity.api_version, self.identity.kind
        return GraphEvent(self.type, metadata_obj(self.identity, *self.owners), api_version, kind,  # type: ignore[arg-type]
                          virtual=self.virtual)


def add(identity: ObjectReference, *owners: ObjectReference) -> Ev:
    return Ev("add", identity, owners)


def delete(identity: ObjectReference, *owners: ObjectReference) -> Ev:
    return Ev("delete", identity, owners)


def vdelete(identity: ObjectReference) -> Ev:
    return Ev("delete", identity, (), True)


@dataclass
class Ctx:
    gc: GarbageCollector
    client: FakeClient
    recorder: FakeRecorder


Step = Callable[[Ctx], Awaitable[None]]


def create(res: Resource, identity: ObjectReference, *owners: ObjectReference) -> Step:
    async def step(ctx: Ctx) -> None:
        assert not ctx.client.actions, "check the pending client actions first"
        ctx.client.create(res, metadata_obj(identity, *owners))
    return step


def remove(res: Resource, namespace: str, name: str) -> Step:
    async def step(ctx: Ctx) -> None:
        assert not ctx.client.actions, "check the pending client actions first"
        ctx.client.remove(res, namespace, name)
    return step


def process(ev: Ev) -> Step:
    async def step(ctx: Ctx) -> None:
        changes = ctx.gc.builder.graph_changes
        assert len(changes) == 0, "process the pending graph changes before processing an event"
        changes.add(ev.make())
        await process_graph_change(ctx)
    return step


async def process_graph_change(ctx: Ctx) -> None:
    changes = ctx.gc.builder.graph_changes
    event = await changes.get()
    assert event is not None
    try:
        ctx.gc.builder.process_graph_changes(event)
    finally:
        changes.done(event)


def pending_changes(count: int) -> Step:
    async def step(ctx: Ctx) -> None:
        for i in range(count):
            assert len(ctx.gc.builder.graph_changes), f"expected at least {count} pending changes, got {i}"
            await process_graph_change(ctx)
    return step


def attempt(count: int = 1) -> Step:
    async def step(ctx: Ctx) -> None:
        for i in range(count):
            assert len(ctx.gc.builder.attempt_to_delete), f"expected at least {count} pending deletes, got {i}"
            await ctx.gc.process_attempt_to_delete_worker()
    return step


def insert(ev: Ev) -> Step:
    """Put ``ev`` ahead of the pending graph changes (an informer event sneaking in first)."""
    async def step(ctx: Ctx) -> None:
        changes = ctx.gc.builder.graph_changes
        items = []
        while len(changes):
            item = await changes.get()
            assert item is not None
            changes.done(item)
            items.append(item)
        changes.add(ev.make())
        for item in items:
            changes.add(item)
    return step


@dataclass
class State:
    graph: Sequence[N] = ()
    actions: Sequence[str] = ()
    events: Sequence[str] = ()
    pending_changes: Sequence[Ev] = ()
    attempt_to_delete: Sequence[N] = ()
    absent: Sequence[ObjectReference] = ()
    extra: dict[str, Any] = field(default_factory=dict)


def coords(refs: Sequence[Any]) -> list[ObjectReference]:
    return [ObjectReference.from_owner_ref(r) for r in refs]


def check(**expected: Any) -> Step:
    s = State(**expected)

    async def step(ctx: Ctx) -> None:
        builder = ctx.gc.builder
        assert sorted(map(str, builder.absent_owner_cache.references())) == sorted(map(str, s.absent))
        assert ctx.recorder.take() == list(s.events)
        assert ctx.client.take_actions() == list(s.actions)
        graph = builder.uid_to_node
        assert len(graph) == len(s.graph), f"expected {len(s.graph)} nodes, got {list(graph.values())}"
        for want in s.graph:
            got = graph.get(want.identity.uid)
            assert got is not None, f"no node in graph with uid={want.identity.uid}"
            assert got.identity == want.identity
            assert got.virtual == want.virtual, want.identity
            assert coords(got.owners) == [o.with_namespace("") for o in want.owners], want.identity
        changes = builder.graph_changes
        assert isinstance(changes, TrackingQueue)
        got_changes = [(e.type, e.identity(), e.virtual, tuple(coords(e.obj["metadata"].get("ownerReferences") or ())))
                       for e in changes.pending()]
        assert got_changes == [(e.type, e.identity, e.virtual, tuple(o.with_namespace("") for o in e.owners))
                               for e in s.pending_changes]
        deletes = builder.attempt_to_delete
        assert isinstance(deletes, TrackingQueue)
        assert [(x.identity, x.virtual) for x in deletes.pending()] == [
            (x.identity, x.virtual) for x in s.attempt_to_delete]
    return step
