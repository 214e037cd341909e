"""The event recorder: client-go's ``tools/record`` (event.go, events_cache.go) writing core/v1 Events.

Guarantees:
- ``recorder.event(obj, type, reason, message)`` never blocks and never raises for a bad event: it builds
  the Event and puts it in a buffer of ``MAX_QUEUED_EVENTS`` (client-go's 1000); when the buffer is full the
  event is dropped with an error log line. An unknown type or an object without kind/apiVersion/name is
  logged and dropped, as client-go does when it cannot build a reference.
- One writer, ``await broadcaster.run()``, sends buffered events in order until cancelled. On cancellation
  it tries each event still buffered once more (no retries), within ``drain_timeout`` seconds, then stops.
- Events look as kube-controller-manager writes them: named ``<object name>.<hex nanoseconds>`` (made
  strictly increasing per broadcaster, so two events in the same clock tick never collide),
  ``involvedObject`` {kind, namespace, name, uid, apiVersion, resourceVersion}, ``source.component`` (+host),
  ``firstTimestamp``/``lastTimestamp``/``count``, ``type``, ``reportingComponent``/``reportingInstance``, in the
  object's namespace ("default" for cluster-scoped objects).
- Correlation as client-go's EventCorrelator: an event identical to one already written (same source,
  object, type, reason, message) becomes a strategic-merge PATCH of that Event's ``count``,
  ``lastTimestamp`` and ``message``; the 10th distinct message for the same source/object/type/reason within
  10 minutes, and every one after it, goes to one aggregate Event whose message starts
  "(combined from similar events): "; each source+object may write 25 events in a burst, then 1 per 5 minutes.
- Writes retry as client-go: up to 12 tries, the first pause random in [0, 10 s), then 10 s, on the injected
  clock. Only failures to reach the server are retried; an API error abandons the event (a 404 on a
  count PATCH first falls back to creating the Event afresh, as the old one has aged out).
"""

from __future__ import annotations

import asyncio
import random
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import structlog

from controller_manager.api.meta import format_time
from controller_manager.api.resources import EVENTS, Resource
from controller_manager.client.errors import (
    NAMESPACE_TERMINATING_CAUSE,
    AlreadyExists,
    ApiConnectionError,
    ApiError,
    NotFound,
    has_status_cause,
)
from controller_manager.clock import Clock

MAX_QUEUED_EVENTS = 1000
MAX_TRIES_PER_EVENT = 12
DEFAULT_SLEEP_DURATION = 10.0
LRU_CACHE_ENTRIES = 4096
AGGREGATE_MAX_EVENTS = 10
AGGREGATE_INTERVAL_SECONDS = 600.0
SPAM_BURST = 25
SPAM_QPS = 1.0 / 300.0
AGGREGATE_MESSAGE_PREFIX = "(combined from similar events): "
EVENT_TYPES = ("Normal", "Warning")

Event = dict[str, Any]
_log = structlog.get_logger("controller_manager.events")


class EventSink(Protocol):
    """What the writer needs from the API client (``controller_manager.client.ApiClient`` has it)."""

    async def create(self, res: Resource, obj: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]: ...

    async def patch(
        self,
        res: Resource,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        patch_type: str = "merge",
        subresource: str | None = None,
    ) -> dict[str, Any]: ...


# -- correlation (events_cache.go) --------------------------------------------------------------------------

V = TypeVar("V")


class _LRU(Generic[V]):
    """A bounded map that forgets the least recently used key (groupcache's lru as client-go uses it)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._data: OrderedDict[str, V] = OrderedDict()

    def get(self, key: str) -> V | None:
        value = self._data.get(key)
        if value is not None:
            self._data.move_to_end(key)
        return value

    def put(self, key: str, value: V) -> None:
        self._data[key] = value
        self._data.move_to_end(key)
        if len(self._data) > self._size:
            self._data.popitem(last=False)


_OBJECT = ("kind", "namespace", "name", "uid", "apiVersion")


def _join(ev: Mapping[str, Any], ref_fields: tuple[str, ...], event_fields: tuple[str, ...]) -> str:
    source = ev.get("source") or {}
    ref = ev.get("involvedObject") or {}
    parts = [source.get("component", ""), source.get("host", "")]
    parts += [ref.get(f, "") for f in ref_fields]
    parts += [ev.get(f, "") for f in event_fields]
    return "".join(parts)


def event_key(ev: Mapping[str, Any]) -> str:
    """Identical events share this key: source, object (with fieldPath), type, reason and message."""
    return _join(ev, (*_OBJECT, "fieldPath"), ("type", "reason", "message"))


def spam_key(ev: Mapping[str, Any]) -> str:
    """The spam filter's bucket: one per source and object."""
    return _join(ev, _OBJECT, ())


