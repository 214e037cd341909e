"""Fault injection for kube-sim: the misbehaviour a controller must survive, on demand.

Guarantees:
- :meth:`FaultInjector.drop_watches` ends every open watch now (clients see their streams end).
- :meth:`FaultInjector.fail` answers a share of matching HTTP requests (a probability, or every n-th;
  filtered by verb and resource; optionally only ``count`` times) with a real ``metav1.Status``:
  410 Expired (for a watch: a 200 stream carrying one ERROR event, as the apiserver sends it),
  429 TooManyRequests with ``Retry-After``, 500 InternalError, or any other code.
- :meth:`FaultInjector.set_latency` delays requests (a fixed number of seconds, or a function of
  the request); watch streams are delayed once, at their start.
- :meth:`FaultInjector.slow_watch` holds every change for N seconds before HTTP watchers see it,
  in order (a lagging watch cache): a controller's informer then lags its own writes.
- :meth:`FaultInjector.restart` is an apiserver restart: all watches cut, history kept or lost
  (a watch from an old resourceVersion then gets 410), optionally a downtime answering 503.
- The HTTP part is :attr:`FaultInjector.middleware` (give it to ``build_app(api, middlewares=...)``);
  in-process callers of the ApiServer are never failed or slowed. All waiting reads the injected clock.
"""

from __future__ import annotations

import contextvars
import random
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import orjson
import structlog
from aiohttp import web

from controller_manager.clock import Clock, RealClock, TimerHandle
from controller_manager.sim.apiserver import errors, requestinfo
from controller_manager.sim.apiserver.requestinfo import RequestInfo

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer

__all__ = ["ErrorRule", "FaultInjector", "error_status", "parse_fault_spec"]

log = structlog.get_logger("kube-sim.faults")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Latency = float | Callable[[web.Request], float]

# Set while an HTTP request is being served, so watches it opens can be told from in-process ones.
_SERVING_HTTP: contextvars.ContextVar[bool] = contextvars.ContextVar("kube_sim_serving_http", default=False)


@dataclass(slots=True)
class ErrorRule:
    """Answer matching requests with ``code``: each with ``probability``, or every ``every``-th one."""

    code: int
    probability: float | None = None
    every: int | None = None
    verbs: frozenset[str] | None = None
    resources: frozenset[str] | None = None  # "pods", "pods/status", "deployments.apps"
    count: int | None = None  # stop after this many injected failures
    retry_after: int = 1
    matched: int = 0
    injected: int = 0

    def applies(self, info: RequestInfo) -> bool:
        if not info.is_resource:
            return False  # discovery and health endpoints stay up: clients must find the API first
        if self.verbs is not None and info.verb not in self.verbs:
            return False
        if self.resources is not None:
            names = {info.resource, f"{info.resource}.{info.group}" if info.group else info.resource}
            if info.subresource:
                names.add(f"{info.resource}/{info.subresource}")
            if not names & self.resources:
                return False
        return self.count is None or self.injected < self.count

    def fires(self, rng: random.Random) -> bool:
        self.matched += 1
        if self.every is not None:
            hit = self.matched % self.every == 0
        else:
            hit = rng.random() < (1.0 if self.probability is None else self.probability)
        if hit:
            self.injected += 1
        return hit


def error_status(code: int, info: RequestInfo, retry_after: int = 1) -> dict[str, Any]:
    """The Status body the apiserver would send for ``code``."""
    if code == 410:
        return errors.expired("too old resource version: 1 (2)").status
    if code == 429:
        return errors.too_many_requests("Too many requests, please try again later.", retry_after).status
    if code == 500:
        return errors.internal_error("injected fault").status
    if code == 504:
        return errors.timeout("The request timed out (injected fault)", retry_after).status
    if code == 409:
        return errors.conflict(info.group, info.resource, info.name or "unknown").status
    reasons = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 503: "ServiceUnavailable"}
    return errors.status(code, reasons.get(code, "InternalError" if code >= 500 else "BadRequest"),
                         f"injected fault ({code})", {})


