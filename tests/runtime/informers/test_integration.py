"""End to end over HTTP: the real ApiClient against an in-test server speaking the list/watch protocol.

The server pages lists (``limit``/``continue``), streams watches as line-delimited JSON, replays history after the
requested resourceVersion, and answers a too-old resourceVersion the way the API server does: an ``ERROR`` event
carrying a 410 Status, or (for a watch opened on an expired version) HTTP 410.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from controller_manager.api.resources import PODS
from controller_manager.client import ApiClient, ClientConfig
from controller_manager.clock import FakeClock
from controller_manager.runtime.informers import Added, Deleted, SharedInformerFactory, Updated

from .conftest import Runner
from .fakes import Recorder

pytestmark = pytest.mark.timeout(30)

_GONE = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Expired",
         "code": 410, "message": "too old resource version: 1 (2)"}


class PodServer:
    def __init__(self, *, http_410: bool = False) -> None:
        self.rv = 100
        self.pods: dict[str, dict[str, Any]] = {}
        self.history: list[tuple[int, str, dict[str, Any]]] = []
        self.compacted = 0
        self.http_410 = http_410  # answer an expired watch with HTTP 410 instead of an ERROR event
        self.streams: list[asyncio.Queue[tuple[str, Any]]] = []
        self.held = False
        self.lists: list[dict[str, str]] = []
        self.watches: list[dict[str, str]] = []

    # -- scripting --------------------------------------------------------------------------------

    def _write(self, event_type: str, pod: dict[str, Any]) -> None:
        self.rv += 1
        pod["metadata"]["resourceVersion"] = str(self.rv)
        self.history.append((self.rv, event_type, copy.deepcopy(pod)))
        if not self.held:
            for q in self.streams:
                q.put_nowait((event_type, copy.deepcopy(pod)))

    def add(self, name: str, node: str = "") -> None:
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                            "managedFields": [{"manager": "test", "operation": "Update"}]},
               "spec": {"nodeName": node} if node else {}}
        self.pods[name] = pod
        self._write("ADDED", pod)

    def update(self, name: str, node: str) -> None:
        pod = copy.deepcopy(self.pods[name])
        pod["spec"]["nodeName"] = node
        self.pods[name] = pod
        self._write("MODIFIED", pod)

    def delete(self, name: str) -> None:
        self._write("DELETED", self.pods.pop(name))

    def compact(self) -> None:
        self.compacted = self.rv
        self.history.clear()

    def send(self, kind: str, payload: Any = None) -> None:
        for q in self.streams:
            q.put_nowait((kind, payload))

    # -- HTTP -------------------------------------------------------------------------------------

    async def pods_handler(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") in ("true", "1"):
            return await self._watch(request)
        self.lists.append(dict(request.query))
        items = [self.pods[name] for name in sorted(self.pods)]
        start = int(request.query.get("continue") or 0)
        limit = int(request.query.get("limit") or 0) or len(items)
        page = items[start:start + limit]
        meta: dict[str, Any] = {"resourceVersion": str(self.rv)}
        if start + limit < len(items):
            meta["continue"] = str(start + limit)
        body = {"kind": "PodList", "apiVersion": "v1", "metadata": meta, "items": page}
        return web.Response(body=orjson.dumps(body), content_type="application/json")

    async def _watch(self, request: web.Request) -> web.StreamResponse:
        self.watches.append(dict(request.query))
        since = int(request.query.get("resourceVersion") or 0)
        if since < self.compacted and self.http_410:
            return web.Response(body=orjson.dumps(_GONE), status=410, content_type="application/json")
        resp = web.StreamResponse()
        resp.content_type = "application/json"
        await resp.prepare(request)
        if since < self.compacted:
            await resp.write(orjson.dumps({"type": "ERROR", "object": _GONE}) + b"\n")
            return resp
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        backlog = [(t, o) for rv, t, o in self.history if rv > since]
        self.streams.append(queue)
        try:
            for t, o in backlog:
                await resp.write(orjson.dumps({"type": t, "object": o}) + b"\n")
            while True:
                kind, payload = await queue.get()
                if kind == "END":
                    break
                if kind == "GONE":
                    await resp.write(orjson.dumps({"type": "ERROR", "object": _GONE}) + b"\n")
                    break
                await resp.write(orjson.dumps({"type": kind, "object": payload}) + b"\n")
        finally:
            self.streams.remove(queue)
        return resp


@pytest.fixture
async def pod_server() -> PodServer:
    return PodServer()


@pytest.fixture
async def http(pod_server: PodServer) -> AsyncIterator[TestServer]:
    app = web.Application()
    app.router.add_get("/api/v1/pods", pod_server.pods_handler)
    server = TestServer(app)
    await server.start_server()
    yield server
    pod_server.send("END")  # let open watch handlers finish before the server goes
    await server.close()


@pytest.fixture
async def client(http: TestServer) -> AsyncIterator[ApiClient]:
    async with ApiClient(ClientConfig(host=str(http.make_url("")).rstrip("/")), qps=0) as c:
        yield c


async def until(condition: Any, clock: FakeClock | None = None, timeout: float = 10.0) -> None:
    """Poll ``condition`` with a real deadline, nudging the fake clock (reflector backoffs) as time passes."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError("condition not met before the deadline")
        if clock is not None:
            clock.advance(0.05)
        await asyncio.sleep(0.005)


