"""Leader fencing proven from outside, by what reaches the API server: kube-sim's audit log
(``--audit-log-path``), each replica authenticating as its own user (``--token-auth-file``, one kubeconfig per
replica; the User-Agent stays upstream's, which names no replica).

- A leader paused (SIGSTOP) past its lease while it scales a Deployment, and woken (SIGCONT) after the
  standby took over and started writing: not one write of the woken replica is received by the API server
  after the new leader's first write, apart from its tries at the Lease itself, which the API server refuses
  (409: the Lease's resourceVersion is the fence). It exits 1 with "leaderelection lost".
- A leader stopped with SIGTERM while its controllers emit Events: no write of it (Events included) is
  received after its Lease release is answered.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import (
    LEASE_DURATION,
    Audited,
    Https,
    Kube,
    Kubectl,
    Processes,
    official_client,
    read_audit_log,
    start_kube_sim,
    start_manager,
    user_kubeconfig,
    wait_for_default_service_account,
    wait_until,
    write_token_file,
)
from tests.e2e.test_leader_election import one_leader

# Two managers scaling a Deployment: heavy enough for the "e2e" group.
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e")]

USERS = ("replica-a", "replica-b")


def deployment(replicas: int) -> dict[str, object]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "fenced", "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "fenced"}},
                 "template": {"metadata": {"labels": {"app": "fenced"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
    }


async def scale(kube: Kube, replicas: int) -> None:
    await kube.retrying(kube.apps.patch_namespaced_deployment_scale, "fenced", "default",
                        {"spec": {"replicas": replicas}})


async def test_a_woken_leader_writes_nothing_after_the_new_leader_and_a_stopped_one_nothing_after_release(
        processes: Processes, https: Https, tmp_path: Path) -> None:
    tokens = write_token_file(tmp_path / "tokens.csv", USERS)
    audit = tmp_path / "audit.log"
    sim = await start_kube_sim(processes, extra=("--token-auth-file", str(tmp_path / "tokens.csv"),
                                                 "--audit-log-path", str(audit)))
    managers = [await start_manager(processes, sim, name=f"manager-{u[-1]}", https=https,
                                    kubeconfig=user_kubeconfig(sim, u, tokens[u])) for u in USERS]
    user_of = {m.process.pid: u for m, u in zip(managers, USERS, strict=True)}
    async with official_client(sim) as kube:
        leader = await one_leader(https, kube, managers)
        standby = next(m for m in managers if m is not leader)
        old, new = user_of[leader.process.pid], user_of[standby.process.pid]
        new_identity = await standby.identity()

        home = tmp_path / "home"
        home.mkdir()
        await wait_for_default_service_account(Kubectl(sim, home))
        await kube.retrying(kube.apps.create_namespaced_deployment, "default", deployment(5))

        async def leader_wrote_pods() -> bool:
            return any(e.user == old and e.verb == "create" and e.resource == "pods" and e.code == 201
                       for e in read_audit_log(audit))

        await wait_until(leader_wrote_pods, timeout=30, what=f"{old} to create pods")

        # Pause the leader in the middle of a scale-up: it has work queued when it wakes.
        await scale(kube, 40)
        leader.process.send(signal.SIGSTOP)
        paused_at = time.monotonic()

        async def taken_over() -> bool:
            return await kube.lease_holder() == new_identity

        await wait_until(taken_over, timeout=LEASE_DURATION * 4, interval=0.05, what=f"{new} to take the Lease")

        async def new_leader_first_write() -> Audited | None:
            # The takeover is itself a write (the Lease update naming the new holder): the first successful
            # write by the new leader after the pause.
            return next((e for e in read_audit_log(audit) if e.user == new and e.write and e.code < 400), None)

        first = await wait_until(new_leader_first_write, timeout=10, what=f"{new}'s first write")

        async def new_leader_acting() -> bool:
            return any(e.user == new and e.resource == "pods" and e.verb in ("create", "delete")
                       for e in read_audit_log(audit))

        await wait_until(new_leader_acting, timeout=30, what=f"{new} to act on pods")
        await scale(kube, 10)  # the new leader now deletes what the old one was creating
        leader.process.send(signal.SIGCONT)
        print(f"paused {time.monotonic() - paused_at:.1f}s (lease {LEASE_DURATION}s)")

        assert await leader.process.wait(30) == 1
        assert any(r.get("event") == "leaderelection lost" for r in leader.process.records())

        await asyncio.sleep(0.3)  # > the audit log's flush interval: what reached the API server is on disk
        late = [e for e in read_audit_log(audit)
                if e.user == old and e.write and e.received > first.completed]
        lease_tries = [e for e in late if e.resource == "leases"]
        print(f"woken replica: {len(lease_tries)} refused Lease tries after the new leader's first write")
        assert all(e.code == 409 for e in lease_tries), [e.event for e in lease_tries]
        assert [e.event for e in late if e.resource != "leases"] == []

        # The new leader now stops while its controllers are busy (and emitting Events).
        await scale(kube, 30)

        async def busy() -> bool:
            return sum(1 for e in read_audit_log(audit) if e.user == new and e.resource == "pods"
                       and e.verb == "create" and e.received > first.completed) >= 5

        await wait_until(busy, timeout=30, what=f"{new} to create pods")
        standby.process.send(signal.SIGTERM)
        assert await standby.process.wait(30) == 0
        await asyncio.sleep(0.3)
        entries = read_audit_log(audit)
        mine = [e for e in entries if e.user == new]
        release = [e for e in mine if e.resource == "leases" and e.verb == "update" and e.code == 200][-1]
        after = [e.event for e in mine if e.write and e.received > release.completed]
        assert after == []
        assert any(e.resource == "events" and e.write for e in mine), "the stopped leader sent no Event at all"
        assert await kube.lease_holder() == ""