@dataclass(slots=True)
class _SlowWatch:
    seconds: float
    resources: frozenset[str] | None


@dataclass(slots=True)
class _Delayed:
    """One watcher's held-back changes, released in order by a single timer."""

    offer: Callable[[Any], None]
    seconds: float
    clock: Clock
    held: deque[tuple[float, Any]] = field(default_factory=deque)
    timer: TimerHandle | None = None

    def __call__(self, change: Any) -> None:
        self.held.append((self.clock.monotonic() + self.seconds, change))
        if self.timer is None:
            self.timer = self.clock.call_later(self.seconds, self._release)

    def _release(self) -> None:
        self.timer = None
        now = self.clock.monotonic()
        while self.held and self.held[0][0] <= now + 1e-9:
            self.offer(self.held.popleft()[1])
        if self.held:
            self.timer = self.clock.call_later(self.held[0][0] - now, self._release)


class FaultInjector:
    """Faults for one ApiServer; the Python API changes what :attr:`middleware` does, at once."""

    def __init__(self, api: ApiServer, clock: Clock | None = None, *, seed: int | None = None) -> None:
        self._api = api
        self._clock = clock or RealClock()
        self._rng = random.Random(seed)
        self.rules: list[ErrorRule] = []
        self._latency: Latency | None = None
        self._slow: _SlowWatch | None = None
        self._down_until: float | None = None
        self._original_watch = api.watch
        # Wrapping the instance's watch lets a slow watch hold changes per watcher, at the source.
        api.watch = self._watch  # type: ignore[method-assign]

    # ---- Python API

    def drop_watches(self) -> None:
        """End every open watch now."""
        self._api.close_all_watches()

    def fail(self, code: int, *, probability: float | None = None, every: int | None = None,
             verbs: Iterable[str] | None = None, resources: Iterable[str] | None = None, count: int | None = None,
             retry_after: int = 1) -> ErrorRule:
        """Answer matching requests with ``code`` (all of them if neither probability nor every is given)."""
        _check_rule(code, probability, every)
        rule = ErrorRule(code, probability, every, None if verbs is None else frozenset(verbs),
                         None if resources is None else frozenset(resources), count, retry_after)
        self.rules.append(rule)
        return rule

    @property
    def latency(self) -> Latency | None:
        return self._latency

    def set_latency(self, latency: Latency | None) -> None:
        """Delay every request by ``latency`` seconds (or ``latency(request)``); None: no delay."""
        self._latency = latency

    def slow_watch(self, seconds: float | None, *, resources: Iterable[str] | None = None) -> None:
        """Hold changes ``seconds`` before HTTP watches opened from now on see them (None: stop)."""
        self._slow = None if not seconds else _SlowWatch(seconds, None if resources is None else frozenset(resources))

    def restart(self, *, lose_history: bool = False, downtime: float = 0.0) -> None:
        """An apiserver restart: watches cut; ``lose_history`` makes old resourceVersions 410 Gone;
        for ``downtime`` seconds every request is answered 503."""
        if downtime > 0:
            self._down_until = self._clock.monotonic() + downtime
        self._api.close_all_watches()
        if lose_history:
            self._api.forget_history()

    def clear(self) -> None:
        """Remove every fault (open slow watches keep their delay until they end)."""
        self.rules.clear()
        self._latency = None
        self._slow = None
        self._down_until = None

    # ---- the in-process hook

    def _watch(self, res: Any, *args: Any, **kwargs: Any) -> Any:
        watcher = self._original_watch(res, *args, **kwargs)
        slow = self._slow
        if slow is not None and _SERVING_HTTP.get() and (
                slow.resources is None or res.plural in slow.resources or res.group_resource in slow.resources):
            watcher.offer = _Delayed(watcher.offer, slow.seconds, self._clock)  # type: ignore[method-assign]
        return watcher

    # ---- the HTTP middleware

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        info = requestinfo.parse(request.method, request.path, request.query)
        if self._down_until is not None:
            if self._clock.monotonic() < self._down_until:
                return _status_response(errors.status(503, "ServiceUnavailable", "apiserver is restarting", {}))
            self._down_until = None
        latency = self._latency
        if latency is not None:
            delay = latency(request) if callable(latency) else latency
            if delay > 0:
                await self._clock.sleep(delay)
        for rule in self.rules:
            if rule.applies(info) and rule.fires(self._rng):
                log.info("fault injected", code=rule.code, verb=info.verb, resource=info.resource, name=info.name)
                return await self._error(request, info, rule)
        token = _SERVING_HTTP.set(True)
        try:
            return await handler(request)
        finally:
            _SERVING_HTTP.reset(token)

    async def _error(self, request: web.Request, info: RequestInfo, rule: ErrorRule) -> web.StreamResponse:
        status = error_status(rule.code, info, rule.retry_after)
        if rule.code == 410 and info.verb == "watch":
            # A watch that is too old is answered 200 with one ERROR event, then the stream ends.
            resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
            await resp.prepare(request)
            await resp.write(orjson.dumps({"type": "ERROR", "object": status}) + b"\n")
            await resp.write_eof()
            return resp
        headers = {"Retry-After": str(rule.retry_after)} if rule.code in (429, 503, 504) else None
        return _status_response(status, headers)