def _summary(events: list[Any]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for e in events:
        if isinstance(e, Added):
            out.append(("Added", e.obj["metadata"]["name"]))
        elif isinstance(e, Updated):
            out.append(("Updated", e.new["metadata"]["name"], e.new["spec"].get("nodeName")))
        else:
            assert isinstance(e, Deleted)
            out.append(("Deleted", e.obj["metadata"]["name"], e.final_state_unknown))
    return out


async def test_relist_after_410_error_event_over_http(pod_server: PodServer, client: ApiClient,
                                                      run: Runner) -> None:
    for name in ("a", "b", "c", "d", "e"):
        pod_server.add(name)
    clock = FakeClock()
    factory = SharedInformerFactory(client, clock, watch_list=False)  # a server without streaming lists
    informer = factory.informer(PODS)
    seen = Recorder()
    informer.add_handler(seen)
    run(factory.run)
    assert await factory.wait_for_cache_sync()
    assert sorted(informer.store.keys()) == [f"default/{n}" for n in "abcde"]
    assert "managedFields" not in informer.store.get("default/a")["metadata"]  # the default transform ran
    assert pod_server.lists[0]["limit"] == "500"
    await until(lambda: len(pod_server.streams) == 1)
    watch = pod_server.watches[0]
    assert watch["resourceVersion"] == "105"
    assert watch["allowWatchBookmarks"] == "true"
    assert 300 <= int(watch["timeoutSeconds"]) < 600

    seen.clear()
    pod_server.add("f", node="n1")
    await until(lambda: len(seen.events) == 1)
    assert _summary(seen.events) == [("Added", "f")]
    assert [p["metadata"]["name"] for p in informer.store.by_index("node-name", "n1")] == ["f"]

    # The watch falls behind, the history it would need is compacted, and the server says 410 on the stream.
    seen.clear()
    pod_server.held = True
    pod_server.update("b", node="n2")
    pod_server.delete("c")
    pod_server.add("g")
    pod_server.compact()
    pod_server.held = False
    kept = informer.store.get("default/a")
    pod_server.send("GONE")
    await until(lambda: len(pod_server.lists) == 2, clock)
    await until(lambda: len(seen.events) == 3)
    # Changes in list order, then what the list no longer has.
    assert _summary(seen.events) == [("Updated", "b", "n2"), ("Added", "g"), ("Deleted", "c", True)]
    assert informer.store.get("default/a") is kept  # unchanged: no event, same cached object
    assert sorted(informer.store.keys()) == [f"default/{n}" for n in "abdefg"]
    await until(lambda: len(pod_server.watches) == 2)
    assert pod_server.watches[1]["resourceVersion"] == str(pod_server.rv)

    # Live events flow again on the new watch.
    seen.clear()
    pod_server.delete("a")
    await until(lambda: len(seen.events) == 1)
    assert _summary(seen.events) == [("Deleted", "a", False)]


async def test_relist_after_http_410_on_rewatch(client: ApiClient, pod_server: PodServer, run: Runner) -> None:
    pod_server.http_410 = True
    pod_server.add("a")
    pod_server.add("b")
    clock = FakeClock()
    factory = SharedInformerFactory(client, clock, watch_list=False)  # a server without streaming lists
    informer = factory.informer(PODS)
    seen = Recorder()
    informer.add_handler(seen)
    run(factory.run)
    assert await factory.wait_for_cache_sync()
    await until(lambda: len(pod_server.streams) == 1)
    pod_server.add("c")
    await until(lambda: len(seen.events) == 3)

    # While the watch is quiet, "b" is deleted and history compacted; the watch then ends normally (its timeout).
    seen.clear()
    pod_server.held = True
    pod_server.delete("b")
    pod_server.compact()
    pod_server.held = False
    pod_server.send("END")
    await until(lambda: len(pod_server.lists) == 2, clock)
    await until(lambda: len(seen.events) == 1)
    assert _summary(seen.events) == [("Deleted", "b", True)]
    assert sorted(informer.store.keys()) == ["default/a", "default/c"]
