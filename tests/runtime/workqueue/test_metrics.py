"""Work queue metrics as a scraper sees them in prometheus_client's default registry."""

from __future__ import annotations

import itertools

import pytest
from prometheus_client import REGISTRY, generate_latest

from controller_manager.clock import FakeClock
from controller_manager.runtime.workqueue import RateLimitingQueue, WorkQueue
from tests.prometheus import sample_value

_names = itertools.count()


def unique(prefix: str) -> str:
    # Stats outlive queues (counters never go backwards), so each test uses its own queue name.
    return f"{prefix}-{next(_names)}"


def sample(metric: str, name: str, **labels: str) -> float | None:
    return sample_value(metric, {"name": name, **labels})


async def test_depth_adds_and_durations() -> None:
    clock = FakeClock()
    name = unique("metrics")
    q: WorkQueue[str] = WorkQueue(name, clock=clock)
    q.add("a")
    q.add("b")
    q.add("a")  # deduplicated: not an add
    assert sample("workqueue_depth", name) == 2
    assert sample("workqueue_adds_total", name) == 2

    clock.advance(0.5)
    assert await q.get() == "a"
    assert sample("workqueue_depth", name) == 1
    assert sample("workqueue_queue_duration_seconds_count", name) == 1
    assert sample("workqueue_queue_duration_seconds_sum", name) == pytest.approx(0.5)
    assert sample("workqueue_queue_duration_seconds_bucket", name, le="0.1") == 0
    assert sample("workqueue_queue_duration_seconds_bucket", name, le="1.0") == 1
    assert sample("workqueue_queue_duration_seconds_bucket", name, le="+Inf") == 1

    clock.advance(2.0)
    q.done("a")
    assert sample("workqueue_work_duration_seconds_count", name) == 1
    assert sample("workqueue_work_duration_seconds_sum", name) == pytest.approx(2.0)
    assert sample("workqueue_work_duration_seconds_bucket", name, le="1.0") == 0
    assert sample("workqueue_work_duration_seconds_bucket", name, le="10.0") == 1


async def test_queue_duration_starts_when_a_delayed_key_becomes_ready() -> None:
    # client-go's delaying queue calls Add once the delay has passed: the delay itself is not queue time.
    clock = FakeClock()
    name = unique("delayed")
    q: RateLimitingQueue[str] = RateLimitingQueue(name, clock=clock)
    q.add_after("a", 5.0)
    clock.advance(5.0)
    clock.advance(0.25)
    assert await q.get() == "a"
    assert sample("workqueue_queue_duration_seconds_sum", name) == pytest.approx(0.25)


async def test_queue_duration_of_a_key_added_while_processing_starts_at_that_add() -> None:
    # client-go's metrics.add runs in Add before the processing check, so a key re-added during its own sync is
    # timed from that Add: its wait includes the rest of the sync (not from Done, when it is queued again).
    clock = FakeClock()
    name = unique("dirty")
    q: WorkQueue[str] = WorkQueue(name, clock=clock)
    q.add("a")
    assert await q.get() == "a"
    clock.advance(1.0)
    q.add("a")  # an event during the sync
    clock.advance(3.0)
    q.done("a")  # queued again now
    clock.advance(0.5)
    assert await q.get() == "a"
    assert sample("workqueue_queue_duration_seconds_count", name) == 2
    assert sample("workqueue_queue_duration_seconds_sum", name) == pytest.approx(3.5)
    assert sample("workqueue_queue_duration_seconds_bucket", name, le="1.0") == 1


async def test_histogram_buckets_are_client_gos() -> None:
    name = unique("buckets")
    WorkQueue[str](name, clock=FakeClock())
    text = generate_latest(REGISTRY).decode()
    les = [
        line.split('le="')[1].split('"')[0]
        for line in text.splitlines()
        if line.startswith("workqueue_work_duration_seconds_bucket") and f'name="{name}"' in line
    ]
    # ExponentialBuckets(10e-7, 10, 10): 1 microsecond to 1000 seconds.
    assert les == ["1e-06", "1e-05", "0.0001", "0.001", "0.01", "0.1", "1.0", "10.0", "100.0", "1000.0", "+Inf"]
    assert "# TYPE workqueue_adds_total counter" in text
    assert "# TYPE workqueue_depth gauge" in text


async def test_unfinished_work_is_computed_at_scrape_time() -> None:
    clock = FakeClock()
    name = unique("unfinished")
    q: WorkQueue[str] = WorkQueue(name, clock=clock)
    q.add("a")
    q.add("b")
    await q.get()
    clock.advance(3.0)
    await q.get()
    clock.advance(1.0)
    # "a" has run 4 s, "b" 1 s.
    assert sample("workqueue_unfinished_work_seconds", name) == pytest.approx(5.0)
    assert sample("workqueue_longest_running_processor_seconds", name) == pytest.approx(4.0)
    q.done("a")
    q.done("b")
    assert sample("workqueue_unfinished_work_seconds", name) == 0
    assert sample("workqueue_longest_running_processor_seconds", name) == 0


async def test_retries_count_every_add_after() -> None:
    clock = FakeClock()
    name = unique("retries")
    q: RateLimitingQueue[str] = RateLimitingQueue(name, clock=clock)
    q.add_rate_limited("a")
    q.add_after("b", 1.0)
    q.add_after("c", 0)
    assert sample("workqueue_retries_total", name) == 3
    q.shut_down()
    q.add_after("d", 1.0)  # ignored after shutdown, not counted
    assert sample("workqueue_retries_total", name) == 3


async def test_unnamed_queue_exports_nothing_and_counters_survive_the_queue() -> None:
    before = generate_latest(REGISTRY)
    q: WorkQueue[str] = WorkQueue()
    q.add("x")
    assert generate_latest(REGISTRY).count(b'name=""') == before.count(b'name=""') == 0

    name = unique("gone")
    named: WorkQueue[str] = WorkQueue(name, clock=FakeClock())
    named.add("x")
    del named
    assert sample("workqueue_adds_total", name) == 1
