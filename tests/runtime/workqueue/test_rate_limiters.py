"""Rate limiters: ports of client-go's default_rate_limiters_test.go plus the clock-driven bucket."""

from __future__ import annotations

import pytest

from controller_manager.clock import FakeClock
from controller_manager.runtime.workqueue import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    WithMaxWaitRateLimiter,
    default_controller_rate_limiter,
)

MS = 0.001


def test_item_exponential_failure() -> None:
    limiter = ItemExponentialFailureRateLimiter(1 * MS, 1.0)
    assert [limiter.when("one") for _ in range(5)] == pytest.approx([1 * MS, 2 * MS, 4 * MS, 8 * MS, 16 * MS])
    assert limiter.num_requeues("one") == 5
    assert [limiter.when("two"), limiter.when("two")] == pytest.approx([1 * MS, 2 * MS])
    assert limiter.num_requeues("two") == 2
    limiter.forget("one")
    assert limiter.num_requeues("one") == 0
    assert limiter.when("one") == pytest.approx(1 * MS)


@pytest.mark.parametrize(
    ("base", "cap", "warmup", "expected"),
    [
        pytest.param(1 * MS, 1000.0, 5, 32 * MS, id="sixth-try-32ms"),
        pytest.param(1 * MS, 1000.0, 1000, 1000.0, id="overflow-capped-1000s"),
        pytest.param(60.0, 3_600_000.0, 2, 240.0, id="minutes-base"),
        pytest.param(60.0, 3_600_000.0, 1000, 3_600_000.0, id="overflow-capped-1000h"),
        pytest.param(60.0, 3_600_000.0, 5000, 3_600_000.0, id="far-past-float-range"),
    ],
)
def test_item_exponential_failure_overflow(base: float, cap: float, warmup: int, expected: float) -> None:
    limiter = ItemExponentialFailureRateLimiter(base, cap)
    for _ in range(warmup):
        limiter.when("x")
    assert limiter.when("x") == pytest.approx(expected)


def test_default_controller_backoff_doubles_from_5ms_and_forget_resets() -> None:
    clock = FakeClock()
    limiter = default_controller_rate_limiter(clock)
    delays = [limiter.when("ns/a") for _ in range(8)]
    assert delays == pytest.approx([0.005 * 2**i for i in range(8)])
    assert limiter.num_requeues("ns/a") == 8
    limiter.forget("ns/a")
    assert limiter.num_requeues("ns/a") == 0
    assert limiter.when("ns/a") == pytest.approx(0.005)


def test_default_controller_backoff_caps_at_1000s() -> None:
    limiter = default_controller_rate_limiter(FakeClock())
    for _ in range(40):
        last = limiter.when("k")
    assert last == pytest.approx(1000.0)


def test_item_fast_slow() -> None:
    limiter = ItemFastSlowRateLimiter(5 * MS, 10.0, 3)
    assert [limiter.when("one") for _ in range(5)] == pytest.approx([5 * MS, 5 * MS, 5 * MS, 10.0, 10.0])
    assert limiter.num_requeues("one") == 5
    assert [limiter.when("two"), limiter.when("two")] == pytest.approx([5 * MS, 5 * MS])
    assert limiter.num_requeues("two") == 2
    limiter.forget("one")
    assert limiter.num_requeues("one") == 0
    assert limiter.when("one") == pytest.approx(5 * MS)


def test_max_of() -> None:
    limiter = MaxOfRateLimiter(ItemFastSlowRateLimiter(5 * MS, 3.0, 3), ItemExponentialFailureRateLimiter(MS, 1.0))
    assert [limiter.when("one") for _ in range(5)] == pytest.approx([5 * MS, 5 * MS, 5 * MS, 3.0, 3.0])
    assert limiter.num_requeues("one") == 5
    assert [limiter.when("two"), limiter.when("two")] == pytest.approx([5 * MS, 5 * MS])
    assert limiter.num_requeues("two") == 2
    limiter.forget("one")
    assert limiter.num_requeues("one") == 0
    assert limiter.when("one") == pytest.approx(5 * MS)


def test_with_max_wait() -> None:
    limiter = WithMaxWaitRateLimiter(ItemFastSlowRateLimiter(5 * MS, 1000.0, 100), 500.0)
    assert all(limiter.when("k") == pytest.approx(5 * MS) for _ in range(100))
    assert all(limiter.when("k") == pytest.approx(500.0) for _ in range(100))


def test_bucket_allows_burst_then_spaces_by_qps() -> None:
    clock = FakeClock()
    limiter = BucketRateLimiter(qps=10, burst=100, clock=clock)
    assert [limiter.when(i) for i in range(100)] == [0.0] * 100
    # Beyond the burst, reservations queue up 100 ms apart.
    assert [limiter.when(i) for i in range(3)] == pytest.approx([0.1, 0.2, 0.3])
    assert limiter.num_requeues(1) == 0


def test_bucket_refills_with_clock_time() -> None:
    clock = FakeClock()
    limiter = BucketRateLimiter(qps=10, burst=5, clock=clock)
    for i in range(5):
        assert limiter.when(i) == 0.0
    assert limiter.when("x") == pytest.approx(0.1)  # owes one token
    clock.advance(0.3)  # refills three: two left after paying the debt
    assert limiter.when("y") == 0.0
    assert limiter.when("y") == 0.0
    assert limiter.when("y") == pytest.approx(0.1)
    clock.advance(3600)  # a long idle spell refills only up to the burst
    assert [limiter.when(i) for i in range(5)] == [0.0] * 5
    assert limiter.when("z") == pytest.approx(0.1)


def test_default_bucket_dominates_once_burst_is_spent() -> None:
    clock = FakeClock()
    limiter = default_controller_rate_limiter(clock)
    for i in range(100):
        assert limiter.when(f"k{i}") == pytest.approx(0.005)
    # The 101st distinct key's first failure would be 5 ms; the overall bucket says 100 ms.
    assert limiter.when("k100") == pytest.approx(0.1)


@pytest.mark.parametrize(("qps", "burst"), [pytest.param(0, 1, id="zero-qps"), pytest.param(1, 0, id="zero-burst")])
def test_bucket_rejects_bad_settings(qps: float, burst: int) -> None:
    with pytest.raises(ValueError, match="must be"):
        BucketRateLimiter(qps=qps, burst=burst, clock=FakeClock())
