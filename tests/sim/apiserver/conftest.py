"""Fixtures for the API server emulator's tests: an ApiServer on a FakeClock and an HTTP client to it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

from controller_manager.clock import FakeClock
from controller_manager.sim.apiserver import ApiServer, ApiServerOptions, build_app

ADMIN_TOKEN = "admin-token"
VIEWER_TOKEN = "viewer-token"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
VIEWER = {"Authorization": f"Bearer {VIEWER_TOKEN}"}


def pod(name: str, *, labels: dict[str, str] | None = None, node: str | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"containers": [{"name": "c", "image": "nginx"}], **spec}
    if node:
        body["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}}, "spec": body}


def deployment(name: str, replicas: int = 1) -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}


def configmap(name: str, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **meta}, "data": {"k": "v"}}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def options() -> ApiServerOptions:
    return ApiServerOptions(admin_token=ADMIN_TOKEN, viewer_token=VIEWER_TOKEN, bookmark_interval=5.0)


@pytest.fixture
def api(clock: FakeClock, options: ApiServerOptions) -> ApiServer:
    return ApiServer(clock=clock, options=options)


class Client:
    """A thin JSON client: every call returns (status, decoded body)."""

    def __init__(self, tc: TestClient[Any, Any]) -> None:
        self.tc = tc

    async def call(self, method: str, path: str, body: Any = None, *, headers: dict[str, str] | None = None,
                   params: dict[str, str] | None = None, content_type: str = "application/json",
                   raw: bytes | None = None) -> tuple[int, Any]:
        hdrs = {**ADMIN, **(headers or {})}
        data = raw
        if body is not None:
            data = orjson.dumps(body)
        if data is not None:
            hdrs.setdefault("Content-Type", content_type)
        resp = await self.tc.request(method, path, data=data, headers=hdrs, params=params)
        text = await resp.read()
        try:
            return resp.status, orjson.loads(text)
        except orjson.JSONDecodeError:
            return resp.status, text.decode()

    async def get(self, path: str, **kw: Any) -> tuple[int, Any]:
        return await self.call("GET", path, **kw)

    async def post(self, path: str, body: Any, **kw: Any) -> tuple[int, Any]:
        return await self.call("POST", path, body, **kw)

    async def put(self, path: str, body: Any, **kw: Any) -> tuple[int, Any]:
        return await self.call("PUT", path, body, **kw)

    async def patch(self, path: str, body: Any, patch_type: str = "merge", **kw: Any) -> tuple[int, Any]:
        ctype = {"merge": "application/merge-patch+json", "json": "application/json-patch+json",
                 "strategic": "application/strategic-merge-patch+json"}[patch_type]
        return await self.call("PATCH", path, body, content_type=ctype, **kw)

    async def delete(self, path: str, body: Any = None, **kw: Any) -> tuple[int, Any]:
        return await self.call("DELETE", path, body, **kw)

    async def watch(self, path: str, params: dict[str, str], n: int,
                    headers: dict[str, str] | None = None) -> list[dict[str, Any]]:
        """Up to ``n`` events of a JSON watch on ``path`` (fewer if it ends or stays quiet for 2 s)."""
        resp = await self.tc.get(path, params={**params, "watch": "true"}, headers={**ADMIN, **(headers or {})})
        assert resp.status == 200
        events: list[dict[str, Any]] = []
        try:
            while len(events) < n:
                line = await asyncio.wait_for(resp.content.readline(), 2)
                if not line:
                    break
                events.append(orjson.loads(line))
        finally:
            resp.close()
        return events


@pytest.fixture
async def client(api: ApiServer) -> AsyncIterator[Client]:
    async with TestClient(TestServer(build_app(api))) as tc:
        yield Client(tc)
