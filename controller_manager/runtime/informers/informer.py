"""The shared informer: one reflector feeding one store, and handlers told of every change.

Guarantees (client-go ``tools/cache/shared_informer.go`` with a DeltaFIFO in front of the indexer):
- Every object passes through the transform before it is cached or handed to a handler.
- Handlers are called synchronously, in the order they were added, after the store shows the change; a handler
  that raises is logged and the next ones still run. Handlers must not await (they enqueue keys).
- The first list delivers ``Added`` for everything. A re-list (after 410 Gone) delivers exactly the
  differences from the cache: ``Added`` for new keys, ``Updated(old, new)`` where the resourceVersion changed,
  ``Deleted(last known, final_state_unknown=True)`` for keys the list no longer has. Unchanged objects keep
  their cached instance and produce no event.
- A watch ADDED for a cached key is an ``Updated``; a MODIFIED for an unknown key is an ``Added``; a DELETED for
  an unknown key changes nothing and is logged at debug level (client-go drops it the same way).
- ``has_synced`` turns True once the first list is in the store, and stays True. With ``watch_list`` the list is
  streamed (see reflector.py): the cache keeps its previous contents until the stream's end bookmark, then
  changes all at once, with the same events a paged list would give.
- A handler added when objects are already cached first receives ``Added`` for each of them (client-go replays
  the cache to late handlers), then live events.
- With a resync period, every period (jittered between 1x and 2x, as kube-controller-manager's
  ``--min-resync-period`` does) each cached object is delivered again as ``Updated(old=obj, new=obj)``, a chunk
  of objects per event-loop turn; an object changed or deleted since the pass began is not delivered again.
- Writes this process made (ours, not client-go's): a controller that writes an object of this kind tells the
  informer (:meth:`SharedInformer.wrote`, with the API server's answer); until the store has applied an event
  at least that new, :meth:`SharedInformer.unseen_write` gives that resourceVersion for the object's key, to
  every controller sharing the informer. So one controller can wait for another's write (the Deployment
  controller for the ReplicaSet controller's status writes) instead of writing over it from an older copy and
  being refused with 409. Versions that are not comparable never count as unseen.

Following a wider informer (ours: ``--sharding``'s leader, see view.py and docs/internals.md):
- :meth:`follow` offers a source: an unfiltered informer of the same resource, shape and transform, in another
  factory. This informer keeps its own list+watch until the source runs, has synced and has read at least as far
  as this informer's own watch (so no object goes back to an older version); then, in one synchronous step, it
  stops its own watch, brings its store to the source's selection (re-list events for the difference) and from
  then on is fed by the source's events through a :class:`SelectionView`: the same objects, not copies.
- If the source stops while this informer runs, it lists and watches on its own again from scratch (a fresh
  list, so nothing that happened meanwhile is missed; the difference arrives as a re-list's events) and follows
  the source again if it starts again.
- While following, ``last_sync_resource_version`` is the source's, ``is_view`` is True, and the
  ``informer_cached_objects`` gauge counts the source's cache only (this informer's objects are in
  ``informer_view_objects``).
"""

from __future__ import annotations

import asyncio
import inspect
import random
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import structlog

from controller_manager.api.meta import key_of, meta
from controller_manager.api.resource_version import compare_resource_versions
from controller_manager.api.resources import PODS, Resource
from controller_manager.clock import Clock

from . import metrics
from .events import Added, Deleted, Event, Handler, Updated
from .reflector import ListWatchClient, Reflector, cached_kind, resource_name
from .store import (
    CONTROLLER_UID_INDEX,
    NAMESPACE_INDEX,
    NODE_NAME_INDEX,
    IndexFunc,
    Store,
    controller_uid_index,
    namespace_index,
    node_name_index,
)
from .transform import Transform, default_transform
from .view import SelectionView
from .wire import WireDecoder

_log = structlog.get_logger("controller_manager.informers")

Obj = dict[str, Any]

# Written objects remembered at most (those the store has applied are dropped first; a write whose event never
# comes, say the object was deleted and the watch missed it, must not be remembered for ever).
MAX_UNSEEN_WRITES = 4096

# Objects a periodic resync delivers per event-loop turn: ~10-20 ms of handler work with every default controller
# registered on pods (bench/scale_paths.py), so nothing else waits long behind a resync.
RESYNC_CHUNK = 200

# Seconds between looks at whether an offered source has caught up with this informer's own watch (usually
# at once: the source's first list is newer than anything the own watch saw).
FOLLOW_POLL = 0.1


def builtin_indexers(res: Resource) -> dict[str, IndexFunc]:
    # The namespace index is there for cluster-scoped kinds too (always empty) so every store answers it.
    indexers: dict[str, IndexFunc] = {NAMESPACE_INDEX: namespace_index, CONTROLLER_UID_INDEX: controller_uid_index}
    if (res.group, res.plural) == (PODS.group, PODS.plural):
        indexers[NODE_NAME_INDEX] = node_name_index
    return indexers


