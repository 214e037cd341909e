"""ApiClient: raw-JSON REST verbs for any group/version/resource over one aiohttp session.

Guarantees:
- Objects go out and come back as the API's JSON in plain dicts, encoded and parsed with orjson.
  No model classes. Caller-owned dicts are never mutated.
- One ``aiohttp.ClientSession`` per client with keep-alive and no connection-count cap, so
  long-lived watches never starve ordinary requests of a connection. Clients built from one
  ``ClientConfig`` in one event loop share one connection pool (at most 25 idle connections per host
  between them), as client-go's clientsets built from one rest config share one transport; the last
  of them to close closes it.
- Every HTTP attempt (retries and watch opens included) first takes a token from the client-side
  limiter (``qps``/``burst``, as ``--kube-api-qps``/``--kube-api-burst``; ``qps <= 0`` disables it).
- Retries, bounded by ``max_retries`` (client-go's 10), with exponential backoff unless the server
  sends ``Retry-After``, which is honoured:
    * 429 on any verb (the server rejected it before doing anything);
    * 5xx on reads and on writes that are safe to repeat (PUT, DELETE, merge/strategic PATCH); on a
      POST or JSON-patch only when the server says ``Retry-After``, since a create that timed out may
      have happened and repeating it could act twice (two pods from one generateName);
    * a connection failure on GET, or on any verb when the connection was never established (so
      the request was never sent). A write that may have reached the server is never re-sent.
  Nothing else is retried: the first 4xx raises its typed error at once.
- Failures raise the :mod:`~controller_manager.client.errors` tree; transport failures raise
  ``ApiConnectionError``. Metrics use client-go's names (see :mod:`.metrics`).
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import aiohttp
import orjson
import structlog
from aiohttp.client_proto import ResponseHandler
from aiohttp.client_reqrep import ConnectionKey

from controller_manager.api.jsonbytes import encode_kept
from controller_manager.api.resources import Resource
from controller_manager.client.config import ClientConfig
from controller_manager.client.discovery import group_versions, resources_from_list
from controller_manager.client.errors import ApiConnectionError, ApiError, Gone, WriteFenced, error_from_response
from controller_manager.client.metrics import RequestMetrics
from controller_manager.client.ratelimit import TokenBucket
from controller_manager.client.watch import Decode, WatchStream
from controller_manager.client.wire import (
    APPLY_PATCH_CONTENT_TYPE,
    JSON,
    METADATA_LIST_ACCEPT,
    METADATA_WATCH_ACCEPT,
    PATCH_CONTENT_TYPES,
    default_user_agent,
    parse_retry_after,
)
from controller_manager.clock import Clock, RealClock

log = structlog.get_logger("controller_manager.client")

# Module-level aliases: inside ApiClient the name ``list`` is the verb, not the builtin.
_Items = list[dict[str, Any]]
_Resources = list[Resource]


def _selector_params(label_selector: str | None, field_selector: str | None) -> dict[str, str]:
    """The ``labelSelector``/``fieldSelector`` query parameters (an empty selector is left out)."""
    params: dict[str, str] = {}
    if label_selector:
        params["labelSelector"] = label_selector
    if field_selector:
        params["fieldSelector"] = field_selector
    return params


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    m = obj.get("metadata")
    return m if isinstance(m, Mapping) else {}


@dataclass(frozen=True, slots=True)
class _Fenced:
    """Marks a write for the connection-time fence check; ``what`` names it in the error."""

    what: str


class _FencedBody(aiohttp.payload.BytesPayload):
    """A write's body whose bytes are checked against the fence by the call that hands them to the transport.

    aiohttp buffers a request's headers and writes them with the body from a task of its own, which runs an
    event-loop turn (or, on a busy loop, many) after the connection-time check, and runs Python on the way (trace
    signals, the headers merged with the body): a process stopped anywhere in between (SIGSTOP, a stuck VM) would
    send the request the moment it wakes, long after its Lease expired (the 60-minute soak caught an Event PATCH
    and a pod create that way). So this request's writer checks the fence in the very calls that give the bytes to
    the transport; beneath them uvloop's transport encrypts and sends in C, with no Python step a pause could
    separate from the check (on asyncio's own loop its TLS layer still runs Python there). A refusal is recorded
    in :attr:`refused` and raised before a byte of the request is handed over; aiohttp then closes the
    connection and :meth:`ApiClient._exchange` raises the recorded :class:`WriteFenced`."""

    def __init__(self, value: bytes, may_write: Callable[[], bool], what: str, content_type: str) -> None:
        super().__init__(value, content_type=content_type)
        self._may_write = may_write
        self._what = what
        self.refused: WriteFenced | None = None

    def _check(self) -> None:
        if not self._may_write():
            self.refused = WriteFenced(f"{self._what}: not sent: this process no longer knows it holds the leader "
                                       f"Lease")
            raise self.refused

    async def write_with_length(self, writer: Any, content_length: int | None) -> None:
        # The writer is this request's own (aiohttp makes one per request), so its two transport-facing calls can
        # be shadowed on the instance for good; a writer without them (another aiohttp) is checked once, here.
        fenced = False
        for name in ("_write", "_writelines"):
            hand_over = getattr(writer, name, None)
            if hand_over is not None:
                setattr(writer, name, self._fenced(hand_over))
                fenced = True
        if not fenced:
            self._check()
        await super().write_with_length(writer, content_length)

    def _fenced(self, hand_over: Callable[[Any], None]) -> Callable[[Any], None]:
        # The shadow lives on the writer, so it holds the writer's own method weakly: a strong reference would
        # close a cycle (writer -> shadow -> method -> writer) that keeps the request's whole graph (request,
        # response, writer, traces: ~40 objects a write) for the next full collection instead of freeing it
        # when the request ends. A calm chaos-soak leader made ~40,000 such objects in two minutes.
        original = weakref.WeakMethod(hand_over)

        def fenced(data: Any) -> None:
            self._check()
            send = original()
            if send is not None:
                send(data)
        return fenced


MAX_IDLE_CONNECTIONS_PER_HOST = 25  # client-go's transport default (MaxIdleConnsPerHost, utilnet.SetTransportDefaults)


class IdleBoundedConnector(aiohttp.TCPConnector):
    """A connection pool that keeps at most :data:`MAX_IDLE_CONNECTIONS_PER_HOST` idle connections per host, closing
    the longest-idle beyond that when a request hands its connection back, as Go's transport does.

    Why: aiohttp keeps every released connection until it has been idle ``keepalive_timeout`` and (3.10+) hands
    them out first-in first-out, so under a steady request rate every pooled connection is reused before it
    expires. The pool then only grows, to the highest concurrency ever reached. A leader under the chaos soak's
    calm churn held 116 TLS connections to a 4-node kube-sim, their buffers part of an RSS that kept rising
    (README, reliability)."""

    def _release(self, key: ConnectionKey, protocol: ResponseHandler, *, should_close: bool = False) -> None:
        super()._release(key, protocol, should_close=should_close)
        idle = self._conns.get(key)
        while idle is not None and len(idle) > MAX_IDLE_CONNECTIONS_PER_HOST:
            oldest, _ = idle[0]  # released first: idle the longest
            del idle[0]
            transport = oldest.transport
            oldest.close()
            if key.is_ssl and not self._cleanup_closed_disabled:
                self._cleanup_closed_transports.append(transport)


@dataclass(slots=True)
class _SharedPool:
    config: ClientConfig
    loop: asyncio.AbstractEventLoop
    connector: IdleBoundedConnector
    users: int = 0

    @property
    def key(self) -> tuple[int, int]:
        return id(self.config), id(self.loop)


# One pool per (config, event loop), shared by every ApiClient built from that config: client-go's transport cache
# hands every clientset made from one rest config the same http.Transport, so a kube-controller-manager's
# controller, leader-election and namespace clients draw on one pool of 25 idle connections, not 25 each. (The
# entry holds its config and loop, so neither id can be reused while it exists.)
_SHARED_POOLS: dict[tuple[int, int], _SharedPool] = {}


def _acquire_pool(config: ClientConfig) -> _SharedPool:
    loop = asyncio.get_running_loop()
    pool = _SHARED_POOLS.get((id(config), id(loop)))
    if pool is None or pool.connector.closed:
        # limit=0: watches hold a connection each for minutes; a cap would queue requests behind them.
        connector = IdleBoundedConnector(limit=0, limit_per_host=0, ssl=config.ssl_context or True,
                                         keepalive_timeout=30.0)
        pool = _SharedPool(config, loop, connector)
        _SHARED_POOLS[pool.key] = pool
    pool.users += 1
    return pool


async def _release_pool(pool: _SharedPool) -> None:
    """The last client of a pool to close closes its connections."""
    pool.users -= 1
    if pool.users > 0:
        return
    if _SHARED_POOLS.get(pool.key) is pool:
        del _SHARED_POOLS[pool.key]
    await pool.connector.close()


class ApiClient:
    """Talks to one API server. Use ``async with ApiClient(config) as client`` or ``await client.close()``."""

    # Streaming lists are understood (``watch(send_initial_events=True)``): informers may list through a watch.
    # A client without this attribute (a test double, an in-process wrapper) is listed the paged way.
    supports_watch_list: bool = True

    def __init__(
        self,
        config: ClientConfig,
        qps: float = 20.0,
        burst: int = 30,
        *,
        clock: Clock | None = None,
        max_retries: int = 10,
        backoff_base: float = 0.1,
        backoff_cap: float = 5.0,
        request_timeout: float = 120.0,
        user_agent: str | None = None,
    ) -> None:
        self.config = config
        self._clock: Clock = clock or RealClock()
        self._limiter = TokenBucket(qps, burst, self._clock)
        self._max_retries = max(0, max_retries)
        self._backoff_base = backoff_base
        self._backoff_cap = backoff_cap
        self._base = config.host.rstrip("/")
        self._metrics = RequestMetrics(config.host_label)
        self._user_agent = user_agent or default_user_agent()
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=30.0, sock_read=request_timeout)
        self._extra: dict[str, Any] = {}
        if config.tls_server_name:
            self._extra["server_hostname"] = config.tls_server_name
        if config.proxy:
            self._extra["proxy"] = config.proxy
        self._session: aiohttp.ClientSession | None = None
        self._pool: _SharedPool | None = None
        self._closed = False
        self._write_fence: Callable[[], bool] | None = None

    def fence_writes(self, may_write: Callable[[], bool] | None) -> None:
        """Refuse every write (any verb but GET) while ``may_write()`` is false, checked just before each
        attempt is sent, after the rate limiter's wait: a leader that may have lost its Lease sends nothing."""
        self._write_fence = may_write

    @property
    def rate_limiter(self) -> TokenBucket:
        return self._limiter

    @property
    def user_agent(self) -> str:
        return self._user_agent

    async def __aenter__(self) -> ApiClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        self._closed = True
        session, self._session = self._session, None
        pool, self._pool = self._pool, None
        if session is not None:
            await session.close()
        if pool is not None:
            await _release_pool(pool)

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is not None:
            return self._session
        if self._closed:
            raise RuntimeError("ApiClient is closed")
        pool = self._pool = _acquire_pool(self.config)
        headers = {"User-Agent": self._user_agent, "Accept": JSON}
        if self.config.source is None and self.config.authorization:
            headers["Authorization"] = self.config.authorization
        # The write fence is checked again once the request has its connection, just before it goes out: a
        # process paused between the first check and the send (a TLS handshake, a busy loop) sends nothing stale.
        fence = aiohttp.TraceConfig()
        fence.on_connection_reuseconn.append(self._fence_on_connection)
        fence.on_connection_create_end.append(self._fence_on_connection)
        self._session = aiohttp.ClientSession(connector=pool.connector, connector_owner=False, headers=headers,
                                              auto_decompress=True, trace_configs=[fence])
        return self._session

    async def _fence_on_connection(self, _session: aiohttp.ClientSession, ctx: Any, _params: Any) -> None:
        described = ctx.trace_request_ctx
        if isinstance(described, _Fenced) and self._write_fence is not None and not self._write_fence():
            raise WriteFenced(f"{described.what}: not sent: this process no longer knows it holds the leader Lease")

    def _backoff(self, attempt: int) -> float:
        return float(min(self._backoff_cap, self._backoff_base * (2 ** (attempt - 1))))

    # --- the one HTTP exchange every verb goes through -------------------------------------------

    async def _exchange(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        data: bytes | None = None,
        content_type: str | None = None,
        accept: str | None = None,
        idempotent: bool = True,
        stream: bool = False,
        timeout: aiohttp.ClientTimeout | None = None,
    ) -> tuple[aiohttp.ClientResponse, bytes]:
        session = self._get_session()
        url = self._base + path
        safe = method == "GET"
        headers: dict[str, str] = {}
        if accept is not None:
            headers["Accept"] = accept
        if content_type is not None:
            headers["Content-Type"] = content_type
        limiter = self._limiter
        metrics = self._metrics
        attempt = 0
        while True:
            if limiter.enabled:
                metrics.rate_limited(method, await limiter.acquire())
            if not safe and self._write_fence is not None and not self._write_fence():
                raise WriteFenced(f"{method} {path}: not sent: this process no longer knows it holds the leader "
                                  f"Lease")
            if self.config.source is not None:
                auth = await self.config.authorization_header()
                if auth:
                    headers["Authorization"] = auth
            start = time.perf_counter()
            fence = None if safe else self._write_fence
            body: bytes | _FencedBody | None = data
            if fence is not None and data is not None:
                body = _FencedBody(data, fence, f"{method} {path}", content_type or JSON)
            try:
                resp = await session.request(
                    method, url, params=params, data=body, headers=headers, timeout=timeout or self._timeout,
                    trace_request_ctx=None if fence is None else _Fenced(f"{method} {path}"),
                    **self._extra,
                )
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                metrics.request(method, None, time.perf_counter() - start)
                if isinstance(body, _FencedBody) and body.refused is not None:
                    raise body.refused from None  # refused as it was about to leave: nothing was sent
                if isinstance(exc.__cause__, WriteFenced):
                    raise exc.__cause__ from None  # refused when the connection was taken: nothing was sent
                never_sent = isinstance(exc, aiohttp.ClientConnectorError) and not isinstance(
                    exc, aiohttp.ClientSSLError
                )
                retry = never_sent or (safe and not isinstance(exc, aiohttp.ClientSSLError))
                if attempt < self._max_retries and retry:
                    attempt += 1
                    delay = self._backoff(attempt)
                    log.info("retrying after connection error", method=method, path=path, attempt=attempt,
                             delay=delay, error=f"{type(exc).__name__}: {exc}")
                    await self._clock.sleep(delay)
                    continue
                raise ApiConnectionError(f"{method} {url}: {type(exc).__name__}: {exc}") from exc
            status = resp.status
            metrics.request(method, status, time.perf_counter() - start)
            if 200 <= status < 300:
                if stream:
                    return resp, b""
                try:
                    return resp, await resp.read()
                except (aiohttp.ClientError, TimeoutError) as exc:
                    resp.close()
                    if safe and attempt < self._max_retries:
                        attempt += 1
                        await self._clock.sleep(self._backoff(attempt))
                        continue
                    raise ApiConnectionError(f"{method} {url}: reading the response: {exc}") from exc
            try:
                body = await resp.read()
            except (aiohttp.ClientError, TimeoutError):
                body = b""
            finally:
                resp.release()
            retry_after = parse_retry_after(resp.headers.get("Retry-After"))
            retryable = status == 429 or (status >= 500 and (idempotent or retry_after is not None))
            if retryable and attempt < self._max_retries:
                attempt += 1
                delay = retry_after if retry_after is not None else self._backoff(attempt)
                log.info("retrying after server response", method=method, path=path, code=status, attempt=attempt,
                         delay=delay)
                await self._clock.sleep(delay)
                continue
            if status == 401 and self.config.source is not None:
                self.config.source.rejected(headers.get("Authorization"))  # an exec plugin runs again next time
            raise error_from_response(status, body, method, retry_after)

    async def _json(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str | None = None,
        accept: str | None = None,
        idempotent: bool = True,
        decode: Callable[[bytes], Any] | None = None,
    ) -> Any:
        data: bytes | None = None
        if body is not None:
            data = body if isinstance(body, bytes) else encode_kept(body)
            content_type = content_type or JSON
        _, raw = await self._exchange(method, path, params=params, data=data, content_type=content_type,
                                      accept=accept, idempotent=idempotent)
        if not raw:
            return {}
        return decode(raw) if decode is not None else orjson.loads(raw)

    # --- verbs -------------------------------------------------------------------------------------

    async def get(self, res: Resource, name: str, namespace: str | None = None, *,
                  metadata_only: bool = False) -> dict[str, Any]:
        """The object; with ``metadata_only``, its PartialObjectMetadata (client-go's metadata client: what the
        garbage collector reads, a fraction of a pod's bytes to encode, send and decode)."""
        result: dict[str, Any] = await self._json("GET", res.path(namespace, name),
                                                  accept=METADATA_WATCH_ACCEPT if metadata_only else None)
        return result

    async def list(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
        metadata_only: bool = False,
        decode: Callable[[bytes], dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """One page of the collection: a List with ``items`` and ``metadata.continue``/``resourceVersion``.

        ``decode`` turns the response body into that List (default: orjson, as sent)."""
        params = _selector_params(label_selector, field_selector)
        if limit:
            params["limit"] = str(limit)
        if continue_token:
            params["continue"] = continue_token
        if resource_version is not None:
            params["resourceVersion"] = resource_version
        result: dict[str, Any] = await self._json(
            "GET", res.path(namespace), params=params or None,
            accept=METADATA_LIST_ACCEPT if metadata_only else None, decode=decode,
        )
        return result

    async def list_all(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        metadata_only: bool = False,
        decode: Callable[[bytes], dict[str, Any]] | None = None,
    ) -> tuple[_Items, str]:
        """Every item, paging through ``continue``; and the list's resourceVersion (to watch from).

        As client-go's pager: if a continue token expires mid-way (410), fall back to one unpaged list.
        ``decode`` as for :meth:`list`, for each page.
        """
        items: _Items = []
        token: str | None = None
        version = ""
        while True:
            try:
                page = await self.list(res, namespace, label_selector=label_selector, field_selector=field_selector,
                                       limit=page_size or None, continue_token=token, metadata_only=metadata_only,
                                       decode=decode)
            except Gone:
                if token is None:
                    raise
                log.info("continue token expired, listing in full", resource=res.group_resource)
                page = await self.list(res, namespace, label_selector=label_selector, field_selector=field_selector,
                                       metadata_only=metadata_only, decode=decode)
                return list(page.get("items") or ()), str(_meta(page).get("resourceVersion") or "")
            meta = _meta(page)
            if token is None:
                version = str(meta.get("resourceVersion") or "")
            items.extend(page.get("items") or ())
            token = meta.get("continue") or None
            if not token:
                return items, version

    def watch(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        allow_bookmarks: bool = True,
        timeout_seconds: int | None = None,
        metadata_only: bool = False,
        decode: Decode | None = None,
        send_initial_events: bool = False,
    ) -> WatchStream:
        """A stream of WatchEvents; the request is sent on first iteration (see :mod:`.watch`).

        ``decode`` turns an event line into ``(type, object)`` (default: orjson, the object as sent).
        ``send_initial_events``: a streaming list (``sendInitialEvents=true``, ``resourceVersionMatch=
        NotOlderThan``): the state at ``resource_version`` or newer as ADDED events first, then, with bookmarks
        allowed, a BOOKMARK annotated ``k8s.io/initial-events-end``, then the watch goes on."""
        params: dict[str, str] = {"watch": "true"}
        if resource_version is not None:
            params["resourceVersion"] = resource_version
        if send_initial_events:
            params["sendInitialEvents"] = "true"
            params["resourceVersionMatch"] = "NotOlderThan"
        params.update(_selector_params(label_selector, field_selector))
        if allow_bookmarks:
            params["allowWatchBookmarks"] = "true"
        # The server ends the watch at timeoutSeconds; a read gap much longer than that means a dead peer.
        sock_read = None
        if timeout_seconds is not None:
            params["timeoutSeconds"] = str(timeout_seconds)
            sock_read = timeout_seconds * 1.5 + 30.0
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=30.0, sock_read=sock_read)
        path = res.path(namespace)
        accept = METADATA_WATCH_ACCEPT if metadata_only else None

        async def open_response() -> aiohttp.ClientResponse:
            resp, _ = await self._exchange("GET", path, params=params, accept=accept, stream=True, timeout=timeout)
            return resp

        return WatchStream(open_response, decode)

    async def create(self, res: Resource, obj: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]:
        ns = namespace or _meta(obj).get("namespace")
        result: dict[str, Any] = await self._json("POST", res.path(ns), body=obj, idempotent=False)
        return result

    async def update(self, res: Resource, obj: Mapping[str, Any]) -> dict[str, Any]:
        """PUT the whole object; its ``metadata.resourceVersion`` makes a stale write a 409 Conflict."""
        m = _meta(obj)
        result: dict[str, Any] = await self._json("PUT", res.path(m.get("namespace"), m["name"]), body=obj)
        return result

    async def update_status(self, res: Resource, obj: Mapping[str, Any]) -> dict[str, Any]:
        m = _meta(obj)
        result: dict[str, Any] = await self._json("PUT", res.path(m.get("namespace"), m["name"], "status"), body=obj)
        return result

    async def update_subresource(self, res: Resource, obj: Mapping[str, Any], subresource: str) -> dict[str, Any]:
        """PUT the whole object to one of its subresources (``approval`` of a CertificateSigningRequest)."""
        m = _meta(obj)
        result: dict[str, Any] = await self._json("PUT", res.path(m.get("namespace"), m["name"], subresource),
                                                  body=obj)
        return result

    async def patch(
        self,
        res: Resource,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        patch_type: str = "merge",
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """PATCH with ``patch_type`` "merge", "strategic" or "json" (RFC 6902); ``patch`` may be pre-encoded bytes."""
        try:
            content_type = PATCH_CONTENT_TYPES[patch_type]
        except KeyError:
            raise ValueError(f"unknown patch type {patch_type!r}: expected merge, strategic or json") from None
        body = patch.encode() if isinstance(patch, str) else patch
        result: dict[str, Any] = await self._json(
            "PATCH", res.path(namespace, name, subresource), body=body, content_type=content_type,
            idempotent=patch_type != "json",
        )
        return result

    async def apply(
        self,
        res: Resource,
        obj: Mapping[str, Any],
        namespace: str | None = None,
        *,
        field_manager: str,
        force: bool = False,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """Server-side apply of ``obj`` (an apply configuration naming the object in its metadata) as
        ``field_manager``; ``force`` takes over fields other managers own (client-go's ``Apply`` with
        ``ApplyOptions{FieldManager, Force}``); ``subresource`` applies to that subresource (``status``:
        client-go's ``ApplyStatus``)."""
        params = {"fieldManager": field_manager}
        if force:
            params["force"] = "true"
        name = str((obj.get("metadata") or {}).get("name") or "")
        result: dict[str, Any] = await self._json(
            "PATCH", res.path(namespace, name, subresource), params=params, body=encode_kept(obj),
            content_type=APPLY_PATCH_CONTENT_TYPE)
        return result

    async def delete(
        self,
        res: Resource,
        name: str,
        namespace: str | None = None,
        *,
        propagation_policy: str | None = None,
        grace_period_seconds: int | None = None,
        uid: str | None = None,
        resource_version: str | None = None,
    ) -> dict[str, Any]:
        """DELETE with a DeleteOptions body; ``uid``/``resource_version`` are preconditions (409 if unmet)."""
        options: dict[str, Any] | None = None
        if propagation_policy or grace_period_seconds is not None or uid or resource_version:
            options = {"kind": "DeleteOptions", "apiVersion": "v1"}
            if propagation_policy:
                options["propagationPolicy"] = propagation_policy
            if grace_period_seconds is not None:
                options["gracePeriodSeconds"] = grace_period_seconds
            if uid or resource_version:
                pre: dict[str, str] = {}
                if uid:
                    pre["uid"] = uid
                if resource_version:
                    pre["resourceVersion"] = resource_version
                options["preconditions"] = pre
        result: dict[str, Any] = await self._json("DELETE", res.path(namespace, name), body=options)
        return result

    async def delete_collection(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        propagation_policy: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> dict[str, Any]:
        """DELETE on the collection (the ``deletecollection`` verb): every matching object, as one request."""
        params = _selector_params(label_selector, field_selector)
        options: dict[str, Any] | None = None
        if propagation_policy:
            options = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation_policy}
        result: dict[str, Any] = await self._json("DELETE", res.path(namespace), params=params or None, body=options)
        return result

    async def get_scale(self, res: Resource, name: str, namespace: str | None) -> dict[str, Any]:
        result: dict[str, Any] = await self._json("GET", res.path(namespace, name, "scale"))
        return result

    async def update_scale(self, res: Resource, name: str, namespace: str | None, replicas: int) -> dict[str, Any]:
        """Set ``spec.replicas`` through the ``/scale`` subresource (an autoscaling/v1 Scale)."""
        scale: dict[str, Any] = {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {"name": name, **({"namespace": namespace} if namespace else {})},
            "spec": {"replicas": replicas},
        }
        result: dict[str, Any] = await self._json("PUT", res.path(namespace, name, "scale"), body=scale)
        return result

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str | None = None,
        accept: str | None = None,
    ) -> Any:
        """Any request: JSON in (dict/list, or raw bytes), JSON out (or text when the server sends text)."""
        method = method.upper()
        data: bytes | None = None
        if body is not None:
            data = body if isinstance(body, bytes) else encode_kept(body)
            content_type = content_type or JSON
        idempotent = method != "POST" and content_type != PATCH_CONTENT_TYPES["json"]
        resp, raw = await self._exchange(method, path, params=params, data=data, content_type=content_type,
                                         accept=accept, idempotent=idempotent)
        if not raw:
            return None
        if "json" in resp.headers.get("Content-Type", "json"):
            return orjson.loads(raw)
        return raw.decode("utf-8", "replace")

    async def discover(self) -> _Resources:
        """Every resource every group/version serves. A group/version that fails (an aggregated API
        that is down) is logged and skipped, as client-go's discovery returns partial results; a
        failure of ``/api``, ``/apis`` or the core ``v1`` raises."""
        out, failed = await self.discover_partial()
        for gv, error in failed.items():
            if "/" not in gv:
                raise error
            log.warning("discovery failed for a group version", group_version=gv, error=str(error))
        return out

    async def discover_partial(self) -> tuple[_Resources, dict[str, ApiError]]:
        """What every group/version that answered serves, and the error of each that did not, by its
        ``group/version`` (``v1`` for the core group), as client-go's ``ErrGroupDiscoveryFailed`` carries
        them. A failure of ``/api`` or ``/apis`` raises."""
        core = await self._json("GET", "/api")
        groups = await self._json("GET", "/apis")
        gvs = group_versions(core, groups)
        found = await asyncio.gather(*(self._discover_gv(group, version) for group, version in gvs))
        out: _Resources = []
        failed: dict[str, ApiError] = {}
        for (group, version), result in zip(gvs, found, strict=True):
            if isinstance(result, ApiError):
                failed[f"{group}/{version}" if group else version] = result
                continue
            out.extend(result)
        return out, failed

    async def _discover_gv(self, group: str, version: str) -> _Resources | ApiError:
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        try:
            doc = await self._json("GET", path)
        except ApiError as exc:
            return exc
        return resources_from_list(group, version, doc)
