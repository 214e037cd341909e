"""What is retried (429, 5xx, connection failures where safe), how long it waits, and when it gives up;
plus the client-go metrics every attempt records."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from aiohttp import web

from controller_manager.api.resources import DEPLOYMENTS, PODS
from controller_manager.client import (
    AlreadyExists,
    ApiClient,
    ApiConnectionError,
    BadRequest,
    ClientConfig,
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    ServerError,
    TooManyRequests,
)
from controller_manager.client.credentials import CredentialSource
from controller_manager.clock import FakeClock
from tests.client.conftest import FakeApiServer, fail, reply, run_on_fake_time, sequence
from tests.prometheus import sample_value

POD_PATH = "/api/v1/namespaces/ns/pods/web-1"
POD = {"kind": "Pod", "metadata": {"name": "web-1", "namespace": "ns"}}


def _client(fake: FakeApiServer, clock: FakeClock, **kwargs: Any) -> ApiClient:
    return ApiClient(ClientConfig(host=fake.url), clock=clock, **{"qps": 0, **kwargs})


async def test_429_with_retry_after_then_success(fake: FakeApiServer) -> None:
    fake.on("GET", POD_PATH, sequence(fail(429, "TooManyRequests", headers={"Retry-After": "1"}), reply(POD)))
    clock = FakeClock()
    async with _client(fake, clock) as api:
        assert await run_on_fake_time(clock, api.get(PODS, "web-1", "ns")) == POD
    assert len(fake.requests) == 2
    assert 1.0 <= clock.monotonic() <= 1.1  # waited what Retry-After said, not the short backoff


async def test_500_retried_with_backoff_then_fails_after_the_bound(fake: FakeApiServer) -> None:
    fake.on("GET", POD_PATH, fail(500, "InternalError", "etcd is sad"))
    clock = FakeClock()
    async with _client(fake, clock) as api:
        with pytest.raises(ServerError, match="etcd is sad"):
            await run_on_fake_time(clock, api.get(PODS, "web-1", "ns"), step=0.1)
    assert len(fake.requests) == 11  # one try plus client-go's 10 retries
    # 0.1 doubling, capped at 5 s: 0.1+0.2+0.4+0.8+1.6+3.2+5*4
    assert clock.monotonic() == pytest.approx(26.3, abs=0.5)


async def test_503_recovers(fake: FakeApiServer) -> None:
    fake.on("GET", POD_PATH, sequence(fail(503, "ServiceUnavailable"), fail(504, "Timeout"), reply(POD)))
    clock = FakeClock()
    async with _client(fake, clock) as api:
        assert await run_on_fake_time(clock, api.get(PODS, "web-1", "ns"), step=0.1) == POD
    assert len(fake.requests) == 3


@pytest.mark.parametrize(
    ("code", "reason", "cls"),
    [
        pytest.param(400, "BadRequest", BadRequest, id="400"),
        pytest.param(403, "Forbidden", Forbidden, id="403"),
        pytest.param(404, "NotFound", NotFound, id="404"),
        pytest.param(409, "Conflict", Conflict, id="409-conflict"),
        pytest.param(409, "AlreadyExists", AlreadyExists, id="409-already-exists"),
        pytest.param(422, "Invalid", Invalid, id="422"),
    ],
)
async def test_client_errors_are_not_retried(fake: FakeApiServer, code: int, reason: str, cls: type[Exception]) -> None:
    fake.on("PUT", POD_PATH, fail(code, reason, headers={"Retry-After": "1"}))
    clock = FakeClock()
    async with _client(fake, clock) as api:
        with pytest.raises(cls):
            await api.update(PODS, POD)
    assert len(fake.requests) == 1
    assert clock.pending_timers() == 0


@pytest.mark.parametrize(
    ("method", "path", "response_headers", "tries"),
    [
        pytest.param("POST", "/api/v1/namespaces/ns/pods", {}, 1, id="create-500-not-retried"),
        pytest.param("POST", "/api/v1/namespaces/ns/pods", {"Retry-After": "1"}, 3, id="create-500-retry-after"),
        pytest.param("PUT", POD_PATH, {}, 3, id="update-500-retried"),
        pytest.param("DELETE", POD_PATH, {}, 3, id="delete-500-retried"),
        pytest.param("PATCH", POD_PATH, {}, 3, id="merge-patch-500-retried"),
    ],
)
async def test_writes_retry_5xx_only_when_repeating_is_safe(
    fake: FakeApiServer, method: str, path: str, response_headers: dict[str, str], tries: int
) -> None:
    fake.on(method, path, fail(500, "InternalError", headers=response_headers))
    clock = FakeClock()
    async with _client(fake, clock, max_retries=2) as api:
        calls = {
            "POST": lambda: api.create(PODS, POD),
            "PUT": lambda: api.update(PODS, POD),
            "DELETE": lambda: api.delete(PODS, "web-1", "ns"),
            "PATCH": lambda: api.patch(PODS, "web-1", {"metadata": {}}, "ns"),
        }
        with pytest.raises(ServerError):
            await run_on_fake_time(clock, calls[method](), step=0.1)
    assert len(fake.requests) == tries


async def test_json_patch_500_not_retried_but_429_is(fake: FakeApiServer) -> None:
    path = "/apis/apps/v1/namespaces/ns/deployments/d"
    ops = [{"op": "add", "path": "/metadata/finalizers/-", "value": "x"}]
    fake.on("PATCH", path, fail(500, "InternalError"))
    clock = FakeClock()
    async with _client(fake, clock, max_retries=2) as api:
        with pytest.raises(ServerError):
            await api.patch(DEPLOYMENTS, "d", ops, "ns", patch_type="json")
        assert len(fake.requests) == 1
        fake.on("PATCH", path, sequence(fail(429, "TooManyRequests"), reply({"kind": "Deployment"})))
        await run_on_fake_time(clock, api.patch(DEPLOYMENTS, "d", ops, "ns", patch_type="json"))
    assert len(fake.requests) == 3


async def test_429_gives_up_after_the_bound(fake: FakeApiServer) -> None:
    fake.on("POST", "/api/v1/namespaces/ns/pods", fail(429, "TooManyRequests", headers={"Retry-After": "2"}))
    clock = FakeClock()
    async with _client(fake, clock, max_retries=3) as api:
        with pytest.raises(TooManyRequests) as info:
            await run_on_fake_time(clock, api.create(PODS, POD), step=0.5)
    assert info.value.retry_after == 2.0
    assert len(fake.requests) == 4
    assert clock.monotonic() == pytest.approx(6.0, abs=0.6)


def _requests_total(code: str, method: str, host: str) -> float:
    return sample_value("rest_client_requests_total", {"code": code, "method": method, "host": host}) or 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("verb", ["get", "create"])
async def test_connection_refused_is_retried_for_any_verb(verb: str) -> None:
    # Nothing was sent when the connection could not even be opened, so even a create may be retried.
    port = _free_port()
    host = f"127.0.0.1:{port}"
    before = _requests_total("<error>", "GET" if verb == "get" else "POST", host)
    async with ApiClient(ClientConfig(host=f"http://{host}"), qps=0, max_retries=2, backoff_base=0.001) as api:
        call = api.get(PODS, "web-1", "ns") if verb == "get" else api.create(PODS, POD)
        with pytest.raises(ApiConnectionError, match="Cannot connect") as info:
            await call
    assert info.value.status == 0
    assert _requests_total("<error>", "GET" if verb == "get" else "POST", host) - before == 3


async def _drop(request: web.Request) -> web.StreamResponse:
    # The server received the request and then the connection died: the write may have happened.
    assert request.transport is not None
    request.transport.close()
    return web.Response()


async def test_dropped_connection_retries_reads_but_never_writes(fake: FakeApiServer) -> None:
    fake.on("GET", POD_PATH, sequence(_drop, reply(POD)))
    fake.on("POST", "/api/v1/namespaces/ns/pods", _drop)
    async with ApiClient(ClientConfig(host=fake.url), qps=0, max_retries=3, backoff_base=0.001) as api:
        assert await api.get(PODS, "web-1", "ns") == POD
        assert len(fake.calls("GET", POD_PATH)) == 2
        with pytest.raises(ApiConnectionError):
            await api.create(PODS, POD)
    assert len(fake.calls("POST", "/api/v1/namespaces/ns/pods")) == 1


async def test_metrics_count_every_attempt(fake: FakeApiServer) -> None:
    fake.on("GET", POD_PATH, sequence(fail(503, "ServiceUnavailable"), reply(POD)))
    host = fake.url.removeprefix("http://")
    ok_before = _requests_total("200", "GET", host)
    err_before = _requests_total("503", "GET", host)
    dur_before = sample_value("rest_client_request_duration_seconds_count",
                                           {"verb": "GET", "host": host}) or 0
    wait_before = sample_value("rest_client_rate_limiter_duration_seconds_count",
                                            {"verb": "GET", "host": host}) or 0
    async with ApiClient(ClientConfig(host=fake.url), qps=100.0, burst=10, backoff_base=0.001) as api:
        await api.get(PODS, "web-1", "ns")
    assert _requests_total("200", "GET", host) - ok_before == 1
    assert _requests_total("503", "GET", host) - err_before == 1
    assert sample_value("rest_client_request_duration_seconds_count",
                                     {"verb": "GET", "host": host}) == dur_before + 2
    assert sample_value("rest_client_rate_limiter_duration_seconds_count",
                                     {"verb": "GET", "host": host}) == wait_before + 2


async def test_client_side_rate_limit_spaces_requests(fake: FakeApiServer) -> None:
    fake.on("GET", POD_PATH, reply(POD))
    clock = FakeClock()
    async with _client(fake, clock, qps=2.0, burst=1) as api:
        for _ in range(3):
            await run_on_fake_time(clock, api.get(PODS, "web-1", "ns"), step=0.05)
    assert len(fake.requests) == 3
    assert clock.monotonic() == pytest.approx(1.0, abs=0.06)


async def test_rotating_token_is_read_before_each_request(fake: FakeApiServer) -> None:
    fake.on("GET", POD_PATH, reply(POD))
    turns = iter(["Bearer second", "Bearer third"])

    class Rotating(CredentialSource):
        async def authorization(self) -> str | None:
            return next(turns)

    source = Rotating()
    async with ApiClient(ClientConfig(host=fake.url, authorization="Bearer first", source=source), qps=0) as api:
        await api.get(PODS, "web-1", "ns")
        await api.get(PODS, "web-1", "ns")
    assert [r.headers["Authorization"] for r in fake.requests] == ["Bearer second", "Bearer third"]
