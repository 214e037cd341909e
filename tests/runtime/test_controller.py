"""The shared controller runner: requeues, backoff, exclusivity, shutdown, metrics and health."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from controller_manager.clock import FakeClock
from controller_manager.runtime.controller import (
    RATE_LIMITED,
    Controller,
    ControllerContext,
    Result,
    TerminalError,
    run_controller,
)
from tests.prometheus import sample_value

DEADLINE = 5.0


async def eventually(cond: Callable[[], bool], what: str = "condition") -> None:
    """Let the loop run until ``cond()`` holds, failing after a real-time deadline."""
    loop = asyncio.get_running_loop()
    end = loop.time() + DEADLINE
    while not cond():
        if loop.time() > end:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.001)


async def settle(turns: int = 20) -> None:
    for _ in range(turns):
        await asyncio.sleep(0)


SyncFn = Callable[[str], Awaitable[Result | None]]


class TinyController(Controller):
    name = "tiny-controller"
    alias = "tiny"
    workers_option = "concurrent-tiny-syncs"
    default_workers = 2

    def __init__(self, ctx: ControllerContext, fn: SyncFn) -> None:
        super().__init__(ctx)
        self.fn = fn
        self.calls: list[str] = []

    async def sync(self, key: str) -> Result | None:
        self.calls.append(key)
        return await self.fn(key)


def make(fn: SyncFn, clock: FakeClock | None = None, options: dict[str, Any] | None = None,
         name: str = "tiny-controller") -> TinyController:
    ctx = ControllerContext(client=None, informers=None, clock=clock or FakeClock(),  # type: ignore[arg-type]
                            events=None, options=options or {})  # type: ignore[arg-type]
    cls = type("Tiny", (TinyController,), {"name": name})
    return cls(ctx, fn)  # type: ignore[no-any-return]


async def stop(c: Controller, runner: asyncio.Task[None]) -> None:
    c.queue.shut_down()
    await asyncio.wait_for(runner, DEADLINE)


def metric(name: str, controller: str) -> float:
    value = sample_value(name, {"controller": controller})
    return value or 0.0


async def test_requeue_after_is_honoured() -> None:
    clock = FakeClock()

    async def fn(key: str) -> Result | None:
        return Result(requeue_after=10.0)

    c = make(fn, clock, name="tiny-requeue")
    runner = asyncio.create_task(run_controller(c, 1), name="runner")
    c.queue.add("ns/a")
    await eventually(lambda: c.calls == ["ns/a"])
    await eventually(lambda: c.queue.waiting() == 1, "delayed re-add")
    assert c.queue.num_requeues("ns/a") == 0
    clock.advance(9.9)
    await settle()
    assert c.calls == ["ns/a"]
    clock.advance(0.1)
    await eventually(lambda: c.calls == ["ns/a", "ns/a"])
    await stop(c, runner)


async def test_no_result_forgets_and_does_not_requeue() -> None:
    clock = FakeClock()
    failures = 1

    async def fn(key: str) -> None:
        nonlocal failures
        if failures:
            failures -= 1
            raise RuntimeError("first attempt fails")

    c = make(fn, clock, name="tiny-forget")
    runner = asyncio.create_task(run_controller(c, 1), name="runner")
    c.queue.add("k")
    await eventually(lambda: c.queue.num_requeues("k") == 1)
    clock.advance(0.005)
    await eventually(lambda: len(c.calls) == 2)
    await eventually(lambda: c.queue.num_requeues("k") == 0, "forget after success")
    assert c.queue.waiting() == 0
    await stop(c, runner)


async def test_exceptions_retry_with_growing_backoff() -> None:
    clock = FakeClock()

    async def fn(key: str) -> None:
        raise ValueError(f"cannot sync {key}")

    c = make(fn, clock, name="tiny-backoff")
    errors_before = metric("controller_sync_errors_total", "tiny-backoff")
    runner = asyncio.create_task(run_controller(c, 1), name="runner")
    c.queue.add("ns/bad")
    await eventually(lambda: len(c.calls) == 1)
    # client-go's default per-item backoff: 5 ms, 10 ms, 20 ms, 40 ms, ...
    for attempt, delay in enumerate([0.005, 0.010, 0.020, 0.040], start=1):
        await eventually(lambda: c.queue.waiting() == 1, "a rate-limited re-add")
        clock.advance(delay * 0.9)
        await settle()
        assert len(c.calls) == attempt, f"retried before its {delay}s backoff"
        clock.advance(delay * 0.1 + 1e-9)
        await eventually(lambda n=attempt: len(c.calls) == n + 1, f"retry {attempt}")
    assert metric("controller_sync_errors_total", "tiny-backoff") - errors_before == 5
    assert c.health() is None, "sync errors never kill a worker"
    await stop(c, runner)


async def test_key_never_in_two_workers_at_once() -> None:
    release = asyncio.Event()
    running: dict[str, int] = {}
    max_seen: dict[str, int] = {}

    async def fn(key: str) -> None:
        running[key] = running.get(key, 0) + 1
        max_seen[key] = max(max_seen.get(key, 0), running[key])
        if key == "hot":
            await release.wait()
        await asyncio.sleep(0)
        running[key] -= 1

    c = make(fn, name="tiny-exclusive")
    runner = asyncio.create_task(run_controller(c, 4), name="runner")
    c.queue.add("hot")
    await eventually(lambda: running.get("hot") == 1)
    for _ in range(5):
        c.queue.add("hot")  # dirty while processing: kept for after
    for k in ("a", "b", "c"):
        c.queue.add(k)
    await eventually(lambda: all(k in c.calls for k in ("a", "b", "c")), "other keys on other workers")
    assert c.calls.count("hot") == 1
    release.set()
    await eventually(lambda: c.calls.count("hot") == 2, "the re-added key once more")
    await settle()
    assert c.calls.count("hot") == 2
    assert max(max_seen.values()) == 1
    await stop(c, runner)


async def test_shutdown_waits_for_in_flight_sync_and_drains_queue() -> None:
    release = asyncio.Event()
    finished: list[str] = []

    async def fn(key: str) -> None:
        if key == "slow":
            await release.wait()
        finished.append(key)

    c = make(fn, name="tiny-shutdown")
    runner = asyncio.create_task(run_controller(c, 1), name="runner")
    c.queue.add("slow")
    await eventually(lambda: c.calls == ["slow"])
    c.queue.add("queued")
    c.queue.shut_down()
    c.queue.add("too-late")
    await settle()
    assert not runner.done(), "the runner must wait for the in-flight sync"
    release.set()
    await asyncio.wait_for(runner, DEADLINE)
    assert finished == ["slow", "queued"]


async def test_cancel_stops_workers_mid_sync() -> None:
    started = asyncio.Event()

    async def fn(key: str) -> None:
        started.set()
        await asyncio.Event().wait()

    c = make(fn, name="tiny-cancel")
    runner = asyncio.create_task(run_controller(c, 3), name="runner")
    c.queue.add("k")
    await started.wait()
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner
    assert c.health() is None


async def test_stray_cancellation_inside_sync_is_retried() -> None:
    clock = FakeClock()
    attempts = 0

    async def fn(key: str) -> None:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            fut.cancel()
            await fut  # raises CancelledError without the worker being cancelled

    c = make(fn, clock, name="tiny-stray")
    runner = asyncio.create_task(run_controller(c, 1), name="runner")
    c.queue.add("k")
    await eventually(lambda: c.queue.waiting() == 1)
    clock.advance(0.005)
    await eventually(lambda: attempts == 2)
    await stop(c, runner)


async def test_worker_death_is_reported_by_health() -> None:
    async def fn(key: str) -> None:
        return None

    c = make(fn, name="tiny-dies")
    real_done = c.queue.done
    broken = {"poison"}

    def done(key: str) -> None:
        real_done(key)
        if key in broken:
            broken.discard(key)
            raise RuntimeError("queue bookkeeping bug")

    c.queue.done = done  # type: ignore[method-assign]
    runner = asyncio.create_task(run_controller(c, 2), name="runner")
    c.queue.add("poison")
    await eventually(lambda: c.health() is not None, "health to notice the dead worker")
    assert c.health() == "1 worker(s) died: worker 0: RuntimeError: queue bookkeeping bug"
    c.queue.add("after")
    await eventually(lambda: "after" in c.calls, "the surviving worker to keep syncing")
    await stop(c, runner)


async def test_sync_duration_histogram_counts_syncs() -> None:
    async def fn(key: str) -> None:
        return None

    c = make(fn, name="tiny-metrics")
    before = metric("controller_sync_duration_seconds_count", "tiny-metrics")
    runner = asyncio.create_task(run_controller(c, 2), name="runner")
    for k in ("a", "b", "c"):
        c.queue.add(k)
    await eventually(lambda: len(c.calls) == 3)
    await stop(c, runner)
    assert metric("controller_sync_duration_seconds_count", "tiny-metrics") - before == 3


async def test_workers_from_options_and_validation() -> None:
    async def fn(key: str) -> None:
        return None

    assert make(fn).workers() == 2
    assert make(fn, options={"concurrent_tiny_syncs": 7}).workers() == 7
    assert make(fn, options={"concurrent-tiny-syncs": 3}).workers() == 3
    with pytest.raises(ValueError, match="at least one worker"):
        await run_controller(make(fn), 0)


async def test_context_queue_uses_injected_clock() -> None:
    clock = FakeClock()

    async def fn(key: str) -> None:
        return None

    c = make(fn, clock, name="tiny-clock")
    c.queue.add_after("later", 30)
    assert len(c.queue) == 0
    clock.advance(30)
    assert len(c.queue) == 1
    c.queue.shut_down()


class BackgroundController(TinyController):
    """A controller with background work beside its workers (the garbage collector's shape)."""

    def __init__(self, ctx: ControllerContext, fn: SyncFn, background: Callable[[], Awaitable[None]]) -> None:
        super().__init__(ctx, fn)
        self._background = background

    async def run_background(self) -> None:
        await self._background()


def make_background(background: Callable[[], Awaitable[None]], name: str) -> BackgroundController:
    async def fn(key: str) -> Result | None:
        return None

    ctx = ControllerContext(client=None, informers=None, clock=FakeClock(),  # type: ignore[arg-type]
                            events=None, options={})  # type: ignore[arg-type]
    cls = type("Bg", (BackgroundController,), {"name": name})
    return cls(ctx, fn, background)  # type: ignore[no-any-return]


async def test_background_work_runs_beside_the_workers_and_is_cancelled_after_them() -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def background() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    c = make_background(background, "tiny-background")
    runner = asyncio.create_task(run_controller(c, 1), name="runner")
    await asyncio.wait_for(started.wait(), DEADLINE)
    c.queue.add("ns/a")
    await eventually(lambda: c.calls == ["ns/a"])
    assert not cancelled.is_set()
    await stop(c, runner)
    assert cancelled.is_set()
    assert c.health() is None


async def test_background_failure_is_reported_by_health_and_workers_keep_going() -> None:
    async def background() -> None:
        raise RuntimeError("graph processor broke")

    c = make_background(background, "tiny-background-fails")
    runner = asyncio.create_task(run_controller(c, 1), name="runner")
    await eventually(lambda: c.health() is not None, "unhealthy")
    assert "graph processor broke" in (c.health() or "")
    c.queue.add("ns/b")
    await eventually(lambda: c.calls == ["ns/b"])
    await stop(c, runner)


async def test_terminal_error_gives_up_on_the_key() -> None:
    clock = FakeClock()

    async def fn(key: str) -> None:
        raise TerminalError("cannot ever work") from ValueError("bad spec")

    c = make(fn, clock, name="tiny-terminal")
    errors_before = metric("controller_sync_errors_total", "tiny-terminal")
    runner = asyncio.create_task(run_controller(c, 1), name="runner")
    c.queue.add("k")
    await eventually(lambda: metric("controller_sync_errors_total", "tiny-terminal") == errors_before + 1)
    await settle()
    assert c.queue.num_requeues("k") == 0
    assert c.queue.waiting() == 0
    clock.advance(60.0)
    await settle()
    assert c.calls == ["k"]
    await stop(c, runner)


async def test_rate_limited_result_requeues_with_growing_backoff_and_no_error() -> None:
    clock = FakeClock()

    async def fn(key: str) -> Result:
        return RATE_LIMITED

    c = make(fn, clock, name="tiny-rate-limited")
    errors_before = metric("controller_sync_errors_total", "tiny-rate-limited")
    runner = asyncio.create_task(run_controller(c, 1), name="runner")
    c.queue.add("k")
    await eventually(lambda: c.queue.num_requeues("k") == 1)
    clock.advance(0.005)
    await eventually(lambda: c.queue.num_requeues("k") == 2, "second rate-limited requeue")
    clock.advance(0.005)
    await settle()
    assert len(c.calls) == 2  # the second delay doubled
    clock.advance(0.005)
    await eventually(lambda: len(c.calls) == 3)
    assert metric("controller_sync_errors_total", "tiny-rate-limited") == errors_before
    await stop(c, runner)


async def test_rate_limited_result_forgetting_failures_keeps_the_base_delay() -> None:
    clock = FakeClock()

    async def fn(key: str) -> Result:
        return Result(rate_limited=True, forget_failures=True)

    c = make(fn, clock, name="tiny-rate-limited-forget")
    runner = asyncio.create_task(run_controller(c, 1), name="runner")
    c.queue.add("k")
    for n in range(1, 4):
        await eventually(lambda n=n: len(c.calls) == n and c.queue.waiting() == 1)  # type: ignore[misc]
        assert c.queue.num_requeues("k") == 0
        clock.advance(0.005)
    await eventually(lambda: len(c.calls) == 4)
    await stop(c, runner)


async def test_max_retries_drops_the_key_after_that_many_failures() -> None:
    clock = FakeClock()

    async def fn(key: str) -> None:
        raise ValueError("always")

    c = make(fn, clock, name="tiny-max-retries")
    c.max_retries = 2  # type: ignore[misc]
    runner = asyncio.create_task(run_controller(c, 1), name="runner")
    c.queue.add("k")
    await eventually(lambda: c.queue.num_requeues("k") == 1)
    clock.advance(0.005)
    await eventually(lambda: c.queue.num_requeues("k") == 2)
    clock.advance(0.01)
    await eventually(lambda: len(c.calls) == 3)
    await eventually(lambda: c.queue.num_requeues("k") == 0, "dropped and forgotten")
    assert c.queue.waiting() == 0
    await stop(c, runner)


async def test_run_queue_drains_another_queue_on_the_same_contract() -> None:
    clock = FakeClock()
    seen: list[str] = []
    failures = 1

    async def other(key: str) -> Result | None:
        nonlocal failures
        seen.append(key)
        if failures:
            failures -= 1
            raise RuntimeError("once")
        return Result(requeue_after=5.0) if key == "later" else None

    async def fn(key: str) -> None:
        return None

    c = make(fn, clock, name="tiny-other-queue")
    extra = c.ctx.new_queue("tiny_extra")
    task = asyncio.create_task(c.run_queue(extra, other, workers=2), name="extra")
    extra.add("now")
    await eventually(lambda: extra.num_requeues("now") == 1)
    assert metric("controller_sync_errors_total", "tiny-other-queue/tiny_extra") >= 1
    clock.advance(0.005)
    await eventually(lambda: seen == ["now", "now"])
    extra.add("later")
    await eventually(lambda: extra.waiting() == 1, "requeue_after honoured")
    clock.advance(5.0)
    await eventually(lambda: seen == ["now", "now", "later", "later"])
    extra.shut_down()
    await asyncio.wait_for(task, DEADLINE)
    assert c.health() is None


async def test_intake_gate_holds_every_queue_until_it_opens() -> None:
    opened = asyncio.Event()

    async def fn(key: str) -> None:
        return None

    c = make(fn, name="tiny-gated")
    c.ctx.intake = opened.wait
    extra = c.ctx.new_queue("tiny_gated_extra")
    seen: list[str] = []

    async def other(key: str) -> None:
        seen.append(key)

    runner = asyncio.create_task(run_controller(c, 2), name="runner")
    extra_runner = asyncio.create_task(c.run_queue(extra, other), name="extra")
    c.queue.add("a")
    extra.add("b")
    await settle()
    assert c.calls == []
    assert seen == []
    opened.set()
    await eventually(lambda: c.calls == ["a"] and seen == ["b"])
    extra.shut_down()
    await asyncio.wait_for(extra_runner, DEADLINE)
    await stop(c, runner)
