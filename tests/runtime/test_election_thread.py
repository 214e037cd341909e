"""A Lease renewed on its own thread keeps being renewed while the owner's event loop is blocked.

Why it matters: on one loop a renewal waits behind everything else that is ready; a new leader's start-up
burst on a loaded machine kept it waiting past the renew deadline, and the leader lost the Lease it had just
won. These tests block the owner's loop outright (``time.sleep``) for longer than the renew deadline.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from typing import Any

import pytest

from controller_manager.clock import RealClock
from controller_manager.manager.leader import hold_lease
from controller_manager.runtime.election_thread import ElectionThread
from controller_manager.runtime.leaderelection import LeaderElector, LeadershipLost
from tests.runtime.test_leaderelection import LeaseApi, LeaseStore, config


class TimedLeaseApi(LeaseApi):
    """Records when each write lands (monotonic) and whether the client was closed, and on which thread."""

    def __init__(self, store: LeaseStore) -> None:
        super().__init__(store)
        self.writes: list[float] = []
        self.closed_on: str | None = None

    async def update(self, res: Any, obj: Any) -> dict[str, Any]:
        result = await super().update(res, obj)
        self.writes.append(time.monotonic())
        return result

    async def close(self) -> None:
        self.closed_on = threading.current_thread().name


def threaded(store: LeaseStore) -> tuple[LeaderElector, ElectionThread, TimedLeaseApi]:
    thread = ElectionThread("test-lease")
    api = TimedLeaseApi(store)
    le = LeaderElector(api, config("me", lease_duration=2.0, renew_deadline=1.5, retry_period=0.2), RealClock(),
                       rng=random.Random(1), notify=thread.notify)
    return le, thread, api


async def wait_until(predicate: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


async def test_renewals_go_on_while_the_owner_loop_is_blocked() -> None:
    store = LeaseStore()
    le, thread, api = threaded(store)
    held = asyncio.Event()
    task = asyncio.create_task(hold_lease(le, held, thread, api))
    await asyncio.wait_for(held.wait(), 5)
    await wait_until(lambda: len(api.writes) >= 1)

    blocked_at = time.monotonic()
    time.sleep(2.0)  # noqa: ASYNC251  # the whole loop stalls on purpose, longer than the renew deadline (1.5 s)
    unblocked_at = time.monotonic()

    during = [t for t in api.writes if blocked_at < t < unblocked_at]
    assert len(during) >= 3, f"renewals while the loop was blocked: {during}"
    assert le.may_write()
    assert le.intake_open()
    await le.wait_for_intake()  # woken from the thread through notify, on this loop
    assert not task.done()

    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert store.spec()["holderIdentity"] == "", "cancelled, the campaign released the Lease on its thread"
    assert api.closed_on == "test-lease", "the thread's client is closed on the thread"
    assert not le.is_leader


async def test_a_lost_lease_is_raised_on_the_owner_loop() -> None:
    store = LeaseStore()
    le, thread, api = threaded(store)
    held = asyncio.Event()
    task = asyncio.create_task(hold_lease(le, held, thread, api))
    await asyncio.wait_for(held.wait(), 5)
    api.down = True  # every renewal fails from now on
    with pytest.raises(LeadershipLost):
        await asyncio.wait_for(task, 5)
    assert not le.may_write()
    assert api.closed_on == "test-lease"


async def test_cancelled_before_the_thread_started_the_work() -> None:
    thread = ElectionThread("test-idle")
    ran = False

    async def work() -> None:
        nonlocal ran
        ran = True
        await asyncio.sleep(10)

    task = asyncio.create_task(thread.run(work()))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert (await thread.run(asyncio.sleep(0, result=7))) == 7, "the thread keeps serving after a cancel"
    thread.stop()
    thread.stop()  # idempotent
