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
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Protocol

import structlog

from controller_manager.api.resources import Resource
from controller_manager.clock import Clock

from . import metrics
from .backoff import ExponentialBackoff

MIN_WATCH_TIMEOUT = 300.0  # seconds; each watch asks for a timeout in [1x, 2x) of this
SHORT_WATCH = 1.0  # a watch ending this fast with no event counts as a failure (client-go's "very short watch")

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
        label_selector: str | None = None,
    ) -> None:
        self._client = client
        # Only objects matching it are listed and watched (a shard's own objects); an object that stops
        # matching arrives as DELETED, one that starts matching as ADDED. Passed to the client only when set.
        self._selector: dict[str, str] = {"label_selector": label_selector} if label_selector else {}
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

    async def run(self) -> None:
        need_list = True
        while True:
            if need_list:
                if not await self._list():
                    await self._backoff.wait()
                    continue
                need_list = False
            relist, back_off = await self._watch()
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

    async def _watch(self) -> tuple[bool, bool]:
        """One watch, until it ends; returns (re-list needed, back off first)."""
        timeout = int(MIN_WATCH_TIMEOUT * (1.0 + self._rng.random()))
        started = self._clock.monotonic()
        received = 0
        metrics.WATCHES.labels(self.name).inc()
        stream: AsyncIterator[WatchEventLike] | None = None
        try:
            stream = self._client.watch(
                self._res,
                resource_version=self._rv,
                allow_bookmarks=True,
                timeout_seconds=timeout,
                metadata_only=self._metadata_only,
                decode=self._decode,
                **self._selector,
            )
            async for event in stream:
                received += 1
                self._handle(event)
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
            # Close the stream now (not at garbage collection) so its connection goes back at once.
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        if received == 0 and self._clock.monotonic() - started < SHORT_WATCH:
            metrics.WATCH_ERRORS.labels(self.name).inc()
            self._log.warning(
                "very short watch: unexpected watch close, it lasted less than a second and no items received",
                resource_version=self._rv,
            )
            return False, True
        return False, False

    def _handle(self, event: WatchEventLike) -> None:
        etype = getattr(event, "type", None)
        obj = getattr(event, "object", None)
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


def _preview(obj: object, limit: int = 200) -> str:
    text = repr(obj)
    return text if len(text) <= limit else text[:limit] + "..."