def _status_response(status: dict[str, Any], headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=orjson.dumps(status), status=int(status["code"]), content_type="application/json",
                        headers=headers)


FaultAction = Callable[[FaultInjector], object]


def parse_fault_spec(spec: str) -> list[FaultAction]:
    """Parse a ``--faults`` spec into actions to apply to an injector (``action(injector)``).

    Items are separated by ``,``, each ``kind[:key=value...]``: ``error:code=500:p=0.1``,
    ``error:code=429:every=5:verb=list+watch:resource=pods:retry-after=2:count=3``,
    ``latency:seconds=0.05``, ``slow-watch:seconds=2``. Raises ValueError on anything else.
    """
    actions: list[FaultAction] = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        kind, *pairs = item.split(":")
        opts: dict[str, str] = {}
        for pair in pairs:
            key, sep, value = pair.partition("=")
            if not sep or not key:
                raise ValueError(f"bad fault option {pair!r} in {item!r} (want key=value)")
            opts[key] = value
        try:
            if kind == "error":
                code = int(opts.pop("code", "500"))
                p = float(opts.pop("p")) if "p" in opts else None
                every = int(opts.pop("every")) if "every" in opts else None
                verbs = opts.pop("verb").split("+") if "verb" in opts else None
                resources = opts.pop("resource").split("+") if "resource" in opts else None
                count = int(opts.pop("count")) if "count" in opts else None
                retry_after = int(opts.pop("retry-after", "1"))
                _check_rule(code, p, every)
                actions.append(partial(FaultInjector.fail, code=code, probability=p, every=every, verbs=verbs,
                                       resources=resources, count=count, retry_after=retry_after))
            elif kind == "latency":
                seconds = float(opts.pop("seconds"))
                actions.append(partial(FaultInjector.set_latency, latency=seconds))
            elif kind == "slow-watch":
                seconds = float(opts.pop("seconds"))
                actions.append(partial(FaultInjector.slow_watch, seconds=seconds))
            else:
                raise ValueError(f"unknown fault kind {kind!r} (error, latency, slow-watch)")
        except KeyError as exc:
            raise ValueError(f"fault {item!r} needs {exc.args[0]}=") from None
        if opts:
            raise ValueError(f"unknown option(s) {', '.join(sorted(opts))} in fault {item!r}")
    return actions


def _check_rule(code: int, probability: float | None, every: int | None) -> None:
    if probability is not None and not 0.0 <= probability <= 1.0:
        raise ValueError(f"probability must be within [0, 1], not {probability}")
    if every is not None and every < 1:
        raise ValueError(f"every must be at least 1, not {every}")
    if code < 400 or code > 599:
        raise ValueError(f"code must be an HTTP error (400-599), not {code}")
