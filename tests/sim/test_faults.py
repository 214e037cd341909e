"""Fault injection as an HTTP client sees it: injected error Statuses (410/429/500, by share and filter),
latency, dropped and slow watches, restarts with and without history, and the --faults spec."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson
import pytest

from controller_manager.api.resources import CONFIGMAPS
from controller_manager.sim.cluster import SimCluster
from controller_manager.sim.faults import FaultInjector, parse_fault_spec


class Client:
    def __init__(self, cluster: SimCluster, session: aiohttp.ClientSession) -> None:
        self.cluster = cluster
        self.session = session

    def url(self, path: str) -> str:
        return self.cluster.url + path

    async def get(self, path: str) -> tuple[int, Any, aiohttp.ClientResponse]:
        async with self.session.get(self.url(path)) as resp:
            return resp.status, orjson.loads(await resp.read()), resp

    async def post(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        async with self.session.post(self.url(path), data=orjson.dumps(body),
                                     headers={"Content-Type": "application/json"}) as resp:
            return resp.status, orjson.loads(await resp.read())


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    async with SimCluster(nodes=0, scheduler=False, kubelets=False) as cluster, aiohttp.ClientSession(
            headers={"Authorization": f"Bearer {cluster.admin_token}"}) as session:
        yield Client(cluster, session)


def configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}}


async def read_event(resp: aiohttp.ClientResponse, timeout: float = 5.0) -> dict[str, Any] | None:
    line = await asyncio.wait_for(resp.content.readline(), timeout)
    return orjson.loads(line) if line else None


async def test_every_nth_500_for_one_verb_and_resource(client: Client) -> None:
    rule = client.cluster.faults.fail(500, every=2, verbs=["list"], resources=["pods"])
    assert (await client.get("/api/v1/namespaces/default/pods"))[0] == 200
    code, body, _ = await client.get("/api/v1/namespaces/default/pods")
    assert code == 500
    assert body["kind"] == "Status"
    assert body["reason"] == "InternalError"
    assert body["code"] == 500
    assert body["message"].startswith("Internal error occurred:")
    assert (await client.get("/api/v1/namespaces/default/pods"))[0] == 200
    # Other verbs and resources are untouched.
    for _ in range(3):
        assert (await client.get("/api/v1/namespaces/default/configmaps"))[0] == 200
        assert (await client.get("/api/v1/namespaces/default"))[0] == 200
    assert (rule.matched, rule.injected) == (3, 1)


async def test_429_with_retry_after_only_count_times(client: Client) -> None:
    client.cluster.faults.fail(429, probability=1.0, count=1, retry_after=3)
    code, body, resp = await client.get("/api/v1/namespaces/default/configmaps")
    assert code == 429
    assert resp.headers["Retry-After"] == "3"
    assert body["reason"] == "TooManyRequests"
    assert body["details"]["retryAfterSeconds"] == 3
    assert (await client.get("/api/v1/namespaces/default/configmaps"))[0] == 200


async def test_probability_zero_never_fires_and_discovery_stays_up(client: Client) -> None:
    client.cluster.faults.fail(500, probability=0.0)
    client.cluster.faults.fail(503)  # every resource request, but never discovery
    assert (await client.get("/api"))[0] == 200
    assert (await client.get("/version"))[0] == 200
    code, body, _ = await client.get("/api/v1/namespaces/default/configmaps")
    assert code == 503
    assert body["reason"] == "ServiceUnavailable"


async def test_410_on_a_watch_is_an_error_event(client: Client) -> None:
    client.cluster.faults.fail(410, verbs=["watch"], count=1)
    async with client.session.get(client.url("/api/v1/namespaces/default/configmaps?watch=true")) as resp:
        assert resp.status == 200
        event = await read_event(resp)
        assert event is not None
        assert event["type"] == "ERROR"
        assert event["object"]["code"] == 410
        assert event["object"]["reason"] == "Expired"
        assert await read_event(resp) is None  # and the stream ends
    code, _, _ = await client.get("/api/v1/namespaces/default/configmaps")
    assert code == 200


async def test_410_on_a_list(client: Client) -> None:
    client.cluster.faults.fail(410, verbs=["list"], count=1)
    code, body, _ = await client.get("/api/v1/namespaces/default/configmaps")
    assert code == 410
    assert body["reason"] == "Expired"


async def test_latency_fixed_and_per_request(client: Client) -> None:
    client.cluster.faults.set_latency(0.2)
    start = time.perf_counter()
    assert (await client.get("/api/v1/namespaces/default/configmaps"))[0] == 200
    assert time.perf_counter() - start >= 0.2
    client.cluster.faults.set_latency(lambda request: 0.3 if "pods" in request.path else 0.0)
    start = time.perf_counter()
    await client.get("/api/v1/namespaces/default/configmaps")
    fast = time.perf_counter() - start
    start = time.perf_counter()
    await client.get("/api/v1/namespaces/default/pods")
    assert time.perf_counter() - start >= 0.3 > fast


async def test_drop_watches_ends_streams(client: Client) -> None:
    async with client.session.get(client.url("/api/v1/namespaces/default/configmaps?watch=true")) as resp:
        client.cluster.api.create(CONFIGMAPS, configmap("before"))
        event = await read_event(resp)
        assert event is not None
        assert event["object"]["metadata"]["name"] == "before"
        client.cluster.faults.drop_watches()
        assert await read_event(resp) is None


async def test_slow_watch_holds_http_events_but_not_in_process_ones(client: Client) -> None:
    api = client.cluster.api
    client.cluster.faults.slow_watch(0.5)
    inproc = api.watch(CONFIGMAPS, "default", resource_version=api.list(CONFIGMAPS)[1])
    try:
        async with client.session.get(client.url("/api/v1/namespaces/default/configmaps?watch=true")) as resp:
            await asyncio.sleep(0.05)  # let the HTTP watch register before the write
            created = time.perf_counter()
            api.create(CONFIGMAPS, configmap("a"))
            api.create(CONFIGMAPS, configmap("b"))
            kind, obj = await asyncio.wait_for(anext(aiter(inproc)), 1.0)
            assert (kind, obj["metadata"]["name"]) == ("ADDED", "a")
            assert time.perf_counter() - created < 0.4  # in-process: at once
            first = await read_event(resp)
            assert time.perf_counter() - created >= 0.45  # HTTP: held back
            second = await read_event(resp)
            assert first is not None
            assert second is not None
            assert [first["object"]["metadata"]["name"], second["object"]["metadata"]["name"]] == ["a", "b"]
    finally:
        inproc.close()


async def test_restart_keeping_history_lets_watches_resume(client: Client) -> None:
    api = client.cluster.api
    _, rv = api.list(CONFIGMAPS)
    api.create(CONFIGMAPS, configmap("during"))
    client.cluster.faults.restart()
    async with client.session.get(
            client.url(f"/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}")) as resp:
        event = await read_event(resp)
        assert event is not None
        assert event["type"] == "ADDED"
        assert event["object"]["metadata"]["name"] == "during"


async def test_restart_losing_history_gives_410_and_downtime_503(client: Client) -> None:
    api = client.cluster.api
    _, rv = api.list(CONFIGMAPS)
    api.create(CONFIGMAPS, configmap("during"))
    _, now = api.list(CONFIGMAPS)
    async with client.session.get(
            client.url(f"/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={now}")) as old:
        await asyncio.sleep(0.05)
        client.cluster.faults.restart(lose_history=True, downtime=0.3)
        assert await read_event(old) is None  # the open watch is cut
    code, body, _ = await client.get("/api/v1/namespaces/default/configmaps")
    assert code == 503
    assert body["code"] == 503
    await asyncio.sleep(0.3)
    async with client.session.get(
            client.url(f"/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}")) as resp:
        event = await read_event(resp)
        assert event is not None
        assert event["type"] == "ERROR"
        assert event["object"]["code"] == 410


async def test_clear_removes_faults(client: Client) -> None:
    client.cluster.faults.fail(500)
    client.cluster.faults.set_latency(5.0)
    client.cluster.faults.clear()
    assert (await client.get("/api/v1/namespaces/default/configmaps"))[0] == 200


@pytest.mark.parametrize(
    ("spec", "rules", "latency"),
    [
        pytest.param("", 0, None, id="empty"),
        pytest.param("error:code=500:p=0.1", 1, None, id="probability"),
        pytest.param("error:code=429:every=5:verb=list+watch:resource=pods:retry-after=2:count=3", 1, None,
                     id="every-with-filters"),
        pytest.param("latency:seconds=0.05, slow-watch:seconds=2,error", 1, 0.05, id="several"),
    ],
)
def test_parse_fault_spec(spec: str, rules: int, latency: float | None) -> None:
    class _Api:
        def watch(self, *args: Any, **kwargs: Any) -> None:
            return None

    injector = FaultInjector(_Api())  # type: ignore[arg-type]
    for action in parse_fault_spec(spec):
        action(injector)
    assert len(injector.rules) == rules
    assert injector.latency == latency


@pytest.mark.parametrize(
    "spec",
    [pytest.param("boom", id="unknown-kind"), pytest.param("error:code=200", id="not-an-error-code"),
     pytest.param("error:p=2", id="probability-out-of-range"), pytest.param("error:every=0", id="every-zero"),
     pytest.param("latency", id="latency-needs-seconds"), pytest.param("latency:seconds=x", id="not-a-number"),
     pytest.param("error:colour=red", id="unknown-option"), pytest.param("error:code", id="no-value")],
)
def test_parse_fault_spec_rejects(spec: str) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - each case has its own message
        parse_fault_spec(spec)