def aggregate_key(ev: Mapping[str, Any]) -> tuple[str, str]:
    """(group of similar events, what tells them apart): everything but the message, then the message."""
    group = _join(ev, _OBJECT, ("type", "reason", "reportingComponent", "reportingInstance"))
    return group, ev.get("message", "")


class _TokenBucket:
    """A passive token bucket (``TryAccept`` only): full at start, refilled at ``qps`` on the clock."""

    __slots__ = ("burst", "last", "qps", "tokens")

    def __init__(self, qps: float, burst: int, now: float) -> None:
        self.qps = qps
        self.burst = burst
        self.tokens = float(burst)
        self.last = now

    def try_accept(self, now: float) -> bool:
        if now > self.last:
            self.tokens = min(float(self.burst), self.tokens + (now - self.last) * self.qps)
            self.last = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


@dataclass(slots=True)
class _AggregateRecord:
    local_keys: set[str]
    last_seen: float


@dataclass(frozen=True, slots=True)
class _Observation:
    count: int
    first_timestamp: str
    name: str
    resource_version: str

    @classmethod
    def of(cls, ev: Mapping[str, Any]) -> _Observation:
        meta = ev.get("metadata") or {}
        return cls(
            count=int(ev.get("count") or 0),
            first_timestamp=str(ev.get("firstTimestamp") or ""),
            name=str(meta.get("name", "")),
            resource_version=str(meta.get("resourceVersion", "")),
        )


@dataclass(frozen=True, slots=True)
class Correlated:
    """An event ready to write: a create, or (``patch`` set) a PATCH of the Event it repeats."""

    event: Event
    patch: dict[str, Any] | None


class EventCorrelator:
    """Aggregates similar events, counts identical ones and filters spam (client-go's EventCorrelator)."""

    def __init__(self, clock: Clock, name_suffix: Callable[[], str]) -> None:
        self._clock = clock
        self._name_suffix = name_suffix  # unique hex nanoseconds, shared with the recorders
        self._spam: _LRU[_TokenBucket] = _LRU(LRU_CACHE_ENTRIES)
        self._aggregates: _LRU[_AggregateRecord] = _LRU(LRU_CACHE_ENTRIES)
        self._observed: _LRU[_Observation] = _LRU(LRU_CACHE_ENTRIES)

    def correlate(self, ev: Event) -> Correlated | None:
        """The write to make for ``ev``, or None when the spam filter drops it."""
        aggregated, key = self._aggregate(ev)
        observed, patch = self._observe(aggregated, key)
        # As upstream, the spam filter runs last: a filtered repeat still advances the count.
        if not self._allow(observed):
            return None
        return Correlated(observed, patch)

    def update_state(self, written: Mapping[str, Any]) -> None:
        """Remember the server's copy (name, resourceVersion, count) of an event just written."""
        self._observed.put(event_key(written), _Observation.of(written))

    def _aggregate(self, ev: Event) -> tuple[Event, str]:
        now = self._clock.now()
        group, local = aggregate_key(ev)
        record = self._aggregates.get(group)
        if record is None or now - record.last_seen > AGGREGATE_INTERVAL_SECONDS:
            record = _AggregateRecord(set(), now)
        record.local_keys.add(local)
        record.last_seen = now
        self._aggregates.put(group, record)
        if len(record.local_keys) < AGGREGATE_MAX_EVENTS:
            return ev, event_key(ev)
        # Keep the set from growing past the threshold; which member goes does not matter.
        record.local_keys.pop()
        stamp = format_time(now)
        ref = ev["involvedObject"]
        aggregate: Event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{ref.get('name', '')}.{self._name_suffix()}",
                "namespace": ev["metadata"]["namespace"],
            },
            "involvedObject": ref,
            "reason": ev.get("reason", ""),
            "message": AGGREGATE_MESSAGE_PREFIX + ev.get("message", ""),
            "source": ev.get("source", {}),
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "type": ev.get("type", ""),
            "eventTime": None,
            # Upstream's aggregate copy does not carry the reporting fields; neither do we.
            "reportingComponent": "",
            "reportingInstance": "",
        }
        return aggregate, group

    def _observe(self, ev: Event, key: str) -> tuple[Event, dict[str, Any] | None]:
        last = self._observed.get(key)
        patch: dict[str, Any] | None = None
        if last is not None and last.count > 0:
            ev = {
                **ev,
                "metadata": {**ev["metadata"], "name": last.name, "resourceVersion": last.resource_version},
                "firstTimestamp": last.first_timestamp,
                "count": last.count + 1,
            }
            # What CreateTwoWayMergePatch yields against a copy with count, lastTimestamp and message blanked.
            patch = {"count": ev["count"], "lastTimestamp": ev["lastTimestamp"], "message": ev.get("message", "")}
        self._observed.put(key, _Observation.of(ev))
        return ev, patch

    def _allow(self, ev: Event) -> bool:
        now = self._clock.monotonic()
        key = spam_key(ev)
        bucket = self._spam.get(key)
        if bucket is None:
            bucket = _TokenBucket(SPAM_QPS, SPAM_BURST, now)
        allowed = bucket.try_accept(now)
        self._spam.put(key, bucket)
        return allowed


