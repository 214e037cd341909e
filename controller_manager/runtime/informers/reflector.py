"""The reflector: list, then watch from the list's resourceVersion, forever, feeding a sink.

Guarantees (client-go ``tools/cache/reflector.go``):
- It lists everything (the client pages), hands the whole list to ``sink.replace`` and watches from the list's
  resourceVersion with bookmarks on and a server-side timeout drawn from [5 min, 10 min) so watches of many
  clients do not all end at once.
- Each watch event reaches ``sink.apply`` in the order the server sent it; the last-seen resourceVersion then
  moves to the event's. A BOOKMARK only moves the resourceVersion.
- A watch that ends normally is re-opened at once from the last-seen resourceVersion, so nothing between the
  two watches is missed.
- 410 Gone (raised by the client for an ERROR event or an HTTP 410) means the resourceVersion is too old: after
  the backoff below, the reflector lists again and the sink reconciles its cache with the fresh list.
- Any failure (list or watch, 410 included, connection lost, server error) and any watch that ends within a
  second having delivered nothing are followed by a jittered exponential backoff (0.8 s doubling to 30 s, reset
  after 2 quiet minutes, so usually 0.8-1.6 s) on the injected clock before the next attempt, so a broken server
  is not hammered. Other failures resume the watch from the last-seen resourceVersion, without a re-list.
- An object of an unexpected shape (not a JSON object, no metadata.name, ...) is logged with what is wrong and
  counted, then skipped; the reflector keeps running. Nothing is dropped without a log line.
- Cancellation is the only way ``run()`` ends.

Streaming lists (client-go's watch-list, feature gate ``WatchListClient``; on when ``watch_list=True`` and the
client has ``supports_watch_list``):
- Instead of a paged list, one watch with ``sendInitialEvents=true``, ``resourceVersionMatch=NotOlderThan`` and
  bookmarks, from the last-seen resourceVersion ("" at first). Its events build a temporary collection; the
  cache is untouched (handlers hear nothing) until the BOOKMARK annotated ``k8s.io/initial-events-end`` arrives.
  Then ``sink.replace`` gets the collection at the bookmark's resourceVersion, exactly as after a paged list,
  and the same stream goes on as the watch.
- Retried as a watch-list, not listed: 429 or a server that could not be reached (after a backoff); 410
  Expired or a too-large resourceVersion (at once, from resourceVersion ""); a stream that ends without the
  bookmark having delivered something (at once). While the bookmark is awaited, a warning is logged for every
  ``BOOKMARK_WARNING`` seconds without an event.
- Any other refusal (400, 403, 422 from a server that does not serve streaming lists, 5xx, ...) and a watch
  that ends within a second with nothing delivered fall back to the paged list, for this sync only: the next
  re-list tries the stream again, as client-go's ListAndWatch does.
- Metrics read the same either way: a streamed list counts once in ``reflector_lists_total`` (and its request
  in ``reflector_watches_total``); one that fell back also counts in ``reflector_list_errors_total`` and
  ``reflector_watch_list_fallbacks_total``.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Protocol

import structlog

from controller_manager.api.resources import Resource
from controller_manager.client.watch import WatchStream
from controller_manager.clock import Clock, TimerHandle

from . import metrics
from .backoff import ExponentialBackoff

MIN_WATCH_TIMEOUT = 300.0  # seconds; each watch asks for a timeout in [1x, 2x) of this
SHORT_WATCH = 1.0  # a watch ending this fast with no event counts as a failure (client-go's "very short watch")
BOOKMARK_WARNING = 10.0  # seconds without an event, while a streaming list awaits its end bookmark, before a warning
INITIAL_EVENTS_END = "k8s.io/initial-events-end"  # metav1.InitialEventsAnnotationKey

_log = structlog.get_logger("controller_manager.informers")


class WatchEventLike(Protocol):
    @property
    def type(self) -> str: ...

    @property
    def object(self) -> Any: ...


class ListWatchClient(Protocol):
    """What a reflector needs of ``controller_manager.client.ApiClient``."""

    async def list_all(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        metadata_only: bool = False,
        decode: Callable[[bytes], dict[str, Any]] | None = None,
        label_selector: str | None = None,
    ) -> tuple[list[dict[str, Any]], str]: ...

    def watch(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        allow_bookmarks: bool = True,
        timeout_seconds: int | None = None,
        metadata_only: bool = False,
        decode: Callable[[bytes | memoryview], tuple[str, Any]] | None = None,
        send_initial_events: bool = False,
        label_selector: str | None = None,
    ) -> AsyncIterator[WatchEventLike]: ...


class ReflectorSink(Protocol):
    def replace(self, items: list[dict[str, Any]], resource_version: str, *, transformed: bool = False) -> None:
        """The complete current contents (first list, or a re-list after 410 Gone); ``transformed`` as for
        :meth:`apply`."""

    def apply(self, event_type: str, obj: dict[str, Any], *, transformed: bool = False) -> None:
        """One ADDED, MODIFIED or DELETED event, its object's shape already checked; ``transformed``: the watch
        decoder already made it the cached form."""


def is_gone(exc: BaseException) -> bool:
    """410 Gone, from ``client.errors.Gone`` or anything else carrying the status (duck-typed on purpose)."""
    return getattr(exc, "status", None) == 410 or getattr(exc, "code", None) == 410


def resource_name(res: Resource) -> str:
    """``apps/v1/deployments``, ``v1/pods``: how logs and metrics name an informer's resource."""
    return f"{res.api_version}/{res.plural}"


