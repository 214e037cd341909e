"""An in-memory, scriptable list/watch "server" and a fake client over it, for informer tests.

The server keeps objects with increasing resourceVersions and a history of events, like the API server's
watch cache: a watch from resourceVersion N replays what happened after N, then streams live events, or fails
with 410 Gone if N is older than the compacted history. Tests can hold delivery (as if the connection lagged),
cut watches (normally or with an error), send BOOKMARKs and send arbitrary (malformed) events. A client asking
with a label selector gets what kube-apiserver's watch cache gives a selected watcher: only matching objects, an
object entering the selection as ADDED, one leaving it as DELETED (its previous state at the change's version).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from controller_manager.api.meta import key_of
from controller_manager.api.resources import PODS, Resource
from controller_manager.api.selectors import EVERYTHING, Selector, parse
from controller_manager.clock import FakeClock


class Gone(Exception):
    """What the real client raises for 410 (the reflector only looks at ``status``)."""

    status = 410


class ConnectionLost(Exception):
    """A dropped connection (the real client raises ApiConnectionError)."""


@dataclass(frozen=True)
class WatchEvent:
    type: str
    object: Any


@dataclass
class _Stream:
    queue: asyncio.Queue[tuple[str, Any, Any]] = field(default_factory=asyncio.Queue)
    held: bool = False
    # end_watches() reached it: a streaming list then ends without its end bookmark.
    ended: asyncio.Event = field(default_factory=asyncio.Event)


_END = "__end__"
_RAISE = "__raise__"


class FakeServer:
    def __init__(self, res: Resource = PODS) -> None:
        self.res = res
        self.rv = 100
        self.objects: dict[str, dict[str, Any]] = {}
        # (resourceVersion, type, object, the object before the change or None)
        self.history: list[tuple[int, str, dict[str, Any], dict[str, Any] | None]] = []
        self.compacted = 0  # a watch from an RV below this is Gone
        self.streams: list[_Stream] = []
        self.list_calls: list[dict[str, Any]] = []
        self.watch_calls: list[dict[str, Any]] = []
        self.list_failures: list[Exception] = []  # raised by the next lists, in order
        self.watch_failures: list[Exception] = []  # raised by the next watches on open, in order
        # Streaming lists (WatchListClient): the end bookmark waits while this is clear.
        self.initial_events_end = asyncio.Event()
        self.initial_events_end.set()

    # -- scripting --------------------------------------------------------------------------------

    def _next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    def add(self, name: str, namespace: str = "default", *, labels: dict[str, str] | None = None,
            **fields: Any) -> dict[str, Any]:
        obj: dict[str, Any] = {"apiVersion": self.res.api_version, "kind": self.res.kind,
                               "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": self._next_rv()}}
        if labels is not None:
            obj["metadata"]["labels"] = dict(labels)
        if self.res.namespaced:
            obj["metadata"]["namespace"] = namespace
        obj.update(copy.deepcopy(fields))
        self.objects[key_of(obj)] = obj
        self._record("ADDED", obj, None)
        return obj

    def update(self, key: str, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        prev = self.objects[key]
        obj = copy.deepcopy(prev)
        change(obj)
        obj["metadata"]["resourceVersion"] = self._next_rv()
        self.objects[key] = obj
        self._record("MODIFIED", obj, prev)
        return obj

    def delete(self, key: str) -> dict[str, Any]:
        prev = self.objects.pop(key)
        obj = copy.deepcopy(prev)
        obj["metadata"]["resourceVersion"] = self._next_rv()
        self._record("DELETED", obj, prev)
        return obj

    def bump(self, n: int = 1) -> None:
        """Move the resourceVersion on without events for this resource (other kinds changing)."""
        self.rv += n

    def compact(self) -> None:
        """Forget history: watches from any earlier resourceVersion now fail with 410 Gone."""
        self.compacted = self.rv
        self.history.clear()

    def bookmark(self) -> None:
        self._send("BOOKMARK", {"kind": self.res.kind, "apiVersion": self.res.api_version,
                                "metadata": {"resourceVersion": str(self.rv)}})

    def send_raw(self, event_type: str, obj: Any) -> None:
        """Deliver any event (malformed ones included) to the live watches."""
        self._send(event_type, obj)

    def hold(self) -> None:
        """Stop delivering to the current watches (they stay open): changes pile up unseen."""
        for s in self.streams:
            s.held = True

    def end_watches(self, error: Exception | None = None) -> None:
        """End every open watch: normally, or by raising ``error`` in the reader."""
        for s in self.streams:
            s.ended.set()
            s.queue.put_nowait((_RAISE, error, None) if error is not None else (_END, None, None))
        self.streams.clear()

    @property
    def open_watches(self) -> int:
        return len(self.streams)

    # -- internals --------------------------------------------------------------------------------

    def _record(self, event_type: str, obj: dict[str, Any], prev: dict[str, Any] | None) -> None:
        self.history.append((int(obj["metadata"]["resourceVersion"]), event_type, obj, prev))
        self._send(event_type, obj, prev)

    def _send(self, event_type: str, obj: Any, prev: Any = None) -> None:
        for s in self.streams:
            if not s.held:
                s.queue.put_nowait((event_type, copy.deepcopy(obj), prev))


def selected_event(selector: Selector, event_type: str, obj: Any, prev: Any) -> tuple[str, Any] | None:
    """The event a watcher with ``selector`` receives for a change, or None (kube-apiserver's cacheWatcher)."""
    if selector.is_empty() or event_type not in ("ADDED", "MODIFIED", "DELETED") or \
            not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
        return event_type, obj  # bookmarks and raw (malformed) test events pass as they are
    now = event_type != "DELETED" and selector.matches(obj["metadata"].get("labels"))
    before = prev is not None and selector.matches(prev["metadata"].get("labels"))
    if now:
        return ("MODIFIED" if before else "ADDED"), obj
    if before:
        left = copy.deepcopy(prev)
        left["metadata"]["resourceVersion"] = obj["metadata"]["resourceVersion"]
        return "DELETED", left
    return None


class FakeClient:
    """Implements the ApiClient calls the reflector makes, over a FakeServer."""

    def __init__(self, server: FakeServer) -> None:
        self.server = server

    async def list_all(
        self, res: Resource, namespace: str | None = None, *, metadata_only: bool = False, **kw: Any
    ) -> tuple[list[dict[str, Any]], str]:
        s = self.server
        s.list_calls.append({"res": res, "namespace": namespace, "metadata_only": metadata_only, **kw})
        await asyncio.sleep(0)
        if s.list_failures:
            raise s.list_failures.pop(0)
        selector = parse(kw["label_selector"]) if kw.get("label_selector") else EVERYTHING
        items = [copy.deepcopy(o) for o in s.objects.values() if selector.matches(o["metadata"].get("labels"))]
        decode = kw.get("decode")
        if decode is not None:
            # What the real client does with a decoder: the page goes over the wire as a List, items without kind.
            wire = [{k: v for k, v in o.items() if k not in ("kind", "apiVersion")} for o in items]
            items = decode(orjson.dumps({"kind": "List", "metadata": {"resourceVersion": str(s.rv)},
                                         "items": wire}))["items"]
        return items, str(s.rv)

    def watch(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        allow_bookmarks: bool = True,
        timeout_seconds: int | None = None,
        metadata_only: bool = False,
        **kw: Any,
    ) -> AsyncIterator[WatchEvent]:
        s = self.server
        s.watch_calls.append({"res": res, "resource_version": resource_version, "allow_bookmarks": allow_bookmarks,
                              "timeout_seconds": timeout_seconds, "metadata_only": metadata_only, **kw})
        decode = kw.get("decode")
        selector = parse(kw["label_selector"]) if kw.get("label_selector") else EVERYTHING
        events = self._stream(resource_version, selector, initial=bool(kw.get("send_initial_events")))
        return events if decode is None else self._decoded(events, decode)

    @staticmethod
    async def _decoded(events: AsyncIterator[WatchEvent], decode: Any) -> AsyncIterator[WatchEvent]:
        """What the real client does with a decoder: each event goes over the wire as a JSON line."""
        async for event in events:
            yield WatchEvent(*decode(orjson.dumps({"type": event.type, "object": event.object})))

    async def _stream(self, resource_version: str | None, selector: Selector, *, initial: bool = False
                      ) -> AsyncIterator[WatchEvent]:
        s = self.server
        if s.watch_failures:
            raise s.watch_failures.pop(0)
        since = int(resource_version or 0)
        if initial:
            # A streaming list (NotOlderThan): the current state as ADDED, then the end bookmark, then live.
            backlog: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = [
                ("ADDED", copy.deepcopy(o), None) for o in s.objects.values()]
            end_rv = str(s.rv)
        else:
            if since < s.compacted:
                raise Gone(f"too old resource version: {since} ({s.compacted})")
            # Replay and subscribe with no await in between, so nothing falls between the two.
            backlog = [(t, copy.deepcopy(o), p) for rv, t, o, p in s.history if rv > since]
        stream = _Stream()
        s.streams.append(stream)
        try:
            for t, o, p in backlog:
                seen = selected_event(selector, t, o, p)
                if seen is not None:
                    yield WatchEvent(*seen)
            if initial:
                waits = [asyncio.ensure_future(e.wait()) for e in (s.initial_events_end, stream.ended)]
                try:
                    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for w in waits:
                        w.cancel()
                if not stream.ended.is_set():
                    yield WatchEvent("BOOKMARK", {"kind": s.res.kind, "apiVersion": s.res.api_version,
                                                  "metadata": {"resourceVersion": end_rv,
                                                               "annotations": {"k8s.io/initial-events-end": "true"}}})
            while True:
                t, o, p = await stream.queue.get()
                if t == _END:
                    return
                if t == _RAISE:
                    raise o
                seen = selected_event(selector, t, o, p)
                if seen is not None:
                    yield WatchEvent(*seen)
        finally:
            if stream in s.streams:
                s.streams.remove(stream)


class WatchListFakeClient(FakeClient):
    """A FakeClient that says it serves streaming lists (as ApiClient does)."""

    supports_watch_list = True


class Refused(Exception):
    """An API error with a status (the reflector reads only ``status``): 422 from a server without WatchList."""

    def __init__(self, status: int, message: str = "refused") -> None:
        super().__init__(message)
        self.status = status


class Recorder:
    """A handler that remembers what it was given."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def __call__(self, event: Any) -> None:
        self.events.append(event)

    def clear(self) -> None:
        self.events.clear()


async def eventually(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Wait (yielding to the loop, with a deadline) until ``condition()`` holds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError("condition not met before the deadline")
        await asyncio.sleep(0.001)


async def settle(turns: int = 20) -> None:
    """Let every ready task run a few turns (to show that something does NOT happen without a clock advance)."""
    for _ in range(turns):
        await asyncio.sleep(0)


async def advance_until(clock: FakeClock, condition: Callable[[], bool], step: float = 0.1,
                        limit: float = 600.0) -> float:
    """Advance the fake clock in small steps until ``condition()`` holds; returns the fake time it took."""
    moved = 0.0
    await settle()
    while not condition():
        if moved >= limit:
            raise AssertionError(f"condition not met after advancing the clock {limit}s")
        clock.advance(step)
        moved += step
        await settle()
    return moved