# -- recording -------------------------------------------------------------------------------------------


class EventRecorder:
    """Records events on behalf of one component (``source.component``), e.g. "deployment-controller"."""

    def __init__(self, broadcaster: EventBroadcaster, component: str, host: str) -> None:
        self._broadcaster = broadcaster
        self.component = component
        self.host = host
        self._log = _log.bind(component=component)

    def event(
        self, obj: Mapping[str, Any], type: str, reason: str, message: str, *, resource: Resource | None = None
    ) -> None:
        """Queue an Event about ``obj``. Never blocks. ``resource`` supplies kind/apiVersion if ``obj`` lacks them
        (objects from a List response do)."""
        ref = object_reference(obj, resource)
        if ref is None:
            self._log.error(
                "Could not construct reference, will not report event",
                object=_describe(obj),
                type=type,
                reason=reason,
                message=message,
            )
            return
        if type not in EVENT_TYPES:
            self._log.error("Unsupported event type", type=type, reason=reason, object=_describe(obj))
            return
        stamp = format_time(self._broadcaster.clock.now())
        source: dict[str, str] = {"component": self.component}
        if self.host:
            source["host"] = self.host
        ev: Event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{ref['name']}.{self._broadcaster.name_suffix()}",
                "namespace": ref.get("namespace") or "default",
            },
            "involvedObject": ref,
            "reason": reason,
            "message": message,
            "source": source,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "type": type,
            "eventTime": None,
            "reportingComponent": self.component,
            "reportingInstance": self.host,
        }
        self._broadcaster.enqueue(ev, self._log)


def object_reference(obj: Mapping[str, Any], resource: Resource | None = None) -> dict[str, str] | None:
    """An ObjectReference to ``obj`` (kind, namespace, name, uid, apiVersion, resourceVersion; empty ones left
    out as the API omits them), or None without a kind, apiVersion or name."""
    meta = obj.get("metadata") or {}
    kind = obj.get("kind") or (resource.kind if resource else "")
    api_version = obj.get("apiVersion") or (resource.api_version if resource else "")
    name = meta.get("name")
    if not kind or not api_version or not name:
        return None
    ref = {
        "kind": kind,
        "namespace": meta.get("namespace") or "",
        "name": name,
        "uid": meta.get("uid") or "",
        "apiVersion": api_version,
        "resourceVersion": meta.get("resourceVersion") or "",
    }
    return {k: str(v) for k, v in ref.items() if v}


