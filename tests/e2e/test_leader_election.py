"""Leader election between manager processes on one kube-sim, as any client sees it: the Lease's holder
(read through the official client) and each manager's /readyz. One leads; a killed leader is replaced once
its lease expires; a stopped leader hands over at once by releasing the lease, and exits 0."""

from __future__ import annotations

import asyncio
import signal
import time

import pytest

from tests.e2e.conftest import (
    LEASE_DURATION,
    RETRY_PERIOD,
    Https,
    Kube,
    KubeSim,
    Manager,
    Processes,
    start_manager,
    wait_until,
)

# Light on CPU: may run beside one of the heavy e2e tests (the "e2e" group), never beside another light one.
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e-light")]

JITTER = 1.2  # client-go's JitterFactor: a standby retries every retry-period * [1, 2.2)
SLACK = 0.5  # seconds for process scheduling and HTTP round trips on a busy 2-core machine


async def roles(https: Https, managers: list[Manager]) -> list[str | None]:
    return list(await asyncio.gather(*(https.role(m) for m in managers)))


async def one_leader(https: Https, kube: Kube, managers: list[Manager]) -> Manager:
    """Wait until exactly one manager says leader, the others standby, and the Lease names the leader."""
    identities = {m.process.pid: await m.identity() for m in managers}

    async def settled() -> Manager | None:
        seen = await roles(https, managers)
        if sorted(r or "" for r in seen) != ["leader"] + ["standby"] * (len(managers) - 1):
            return None
        leader = managers[seen.index("leader")]
        return leader if await kube.lease_holder() == identities[leader.process.pid] else None

    return await wait_until(settled, timeout=30, what="exactly one leader, named by the Lease")


async def takeover(https: Https, kube: Kube, candidate: Manager, since: float, timeout: float) -> float:
    """Seconds from ``since`` until the Lease names ``candidate``; returns once its /readyz says leader too
    (which also needs its informer caches synced, so it is not part of the figure)."""
    identity = await candidate.identity()

    async def holds() -> bool:
        return await kube.lease_holder() == identity

    await wait_until(holds, timeout=timeout, interval=0.02, what=f"{candidate.process.name} to take the lease")
    elapsed = time.monotonic() - since
    await https.wait_role(candidate, "leader")
    return elapsed


async def test_two_managers_one_leader_and_a_killed_leader_is_replaced_after_its_lease_expires(
        processes: Processes, sim: KubeSim, https: Https, kube: Kube) -> None:
    a, b = await asyncio.gather(start_manager(processes, sim, name="manager-a", https=https),
                                start_manager(processes, sim, name="manager-b", https=https))
    assert await a.identity() != await b.identity()
    leader = await one_leader(https, kube, [a, b])
    standby = b if leader is a else a
    # It stays that way: the standby keeps standing by while the leader renews.
    for _ in range(10):
        assert await roles(https, [leader, standby]) == ["leader", "standby"]
        await asyncio.sleep(RETRY_PERIOD / 2)
    lease = await kube(kube.coordination.read_namespaced_lease, "controller-manager-py", "kube-system")
    assert lease.spec.lease_duration_seconds == int(LEASE_DURATION)
    transitions = lease.spec.lease_transitions or 0

    leader.process.send(signal.SIGKILL)
    killed_at = time.monotonic()
    # client-go's rule: a standby may take over once lease-duration has passed since it *observed* the last
    # renewal. It observes that renewal at its next poll (up to one jittered retry period after the kill),
    # and notices the expiry at the poll after (one more): lease-duration + 2 jittered retry periods at worst.
    # Never earlier than lease-duration after the last renewal, itself at most one retry period before the kill.
    bound = LEASE_DURATION + 2 * RETRY_PERIOD * (1 + JITTER) + SLACK
    elapsed = await takeover(https, kube, standby, killed_at, timeout=bound)
    print(f"takeover after SIGKILL: {elapsed:.2f}s (lease {LEASE_DURATION}s, retry {RETRY_PERIOD}s)")
    assert elapsed >= LEASE_DURATION - RETRY_PERIOD - 0.1
    assert elapsed <= bound
    lease = await kube(kube.coordination.read_namespaced_lease, "controller-manager-py", "kube-system")
    assert (lease.spec.lease_transitions or 0) == transitions + 1
    assert await leader.process.wait(5) == -signal.SIGKILL


async def test_a_stopped_leader_releases_the_lease_and_the_standby_takes_over_at_once(
        processes: Processes, sim: KubeSim, https: Https, kube: Kube) -> None:
    # A long lease: a takeover after release is then clearly told from one after expiry.
    lease_duration, renew_deadline = 20.0, 15.0
    election = (f"--leader-elect-lease-duration={lease_duration}s", f"--leader-elect-renew-deadline={renew_deadline}s",
                f"--leader-elect-retry-period={RETRY_PERIOD}s")
    a, b = await asyncio.gather(start_manager(processes, sim, name="manager-a", election=election, https=https),
                                start_manager(processes, sim, name="manager-b", election=election, https=https))
    leader = await one_leader(https, kube, [a, b])
    standby = b if leader is a else a
    old_holder, new_holder = await leader.identity(), await standby.identity()

    leader.process.send(signal.SIGTERM)
    stopped_at = time.monotonic()

    # The stopping leader first drains its in-flight syncs, then writes the lease back with no holder.
    async def released() -> float | None:
        holder = await kube.lease_holder()
        assert holder in (old_holder, "", new_holder)
        return time.monotonic() if holder != old_holder else None

    released_at = await wait_until(released, timeout=lease_duration / 2, interval=0.02, what="the lease released")
    elapsed = await takeover(https, kube, standby, released_at, timeout=lease_duration / 2)
    total = time.monotonic() - stopped_at
    print(f"takeover after SIGTERM: {total:.2f}s, of which {elapsed:.2f}s after the lease was released "
          f"(retry {RETRY_PERIOD}s, lease {lease_duration}s)")
    assert elapsed <= RETRY_PERIOD * (1 + JITTER) + SLACK
    assert total < lease_duration / 2  # released, not expired
    assert await leader.process.wait(15) == 0
    records = leader.process.records()
    assert [r for r in records if r.get("level") == "error"] == []
    assert any(r.get("event", "").startswith("released lease") for r in records)
