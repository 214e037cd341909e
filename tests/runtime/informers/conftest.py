"""Fixtures: a fake server + client, a FakeClock, and a runner that cancels what it starts."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from controller_manager.clock import FakeClock
from controller_manager.runtime.informers import SharedInformerFactory

from .fakes import FakeClient, FakeServer


@pytest.fixture
def server() -> FakeServer:
    return FakeServer()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def factory(server: FakeServer, clock: FakeClock) -> SharedInformerFactory:
    return SharedInformerFactory(FakeClient(server), clock, rng=random.Random(7))


Runner = Callable[[Callable[[], Awaitable[None]]], asyncio.Task[None]]


@pytest.fixture
async def run() -> AsyncIterator[Runner]:
    """``run(factory.run)`` starts a coroutine function as a task; the fixture cancels and awaits it."""
    tasks: list[asyncio.Task[None]] = []

    def start(fn: Callable[[], Awaitable[None]]) -> asyncio.Task[None]:
        async def body() -> None:
            await fn()

        task = asyncio.create_task(body(), name="test-runner")
        tasks.append(task)
        return task

    yield start
    for task in tasks:
        task.cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError):
            raise r
