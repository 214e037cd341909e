"""Garbage-collector settings for a process whose heap is mostly a long-lived informer cache.

Why: CPython's cyclic collector walks every tracked container on each full collection, and the informer cache
is exactly what keeps growing, so with the default thresholds (700, 10, 10) collection took ~60% of watch-event
ingest time in ``bench`` (see bench/RESULTS.md). The cache holds no reference cycles worth collecting early.

Guarantees:
- :func:`configure` raises the generation-0 threshold so fewer short-lived survivors get promoted (and fewer
  full collections run); collection stays on, so real cycles are still reclaimed.
- :func:`freeze_cache` moves everything alive now (the synced caches) into the permanent generation, so later
  collections never walk it again. Objects the cache later drops are still freed by reference counting.
"""

from __future__ import annotations

import gc

# 50,000: measured in bench's ingest (watch events into a growing cache) against 10,000: +10% over 50k events,
# +17% over 20k; beyond it nothing more (100,000 measured the same). A young collection then walks at most
# 50,000 objects (a few milliseconds), well inside the latency target.
GEN0_THRESHOLD = 50_000


def configure() -> None:
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GEN0_THRESHOLD, gen1, gen2)


def freeze_cache() -> None:
    gc.collect()
    gc.freeze()
