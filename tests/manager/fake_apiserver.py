"""A minimal API server for the manager's tests: /version, TokenReview, SubjectAccessReview and Leases.

Tokens: "admin" -> user admin (system:masters), "prometheus" and "viewer" -> those users, others unauthenticated.
Access reviews: admin and prometheus are allowed everything, every other user is denied.
Leases: get/create/update with resourceVersion conflicts (409), as leader election needs.
Every other GET: an empty list, or a watch that stays open and silent (so every informer syncs); a streaming
list (sendInitialEvents=true) first gets its end bookmark, as the collection is empty.
``down = True`` answers every request 503, like an API server that went away.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import orjson
from aiohttp import web
from aiohttp.test_utils import TestServer

USERS = {
    "admin": ("admin", ["system:masters", "system:authenticated"]),
    "prometheus": ("prometheus", ["system:authenticated"]),
    "viewer": ("viewer", ["system:authenticated"]),
}


class FakeApiServer:
    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.reviews: list[dict[str, Any]] = []
        self.leases: dict[tuple[str, str], dict[str, Any]] = {}
        self.down = False
        self._rv = 0
        app = web.Application(middlewares=[self._maybe_down])
        app.router.add_get("/version", self._version)
        app.router.add_post("/apis/authentication.k8s.io/v1/tokenreviews", self._token_review)
        app.router.add_post("/apis/authorization.k8s.io/v1/subjectaccessreviews", self._access_review)
        leases = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
        app.router.add_get(leases + "/{name}", self._get_lease)
        app.router.add_post(leases, self._create_lease)
        app.router.add_put(leases + "/{name}", self._update_lease)
        # Any other GET is a list (empty) or a watch (open, silent), so informers of every controller sync.
        app.router.add_get("/{tail:.*}", self._empty_list_or_watch)
        self._server = TestServer(app, host="127.0.0.1")

    @property
    def url(self) -> str:
        return str(self._server.make_url("")).rstrip("/")

    async def __aenter__(self) -> FakeApiServer:
        await self._server.start_server()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._server.close()

    async def _version(self, request: web.Request) -> web.Response:
        self.calls["version"] += 1
        return web.json_response({"major": "1", "minor": "34", "gitVersion": "v1.34.0-fake", "platform": "linux/amd64"})

    async def _token_review(self, request: web.Request) -> web.Response:
        self.calls["tokenreview"] += 1
        review = await request.json()
        token = review["spec"]["token"]
        status: dict[str, Any] = {"authenticated": False}
        if token in USERS:
            name, groups = USERS[token]
            status = {"authenticated": True, "user": {"username": name, "uid": f"uid-{name}", "groups": groups}}
        return web.json_response({**review, "status": status}, status=201)

    async def _access_review(self, request: web.Request) -> web.Response:
        self.calls["subjectaccessreview"] += 1
        review = await request.json()
        self.reviews.append(review)
        allowed = review["spec"]["user"] in ("admin", "prometheus")
        status = {"allowed": allowed} if allowed else {"allowed": False, "reason": "no RBAC policy matched"}
        return web.json_response({**review, "status": status}, status=201)

    async def _empty_list_or_watch(self, request: web.Request) -> web.StreamResponse:
        self.calls["list-or-watch"] += 1
        if request.query.get("watch") in ("1", "true"):
            resp = web.StreamResponse(headers={"Content-Type": "application/json"})
            await resp.prepare(request)
            if request.query.get("sendInitialEvents") == "true":
                # A bookmark's object: only its metadata is read.
                end = {"metadata": {"resourceVersion": "1", "annotations": {"k8s.io/initial-events-end": "true"}}}
                await resp.write(orjson.dumps({"type": "BOOKMARK", "object": end}) + b"\n")
            timeout = float(request.query.get("timeoutSeconds", "30"))
            try:
                await asyncio.sleep(min(timeout, 30.0))
            except asyncio.CancelledError:
                pass
            return resp
        empty = {"kind": "List", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": []}
        return web.json_response(empty)

    @web.middleware
    async def _maybe_down(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if self.down:
            return _status(503, "ServiceUnavailable", "apiserver is down")
        resp: web.StreamResponse = await handler(request)
        return resp

    async def _get_lease(self, request: web.Request) -> web.Response:
        lease = self.leases.get((request.match_info["ns"], request.match_info["name"]))
        if lease is None:
            return _status(404, "NotFound", f'leases.coordination.k8s.io "{request.match_info["name"]}" not found')
        return web.json_response(lease)

    async def _create_lease(self, request: web.Request) -> web.Response:
        lease = await request.json()
        key = (request.match_info["ns"], lease["metadata"]["name"])
        if key in self.leases:
            return _status(409, "AlreadyExists", f'leases.coordination.k8s.io "{key[1]}" already exists')
        self._rv += 1
        lease["metadata"] = {**lease["metadata"], "namespace": key[0], "resourceVersion": str(self._rv)}
        self.leases[key] = lease
        return web.json_response(lease, status=201)

    async def _update_lease(self, request: web.Request) -> web.Response:
        lease = await request.json()
        key = (request.match_info["ns"], request.match_info["name"])
        current = self.leases.get(key)
        if current is None:
            return _status(404, "NotFound", f'leases.coordination.k8s.io "{key[1]}" not found')
        if lease["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            return _status(409, "Conflict", "the object has been modified; please apply your changes to the latest "
                           "version and try again")
        self._rv += 1
        lease["metadata"] = {**lease["metadata"], "resourceVersion": str(self._rv)}
        self.leases[key] = lease
        return web.json_response(lease)


def _status(code: int, reason: str, message: str) -> web.Response:
    return web.json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                              "message": message, "reason": reason, "code": code}, status=code)