def _newer(a: str, b: str) -> bool:
    try:
        return compare_resource_versions(a, b) > 0
    except ValueError:
        return False


def _resource_version(obj: Obj) -> object:
    m = obj.get("metadata")
    return m.get("resourceVersion") if isinstance(m, Mapping) else None


class SharedInformer:
    def __init__(
        self,
        client: ListWatchClient,
        res: Resource,
        *,
        clock: Clock,
        metadata_only: bool = False,
        transform: Transform | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
        resync_period: float = 0.0,
        rng: random.Random | None = None,
        watch_list: bool = False,
        label_selector: str | None = None,
    ) -> None:
        self.resource = res
        self.label_selector = label_selector
        self.metadata_only = metadata_only
        self._name = resource_name(res) + (":metadata" if metadata_only else "")
        self.transform: Transform = transform or default_transform
        # With the default transform, watch events are decoded straight into the cached form (wire.py), which is
        # several times cheaper than parsing everything and transforming after. A caller's own transform runs
        # on plainly parsed objects.
        self._wire: WireDecoder | None = None
        if self.transform is default_transform:
            kind, api_version = cached_kind(res, metadata_only=metadata_only)
            self._wire = WireDecoder(kind=kind, api_version=api_version)
        self._client = client
        self._watch_list = watch_list
        self.store = Store(builtin_indexers(res))
        if indexers:
            self.store.add_indexers(indexers)
        self._clock = clock
        self._rng = rng or random.Random()
        self._resync_period = resync_period
        self._handlers: list[Handler] = []
        self._unseen_writes: dict[str, str] = {}  # key -> resourceVersion this process wrote
        self._synced = asyncio.Event()
        self._running = False
        self._stopped = asyncio.Event()
        self._stopped.set()
        self._log = _log.bind(informer=self._name)
        self._reflector = self._new_reflector()
        # follow(): the source offered, and the source while it feeds this informer
        self._offered: SharedInformer | None = None
        self._offer_made = asyncio.Event()
        self._following: SharedInformer | None = None
        metrics.track(self)

    def _new_reflector(self) -> Reflector:
        wire = self._wire
        return Reflector(
            self._client, self.resource, self, clock=self._clock, name=self._name, metadata_only=self.metadata_only,
            rng=self._rng, decode=wire.decode if wire is not None else None,
            decode_list=wire.decode_list if wire is not None else None, watch_list=self._watch_list,
            label_selector=self.label_selector,
        )

    @property
    def name(self) -> str:
        """``apps/v1/deployments`` (``:metadata`` appended for a metadata-only informer)."""
        return self._name

    @property
    def has_synced(self) -> bool:
        return self._synced.is_set()

    @property
    def last_sync_resource_version(self) -> str:
        source = self._following
        if source is not None:
            return source.last_sync_resource_version
        return self._reflector.last_sync_resource_version

    @property
    def is_running(self) -> bool:
        return self._running

    @property
    def is_view(self) -> bool:
        """Fed by a source's cache (:meth:`follow`) rather than a watch of its own, at this moment."""
        return self._following is not None

    async def wait_stopped(self) -> None:
        """Return once ``run()`` is not running (at once if it never started)."""
        await self._stopped.wait()

    def follow(self, source: SharedInformer) -> None:
        """Serve this informer from ``source``'s cache (filtered by this informer's label selector) once
        ``source`` has caught up with it; see the module's guarantees. ``source`` must see every object of the
        same resource, in the same shape."""
        if source is self._offered:
            return
        if self._offered is not None:
            raise ValueError(f"informer {self._name} already follows another source")
        if source is self or source.label_selector is not None:
            raise ValueError(f"informer {source.name} is not a cluster-wide source for {self._name}")
        if (source.resource, source.metadata_only) != (self.resource, self.metadata_only) or \
                source.transform is not self.transform:
            raise ValueError(f"informer {source.name} caches another resource or shape than {self._name}")
        self._offered = source
        self._offer_made.set()

    def wrote(self, obj: Mapping[str, Any]) -> None:
        """``obj`` is the API server's answer to a write of it by this process: see :meth:`unseen_write`."""
        rv = meta(obj).get("resourceVersion")
        if not isinstance(rv, str) or not self._behind(rv):
            return
        key = key_of(obj)
        known = self._unseen_writes.get(key)
        if known is not None and not _newer(rv, known):
            return
        if len(self._unseen_writes) >= MAX_UNSEEN_WRITES:
            self._unseen_writes = {k: v for k, v in self._unseen_writes.items() if self._behind(v)}
            if len(self._unseen_writes) >= MAX_UNSEEN_WRITES:
                self._unseen_writes.pop(next(iter(self._unseen_writes)))  # the oldest remembered
        self._unseen_writes[key] = rv

    def unseen_write(self, key: str) -> str | None:
        """The resourceVersion of this process's last write of ``key`` while the store has not applied an event
        that new, else None."""
        rv = self._unseen_writes.get(key)
        if rv is None:
            return None
        if self._behind(rv):
            return rv
        del self._unseen_writes[key]
        return None

    def _behind(self, rv: str) -> bool:
        """The store has not applied an event as new as ``rv`` (False when either version is unknown or not
        comparable: never wait on what cannot be judged)."""
        read = self.last_sync_resource_version
        return bool(read) and _newer(rv, read)

    def cached_count(self) -> int:
        return len(self.store)

    async def wait_for_sync(self) -> None:
        await self._synced.wait()

    def add_handler(self, handler: Handler, *, replay: bool = True) -> None:
        """Register ``handler``; it first receives ``Added`` for every object already cached (unless ``replay``
        is False: a view reconciles itself instead)."""
        # Copy on write: dispatch iterates the list it finds without copying it per event, and a handler added
        # from inside a handler does not see the event being dispatched.
        self._handlers = [*self._handlers, handler]
        if replay:
            for obj in self.store.list():
                self._call(handler, Added(obj))

    def remove_handler(self, handler: Handler) -> None:
        """Stop calling ``handler`` (nothing if it is not registered)."""
        self._handlers = [h for h in self._handlers if h is not handler]

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """More indexes, built at once from the current contents. A name already registered with the same
        function is accepted (two controllers asking for the same index); with another function it is an error."""
        existing = self.store.indexers
        fresh = {}
        for name, fn in indexers.items():
            if name in existing:
                if existing[name] is not fn:
                    raise ValueError(f"indexer conflict: {name!r} is already registered on {self._name}")
            else:
                fresh[name] = fn
        if fresh:
            self.store.add_indexers(fresh)

    async def run(self) -> None:
        """List, watch and (with a resync period) resync until cancelled."""
        if self._running:
            raise RuntimeError(f"informer {self._name} is already running")
        self._running = True
        self._stopped.clear()
        try:
            if self._resync_period <= 0:
                await self._feed()
                return
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self._feed(), name=f"feed:{self._name}")
                tg.create_task(self._resync_loop(), name=f"resync:{self._name}")
        finally:
            self._running = False
            self._stopped.set()

    # -- feed: an own watch, or a source's cache --------------------------------------------------

    async def _feed(self) -> None:
        while True:
            own = asyncio.create_task(self._reflector.run(), name=f"reflector:{self._name}")
            source, view = await self._watch_until_attached(own)
            try:
                await source.wait_stopped()
            finally:
                source.remove_handler(view)
                self._following = None
            self._log.info("source informer stopped: listing and watching again", source=source.name)
            self._reflector = self._new_reflector()  # from resourceVersion "": a fresh list

    async def _watch_until_attached(self, own: asyncio.Task[None]) -> tuple[SharedInformer, SelectionView]:
        """Let ``own`` (this informer's reflector) run until the offered source can take over, then switch."""
        try:
            while True:
                attached = self._attach_if_ready(own)
                if attached is not None:
                    return attached
                pause = asyncio.ensure_future(self._until_worth_a_look())
                try:
                    await asyncio.wait((own, pause), return_when=asyncio.FIRST_COMPLETED)
                finally:
                    pause.cancel()
                if own.done():
                    own.result()
                    raise RuntimeError(f"reflector of {self._name} ended")
        finally:
            own.cancel()
            await asyncio.gather(own, return_exceptions=True)

    def _until_worth_a_look(self) -> Awaitable[object]:
        source = self._offered
        if source is None:
            return self._offer_made.wait()  # for ever, where no source is ever offered
        if source.is_running and not source.has_synced:
            return source.wait_for_sync()
        return self._clock.sleep(FOLLOW_POLL)  # behind, or stopped

    def _attach_if_ready(self, own: asyncio.Task[None]) -> tuple[SharedInformer, SelectionView] | None:
        """Switch to the offered source if it can take over now; synchronous, so no event of either falls
        between the own watch's last one and the source's first."""
        source = self._offered
        if source is None or not source.is_running or not source.has_synced:
            return None
        mine = self._reflector.last_sync_resource_version
        if mine and _newer(mine, source.last_sync_resource_version):
            return None  # the source has not read as far as this informer: switching now would go back in time
        own.cancel()  # it applies nothing more: the task resumes only to be cancelled (apply ignores it anyway)
        view = SelectionView(self.store, self.label_selector, self._dispatch)
        self._following = source
        added, updated, deleted = view.reconcile(source.store.list())
        source.add_handler(view, replay=False)
        first = not self._synced.is_set()
        self._synced.set()
        self._log.info("serving from the source's cache", source=source.name, first_sync=first,
                       resource_version=source.last_sync_resource_version, objects=len(self.store), added=added,
                       updated=updated, deleted=deleted)
        return source, view

    # -- reflector sink ---------------------------------------------------------------------------

    def replace(self, items: list[Obj], resource_version: str, *, transformed: bool = False) -> None:
        if self._following is not None:
            return  # a cancelled own reflector's last words: the source feeds this informer now
        store = self.store
        listed: set[str] = set()
        added = updated = 0
        for raw in items:
            key = key_of(raw)
            # Counted as listed even if the transform fails: the object exists, so it must not be reported deleted.
            listed.add(key)
            obj = raw if transformed else self._transformed(raw, key)
            if obj is None:
                continue
            old = store.get(key)
            if old is not None and _resource_version(old) == _resource_version(obj):
                continue
            if not self._put(key, obj):
                continue
            if old is None:
                added += 1
                self._dispatch(Added(obj))
            else:
                updated += 1
                self._dispatch(Updated(old, obj))
        deleted = 0
        for key in store:  # a snapshot: deleting while iterating is fine
            if key in listed:
                continue
            old = store._remove(key)
            if old is not None:
                deleted += 1
                self._dispatch(Deleted(old, final_state_unknown=True))
        first = not self._synced.is_set()
        self._synced.set()
        self._log.info(
            "cache synced" if first else "cache re-listed",
            resource_version=resource_version, objects=len(store), added=added, updated=updated, deleted=deleted,
        )

    def apply(self, event_type: str, obj: Obj, *, transformed: bool = False) -> None:
        if self._following is not None:
            return  # as in replace()
        key = key_of(obj)
        if event_type == "DELETED":
            old = self.store._remove(key)
            if old is None:
                self._log.debug("delete of an object not in the cache: nothing to do", key=key)
                return
            final = obj if transformed else self._transformed(obj, key)
            self._dispatch(Deleted(final if final is not None else old))
            return
        new = obj if transformed else self._transformed(obj, key)
        if new is None:
            return
        try:
            old = self.store._put(key, new)
        except Exception:
            # An index function choked on the object; the store is unchanged (it indexes before writing).
            self._log.exception("indexing failed; object not cached", key=key)
            return
        event = Added(new) if old is None else Updated(old, new)
        for handler in self._handlers:  # _dispatch, inlined: this runs for every watch event
            self._call(handler, event)

    # -- internals --------------------------------------------------------------------------------

    def _transformed(self, obj: Obj, key: str) -> Obj | None:
        try:
            return self.transform(obj)
        except Exception:
            self._log.exception("transform failed; object not cached", key=key)
            return None

    def _put(self, key: str, obj: Obj) -> bool:
        try:
            self.store._put(key, obj)
        except Exception:
            # An index function choked on the object; the store is unchanged (it indexes before writing).
            self._log.exception("indexing failed; object not cached", key=key)
            return False
        return True

    def _dispatch(self, event: Event) -> None:
        for handler in self._handlers:
            self._call(handler, event)

    def _call(self, handler: Handler, event: Event) -> None:
        try:
            call: Callable[[Event], object] = handler
            result = call(event)
        except Exception:
            self._log.exception("event handler failed", handler=_describe(handler), event_type=type(event).__name__,
                                key=key_of(event.new if isinstance(event, Updated) else event.obj))
            return
        if result is not None and inspect.iscoroutine(result):
            # An async handler would never run: say so loudly instead of leaking an un-awaited coroutine.
            result.close()
            self._log.error("event handler is a coroutine function; handlers must be synchronous",
                            handler=_describe(handler))

    async def _resync_loop(self) -> None:
        await self._synced.wait()
        while True:
            await self._clock.sleep(self._resync_period * (1.0 + self._rng.random()))
            await self.resync_once()

    async def resync_once(self) -> None:
        """Deliver every cached object again as ``Updated(obj, obj)``, ``RESYNC_CHUNK`` objects per event-loop turn.

        Why in chunks: at 150,000 pods one pass through every pod handler takes seconds, and a pass delivered in
        one go held the event loop (every queue, watch and lease renewal) for all of it. Between chunks the
        store may change: an object replaced or removed meanwhile was delivered by its own event, so only those
        still cached as listed are delivered (never an older copy than the store holds)."""
        objects = self.store.list()
        self._log.debug("resync", objects=len(objects))
        store = self.store
        for start in range(0, len(objects), RESYNC_CHUNK):
            if start:
                await asyncio.sleep(0)
            for obj in objects[start:start + RESYNC_CHUNK]:
                if store.get(key_of(obj)) is obj:
                    self._dispatch(Updated(obj, obj))


def _describe(handler: object) -> str:
    return getattr(handler, "__qualname__", None) or repr(handler)