def cached_kind(res: Resource, *, metadata_only: bool = False) -> tuple[str, str]:
    """The kind and apiVersion of what an informer of ``res`` caches (stamped on List items, which lack them)."""
    if metadata_only:
        return "PartialObjectMetadata", "meta.k8s.io/v1"
    return res.kind, res.api_version


def shape_problem(obj: object, res: Resource, *, metadata_only: bool = False) -> str | None:
    """What is wrong with ``obj`` as an object of ``res``, or None when it can be cached."""
    # ``type(x) is str`` and truthiness: this runs once per watch event, so the checks are the cheapest that say
    # the same as isinstance would for decoded JSON.
    if type(obj) is not dict:
        return f"object is a {type(obj).__name__}, not a JSON object"
    kind = obj.get("kind")
    if kind is not None and kind != res.kind and not (metadata_only and kind == "PartialObjectMetadata"):
        return f"kind is {kind!r}, expected {res.kind!r}"
    m = obj.get("metadata")
    if type(m) is not dict:
        return "metadata is missing or not an object"
    name = m.get("name")
    if type(name) is not str or not name:
        return "metadata.name is missing or empty"
    if res.namespaced:
        ns = m.get("namespace")
        if type(ns) is not str or not ns:
            return "metadata.namespace is missing on a namespaced resource"
    rv = m.get("resourceVersion")
    if type(rv) is not str or not rv:
        return "metadata.resourceVersion is missing or empty"
    return None


def supports_watch_list(client: object) -> bool:
    """Whether ``client``'s class says it can list through a watch (``ApiClient.supports_watch_list``). Read on
    the class: test doubles that treat any attribute as an API call are not consulted."""
    return getattr(type(client), "supports_watch_list", False) is True


def _status(exc: BaseException) -> object:
    return getattr(exc, "status", None)


def _retry_watch_list_later(exc: BaseException) -> bool:
    """client-go's isWatchErrorRetriable: the server could not be reached (status 0: the client's connection
    error) or asked us to slow down (429); neither says anything about streaming lists."""
    return _status(exc) in (0, 429) or isinstance(exc, OSError)


def _resource_version_unavailable(exc: BaseException) -> bool:
    """410 Expired/Gone, or a resourceVersion newer than the server has (the ResourceVersionTooLarge cause, or
    the 504 "Too large resource version" of servers before 1.19)."""
    if is_gone(exc):
        return True
    causes = getattr(exc, "details", None)
    causes = causes.get("causes") if isinstance(causes, Mapping) else None
    for cause in causes or ():
        if isinstance(cause, Mapping) and cause.get("reason") == "ResourceVersionTooLarge":
            return True
    return _status(exc) == 504 and "Too large resource version" in str(exc)


