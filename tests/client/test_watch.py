"""Watches: streamed events in order, huge lines, bookmarks, ERROR events, and how streams end."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson
import pytest
from aiohttp import web

from controller_manager.api.resources import PODS
from controller_manager.client import ApiClient, ApiConnectionError, ClientConfig, Gone, ServerError, WatchEvent
from controller_manager.client.wire import METADATA_WATCH_ACCEPT
from tests.client.conftest import FakeApiServer, fail, status_object

PODS_PATH = "/api/v1/namespaces/ns/pods"


def pod(name: str, rv: str, **extra: Any) -> dict[str, Any]:
    return {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv},
            **extra}


def line(typ: str, obj: Any) -> bytes:
    return orjson.dumps({"type": typ, "object": obj}) + b"\n"


def streaming(*pieces: bytes, hold_open: asyncio.Event | None = None) -> Callable[[web.Request],
                                                                                    Awaitable[web.StreamResponse]]:
    """Write each piece as its own chunk (draining between), then end the response (or wait)."""
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        for piece in pieces:
            await resp.write(piece)
        if hold_open is not None:
            await hold_open.wait()
        await resp.write_eof()
        return resp
    return handler


async def collect(api: ApiClient, **kwargs: Any) -> list[WatchEvent]:
    return [event async for event in api.watch(PODS, "ns", **kwargs)]


async def names_into(seen: list[str], stream: AsyncIterator[WatchEvent]) -> None:
    async for event in stream:
        seen.append(event.object["metadata"]["name"])


async def test_events_in_order_and_stream_end(fake: FakeApiServer, client: ApiClient) -> None:
    big = pod("big", "12", metadata_note="x" * 200_000)  # one line far past 64 KiB
    payload = (line("ADDED", pod("a", "10")) + line("MODIFIED", pod("a", "11")) + line("ADDED", big)
               + line("BOOKMARK", {"kind": "Pod", "metadata": {"resourceVersion": "13"}})
               + line("DELETED", pod("a", "14")))
    # Cut the bytes at awkward places: mid-line, right after a newline, inside the big object.
    cuts = [5, 40, len(line("ADDED", pod("a", "10"))), 300, 70_000, 140_000, len(payload) - 3]
    pieces = [payload[i:j] for i, j in zip([0, *cuts], [*cuts, len(payload)], strict=True)]
    fake.on("GET", PODS_PATH, streaming(*pieces))

    events = await collect(client, resource_version="9", timeout_seconds=300)
    assert [(e.type, e.object["metadata"]["resourceVersion"]) for e in events] == [
        ("ADDED", "10"), ("MODIFIED", "11"), ("ADDED", "12"), ("BOOKMARK", "13"), ("DELETED", "14")]
    assert events[2].object == big
    (req,) = fake.requests
    assert req.query == {"watch": "true", "resourceVersion": "9", "allowWatchBookmarks": "true",
                         "timeoutSeconds": "300"}


async def test_last_line_without_newline_is_delivered(fake: FakeApiServer, client: ApiClient) -> None:
    fake.on("GET", PODS_PATH, streaming(line("ADDED", pod("a", "1")), line("ADDED", pod("b", "2")).rstrip(b"\n")))
    assert [e.object["metadata"]["name"] for e in await collect(client)] == ["a", "b"]


async def test_error_410_raises_gone_after_earlier_events(fake: FakeApiServer, client: ApiClient) -> None:
    gone = status_object(410, "Expired", "too old resource version: 5 (120)")
    fake.on("GET", PODS_PATH, streaming(line("ADDED", pod("a", "6")), line("ERROR", gone),
                                        line("ADDED", pod("never", "7"))))
    seen: list[str] = []
    with pytest.raises(Gone, match="too old resource version") as info:
        await names_into(seen, client.watch(PODS, "ns", resource_version="5"))
    assert seen == ["a"]
    assert info.value.status == 410


async def test_error_500_event_raises_server_error(fake: FakeApiServer, client: ApiClient) -> None:
    fake.on("GET", PODS_PATH, streaming(line("ERROR", status_object(500, "InternalError", "watch chan error"))))
    with pytest.raises(ServerError, match="watch chan error"):
        await collect(client)


async def test_undecodable_line_raises(fake: FakeApiServer, client: ApiClient) -> None:
    fake.on("GET", PODS_PATH, streaming(line("ADDED", pod("a", "1")), b"{not json\n"))
    with pytest.raises(ServerError, match="unable to decode watch event"):
        await collect(client)


async def test_opening_a_watch_can_fail(fake: FakeApiServer, client: ApiClient) -> None:
    fake.on("GET", PODS_PATH, fail(410, "Expired", "too old resource version: 1 (50)"))
    with pytest.raises(Gone):
        await collect(client, resource_version="1")


async def test_metadata_only_watch_and_no_bookmarks(fake: FakeApiServer, client: ApiClient) -> None:
    meta = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": {"name": "a"}}
    fake.on("GET", "/api/v1/pods", streaming(line("ADDED", meta)))
    events = [e async for e in client.watch(PODS, metadata_only=True, allow_bookmarks=False,
                                            label_selector="app=web", field_selector="spec.nodeName=n1")]
    assert events == [WatchEvent("ADDED", meta)]
    (req,) = fake.requests
    assert req.headers["Accept"] == METADATA_WATCH_ACCEPT
    assert METADATA_WATCH_ACCEPT == "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
    assert req.query == {"watch": "true", "labelSelector": "app=web", "fieldSelector": "spec.nodeName=n1"}


async def test_closing_a_live_watch_releases_it(fake: FakeApiServer, client: ApiClient) -> None:
    hold = asyncio.Event()
    fake.on("GET", PODS_PATH, streaming(line("ADDED", pod("a", "1")), hold_open=hold))
    try:
        async with client.watch(PODS, "ns") as stream:
            first = await stream.__anext__()
            assert first.object["metadata"]["name"] == "a"
        with pytest.raises(StopAsyncIteration):
            await stream.__anext__()
    finally:
        hold.set()


async def test_broken_stream_raises_connection_error(fake: FakeApiServer, client: ApiClient) -> None:
    async def broken(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        await resp.write(line("ADDED", pod("a", "1")) + b'{"type":"ADD')
        assert request.transport is not None
        request.transport.close()  # mid-chunk, no terminating chunk
        return resp

    fake.on("GET", PODS_PATH, broken)
    seen: list[str] = []
    with pytest.raises(ApiConnectionError, match="watch stream broken"):
        await names_into(seen, client.watch(PODS, "ns"))
    assert seen == ["a"]


async def test_nothing_is_sent_until_iterated(fake: FakeApiServer, client: ApiClient) -> None:
    stream = client.watch(PODS, "ns")
    await stream.aclose()
    assert fake.requests == []


async def test_watches_do_not_starve_requests(fake: FakeApiServer) -> None:
    hold = asyncio.Event()
    fake.on("GET", PODS_PATH, streaming(line("ADDED", pod("a", "1")), hold_open=hold))
    fake.on("GET", "/api/v1/namespaces/ns/pods/a", streaming(orjson.dumps(pod("a", "1"))))
    async with ApiClient(ClientConfig(host=fake.url), qps=0) as api:
        streams = [api.watch(PODS, "ns") for _ in range(120)]
        try:
            for s in streams:
                await s.__anext__()
            # 120 live watches hold 120 connections; a plain GET still gets through.
            got = await asyncio.wait_for(api.get(PODS, "a", "ns"), timeout=10)
            assert got["metadata"]["name"] == "a"
        finally:
            for s in streams:
                await s.aclose()
            hold.set()


async def test_read_batch_gives_each_read_s_events_in_order(fake: FakeApiServer, client: ApiClient) -> None:
    first = line("ADDED", pod("a", "1")) + line("MODIFIED", pod("a", "2"))
    second = line("ADDED", pod("b", "3"))
    # The second read ends mid-line; the rest of that line comes with the third.
    fake.on("GET", PODS_PATH, streaming(first, second[:20], second[20:]))
    stream = client.watch(PODS, "ns")
    batches: list[list[tuple[str, str]]] = []
    while batch := await stream.read_batch():
        batches.append([(typ, obj["metadata"]["resourceVersion"]) for typ, obj in batch])
    # The client may merge reads; what each batch holds is whole events, all of them, in order.
    assert [event for batch in batches for event in batch] == [("ADDED", "1"), ("MODIFIED", "2"), ("ADDED", "3")]
    assert all(batches)
    assert await stream.read_batch() == []


async def test_read_batch_raises_after_the_events_before_an_error(fake: FakeApiServer, client: ApiClient) -> None:
    gone = status_object(410, "Expired", "too old resource version: 5 (120)")
    # One read: two events, the ERROR, and an event after it that must never be delivered.
    fake.on("GET", PODS_PATH, streaming(line("ADDED", pod("a", "6")) + line("ADDED", pod("b", "7"))
                                        + line("ERROR", gone) + line("ADDED", pod("never", "8"))))
    stream = client.watch(PODS, "ns", resource_version="5")
    assert [obj["metadata"]["name"] for _, obj in await stream.read_batch()] == ["a", "b"]
    with pytest.raises(Gone, match="too old resource version"):
        await stream.read_batch()
    assert await stream.read_batch() == []


async def test_iteration_and_batches_mix_on_one_stream(fake: FakeApiServer, client: ApiClient) -> None:
    fake.on("GET", PODS_PATH, streaming(line("ADDED", pod("a", "1")) + line("ADDED", pod("b", "2"))
                                        + line("ADDED", pod("c", "3"))))
    stream = client.watch(PODS, "ns")
    head = await stream.__anext__()
    rest = await stream.read_batch()
    assert [head.object["metadata"]["name"], *(obj["metadata"]["name"] for _, obj in rest)] == ["a", "b", "c"]
