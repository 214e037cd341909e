"""The REST verbs as the API server sees them: paths, query, headers, bodies; paging and discovery."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import re
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
import uvloop
from aiohttp import web
from aiohttp.http_writer import StreamWriter
from aiohttp.test_utils import TestServer

from controller_manager.api.resources import DEPLOYMENTS, NAMESPACES, PODS, Resource
from controller_manager.client import ApiClient, ClientConfig, Conflict, Forbidden, NotFound, WriteFenced
from controller_manager.client.wire import METADATA_LIST_ACCEPT
from controller_manager.sim import tls
from tests.client.conftest import FakeApiServer, fail, reply, sequence, status_object

POD: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-1", "namespace": "ns", "resourceVersion": "7"},
    "spec": {"containers": [{"name": "c", "image": "nginx"}]},
}


async def test_get_sends_path_and_headers(fake: FakeApiServer, client: ApiClient) -> None:
    fake.on("GET", "/api/v1/namespaces/ns/pods/web-1", reply(POD))
    assert await client.get(PODS, "web-1", "ns") == POD
    (req,) = fake.requests
    assert req.headers["Authorization"] == "Bearer t0ken"
    assert req.headers["Accept"] == "application/json"
    assert re.fullmatch(r"controller-manager/0\.1\.0 \([a-z0-9]+/[a-z0-9_]+\)", req.headers["User-Agent"])


async def test_cluster_scoped_and_grouped_paths(fake: FakeApiServer, client: ApiClient) -> None:
    fake.on("GET", "/api/v1/namespaces/kube-system", reply({"kind": "Namespace"}))
    fake.on("GET", "/apis/apps/v1/namespaces/ns/deployments/d", reply({"kind": "Deployment"}))
    assert (await client.get(NAMESPACES, "kube-system"))["kind"] == "Namespace"
    assert (await client.get(DEPLOYMENTS, "d", "ns"))["kind"] == "Deployment"


async def test_list_one_page_sends_query(fake: FakeApiServer, client: ApiClient) -> None:
    fake.on("GET", "/api/v1/namespaces/ns/pods", reply({"kind": "PodList", "metadata": {"resourceVersion": "9"},
                                                        "items": [POD]}))
    page = await client.list(PODS, "ns", label_selector="app=web,tier!=db", field_selector="spec.nodeName=n1",
                             limit=50, continue_token="abc", resource_version="0")
    assert page["items"] == [POD]
    assert fake.requests[0].query == {"labelSelector": "app=web,tier!=db", "fieldSelector": "spec.nodeName=n1",
                                      "limit": "50", "continue": "abc", "resourceVersion": "0"}


async def test_list_all_pages_through_continue(fake: FakeApiServer, client: ApiClient) -> None:
    pods = [{"metadata": {"name": f"p{i}"}} for i in range(7)]

    async def pages(request: web.Request) -> web.StreamResponse:
        start = int(request.query.get("continue", "0"))
        limit = int(request.query["limit"])
        chunk = pods[start:start + limit]
        meta: dict[str, Any] = {"resourceVersion": "100"}
        if start + limit < len(pods):
            meta["continue"] = str(start + limit)
        return web.json_response({"kind": "PodList", "metadata": meta, "items": chunk})

    fake.on("GET", "/api/v1/pods", pages)
    items, version = await client.list_all(PODS, label_selector="app=web", page_size=3)
    assert [p["metadata"]["name"] for p in items] == [f"p{i}" for i in range(7)]
    assert version == "100"
    assert [r.query.get("continue") for r in fake.requests] == [None, "3", "6"]
    assert all(r.query["labelSelector"] == "app=web" and r.query["limit"] == "3" for r in fake.requests)


async def test_list_all_falls_back_to_full_list_when_continue_expires(fake: FakeApiServer, client: ApiClient) -> None:
    async def pages(request: web.Request) -> web.StreamResponse:
        if "continue" in request.query:
            return web.json_response(status_object(410, "Expired", "continue token too old"), status=410)
        if "limit" in request.query:
            return web.json_response({"metadata": {"resourceVersion": "5", "continue": "x"}, "items": [{"n": 1}]})
        return web.json_response({"metadata": {"resourceVersion": "8"}, "items": [{"n": 1}, {"n": 2}]})

    fake.on("GET", "/api/v1/namespaces/ns/pods", pages)
    items, version = await client.list_all(PODS, "ns", page_size=1)
    assert (items, version) == ([{"n": 1}, {"n": 2}], "8")
    assert "limit" not in fake.requests[-1].query


async def test_metadata_only_list_accept_header(fake: FakeApiServer, client: ApiClient) -> None:
    fake.on("GET", "/api/v1/pods", reply({"kind": "PartialObjectMetadataList", "metadata": {"resourceVersion": "1"},
                                          "items": [{"kind": "PartialObjectMetadata", "metadata": {"name": "a"}}]}))
    items, _ = await client.list_all(PODS, metadata_only=True)
    assert items[0]["kind"] == "PartialObjectMetadata"
    assert fake.requests[0].headers["Accept"] == METADATA_LIST_ACCEPT
    assert METADATA_LIST_ACCEPT == "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"


async def test_create_posts_to_the_objects_namespace(fake: FakeApiServer, client: ApiClient) -> None:
    fake.on("POST", "/api/v1/namespaces/ns/pods", reply({**POD, "metadata": {**POD["metadata"], "uid": "u1"}}, 201))
    created = await client.create(PODS, POD)
    assert created["metadata"]["uid"] == "u1"
    (req,) = fake.requests
    assert req.json() == POD
    assert req.headers["Content-Type"] == "application/json"
    assert "uid" not in POD["metadata"]  # the caller's dict is untouched


async def test_create_with_explicit_namespace(fake: FakeApiServer, client: ApiClient) -> None:
    fake.on("POST", "/api/v1/namespaces/other/pods", reply(POD, 201))
    await client.create(PODS, {"metadata": {"generateName": "web-"}}, namespace="other")
    assert fake.requests[0].path == "/api/v1/namespaces/other/pods"


async def test_update_and_update_status(fake: FakeApiServer, client: ApiClient) -> None:
    fake.on("PUT", "/api/v1/namespaces/ns/pods/web-1", reply(POD))
    fake.on("PUT", "/api/v1/namespaces/ns/pods/web-1/status", reply(POD))
    await client.update(PODS, POD)
    await client.update_status(PODS, POD)
    assert [r.path for r in fake.requests] == ["/api/v1/namespaces/ns/pods/web-1",
                                               "/api/v1/namespaces/ns/pods/web-1/status"]
    assert all(r.json()["metadata"]["resourceVersion"] == "7" for r in fake.requests)


@pytest.mark.parametrize(
    ("patch_type", "content_type", "patch"),
    [
        pytest.param("merge", "application/merge-patch+json", {"metadata": {"labels": {"a": "b"}}}, id="merge"),
        pytest.param("strategic", "application/strategic-merge-patch+json", {"spec": {"replicas": 3}},
                     id="strategic"),
        pytest.param("json", "application/json-patch+json", [{"op": "replace", "path": "/spec/replicas",
                                                             "value": 3}], id="json"),
        pytest.param("merge", "application/merge-patch+json", '{"spec":{"paused":true}}', id="pre-encoded-str"),
        pytest.param("merge", "application/merge-patch+json", b'{"spec":{"paused":true}}', id="pre-encoded-bytes"),
    ],
)
async def test_patch_content_types(fake: FakeApiServer, client: ApiClient, patch_type: str, content_type: str,
                                   patch: Any) -> None:
    fake.on("PATCH", "/apis/apps/v1/namespaces/ns/deployments/d", reply({"kind": "Deployment"}))
    await client.patch(DEPLOYMENTS, "d", patch, "ns", patch_type=patch_type)
    (req,) = fake.requests
    assert req.headers["Content-Type"] == content_type
    expected = orjson.loads(patch) if isinstance(patch, str | bytes) else patch
    assert req.json() == expected


async def test_patch_subresource_and_bad_type(fake: FakeApiServer, client: ApiClient) -> None:
    fake.on("PATCH", "/apis/apps/v1/namespaces/ns/deployments/d/status", reply({"kind": "Deployment"}))
    await client.patch(DEPLOYMENTS, "d", {"status": {"replicas": 1}}, "ns", subresource="status")
    assert fake.requests[0].path.endswith("/d/status")
    with pytest.raises(ValueError, match="unknown patch type 'apply'"):
        await client.patch(DEPLOYMENTS, "d", {}, "ns", patch_type="apply")


async def test_delete_sends_delete_options(fake: FakeApiServer, client: ApiClient) -> None:
    fake.on("DELETE", "/api/v1/namespaces/ns/pods/web-1", reply({"kind": "Status", "status": "Success"}))
    result = await client.delete(PODS, "web-1", "ns", propagation_policy="Background", grace_period_seconds=0,
                                 uid="u-1", resource_version="7")
    assert result["status"] == "Success"
    (req,) = fake.requests
    assert req.headers["Content-Type"] == "application/json"
    assert req.json() == {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background",
                          "gracePeriodSeconds": 0, "preconditions": {"uid": "u-1", "resourceVersion": "7"}}


async def test_delete_without_options_sends_no_body(fake: FakeApiServer, client: ApiClient) -> None:
    fake.on("DELETE", "/api/v1/namespaces/ns/pods/web-1", reply(POD))
    await client.delete(PODS, "web-1", "ns")
    assert fake.requests[0].body == b""


async def test_delete_precondition_failure_is_conflict(fake: FakeApiServer, client: ApiClient) -> None:
    fake.on("DELETE", "/api/v1/namespaces/ns/pods/web-1",
            fail(409, "Conflict", "Precondition failed: UID in precondition: u-1, UID in object meta: u-2"))
    with pytest.raises(Conflict, match="Precondition failed"):
        await client.delete(PODS, "web-1", "ns", uid="u-1")
    assert len(fake.requests) == 1


async def test_scale_subresource(fake: FakeApiServer, client: ApiClient) -> None:
    scale = {"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": {"name": "d", "namespace": "ns"},
             "spec": {"replicas": 2}, "status": {"replicas": 2, "selector": "app=web"}}
    fake.on("GET", "/apis/apps/v1/namespaces/ns/deployments/d/scale", reply(scale))
    fake.on("PUT", "/apis/apps/v1/namespaces/ns/deployments/d/scale", reply(scale))
    assert (await client.get_scale(DEPLOYMENTS, "d", "ns"))["status"]["selector"] == "app=web"
    await client.update_scale(DEPLOYMENTS, "d", "ns", 5)
    assert fake.requests[1].json() == {"kind": "Scale", "apiVersion": "autoscaling/v1",
                                       "metadata": {"name": "d", "namespace": "ns"}, "spec": {"replicas": 5}}


async def test_raw_request(fake: FakeApiServer, client: ApiClient) -> None:
    async def text(request: web.Request) -> web.StreamResponse:
        return web.Response(text="ok", content_type="text/plain")

    fake.on("GET", "/healthz", text)
    fake.on("POST", "/apis/authentication.k8s.io/v1/tokenreviews", reply({"status": {"authenticated": True}}, 201))
    assert await client.request("GET", "/healthz") == "ok"
    review = await client.request("post", "/apis/authentication.k8s.io/v1/tokenreviews",
                                  body={"spec": {"token": "x"}}, params={"dryRun": "All"})
    assert review == {"status": {"authenticated": True}}
    assert fake.requests[1].query == {"dryRun": "All"}
    assert fake.requests[1].json() == {"spec": {"token": "x"}}
    with pytest.raises(NotFound):
        await client.request("GET", "/nowhere")


async def test_closed_client_refuses_work(fake: FakeApiServer) -> None:
    api = ApiClient(ClientConfig(host=fake.url), qps=0)
    await api.close()
    with pytest.raises(RuntimeError, match="closed"):
        await api.get(PODS, "x", "ns")


def _resource_list(group_version: str, resources: list[dict[str, Any]]) -> dict[str, Any]:
    return {"kind": "APIResourceList", "groupVersion": group_version, "resources": resources}


async def test_discovery_walks_every_group_version(fake: FakeApiServer, client: ApiClient) -> None:
    fake.on("GET", "/api", reply({"kind": "APIVersions", "versions": ["v1"]}))
    fake.on("GET", "/apis", reply({"kind": "APIGroupList", "groups": [
        {"name": "apps", "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
         "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"}},
        {"name": "example.com", "versions": [{"groupVersion": "example.com/v2", "version": "v2"},
                                             {"groupVersion": "example.com/v1", "version": "v1"}]},
        {"name": "metrics.k8s.io", "versions": [{"groupVersion": "metrics.k8s.io/v1beta1", "version": "v1beta1"}]},
    ]}))
    fake.on("GET", "/api/v1", reply(_resource_list("v1", [
        {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod", "shortNames": ["po"],
         "categories": ["all"], "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]},
        {"name": "pods/status", "singularName": "", "namespaced": True, "kind": "Pod", "verbs": ["get", "patch"]},
        {"name": "pods/eviction", "namespaced": True, "group": "policy", "version": "v1", "kind": "Eviction",
         "verbs": ["create"]},
        {"name": "nodes", "singularName": "node", "namespaced": False, "kind": "Node", "verbs": ["get", "list"]},
    ])))
    fake.on("GET", "/apis/apps/v1", reply(_resource_list("apps/v1", [
        {"name": "deployments", "namespaced": True, "kind": "Deployment", "verbs": ["get"]},
        {"name": "deployments/scale", "namespaced": True, "group": "autoscaling", "version": "v1", "kind": "Scale",
         "verbs": ["get", "update"]},
        {"name": "deployments/status", "namespaced": True, "kind": "Deployment", "verbs": ["get"]},
    ])))
    fake.on("GET", "/apis/example.com/v2", reply(_resource_list("example.com/v2", [
        {"name": "widgets", "namespaced": True, "kind": "Widget", "verbs": ["get", "list", "watch"]}])))
    fake.on("GET", "/apis/example.com/v1", reply(_resource_list("example.com/v1", [
        {"name": "widgets", "namespaced": True, "kind": "Widget", "verbs": ["get"]}])))
    # An aggregated API that is down: skipped, not fatal.
    fake.on("GET", "/apis/metrics.k8s.io/v1beta1", fail(503, "ServiceUnavailable", "metrics-server unavailable"))
    client._max_retries = 0

    found = await client.discover()
    by_id = {(r.group, r.version, r.plural): r for r in found}
    assert list(by_id) == [("", "v1", "pods"), ("", "v1", "nodes"), ("apps", "v1", "deployments"),
                           ("example.com", "v2", "widgets"), ("example.com", "v1", "widgets")]
    assert by_id[("", "v1", "pods")] == Resource("", "v1", "pods", "Pod", True, ("po",), ("status", "eviction"),
                                                 ("create", "delete", "get", "list", "patch", "update", "watch"),
                                                 ("all",), "pod")
    assert by_id[("", "v1", "nodes")].namespaced is False
    assert by_id[("apps", "v1", "deployments")].subresources == ("scale", "status")


async def test_discovery_core_failure_raises(fake: FakeApiServer, client: ApiClient) -> None:
    fake.on("GET", "/api", reply({"versions": ["v1"]}))
    fake.on("GET", "/apis", reply({"groups": []}))
    fake.on("GET", "/api/v1", sequence(fail(403, "Forbidden", "no discovery for you")))
    with pytest.raises(Forbidden):
        await client.discover()


async def test_a_fenced_client_sends_no_write_but_still_reads(fake: FakeApiServer, client: ApiClient) -> None:
    fake.on("GET", "/api/v1/namespaces/ns/pods/web-1", reply(POD))
    fake.on("POST", "/api/v1/namespaces/ns/pods", reply(POD, 201))
    fake.on("DELETE", "/api/v1/namespaces/ns/pods/web-1", reply(POD))
    holds = [True]
    client.fence_writes(lambda: holds[0])
    assert (await client.create(PODS, POD, "ns"))["metadata"]["name"] == "web-1"
    holds[0] = False
    with pytest.raises(WriteFenced) as refused:
        await client.create(PODS, POD, "ns")
    assert refused.value.status == 0
    with pytest.raises(WriteFenced):
        await client.delete(PODS, "web-1", "ns")
    assert (await client.get(PODS, "web-1", "ns"))["metadata"]["name"] == "web-1"
    assert [(r.method, r.path) for r in fake.requests] == [("POST", "/api/v1/namespaces/ns/pods"),
                                                            ("GET", "/api/v1/namespaces/ns/pods/web-1")]


async def test_the_fence_is_checked_again_when_the_write_has_its_connection(fake: FakeApiServer,
                                                                          client: ApiClient) -> None:
    # A process paused after the first check (waiting on a TLS handshake, a busy loop) and woken after it lost
    # the Lease: found at connection time, the write is still not sent. (The chaos soak saw such writes.)
    fake.on("POST", "/api/v1/namespaces/ns/pods", reply(POD, 201))
    fake.on("GET", "/api/v1/namespaces/ns/pods/web-1", reply(POD))
    answers = iter([True, False])
    client.fence_writes(lambda: next(answers, False))
    with pytest.raises(WriteFenced, match="POST /api/v1/namespaces/ns/pods: not sent"):
        await client.create(PODS, POD, "ns")
    assert (await client.get(PODS, "web-1", "ns"))["metadata"]["name"] == "web-1"  # reads are never fenced
    for _ in range(2):  # on a fresh connection and on a pooled one alike
        answers = iter([True, False])
        with pytest.raises(WriteFenced):
            await client.create(PODS, POD, "ns")
    assert [(r.method, r.path) for r in fake.requests] == [("GET", "/api/v1/namespaces/ns/pods/web-1")]


async def test_the_fence_is_checked_again_as_the_body_is_written(fake: FakeApiServer, client: ApiClient) -> None:
    # aiohttp writes a request's buffered headers and its body from a task of its own, a loop turn (or many, on a
    # busy loop) after the connection is taken: a process stopped then (SIGSTOP past its lease) sent a burst of
    # writes the moment it woke (the chaos soak, seed 7). Allowed at the first two checks, refused at the third,
    # nothing reaches the server, and the pooled connection is not left half-written.
    fake.on("POST", "/api/v1/namespaces/ns/pods", reply(POD, 201))
    fake.on("PUT", "/api/v1/namespaces/ns/pods/web-1", reply(POD))
    fake.on("GET", "/api/v1/namespaces/ns/pods/web-1", reply(POD))
    for write in (lambda: client.create(PODS, POD, "ns"), lambda: client.update(PODS, POD)):
        answers = iter([True, True, False])
        client.fence_writes(lambda: next(answers, False))  # noqa: B023 (each write reads its own answers)
        with pytest.raises(WriteFenced, match=r"/api/v1/namespaces/ns/pods.*: not sent"):
            await write()
        assert (await client.get(PODS, "web-1", "ns"))["metadata"]["name"] == "web-1"
    client.fence_writes(lambda: True)
    assert (await client.create(PODS, POD, "ns"))["metadata"]["name"] == "web-1"
    assert [(r.method, r.path) for r in fake.requests] == [("GET", "/api/v1/namespaces/ns/pods/web-1")] * 2 + [
        ("POST", "/api/v1/namespaces/ns/pods")]


async def test_a_fenced_write_leaves_no_cyclic_garbage(fake: FakeApiServer, client: ApiClient) -> None:
    # Every object a write request makes (request, response, writer, traces: ~40) must go when the request ends,
    # by reference counting: left in a cycle, they wait for a full collection, which the daemon runs every few
    # minutes, and a calm chaos-soak leader's RSS rose and fell by megabytes between them.
    fake.on("POST", "/api/v1/namespaces/ns/pods", reply(POD, 201))
    fake.on("PUT", "/api/v1/namespaces/ns/pods/web-1", reply(POD))
    fake.on("GET", "/api/v1/namespaces/ns/pods/web-1", reply(POD))
    client.fence_writes(lambda: True)
    await client.create(PODS, POD, "ns")  # the pool's connection and the session made before counting
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for _ in range(3):
            await client.create(PODS, POD, "ns")
            await client.update(PODS, POD)
            await client.get(PODS, "web-1", "ns")
        gc.collect()
        left = sorted({type(o).__qualname__ for o in gc.garbage})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert left == []


@contextlib.asynccontextmanager
async def fake_server(scheme: str) -> AsyncIterator[tuple[FakeApiServer, ApiClient]]:
    """A fake API server over plain HTTP or TLS, and a client of it, on the running loop."""
    server = FakeApiServer()
    cert = tls.generate() if scheme == "https" else None
    test_server = TestServer(server.app, host="127.0.0.1", scheme=scheme)
    await test_server.start_server(ssl=cert.server_context() if cert else None)
    server.url = str(test_server.make_url("")).rstrip("/")
    api = ApiClient(ClientConfig(host=server.url, ssl_context=cert.client_context() if cert else None), qps=0,
                    max_retries=0)
    try:
        yield server, api
    finally:
        await api.close()
        await test_server.close()


async def paused_while_the_request_is_built(scheme: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The 60-minute soak caught an Event PATCH and a pod create stopped by SIGSTOP between the fence check and the
    # send, sent on waking 7-9 s after the Lease had passed to another replica: aiohttp still runs Python there
    # (trace signals, the headers merged with the body). Here the lease clock runs out exactly there (as it would
    # for a paused process): the call handing the bytes to the transport refuses.
    async with fake_server(scheme) as (fake, client):
        fake.on("PATCH", "/api/v1/namespaces/ns/pods/web-1", reply(POD))
        leading = True
        client.fence_writes(lambda: leading)
        build = StreamWriter._send_headers_with_payload

        def paused_here(self: StreamWriter, *args: Any, **kwargs: Any) -> Any:
            nonlocal leading
            leading = False  # the process "wakes" here, its lease clock run out
            return build(self, *args, **kwargs)

        monkeypatch.setattr(StreamWriter, "_send_headers_with_payload", paused_here)
        for _ in range(2):  # a fresh connection, then (the refusal closed it) another fresh one
            with pytest.raises(WriteFenced, match=r"PATCH /api/v1/namespaces/ns/pods/web-1: not sent"):
                await client.patch(PODS, "web-1", {"metadata": {"labels": {"a": "b"}}}, "ns")
            leading = True
        assert fake.requests == []
        monkeypatch.undo()
        for _ in range(2):  # a fresh connection, then the same one reused
            patched = await client.patch(PODS, "web-1", {"metadata": {"labels": {"a": "b"}}}, "ns")
            assert patched["metadata"]["name"] == "web-1"
        assert [(r.method, r.path) for r in fake.requests] == [("PATCH", "/api/v1/namespaces/ns/pods/web-1")] * 2


@pytest.mark.parametrize("scheme", ["http", "https"])
async def test_a_pause_while_the_request_is_being_built_sends_nothing(
    scheme: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await paused_while_the_request_is_built(scheme, monkeypatch)


def test_a_pause_while_the_request_is_being_built_sends_nothing_on_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    # The daemon's own loop: uvloop's TLS transport is compiled (nothing of it can be patched), so the check has to
    # sit above it, in the writer.
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(paused_while_the_request_is_built("https", monkeypatch))


def gated_pod_reads() -> tuple[web.Application, asyncio.Event, list[asyncio.BaseTransport]]:
    """A server whose pod reads wait for the gate, recording every connection (transport) they arrive on."""
    gate = asyncio.Event()
    transports: list[asyncio.BaseTransport] = []

    async def handler(request: web.Request) -> web.Response:
        if request.transport is not None and request.transport not in transports:
            transports.append(request.transport)
        await gate.wait()
        return web.json_response({"kind": "Pod", "metadata": {"name": request.match_info["name"]}})

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/default/pods/{name}", handler)
    return app, gate, transports


async def test_idle_connections_beyond_client_gos_25_per_host_are_closed() -> None:
    """A burst of 40 concurrent reads opens 40 connections; once they are handed back, the pool keeps 25 (Go's
    MaxIdleConnsPerHost in client-go's transport) and closes the rest, and still serves from those."""
    from controller_manager.client.rest import MAX_IDLE_CONNECTIONS_PER_HOST
    from tests.runtime.informers.fakes import eventually

    app, gate, transports = gated_pod_reads()
    async with TestServer(app) as server:
        api = ApiClient(ClientConfig(host=str(server.make_url("")).rstrip("/")), qps=0)
        try:
            reads = [asyncio.create_task(api.get(PODS, f"p{i}", "default")) for i in range(40)]
            await eventually(lambda: len(transports) == 40, timeout=10)
            gate.set()
            await asyncio.gather(*reads)
            await eventually(lambda: sum(not t.is_closing() for t in transports) <= MAX_IDLE_CONNECTIONS_PER_HOST,
                             timeout=10)
            assert sum(not t.is_closing() for t in transports) == MAX_IDLE_CONNECTIONS_PER_HOST
            assert (await api.get(PODS, "again", "default"))["metadata"]["name"] == "again"
            assert len(transports) == 40  # served on a kept connection, none opened
        finally:
            await api.close()


async def test_clients_of_one_config_share_one_pool_of_25_idle_connections() -> None:
    """client-go hands every clientset built from one rest config the same transport: a daemon's controller,
    leader-election and namespace clients keep 25 idle connections between them, not 25 each. Closing one client
    leaves the others' pool serving; the last one to close closes it."""
    from controller_manager.client.rest import MAX_IDLE_CONNECTIONS_PER_HOST
    from tests.runtime.informers.fakes import eventually

    app, gate, transports = gated_pod_reads()

    def open_transports() -> int:
        return sum(not t.is_closing() for t in transports)

    async with TestServer(app) as server:
        config = ClientConfig(host=str(server.make_url("")).rstrip("/"))
        first, second, other = ApiClient(config, qps=0), ApiClient(config, qps=0), ApiClient(
            ClientConfig(host=config.host), qps=0)
        try:
            reads = [asyncio.create_task(api.get(PODS, f"p{i}", "default"))
                     for i in range(20) for api in (first, second)]
            await eventually(lambda: len(transports) == 40, timeout=10)
            gate.set()
            await asyncio.gather(*reads)
            await eventually(lambda: open_transports() <= MAX_IDLE_CONNECTIONS_PER_HOST, timeout=10)
            assert open_transports() == MAX_IDLE_CONNECTIONS_PER_HOST
            await first.close()
            assert (await second.get(PODS, "again", "default"))["metadata"]["name"] == "again"
            assert len(transports) == 40  # the closed client's sibling still served from the shared pool
            assert (await other.get(PODS, "elsewhere", "default"))["metadata"]["name"] == "elsewhere"
            assert len(transports) == 41  # another config: a pool of its own
            await second.close()
            await eventually(lambda: open_transports() == 1, timeout=10)  # only the other config's connection
        finally:
            for api in (first, second, other):
                await api.close()


async def test_a_request_body_in_flight_holds_its_own_size_not_orjsons_buffer() -> None:
    """orjson hands back its working buffer (16-32 KiB for a 2-3 KB pod); a body lives as long as its request, so a
    burst of writes in flight held ~10x their size, which stayed in the process's RSS as a high-water mark."""
    import tracemalloc

    from controller_manager.client import rest
    from tests.runtime.informers.fakes import eventually

    gate = asyncio.Event()
    arrived = 0

    async def handler(request: web.Request) -> web.Response:
        nonlocal arrived
        body = await request.read()
        arrived += 1
        await gate.wait()
        return web.Response(body=body, content_type="application/json")

    app = web.Application()
    app.router.add_post("/api/v1/namespaces/default/pods", handler)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
           "spec": {"containers": [{"name": "c", "image": "registry.example.com/" + "x" * 2000}]}}
    async with TestServer(app) as server:
        api = ApiClient(ClientConfig(host=str(server.make_url("")).rstrip("/")), qps=0)
        tracemalloc.start()
        try:
            writes = [asyncio.create_task(api.create(PODS, pod, "default")) for _ in range(20)]
            await eventually(lambda: arrived == 20, timeout=10)
            snapshot = tracemalloc.take_snapshot()
            gate.set()
            await asyncio.gather(*writes)
        finally:
            tracemalloc.stop()
            await api.close()
    held = sum(s.size for s in snapshot.statistics("lineno") if s.traceback[0].filename == rest.__file__)
    assert held / 20 < 8192  # each body is ~2.2 KB; the request's own objects are counted too
