"""Garbage-collector settings for a process whose heap is mostly long-lived objects: the daemon's informer caches,
kube-sim's store (both use it; it depends on nothing of either).

Why: CPython's cyclic collector walks every tracked container on each full collection, and the informer cache
is exactly what keeps growing, so with the default thresholds (700, 10, 10) collection took ~60% of watch-event
ingest time in ``bench`` (see bench/RESULTS.md). The cache holds no reference cycles worth collecting early.

Guarantees:
- :func:`configure` raises the generation-0 threshold so fewer short-lived survivors get promoted (and fewer
  full collections run); collection stays on, so real cycles are still reclaimed.
- :func:`freeze_cache` moves everything alive now (the synced caches) into the permanent generation, so later
  collections never walk it again. Objects the cache later drops are still freed by reference counting.
- :func:`collect_periodically` runs a full collection every :data:`COLLECT_INTERVAL` seconds and freezes what
  survives it, so each one walks only what was made since the last. Why: with the raised threshold a full collection
  comes only after millions of allocations, and until then cyclic garbage stays: an exception kept in a list in the
  frame its traceback holds, with the responses and requests those frames hold. A leader under the chaos soak's calm
  churn grew ~0.7-1.75 MiB a minute that way (Python blocks +38,000 in 8 minutes; with a full collection every 90 s,
  flat). Cycles made on every request are fixed where they are made (the write fence's shadow of the request writer
  held the writer's method: ~40 objects a write, ~40,000 in two calm minutes, now none;
  ``tests/client/test_rest.py`` asserts a write leaves no cyclic garbage); these runs reclaim what the error paths
  still leave (~1,500 objects in two calm minutes). Every :data:`UNFREEZE_EVERY`-th run unfreezes everything first,
  so an object frozen while alive that later died in a cycle is reclaimed within the hour; that run walks the whole
  heap (~0.6-3 s at 100,000 cached pods, by machine load), the others a few milliseconds. It is skipped (and said so
  once in the log) while more than :data:`UNFREEZE_MAX_FROZEN` objects are frozen, since it would hold the process
  longer than any lease allows: kube-sim at 5,000 nodes and 120,000 pods (6 GiB) stopped answering long enough for
  the envelope's leader to lose its Lease (10 s renew deadline) at the first hourly run. What that leaves
  uncollected is only what was alive at some freeze and later died in a cycle.
- :func:`trim_heap` hands the C heap's free pages back to the system (glibc's ``malloc_trim``; elsewhere it does
  nothing), and :func:`collect_periodically` calls it after each run. Why: objects over 512 bytes (dict tables,
  request and response bodies) come from the C heap, which returns memory only from its top; after a burst of
  writes its freed middle stays resident. A calm chaos-soak leader at 130 MiB held 22 MiB of free heap (glibc's
  ``malloc_stats``), and one ``malloc_trim(0)`` took its RSS to 117 MiB. Go's runtime returns freed spans the
  same way (its scavenger).
- :func:`pin_mmap_threshold` (the daemon calls it at start) gives every allocation of 128 KiB or more a mapping of
  its own, returned to the system when freed. Why: uvloop gives each TLS connection a 256 KiB read buffer from
  malloc (the leader holds 60-90 connections: a watch each, the pool, requests in flight) and allocates 256 KiB
  for each decrypted read before shrinking it; glibc raises its mapping threshold to the largest mapped block
  freed so far, so after the first closed connection these extended the heap, where each closed connection left
  a hole that small allocations then pinned. A calm chaos-soak leader's heap grew 28 -> 39 MiB over an hour that
  way; pinned, 22 -> 28. The price: each decrypted read maps and unmaps (~12 us more, ~0.17% of a core on a calm
  leader). kube-sim keeps glibc's default: its large allocations are list responses, which the dynamic
  threshold serves from reused heap without faulting fresh pages.
- :data:`PAUSES` (installed by :func:`configure`) adds up the time each collection held the process, exported as
  ``python_gc_pause_seconds_total{generation}`` by both (Go processes export ``go_gc_duration_seconds``).
- kube-sim runs the same policy: its store grows for the whole run, and CPython's own full collections (each time
  the long-lived heap grew by a quarter) walked all of it: at ~800 MiB under the chaos soak, kube-sim answered
  nothing for 4.7 s, longer than the soak's 4 s renew deadline, and the leader lost its Lease. A real API
  server has no such pause.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import itertools
import time
from collections.abc import Iterator
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily

from controller_manager.clock import Clock

# 50,000: measured in bench's ingest (watch events into a growing cache) against 10,000: +10% over 50k events,
# +17% over 20k; beyond it nothing more (100,000 measured the same). A young collection then walks at most
# 50,000 objects (a few milliseconds), well inside the latency target.
GEN0_THRESHOLD = 50_000
COLLECT_INTERVAL = 300.0  # seconds between full collections of what is young since the last freeze
UNFREEZE_EVERY = 12  # every 12th run (hourly) also collects what was frozen
SLOW_COLLECTION = 0.1  # seconds: a collection longer than this is logged
# Frozen objects beyond which the hourly unfreezing run is skipped: walking 4 million took 1.0 s on a loaded 2-core
# machine (~250 ns each), and a pause is time no Lease renewal and no request is served.
UNFREEZE_MAX_FROZEN = 4_000_000
# Allocations from this size up get a mapping of their own (glibc's default before it starts raising the threshold).
MMAP_THRESHOLD = 128 * 1024


class Pauses:
    """The time the cyclic collector held the process, per generation (CPython's ``gc.callbacks``): what Go
    processes export as ``go_gc_duration_seconds``, so a benchmark or an operator can tell collector time from
    work. Cost: two ``perf_counter`` calls per collection."""

    def __init__(self) -> None:
        self.seconds = [0.0, 0.0, 0.0]
        self.count = [0, 0, 0]
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        generation = min(int(info.get("generation", 2)), 2)
        self.seconds[generation] += time.perf_counter() - self._started
        self.count[generation] += 1


PAUSE_METRIC = "python_gc_pause_seconds"
PAUSES = Pauses()


class PauseCollector:
    """A :class:`Pauses` for a ``prometheus_client`` registry."""

    def __init__(self, pauses: Pauses) -> None:
        self.pauses = pauses

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(PAUSE_METRIC, "Time the cyclic garbage collector held the process, by "
                                     "generation.", labels=["generation"])
        for generation, seconds in enumerate(self.pauses.seconds):
            family.add_metric([str(generation)], seconds)
        yield family


REGISTRY.register(PauseCollector(PAUSES))  # the daemon's /metrics
_PAUSES_ALONE = CollectorRegistry(auto_describe=False)
_PAUSES_ALONE.register(PauseCollector(PAUSES))


def pauses_text() -> str:
    """:data:`PAUSES` in the Prometheus text format, for a process that writes its own ``/metrics`` (kube-sim)."""
    return generate_latest(_PAUSES_ALONE).decode()


def configure() -> None:
    """The raised threshold, and :data:`PAUSES` counting every collection from now on."""
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GEN0_THRESHOLD, gen1, gen2)
    if PAUSES not in gc.callbacks:
        gc.callbacks.append(PAUSES)


def freeze_cache() -> None:
    gc.collect()
    gc.freeze()


def collect_young(*, unfreeze: bool = False) -> int:
    """One full collection of what is not frozen (of everything with ``unfreeze``), then freeze what survives.
    Returns the number of unreachable objects found."""
    if unfreeze:
        gc.unfreeze()
    found = gc.collect()
    gc.freeze()
    return found


def _glibc(name: str, argtypes: list[Any]) -> Any:
    """glibc's function ``name`` (returning int), or None where the C library has none (musl, macOS)."""
    try:
        function = getattr(ctypes.CDLL(ctypes.util.find_library("c")), name)
    except (OSError, AttributeError, TypeError):
        return None
    function.argtypes = argtypes
    function.restype = ctypes.c_int
    return function


_MALLOC_TRIM = _glibc("malloc_trim", [ctypes.c_size_t])
_MALLOPT = _glibc("mallopt", [ctypes.c_int, ctypes.c_int])
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)


