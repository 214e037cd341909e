"""The HTTPS endpoint against a fake API server: delegated auth, metrics, health, readiness."""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import aiohttp
import pytest
from cryptography import x509

from controller_manager.client import ApiClient, ClientConfig
from controller_manager.clock import FakeClock
from controller_manager.manager.auth import DelegatingAuth, bearer_token
from controller_manager.manager.certs import generate_self_signed, server_ssl_context
from controller_manager.manager.health import HealthChecks, LoopLagProbe
from controller_manager.manager.serving import SecureServer
from tests.manager.fake_apiserver import FakeApiServer


@pytest.fixture(scope="module")
def tls() -> ssl.SSLContext:
    return server_ssl_context()  # self-signed, in memory: made once for the module (RSA keys take a moment)


@dataclass
class Env:
    api: FakeApiServer
    server: SecureServer
    session: aiohttp.ClientSession
    clock: FakeClock
    auth: DelegatingAuth
    state: dict[str, object] = field(default_factory=dict)

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.server.port}{path}"

    async def get(self, path: str, token: str | None = None) -> tuple[int, str, aiohttp.typedefs.LooseHeaders]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with self.session.get(self.url(path), headers=headers) as resp:
            return resp.status, await resp.text(), resp.headers


@pytest.fixture
async def env(tls: ssl.SSLContext) -> AsyncIterator[Env]:
    clock = FakeClock()
    async with FakeApiServer() as api:
        client = ApiClient(ClientConfig(host=api.url), qps=0, max_retries=0)
        auth = DelegatingAuth(client, clock=clock)
        state: dict[str, object] = {"role": "leader", "synced": None, "ctrl": None}
        checks = HealthChecks()
        checks.add("ping", lambda: None, groups=("healthz", "livez", "readyz"))
        checks.add("deployment-controller", lambda: state["ctrl"])  # type: ignore[arg-type,return-value]
        checks.add("informer-sync", lambda: state["synced"], groups=("readyz",))  # type: ignore[arg-type,return-value]
        server = SecureServer(host="127.0.0.1", port=0, ssl_context=tls, auth=auth, checks=checks,
                              role=lambda: str(state["role"]))
        await server.start()
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=False))  # self-signed: skip verify
        try:
            yield Env(api, server, session, clock, auth, state)
        finally:
            await session.close()
            await server.stop()
            await client.close()


async def test_healthz_needs_no_token(env: Env) -> None:
    status, body, headers = await env.get("/healthz")
    assert (status, body) == (200, "ok")
    assert headers["Content-Type"].startswith("text/plain")
    assert env.api.calls["tokenreview"] == 0


async def test_metrics_without_token_is_unauthorized(env: Env) -> None:
    status, body, _ = await env.get("/metrics")
    assert status == 401
    assert body == ('{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized",'
                    '"reason":"Unauthorized","code":401}')


async def test_metrics_with_unknown_token_is_unauthorized(env: Env) -> None:
    status, _, _ = await env.get("/metrics", token="stolen")
    assert status == 401
    assert env.api.calls["tokenreview"] == 1
    assert env.api.calls["subjectaccessreview"] == 0


async def test_metrics_for_admin(env: Env) -> None:
    status, body, headers = await env.get("/metrics", token="admin")
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain; version=")
    assert "# HELP controller_manager_event_loop_lag_seconds" in body
    assert env.api.calls["subjectaccessreview"] == 0  # system:masters needs no access review


