"""The daemon's periodic collections reclaim cyclic garbage that the raised thresholds would leave for ages."""

from __future__ import annotations

import asyncio
import gc
import os
import subprocess
import sys
import weakref
from collections.abc import Iterator

import pytest
import structlog
from prometheus_client import CollectorRegistry, generate_latest

from controller_manager import gctuning
from controller_manager.clock import FakeClock


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def cycle() -> weakref.ref[Node]:
    """Two objects referring to each other: freed only by the cyclic collector. A weak reference to one."""
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


@pytest.fixture(autouse=True)
def collector_off() -> Iterator[None]:
    """Only the collections under test run (no automatic ones); the process's heap unfrozen afterwards."""
    gc.disable()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.enable()


async def test_cyclic_garbage_made_after_the_freeze_is_reclaimed_on_the_next_run() -> None:
    clock = FakeClock()
    gctuning.freeze_cache()
    task = asyncio.create_task(gctuning.collect_periodically(clock, structlog.get_logger("test"), interval=60))
    await asyncio.sleep(0)
    ref = cycle()
    assert ref() is not None, "nothing collects it until the run"
    clock.advance(59)
    await asyncio.sleep(0)
    assert ref() is not None
    clock.advance(1)
    await asyncio.sleep(0)
    assert ref() is None, "the periodic run reclaimed the cycle"
    task.cancel()


def test_a_cycle_frozen_while_alive_is_reclaimed_by_the_unfreezing_run() -> None:
    a, b = Node(), Node()
    a.other, b.other = b, a
    ref = weakref.ref(a)
    gctuning.collect_young()  # alive: frozen with the survivors
    del a, b
    gctuning.collect_young()
    assert ref() is not None, "frozen objects are not walked by the cheap runs"
    gctuning.collect_young(unfreeze=True)
    assert ref() is None


async def test_the_hourly_unfreezing_run_is_skipped_while_too_much_is_frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    """Walking a large frozen heap would stop the process for seconds (kube-sim at 120,000 pods: long enough to
    cost the daemon its Lease), so above the bound the hourly run collects only what is young, and says so once."""
    clock = FakeClock()
    log = structlog.testing.CapturingLogger()
    a, b = Node(), Node()
    a.other, b.other = b, a
    ref = weakref.ref(a)
    gctuning.collect_young()  # the cycle is alive: frozen with the survivors
    del a, b
    monkeypatch.setattr(gctuning, "UNFREEZE_MAX_FROZEN", gc.get_freeze_count() - 1)
    task = asyncio.create_task(gctuning.collect_periodically(clock, log, interval=60))
    try:
        for _ in range(2 * gctuning.UNFREEZE_EVERY):
            await asyncio.sleep(0)
            clock.advance(60)
            await asyncio.sleep(0)
        assert ref() is not None, "two hours of runs, none walked the frozen heap"
        skipped = [c for c in log.calls if "skipped" in str(c.args)]
        assert len(skipped) == 1
        monkeypatch.setattr(gctuning, "UNFREEZE_MAX_FROZEN", gc.get_freeze_count() + 1_000_000)
        for _ in range(gctuning.UNFREEZE_EVERY):
            await asyncio.sleep(0)
            clock.advance(60)
            await asyncio.sleep(0)
        assert ref() is None, "within the bound again, the hourly run reclaims the frozen cycle"
    finally:
        task.cancel()


def test_every_run_leaves_the_survivors_frozen() -> None:
    gctuning.collect_young()
    survivors = Node()
    assert gc.get_freeze_count() > 0
    before = gc.get_freeze_count()
    gctuning.collect_young()
    assert gc.get_freeze_count() > before, "what survived the run was frozen too"
    assert gc.is_tracked(survivors)


def test_pauses_add_up_each_collection_by_generation() -> None:
    pauses = gctuning.Pauses()
    gc.callbacks.append(pauses)
    try:
        gc.collect(0)
        gc.collect(2)
    finally:
        gc.callbacks.remove(pauses)
    assert pauses.count[0] >= 1
    assert pauses.count[2] >= 1
    assert all(s >= 0.0 for s in pauses.seconds)
    assert pauses.seconds[2] > 0.0
    registry = CollectorRegistry()
    registry.register(gctuning.PauseCollector(pauses))
    text = generate_latest(registry).decode()
    assert "# TYPE python_gc_pause_seconds_total counter" in text  # as prometheus_client writes counters
    assert f'python_gc_pause_seconds_total{{generation="2"}} {pauses.seconds[2]!r}' in text


def test_configure_installs_the_pause_counter_once_and_the_registry_exports_it() -> None:
    from prometheus_client import REGISTRY, generate_latest

    threshold = gc.get_threshold()
    try:
        gctuning.configure()
        gctuning.configure()
        assert gc.callbacks.count(gctuning.PAUSES) == 1
        gc.collect()
        assert 'python_gc_pause_seconds_total{generation="2"}' in generate_latest(REGISTRY).decode()
    finally:
        gc.set_threshold(*threshold)
        gc.callbacks.remove(gctuning.PAUSES)


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim and /proc: Linux only")
def test_trim_heap_returns_the_freed_middle_of_the_c_heap() -> None:
    """Objects over 512 bytes live in the C heap, which gives back only its top: after a burst, its freed middle
    stays resident until trimmed (a calm soak leader: 130 -> 117 MiB from one trim)."""
    burst = [bytes(2048) for _ in range(40_000)]  # ~80 MiB of C-heap blocks
    kept = burst[::64]  # a survivor every 128 KiB pins the heap: nothing is freed from its top
    del burst
    before = _rss_bytes()
    assert gctuning.trim_heap()
    after = _rss_bytes()
    assert before - after > 40 * 1024 * 1024
    assert len(kept) == 625


async def test_every_periodic_run_trims_the_heap(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    trims: list[int] = []
    monkeypatch.setattr(gctuning, "trim_heap", lambda: trims.append(1) or True)
    task = asyncio.create_task(gctuning.collect_periodically(clock, structlog.get_logger("test"), interval=60))
    try:
        for _ in range(3):
            await asyncio.sleep(0)
            clock.advance(60)
            await asyncio.sleep(0)
        assert len(trims) == 3
    finally:
        task.cancel()



# Run in a fresh interpreter (a long-lived test process has free heap chunks that malloc reuses whatever the
# threshold): after a 4 MiB block is mapped and freed, is a 256 KiB allocation in the heap?
_HEAP_PROBE = """
import ctypes, ctypes.util, sys
from controller_manager import gctuning
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
if sys.argv[1] == "pinned":
    assert gctuning.pin_mmap_threshold()
libc.free(libc.malloc(4 << 20))
buffer = libc.malloc(256 * 1024)
for line in open("/proc/self/maps"):
    if line.rstrip().endswith("[heap]"):
        start, end = (int(x, 16) for x in line.split()[0].split("-"))
        print("heap" if start <= buffer < end else "mapped")
        break
else:
    print("mapped")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt and /proc: Linux only")
@pytest.mark.parametrize(("mode", "where"), [("pinned", "mapped"), ("default", "heap")])
def test_large_allocations_get_mappings_of_their_own_once_the_threshold_is_pinned(mode: str, where: str) -> None:
    """uvloop gives each TLS connection a 256 KiB read buffer from malloc. glibc raises its mapping threshold to
    the largest mapped block freed so far, after which such buffers extend the heap, where a closed
    connection's buffer leaves a hole that small allocations then pin. Pinned, each is a mapping of its own."""
    out = subprocess.run([sys.executable, "-c", _HEAP_PROBE, mode], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == where
