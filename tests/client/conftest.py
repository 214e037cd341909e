"""An in-test stand-in for the API server: each test scripts the responses it needs, and every
request is recorded so tests assert on what went over the wire."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from controller_manager.client import ApiClient, ClientConfig
from controller_manager.clock import FakeClock

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
T = TypeVar("T")


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)


def json_response(obj: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.Response(body=orjson.dumps(obj), status=status, content_type="application/json",
                        headers=dict(headers or {}))


def status_object(
    code: int, reason: str, message: str = "", details: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    status: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                              "code": code, "reason": reason, "message": message or f"{reason} happened"}
    if details is not None:
        status["details"] = dict(details)
    return status


def reply(obj: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return json_response(obj, status, headers)
    return handler


def fail(code: int, reason: str, message: str = "", headers: Mapping[str, str] | None = None,
         details: Mapping[str, Any] | None = None) -> Handler:
    return reply(status_object(code, reason, message, details), code, headers)


def sequence(*handlers: Handler) -> Handler:
    """Serve the handlers in turn; the last one keeps answering."""
    queue = list(handlers)

    async def handler(request: web.Request) -> web.StreamResponse:
        h = queue.pop(0) if len(queue) > 1 else queue[0]
        return await h(request)
    return handler


class FakeApiServer:
    def __init__(self) -> None:
        self.handlers: dict[tuple[str, str], Handler] = {}
        self.requests: list[Recorded] = []
        self.app = web.Application()
        self.app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self.url = ""

    def on(self, method: str, path: str, handler: Handler) -> None:
        self.handlers[(method, path)] = handler

    def calls(self, method: str, path: str) -> list[Recorded]:
        return [r for r in self.requests if r.method == method and r.path == path]

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.requests.append(Recorded(request.method, request.path, dict(request.query), request.headers, body))
        handler = self.handlers.get((request.method, request.path))
        if handler is None:
            return json_response(status_object(404, "NotFound", f"no route {request.path}"), 404)
        return await handler(request)


@pytest.fixture
async def fake() -> AsyncIterator[FakeApiServer]:
    server = FakeApiServer()
    test_server = TestServer(server.app, host="127.0.0.1")
    await test_server.start_server()
    server.url = str(test_server.make_url("")).rstrip("/")
    yield server
    await test_server.close()


@pytest.fixture
async def client(fake: FakeApiServer) -> AsyncIterator[ApiClient]:
    api = ApiClient(ClientConfig(host=fake.url, authorization="Bearer t0ken"), qps=0,
                    max_retries=3, backoff_base=0.001, backoff_cap=0.002)
    yield api
    await api.close()


async def run_on_fake_time(clock: FakeClock, coro: Coroutine[Any, Any, T], step: float = 0.05) -> T:
    """Run ``coro`` while moving ``clock`` forward whenever something sleeps on it and nothing else
    can progress (real I/O still runs in real time)."""
    task = asyncio.ensure_future(coro)
    try:
        while not task.done():
            # Poll: let the loop run I/O and callbacks, then move fake time only if a timer waits.
            await asyncio.wait({task}, timeout=0.002)
            if not task.done() and clock.pending_timers():
                clock.advance(step)
        return task.result()
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
