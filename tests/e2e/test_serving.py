"""The manager's HTTPS endpoints as curl sees them, with kube-sim doing the delegated TokenReview and
SubjectAccessReview: health open to all, metrics only for a token allowed ``get /metrics``."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import Https, KubeSim, Processes, start_manager, wait_until

# Light on CPU: may run beside one of the heavy e2e tests (the "e2e" group), never beside another light one.
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e-light")]

METRICS = (
    "workqueue_adds_total",
    "workqueue_depth",
    "rest_client_requests_total",
    "leader_election_master_status",
    "controller_sync_duration_seconds",
    "reflector_lists_total",
)


async def test_health_is_open_and_metrics_need_an_authorized_token(
        processes: Processes, sim: KubeSim, https: Https) -> None:
    manager = await start_manager(processes, sim, https=https)
    await https.wait_role(manager, "leader")
    assert await https.get(manager, "/readyz") == (200, "ok: leader")
    assert await https.get(manager, "/healthz") == (200, "ok")
    assert await https.get(manager, "/livez") == (200, "ok")
    status, verbose = await https.get(manager, "/readyz?verbose")
    assert status == 200
    assert "[+]leader-election ok: leader" in verbose.splitlines()
    assert verbose.endswith("readyz check passed\n")

    admin, viewer = sim.token("admin"), sim.token("viewer")
    status, body = await https.get(manager, "/metrics")
    assert status == 401
    assert '"reason":"Unauthorized"' in body
    assert (await https.get(manager, "/metrics", token="not-a-token"))[0] == 401
    assert (await https.get(manager, "/metrics", token=viewer))[0] == 403

    # The controllers have synced by the time every family has samples (a workqueue add happened, ...).
    async def metrics() -> str | None:
        status, body = await https.get(manager, "/metrics", token=admin)
        assert status == 200, body
        names = {line.split("{")[0].split(" ")[0] for line in body.splitlines() if not line.startswith("#")}
        present = {m for m in METRICS if any(n == m or n.startswith(f"{m.removesuffix('_total')}_") for n in names)}
        return body if present == set(METRICS) else None

    body = await wait_until(metrics, what="every metric family to have samples")
    assert 'leader_election_master_status{name="controller-manager-py"} 1.0' in body
    adds = [line for line in body.splitlines() if line.startswith("workqueue_adds_total{")]
    assert any(float(line.rsplit(" ", 1)[1]) > 0 for line in adds), adds

    # A path outside --authorization-always-allow-paths needs authorization, even under /healthz.
    assert (await https.get(manager, "/healthz/deployment-controller"))[0] == 401
    assert await https.get(manager, "/healthz/deployment-controller", token=admin) == (200, "ok")
    assert (await https.get(manager, "/healthz/no-such-controller", token=admin))[0] == 404
    status, verbose = await https.get(manager, "/healthz?verbose")
    assert status == 200
    assert {"[+]deployment-controller ok", "[+]replicaset-controller ok", "[+]leaderElection ok"} <= set(
        verbose.splitlines())

    assert await manager.process.stop() == 0