async def test_metrics_for_an_allowed_user(env: Env) -> None:
    status, body, _ = await env.get("/metrics", token="prometheus")
    assert status == 200
    assert "# TYPE controller_manager_event_loop_lag_seconds gauge" in body
    review = env.api.reviews[-1]
    assert review["spec"]["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}
    assert review["spec"]["user"] == "prometheus"
    assert review["spec"]["groups"] == ["system:authenticated"]
    assert review["spec"]["uid"] == "uid-prometheus"


async def test_metrics_for_viewer_is_forbidden(env: Env) -> None:
    status, body, _ = await env.get("/metrics", token="viewer")
    assert status == 403
    assert body == ('{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
                    '"forbidden: User \\"viewer\\" cannot get path \\"/metrics\\": no RBAC policy matched",'
                    '"reason":"Forbidden","details":{},"code":403}')


async def test_answers_are_cached_for_ten_seconds(env: Env) -> None:
    for _ in range(3):
        assert (await env.get("/metrics", token="prometheus"))[0] == 200
        assert (await env.get("/metrics", token="viewer"))[0] == 403
        assert (await env.get("/metrics", token="stolen"))[0] == 401
    assert env.api.calls["tokenreview"] == 3
    assert env.api.calls["subjectaccessreview"] == 2
    env.clock.advance(9.9)
    assert (await env.get("/metrics", token="prometheus"))[0] == 200
    assert env.api.calls["tokenreview"] == 3
    env.clock.advance(0.2)
    assert (await env.get("/metrics", token="prometheus"))[0] == 200
    assert env.api.calls["tokenreview"] == 4
    assert env.api.calls["subjectaccessreview"] == 3


async def test_readyz_says_leader_or_standby(env: Env) -> None:
    assert (await env.get("/readyz"))[:2] == (200, "ok: leader")
    env.state["role"] = "standby"
    assert (await env.get("/readyz"))[:2] == (200, "ok: standby")
    status, body, _ = await env.get("/readyz?verbose")
    assert status == 200
    assert body == "[+]ping ok\n[+]informer-sync ok\n[+]leader-election ok: standby\nreadyz check passed\n"


async def test_readyz_fails_until_caches_sync(env: Env) -> None:
    env.state["synced"] = "informer caches not synced: pods"
    status, body, _ = await env.get("/readyz")
    assert status == 500
    assert body == ("[+]ping ok\n[-]informer-sync failed: reason withheld\n[+]leader-election ok: leader\n"
                    "readyz check failed")
    status, body, _ = await env.get("/readyz?exclude=informer-sync")
    assert (status, body) == (200, "ok: leader")


async def test_controller_health_checks(env: Env) -> None:
    status, body, _ = await env.get("/healthz?verbose")
    assert (status, body) == (200, "[+]ping ok\n[+]deployment-controller ok\nhealthz check passed\n")
    env.state["ctrl"] = "workers stuck"
    status, body, _ = await env.get("/healthz")
    assert status == 500
    assert "[-]deployment-controller failed: reason withheld\n" in body
    assert body.endswith("healthz check failed")
    # /healthz/<name> is not an always-allowed path: it needs a token, and then tells the reason.
    assert (await env.get("/healthz/deployment-controller"))[0] == 401
    status, body, _ = await env.get("/healthz/deployment-controller", token="admin")
    assert (status, body) == (500, "internal server error: workers stuck\n")
    env.state["ctrl"] = None
    assert (await env.get("/healthz/deployment-controller", token="admin"))[:2] == (200, "ok")
    assert (await env.get("/healthz/no-such-check", token="admin"))[0] == 404


def _sample(metrics: str, series: str) -> float | None:
    for line in metrics.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


async def test_health_checks_are_recorded_as_metrics(env: Env) -> None:
    """Each /healthz run sets kubernetes_healthcheck{name,type} and counts kubernetes_healthchecks_total."""
    gauge = 'kubernetes_healthcheck{name="deployment-controller",type="healthz"}'
    errors = 'kubernetes_healthchecks_total{name="deployment-controller",status="error",type="healthz"}'
    successes = 'kubernetes_healthchecks_total{name="deployment-controller",status="success",type="healthz"}'
    before = _sample((await env.get("/metrics", token="admin"))[1], errors) or 0.0
    env.state["ctrl"] = "workers stuck"
    assert (await env.get("/healthz"))[0] == 500
    metrics = (await env.get("/metrics", token="admin"))[1]
    assert _sample(metrics, gauge) == 0.0
    assert _sample(metrics, errors) == before + 1
    env.state["ctrl"] = None
    ok_before = _sample(metrics, successes) or 0.0
    assert (await env.get("/healthz"))[0] == 200
    metrics = (await env.get("/metrics", token="admin"))[1]
    assert _sample(metrics, gauge) == 1.0
    assert _sample(metrics, successes) == ok_before + 1
    # An excluded check is not run, so not recorded.
    assert (await env.get("/healthz?exclude=deployment-controller"))[0] == 200
    assert _sample((await env.get("/metrics", token="admin"))[1], successes) == ok_before + 1
    assert _sample(metrics, 'kubernetes_healthcheck{name="ping",type="livez"}') in (None, 1.0)
    assert (await env.get("/livez"))[0] == 200
    metrics = (await env.get("/metrics", token="admin"))[1]
    assert _sample(metrics, 'kubernetes_healthcheck{name="ping",type="livez"}') == 1.0


async def test_livez(env: Env) -> None:
    assert (await env.get("/livez"))[:2] == (200, "ok")
    assert (await env.get("/livez?verbose"))[:2] == (200, "[+]ping ok\nlivez check passed\n")


async def test_review_failure_is_not_cached(tls: ssl.SSLContext) -> None:
    # An API server that is down: reviews fail, requests get 401, nothing is remembered.
    client = ApiClient(ClientConfig(host="http://127.0.0.1:9"), qps=0, max_retries=0)
    auth = DelegatingAuth(client, clock=FakeClock())
    try:
        decision = await auth.decide("GET", "/metrics", "Bearer admin")
        assert decision.status == 401
        assert auth.reviews["token"] == 1
        decision = await auth.decide("GET", "/metrics", "Bearer admin")
        assert auth.reviews["token"] == 2
    finally:
        await client.close()


@pytest.mark.parametrize(
    ("header", "token"),
    [
        pytest.param("Bearer abc", "abc", id="bearer"),
        pytest.param("bearer abc", "abc", id="case-insensitive-scheme"),
        pytest.param("  Bearer abc  ", "abc", id="trimmed"),
        pytest.param("Basic abc", None, id="basic"),
        pytest.param("Bearer", None, id="no-token"),
        pytest.param("Bearer  abc", None, id="double-space"),
        pytest.param("", None, id="empty"),
        pytest.param(None, None, id="absent"),
    ],
)
def test_bearer_token(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token


def test_always_allow_paths_support_prefixes() -> None:
    auth = DelegatingAuth(None, always_allow_paths=["/healthz", "/debug/*"])  # type: ignore[arg-type]
    assert auth.always_allowed("/healthz")
    assert not auth.always_allowed("/healthz/deployment-controller")
    assert auth.always_allowed("/debug/pprof/heap")
    assert not auth.always_allowed("/metrics")


def test_self_signed_certificate_is_shaped_like_upstream() -> None:
    chain, key = generate_self_signed()
    certs = x509.load_pem_x509_certificates(chain)
    assert len(certs) == 2
    leaf, ca = certs
    assert leaf.subject.rfc4514_string().startswith("CN=localhost@")
    assert ca.subject.rfc4514_string().startswith("CN=localhost-ca@")
    assert leaf.issuer == ca.subject
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["localhost"]
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert b"PRIVATE KEY" in key


async def test_server_verifies_with_its_ca(tls: ssl.SSLContext) -> None:
    chain, _ = generate_self_signed()
    # The bundled CA verifies the leaf for "localhost": a client trusting it gets a verified session.
    ca_pem = chain[chain.index(b"-----END CERTIFICATE-----") + len(b"-----END CERTIFICATE-----\n"):]
    client_ctx = ssl.create_default_context(cadata=ca_pem.decode())
    leaf = x509.load_pem_x509_certificates(chain)[0]
    assert client_ctx.get_ca_certs()[0]["subject"][0][0][1].startswith("localhost-ca@")
    assert leaf.not_valid_after_utc > leaf.not_valid_before_utc


async def test_loop_lag_probe_detects_a_blocked_loop() -> None:
    class _Gauge:
        def __init__(self) -> None:
            self.value = -1.0
            self.changed = asyncio.Event()

        def set(self, v: float) -> None:
            self.value = v
            self.changed.set()

        async def wait_until(self, predicate: Callable[[float], bool]) -> None:
            async with asyncio.timeout(5):
                while not predicate(self.value):
                    self.changed.clear()
                    await self.changed.wait()

    gauge = _Gauge()
    probe = LoopLagProbe(interval=0.01, threshold=0.05, gauge=gauge)
    task = asyncio.create_task(probe.run(), name="loop-lag-probe")
    try:
        await gauge.wait_until(lambda v: v >= 0)
        assert probe.check() is None
        time.sleep(0.2)  # noqa: ASYNC251 -- the point: block the loop as a runaway sync would
        assert probe.check() is not None  # the probe has been silent for longer than the threshold
        await gauge.wait_until(lambda v: v >= 0.15)  # and once it runs, it reports how late it woke
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
