"""kube-sim's audit log: kube-apiserver's ``--audit-log-path`` with a policy of one rule, ``level: Metadata``.

Guarantees:
- Every HTTP request (resource or not, failed, fault-injected or refused included) is one JSON line, an
  ``audit.k8s.io/v1`` ``Event`` at level ``Metadata`` and stage ``ResponseComplete``: ``auditID``,
  ``requestURI``, ``verb`` (the RequestInfo verb: get, list, watch, create, update, patch, delete,
  deletecollection; a non-resource request's lowercased method), ``user`` (``username``, ``uid``, ``groups``
  as authenticated, impersonation applied; ``impersonatedUser`` is not kept), ``sourceIPs``, ``userAgent``,
  ``objectRef`` (``resource``, ``namespace``, ``name``, ``apiGroup``, ``apiVersion``, ``subresource``; empty
  ones left out, as ``omitempty`` does; absent for a non-resource request), ``responseStatus`` (``code``, and
  for an answer that is a Status its ``status``, ``message`` and ``reason``), ``requestReceivedTimestamp``
  and ``stageTimestamp`` (RFC 3339, microseconds).
- A watch is logged when its stream ends (its ResponseComplete stage), so lines are in completion order.
- The ``Audit-ID`` request header is kept as the ``auditID`` when given, otherwise a fresh UUID is used;
  it is sent back as the ``Audit-ID`` response header (not on a watch's stream, whose headers left earlier).
- Writing never blocks the event loop: lines are buffered in memory and a background task hands them to a
  worker thread every :data:`FLUSH_INTERVAL` seconds (as the ``batch`` audit backend does); :meth:`AuditLog.close`
  writes what is left. The file is appended to (created when missing).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from controller_manager.api.meta import format_micro_time
from controller_manager.sim.apiserver import errors, requestinfo
from controller_manager.sim.apiserver.auth.users import ANONYMOUS, User

__all__ = ["FLUSH_INTERVAL", "AuditLog", "note_user"]

FLUSH_INTERVAL = 0.1  # seconds between hand-overs of buffered lines to the writer thread

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Authenticate = Callable[[Any], User]

# The request being audited: the HTTP layer fills in its user once authenticated (see note_user).
_CURRENT: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("kube_sim_audit", default=None)


def note_user(user: User) -> None:
    """Record the authenticated user of the request being served (no-op outside an audited request)."""
    current = _CURRENT.get()
    if current is not None:
        current["user"] = user


class AuditLog:
    """The audit backend writing to ``path``; :attr:`middleware` goes outermost in the HTTP app."""

    def __init__(self, path: str | Path, authenticate: Authenticate) -> None:
        self.path = Path(path)
        self._authenticate = authenticate
        self._buffer: list[bytes] = []
        self._file = self.path.open("ab")
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self.written = 0  # events handed to the file so far

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._flusher(), name="audit-log-flusher")

    async def close(self) -> None:
        """Stop the flusher and write out everything buffered."""
        if self._closed:
            return
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._flush()
        await asyncio.to_thread(self._file.close)

    async def flush(self) -> None:
        """Write out what is buffered now."""
        await self._flush()

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        received = time.time()
        audit_id = request.headers.get("Audit-ID") or str(uuid.uuid4())
        current: dict[str, Any] = {}
        token = _CURRENT.set(current)
        code = 500
        status: dict[str, Any] | None = None
        try:
            resp = await handler(request)
            code = resp.status
            if code >= 400 and isinstance(resp, web.Response):
                status = _status_of(resp.body)
            if not resp.prepared:
                resp.headers["Audit-ID"] = audit_id
            return resp
        except web.HTTPException as exc:
            code = exc.status
            raise
        finally:
            _CURRENT.reset(token)
            user = current.get("user") or self._user_of(request)
            self._record(request, audit_id, user, code, status, received)

    def _user_of(self, request: web.Request) -> User:
        # A request answered before the API handlers authenticated it (a fault injected, a restart's 503).
        try:
            return self._authenticate(request.headers)
        except errors.StatusError:
            return ANONYMOUS

    def _record(self, request: web.Request, audit_id: str, user: User, code: int, status: dict[str, Any] | None,
                received: float) -> None:
        info = requestinfo.parse(request.method, request.path, request.query)
        user_info: dict[str, Any] = {"username": user.name}
        if user.uid:
            user_info["uid"] = user.uid
        if user.groups:
            user_info["groups"] = list(user.groups)
        event: dict[str, Any] = {
            "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata", "auditID": audit_id,
            "stage": "ResponseComplete", "requestURI": request.raw_path, "verb": info.verb, "user": user_info,
            "sourceIPs": [request.remote] if request.remote else [],
        }
        agent = request.headers.get("User-Agent")
        if agent:
            event["userAgent"] = agent
        if info.is_resource:
            ref = {"resource": info.resource, "namespace": info.namespace, "name": info.name,
                   "apiGroup": info.group, "apiVersion": info.version, "subresource": info.subresource}
            event["objectRef"] = {k: v for k, v in ref.items() if v}
        response: dict[str, Any] = {"metadata": {}}
        if status is not None:
            response.update({k: status[k] for k in ("status", "message", "reason") if status.get(k)})
        response["code"] = code
        event["responseStatus"] = response
        event["requestReceivedTimestamp"] = format_micro_time(received)
        event["stageTimestamp"] = format_micro_time(time.time())
        self._buffer.append(orjson.dumps(event) + b"\n")

    async def _flusher(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_INTERVAL)
            await self._flush()

    async def _flush(self) -> None:
        if not self._buffer:
            return
        batch, self._buffer = self._buffer, []
        await asyncio.to_thread(self._write, b"".join(batch))
        self.written += len(batch)

    def _write(self, data: bytes) -> None:
        self._file.write(data)
        self._file.flush()


def _status_of(body: Any) -> dict[str, Any] | None:
    if not isinstance(body, bytes | bytearray) or not body.startswith(b"{"):
        return None
    try:
        decoded = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return decoded if isinstance(decoded, dict) and decoded.get("kind") == "Status" else None