def pin_mmap_threshold(size: int = MMAP_THRESHOLD) -> bool:
    """From now on every allocation of ``size`` bytes or more gets a mapping of its own, handed back to the system
    when it is freed; False where the C library cannot (not glibc)."""
    return _MALLOPT is not None and _MALLOPT(_M_MMAP_THRESHOLD, size) == 1


def trim_heap() -> bool:
    """Return the C heap's free pages to the system; False where the C library cannot (not glibc)."""
    if _MALLOC_TRIM is None:
        return False
    _MALLOC_TRIM(0)
    return True


async def collect_periodically(clock: Clock, log: Any, interval: float = COLLECT_INTERVAL) -> None:
    """Forever: a young collection every ``interval`` seconds (an unfreezing one every
    :data:`UNFREEZE_EVERY`-th), then the C heap trimmed; one run longer than :data:`SLOW_COLLECTION` is logged on
    ``log`` (a structlog logger)."""
    said_skipped = False
    for run in itertools.count(1):
        await clock.sleep(interval)
        unfreeze = run % UNFREEZE_EVERY == 0
        if unfreeze and gc.get_freeze_count() > UNFREEZE_MAX_FROZEN:
            unfreeze = False
            if not said_skipped:
                said_skipped = True
                log.info("hourly full garbage collection skipped: it would walk every frozen object",
                         frozen=gc.get_freeze_count(), limit=UNFREEZE_MAX_FROZEN)
        started = time.perf_counter()
        found = collect_young(unfreeze=unfreeze)
        trim_heap()
        took = time.perf_counter() - started
        if took > SLOW_COLLECTION:
            log.info("slow garbage collection", seconds=round(took, 3), unreachable=found, unfrozen=unfreeze)
