"""Benchmark 3: work queue operations per second, 8 workers over 10k distinct keys, beside ``asyncio.Queue``.

A producer adds keys round-robin over ``keys`` distinct keys; 8 worker coroutines loop ``get``/``done``, yielding
to the loop once in between (a sync awaits something), so the workers interleave and a re-added key can meet one
in processing. Every ``add``, ``get`` and ``done`` call counts as one operation. The producer adds 8 keys (one
per worker) per turn of the loop, so the queue stays short and nearly every add does real work (a saturated
queue would make most adds cheap no-ops and flatter the figure). The reference is the usual Python way to hand
work to coroutines, ``asyncio.Queue`` ``put_nowait``/``get``/``task_done`` with the same workers and pattern
(no dedup, no exclusivity, no metrics).
"""

from __future__ import annotations

import asyncio
import time

from bench.report import Figure, at_least
from controller_manager.runtime.workqueue import RateLimitingQueue


async def ours(ops: int, keys: int = 10_000, workers: int = 8, batch: int = 8) -> float:
    """Operations per second of the controllers' queue (named, so metrics are on, as in the daemon)."""
    q: RateLimitingQueue[str] = RateLimitingQueue("bench-workqueue")
    names = [f"default/pod-{i}" for i in range(keys)]
    counted = 0

    async def worker() -> None:
        nonlocal counted
        while True:
            key = await q.get()
            if key is None:
                return
            await asyncio.sleep(0)  # a sync awaits something: the key stays in processing meanwhile
            q.done(key)
            counted += 2

    tasks = [asyncio.create_task(worker(), name=f"bench:worker-{i}") for i in range(workers)]
    start = time.perf_counter()
    i = 0
    while counted < ops:
        for _ in range(batch):
            q.add(names[i % keys])
            i += 1
        counted += batch
        await asyncio.sleep(0)
    q.shut_down()
    await asyncio.gather(*tasks)
    return counted / (time.perf_counter() - start)


async def reference(ops: int, keys: int = 10_000, workers: int = 8, batch: int = 8) -> float:
    q: asyncio.Queue[str | None] = asyncio.Queue()
    names = [f"default/pod-{i}" for i in range(keys)]
    counted = 0

    async def worker() -> None:
        nonlocal counted
        while True:
            key = await q.get()
            if key is None:
                return
            await asyncio.sleep(0)
            q.task_done()
            counted += 2

    tasks = [asyncio.create_task(worker(), name=f"bench:ref-worker-{i}") for i in range(workers)]
    start = time.perf_counter()
    i = 0
    while counted < ops:
        for _ in range(batch):
            q.put_nowait(names[i % keys])
            i += 1
        counted += batch
        await asyncio.sleep(0)
    for _ in tasks:
        q.put_nowait(None)
    await asyncio.gather(*tasks)
    return counted / (time.perf_counter() - start)


async def run(*, ops: int = 2_000_000, rounds: int = 3) -> list[Figure]:
    best_ours = best_ref = 0.0
    for _ in range(rounds):
        best_ours = max(best_ours, await ours(ops))
        best_ref = max(best_ref, await reference(ops))
    return [Figure("workqueue", "add/get/done ops/s (8 workers, 10k keys)", best_ours, "ops/s", best_ref,
                   "asyncio.Queue", ">= 200k ops/s", at_least(200_000), {"ops": ops, "rounds": rounds})]