def _describe(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns, name = meta.get("namespace"), meta.get("name")
    return f"{obj.get('kind', '?')} {ns}/{name}" if ns else f"{obj.get('kind', '?')} {name}"


class EventBroadcaster:
    """Owns the buffer and the single writer task; hands out recorders per component."""

    def __init__(
        self,
        client: EventSink,
        clock: Clock,
        *,
        host: str | None = None,
        sleep_duration: float = DEFAULT_SLEEP_DURATION,
        drain_timeout: float = 5.0,
        rng: random.Random | None = None,
    ) -> None:
        self.clock = clock
        self._client = client
        self._host = host or ""
        self._sleep = sleep_duration
        self._drain_timeout = drain_timeout
        self._rng = rng or random.Random()
        self._buffer: deque[Event] = deque()
        self._wakeup: asyncio.Future[None] | None = None
        self._recorders: dict[str, EventRecorder] = {}
        self._last_nanos = 0
        self._correlator = EventCorrelator(clock, self.name_suffix)
        self._in_flight: Correlated | None = None
        self.dropped = 0

    def recorder(self, component: str) -> EventRecorder:
        rec = self._recorders.get(component)
        if rec is None:
            rec = self._recorders[component] = EventRecorder(self, component, self._host)
        return rec

    @property
    def pending(self) -> int:
        """Events buffered and not yet handed to the writer."""
        return len(self._buffer)

    def name_suffix(self) -> str:
        """Hex nanoseconds of now, strictly increasing so names never collide within one process."""
        nanos = int(self.clock.now() * 1e9)
        if nanos <= self._last_nanos:
            nanos = self._last_nanos + 1
        self._last_nanos = nanos
        return f"{nanos:x}"

    def enqueue(self, ev: Event, log: Any = None) -> None:
        """Buffer ``ev`` for the writer, or drop it (logged) if the buffer is full. Never blocks."""
        if len(self._buffer) >= MAX_QUEUED_EVENTS:
            self.dropped += 1
            (log or _log).error(
                "Unable to record event: too many queued events, dropped event",
                object=_ref_text(ev),
                reason=ev.get("reason"),
                message=ev.get("message"),
            )
            return
        self._buffer.append(ev)
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    async def run(self) -> None:
        """Write buffered events until cancelled; then try what is left once, within ``drain_timeout``."""
        try:
            while True:
                while not self._buffer:
                    self._wakeup = asyncio.get_running_loop().create_future()
                    await self._wakeup
                ev = self._buffer.popleft()
                correlated = self._correlator.correlate(ev)
                if correlated is None:
                    _log.debug("Event dropped by the spam filter", object=_ref_text(ev), reason=ev.get("reason"))
                    continue
                self._in_flight = correlated
                await self._record_with_retries(correlated)
                self._in_flight = None
        except asyncio.CancelledError:
            await self._drain()
            raise

    async def _record_with_retries(self, correlated: Correlated) -> None:
        ev = correlated.event
        _log.debug(
            "Event occurred",
            component=(ev.get("source") or {}).get("component"),
            object=_ref_text(ev),
            type=ev.get("type"),
            reason=ev.get("reason"),
            message=ev.get("message"),
        )
        tries = 0
        while not await self._record_once(correlated):
            tries += 1
            if tries >= MAX_TRIES_PER_EVENT:
                _log.error(
                    "Unable to write event (retry limit exceeded!)", object=_ref_text(ev), reason=ev.get("reason")
                )
                return
            # The first pause is random so that many clients do not retry in step after an outage.
            delay = self._sleep * self._rng.random() if tries == 1 else self._sleep
            await self.clock.sleep(delay)

    async def _record_once(self, correlated: Correlated) -> bool:
        """One write; True when done with the event (written or abandoned), False to retry."""
        ev, patch = correlated.event, correlated.patch
        meta = ev["metadata"]
        try:
            written: dict[str, Any] | None = None
            if patch is not None and int(ev.get("count") or 0) > 1:
                try:
                    written = await self._client.patch(
                        EVENTS, meta["name"], patch, meta["namespace"], patch_type="strategic"
                    )
                except NotFound:
                    written = None  # aged out on the server: create it afresh below
            if written is None:
                fresh = {**ev, "metadata": {k: v for k, v in meta.items() if k != "resourceVersion"}}
                written = await self._client.create(EVENTS, fresh, meta["namespace"])
        except ApiConnectionError as err:
            _log.error("Unable to write event (may retry after sleeping)", object=_ref_text(ev), error=str(err))
            return False
        except ApiError as err:
            terminating = has_status_cause(err, NAMESPACE_TERMINATING_CAUSE)
            level = _log.debug if isinstance(err, AlreadyExists) or terminating else _log.error
            level(
                "Server rejected event (will not retry!)", object=_ref_text(ev), reason=ev.get("reason"), error=str(err)
            )
            return True
        except (OSError, TimeoutError) as err:
            _log.error("Unable to write event (may retry after sleeping)", object=_ref_text(ev), error=str(err))
            return False
        self._correlator.update_state(written)
        return True

    async def _drain(self) -> None:
        """Try the in-flight event and every buffered one once, bounded by ``drain_timeout`` on the clock."""
        if self._in_flight is None and not self._buffer:
            return
        writer = asyncio.create_task(self._write_remaining_once(), name="event-broadcaster-drain")
        timer = asyncio.create_task(self.clock.sleep(self._drain_timeout), name="event-broadcaster-drain-timer")
        try:
            await asyncio.wait({writer, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (writer, timer):
                task.cancel()
            await asyncio.gather(writer, timer, return_exceptions=True)
        left = len(self._buffer) + (self._in_flight is not None)
        if left:
            _log.error("Unable to write events at shutdown (timed out)", dropped=left)

    async def _write_remaining_once(self) -> None:
        if self._in_flight is not None:
            await self._record_once(self._in_flight)
            self._in_flight = None
        while self._buffer:
            correlated = self._correlator.correlate(self._buffer.popleft())
            if correlated is None:
                continue
            self._in_flight = correlated
            await self._record_once(correlated)
            self._in_flight = None


def _ref_text(ev: Mapping[str, Any]) -> str:
    ref = ev.get("involvedObject") or {}
    ns = ref.get("namespace")
    kind, name = ref.get("kind", ""), ref.get("name", "")
    return f"{kind} {ns}/{name}" if ns else f"{kind} {name}"