def _ends_initial_events(obj: object) -> bool:
    if isinstance(obj, Mapping):
        m = obj.get("metadata")
        if isinstance(m, Mapping):
            annotations = m.get("annotations")
            return isinstance(annotations, Mapping) and annotations.get(INITIAL_EVENTS_END) == "true"
    return False


def _resource_version(obj: object) -> str | None:
    if isinstance(obj, Mapping):
        m = obj.get("metadata")
        if isinstance(m, Mapping):
            rv = m.get("resourceVersion")
            if isinstance(rv, str) and rv:
                return rv
    return None


class Reflector:
    def __init__(
        self,
        client: ListWatchClient,
        res: Resource,
        sink: ReflectorSink,
        *,
        clock: Clock,
        name: str | None = None,
        metadata_only: bool = False,
        rng: random.Random | None = None,
        decode: Callable[[bytes | memoryview], tuple[str, Any]] | None = None,
        decode_list: Callable[[bytes], dict[str, Any]] | None = None,
        watch_list: bool = False,
        label_selector: str | None = None,
    ) -> None:
        self._client = client
        self._watch_list = watch_list and supports_watch_list(client)
        # A streaming list refused for its resourceVersion (410, too large): the next one starts from "".
        self._rv_unavailable = False
        # Only objects matching it are listed and watched (a shard's own objects); an object that stops
        # matching arrives as DELETED, one that starts matching as ADDED. Passed to the client only when set.
        self._selector: dict[str, Any] = {"label_selector": label_selector} if label_selector else {}
        # Watch lines and list pages decoded straight into the sink's cached form (the sink is told, so it does
        # not transform them again).
        self._decode = decode
        self._decode_list = decode_list
        self._res = res
        self._sink = sink
        self._clock = clock
        self._metadata_only = metadata_only
        self._rng = rng or random.Random()
        self._backoff = ExponentialBackoff(clock, rng=self._rng)
        self.name = name or resource_name(res)
        self._log = _log.bind(resource=self.name)
        self._rv = ""

    @property
    def last_sync_resource_version(self) -> str:
        """The resourceVersion the next watch starts from ("" before the first list)."""
        return self._rv

    @property
    def uses_watch_list(self) -> bool:
        """Whether syncs try a streaming list first (the gate is on and the client supports it)."""
        return self._watch_list

    async def run(self) -> None:
        need_list = True
        while True:
            stream: AsyncIterator[WatchEventLike] | None = None
            if need_list:
                if self._watch_list:
                    stream = await self._stream_list()
                if stream is None and not await self._list():
                    await self._backoff.wait()
                    continue
                need_list = False
            relist, back_off = await self._watch(stream)
            if relist:
                metrics.RELISTS.labels(self.name).inc()
                need_list = True
            if back_off:
                delay = await self._backoff.wait()
                self._log.debug("reflector backed off", seconds=round(delay, 3))

    async def _list(self) -> bool:
        metrics.LISTS.labels(self.name).inc()
        try:
            items, rv = await self._client.list_all(self._res, metadata_only=self._metadata_only,
                                                    decode=self._decode_list, **self._selector)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            metrics.LIST_ERRORS.labels(self.name).inc()
            self._log.warning("list failed", error=repr(exc))
            return False
        good: list[dict[str, Any]] = []
        # Items of a List carry no kind/apiVersion on the wire; watch events do. Stamp them so every cached
        # object looks the same whichever way it arrived (the event recorder and owner references need them).
        kind, api_version = cached_kind(self._res, metadata_only=self._metadata_only)
        for item in items:
            problem = shape_problem(item, self._res, metadata_only=self._metadata_only)
            if problem is None:
                if isinstance(item, dict) and "kind" not in item:
                    item["kind"] = kind
                    item["apiVersion"] = api_version
                good.append(item)
            else:
                self._malformed("list", problem, item)
        self._sink.replace(good, rv, transformed=self._decode_list is not None)
        self._rv = rv
        self._log.debug("listed", items=len(good), resource_version=rv)
        return True

    async def _stream_list(self) -> AsyncIterator[WatchEventLike] | None:
        """A streaming list into the sink: the open stream, past its end bookmark, to go on watching with; or
        None when the server will not serve one (fall back to the paged list)."""
        metrics.LISTS.labels(self.name).inc()
        while True:
            rv = "" if self._rv_unavailable else self._rv
            outcome = await self._stream_initial_events(rv)
            if isinstance(outcome, tuple):
                break
            if outcome == "fallback":
                metrics.LIST_ERRORS.labels(self.name).inc()
                metrics.WATCH_LIST_FALLBACKS.labels(self.name).inc()
                return None
        stream, items, rv = outcome
        self._rv_unavailable = False
        self._sink.replace(items, rv, transformed=self._decode is not None)
        self._rv = rv
        self._log.debug("listed through a watch", items=len(items), resource_version=rv)
        return stream

    async def _stream_initial_events(
        self, rv: str
    ) -> tuple[AsyncIterator[WatchEventLike], list[dict[str, Any]], str] | str:
        """One watch-list attempt from ``rv``: (the stream, the objects, the bookmark's resourceVersion) once
        the end bookmark arrives; else "retry" or "fallback"."""
        timeout = int(MIN_WATCH_TIMEOUT * (1.0 + self._rng.random()))
        started = self._clock.monotonic()
        metrics.WATCHES.labels(self.name).inc()
        # Keyed like the cache, so a MODIFIED or DELETED among the initial events acts on what came before it.
        collected: dict[str, dict[str, Any]] = {}
        received = 0
        end_rv: str | None = None
        seen_at_tick = 0
        ticker: TimerHandle

        # client-go's initialEventsEndBookmarkTicker, without a per-event clock read: a tick that finds no new
        # event since the last one means nothing came for at least BOOKMARK_WARNING seconds.
        def warn_if_stalled() -> None:
            nonlocal seen_at_tick, ticker
            if received == seen_at_tick:
                self._log.warning("hasn't received required bookmark event marking the end of initial events "
                                  "stream", seconds=round(self._clock.monotonic() - started, 1), events=received)
            seen_at_tick = received
            ticker = self._clock.call_later(BOOKMARK_WARNING, warn_if_stalled)

        ticker = self._clock.call_later(BOOKMARK_WARNING, warn_if_stalled)
        stream = self._client.watch(
            self._res, resource_version=rv, allow_bookmarks=True, timeout_seconds=timeout,
            metadata_only=self._metadata_only, decode=self._decode, send_initial_events=True, **self._selector,
        )
        keep_open = False
        try:
            iterator = aiter(stream)
            while end_rv is None:
                try:
                    event = await anext(iterator)
                except StopAsyncIteration:
                    break
                received += 1
                end_rv = self._collect(event, collected)
            keep_open = end_rv is not None
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            metrics.WATCH_ERRORS.labels(self.name).inc()
            if _retry_watch_list_later(exc):
                self._log.info("watch-list failed, backing off", error=repr(exc))
                await self._backoff.wait()
                return "retry"
            if _resource_version_unavailable(exc):
                self._log.info("watch-list refused its resourceVersion, streaming from the latest",
                               resource_version=rv, error=str(exc))
                self._rv_unavailable = True
                return "retry"
            self._log.info("data couldn't be fetched in watch-list mode, falling back to a paged list",
                           error=repr(exc))
            return "fallback"
        finally:
            ticker.cancel()
            if not keep_open:
                await _close(stream)
        if end_rv is not None:
            return stream, list(collected.values()), end_rv
        if received == 0 and self._clock.monotonic() - started < SHORT_WATCH:
            metrics.WATCH_ERRORS.labels(self.name).inc()
            self._log.info("very short watch-list: it ended within a second with no events, falling back to a "
                           "paged list", resource_version=rv)
            return "fallback"
        self._log.info("watch-list ended before its end bookmark, streaming again", events=received)
        return "retry"

    def _collect(self, event: WatchEventLike, collected: dict[str, dict[str, Any]]) -> str | None:
        """One event of a streaming list into ``collected``; the resourceVersion if it is the end bookmark."""
        etype = getattr(event, "type", None)
        obj = getattr(event, "object", None)
        if etype == "BOOKMARK":
            rv = _resource_version(obj)
            if rv is None:
                self._malformed("BOOKMARK", "metadata.resourceVersion is missing or empty", obj)
                return None
            return rv if _ends_initial_events(obj) else None
        if etype not in ("ADDED", "MODIFIED", "DELETED"):
            self._malformed(str(etype), f"unknown watch event type {etype!r}", obj)
            return None
        problem = shape_problem(obj, self._res, metadata_only=self._metadata_only)
        if problem is not None:
            self._malformed(etype, problem, obj)
            return None
        assert isinstance(obj, dict)  # shape_problem checked it
        m = obj["metadata"]
        key = f"{m['namespace']}/{m['name']}" if self._res.namespaced else m["name"]
        if etype == "DELETED":
            collected.pop(key, None)
        else:
            collected[key] = obj
        return None

    async def _watch(self, stream: AsyncIterator[WatchEventLike] | None = None) -> tuple[bool, bool]:
        """One watch, until it ends (``stream``: one a streaming list left open); returns (re-list needed, back
        off first)."""
        timeout = int(MIN_WATCH_TIMEOUT * (1.0 + self._rng.random()))
        started = self._clock.monotonic()
        received = 0
        if stream is None:
            metrics.WATCHES.labels(self.name).inc()
        try:
            if stream is None:
                stream = self._client.watch(
                    self._res,
                    resource_version=self._rv,
                    allow_bookmarks=True,
                    timeout_seconds=timeout,
                    metadata_only=self._metadata_only,
                    decode=self._decode,
                    **self._selector,
                )
            if isinstance(stream, WatchStream):
                # The real client's stream, a socket read at a time: no await and no wrapper object per event.
                handle = self._handle
                while batch := await stream.read_batch():
                    received += len(batch)
                    for etype, obj in batch:
                        handle(etype, obj)
            else:
                async for event in stream:
                    received += 1
                    self._handle(getattr(event, "type", None), getattr(event, "object", None))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            metrics.WATCH_ERRORS.labels(self.name).inc()
            if is_gone(exc):
                # Backing off before the re-list too, as client-go's BackoffUntil around ListAndWatch does: a server
                # that keeps expiring watches must not turn every informer into a full-list loop.
                self._log.info("watch expired, re-listing", resource_version=self._rv, error=str(exc))
                return True, True
            self._log.warning("watch failed", resource_version=self._rv, error=repr(exc))
            return False, True
        finally:
            await _close(stream)
        if received == 0 and self._clock.monotonic() - started < SHORT_WATCH:
            metrics.WATCH_ERRORS.labels(self.name).inc()
            self._log.warning(
                "very short watch: unexpected watch close, it lasted less than a second and no items received",
                resource_version=self._rv,
            )
            return False, True
        return False, False

    def _handle(self, etype: object, obj: object) -> None:
        if etype == "BOOKMARK":
            rv = _resource_version(obj)
            if rv is None:
                self._malformed("BOOKMARK", "metadata.resourceVersion is missing or empty", obj)
            else:
                self._rv = rv
            return
        if etype not in ("ADDED", "MODIFIED", "DELETED"):
            self._malformed(str(etype), f"unknown watch event type {etype!r}", obj)
            return
        problem = shape_problem(obj, self._res, metadata_only=self._metadata_only)
        if problem is not None:
            self._malformed(etype, problem, obj)
            # Still move past it when possible, so a re-watch does not serve the same bad event again.
            rv = _resource_version(obj)
            if rv is not None:
                self._rv = rv
            return
        assert isinstance(obj, dict)  # shape_problem checked it
        self._sink.apply(etype, obj, transformed=self._decode is not None)
        self._rv = obj["metadata"]["resourceVersion"]

    def _malformed(self, where: str, problem: str, obj: object) -> None:
        metrics.MALFORMED.labels(self.name).inc()
        self._log.error("skipping malformed object", event_type=where, problem=problem, object=_preview(obj))


async def _close(stream: object) -> None:
    # Close the stream now (not at garbage collection) so its connection goes back at once.
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()


def _preview(obj: object, limit: int = 200) -> str:
    text = repr(obj)
    return text if len(text) <= limit else text[:limit] + "..."
