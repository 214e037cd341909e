"""Shared test rules: no test may leave a task running behind it; hypothesis judges behaviour, not speed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from hypothesis import HealthCheck, settings
from pytest_asyncio import is_async_test

# The too_slow health check times input generation, which on a shared 2-core machine measures the machine's
# load (it failed a YAML round-trip property under load, nothing else wrong). Per-test settings still apply.
settings.register_profile("project", suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("project")


@pytest.fixture(autouse=True)
def _no_leaked_tasks(request: pytest.FixtureRequest) -> None:
    # Only a coroutine test has a loop to leave tasks on; an async fixture on every synchronous test would give
    # each of them an event loop of its own, a few milliseconds apiece over thousands of tests.
    if is_async_test(request.node):
        request.getfixturevalue("_no_leaked_tasks_in_loop")


@pytest.fixture
async def _no_leaked_tasks_in_loop() -> AsyncIterator[None]:
    before = set(asyncio.all_tasks())
    yield
    # Give cancelled tasks one loop turn to finish unwinding before judging.
    for _ in range(3):
        await asyncio.sleep(0)
    leaked = [t for t in asyncio.all_tasks() - before if not t.done() and t is not asyncio.current_task()]
    if leaked:
        for t in leaked:
            t.cancel()
        await asyncio.gather(*leaked, return_exceptions=True)
        names = ", ".join(sorted(t.get_name() for t in leaked))
        pytest.fail(f"test left tasks running: {names}")
