"""Queue waits of a creation sync against a slow API server (issue 19: the job and replicaset queues' misses).

``python -m bench.creation_waits [--latency S ...]``: no API server and no wall clock. The ReplicaSet and Job
controllers run their 5 workers on a fake clock against :class:`LatencyClient`, whose every write takes the given
latency and then shows the written object to its informer (a watch with no delay of its own). One ReplicaSet of
25 replicas, then one Job of 25 pods, is created and the clock advanced until all settles; the figures are each
queue's ``workqueue_queue_duration_seconds`` and ``workqueue_work_duration_seconds`` for that one object.

What it shows: a creation sync is six serial writes (slow-start batches of 1, 2, 4, 8 and 10 creates, then the
status), and the pods it creates wake their owner during it. client-go times such a key from that Add, so the
wait it reports is the rest of the sync: about 5 latencies for the ReplicaSet (its pod events enqueue at once),
5 latencies less the 1 s batch period for the Job. A queue's p99 stays under 1 s only while the API answers
writes in under ~0.2 s (ReplicaSets) or ~0.4 s (Jobs); more workers cannot help, as no other key waits.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import itertools
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from controller_manager.api.resources import JOBS, PODS, REPLICASETS, Resource
from controller_manager.clock import FakeClock
from controller_manager.controllers.job import JobController
from controller_manager.controllers.replicaset import ReplicaSetController
from controller_manager.runtime.controller import Controller, ControllerContext, run_controller
from controller_manager.runtime.events import EventBroadcaster
from controller_manager.runtime.informers import SharedInformerFactory
from controller_manager.runtime.workqueue.metrics import BUCKETS, Histogram

PODS_PER_OWNER = 25  # the envelope's churn: a Job of 25 pods and a Deployment scaled by 25 every second
STEP = 0.01  # fake seconds per clock step
SETTLE = 12.0  # fake seconds to run after the create


class LatencyClient:
    """Writes succeed after ``latency`` fake seconds; the written object then reaches its informer at once."""

    supports_watch_list = False

    def __init__(self, clock: FakeClock, latency: float) -> None:
        self.clock = clock
        self.latency = latency
        self.factory: SharedInformerFactory | None = None
        self._rvs = itertools.count(1000)
        self._names = itertools.count(1)

    def show(self, res: Resource, obj: Mapping[str, Any], event: str) -> dict[str, Any]:
        out = copy.deepcopy(dict(obj))
        m = out.setdefault("metadata", {})
        m["resourceVersion"] = str(next(self._rvs))
        informer = self.factory.existing(res) if self.factory is not None else None
        if informer is not None:
            informer.apply(event, out)
            informer._reflector._rv = m["resourceVersion"]  # as its watch would have advanced
        return out

    async def create(self, res: Resource, obj: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]:
        await self.clock.sleep(self.latency)
        out = copy.deepcopy(dict(obj))
        m = out["metadata"]
        m.setdefault("name", f"{m.get('generateName', 'x-')}{next(self._names)}")
        m["namespace"] = namespace
        m["uid"] = f"uid-{next(self._names)}"
        return self.show(res, out, "ADDED")

    async def update_status(self, res: Resource, obj: Mapping[str, Any], **_: Any) -> dict[str, Any]:
        await self.clock.sleep(self.latency)
        return self.show(res, obj, "MODIFIED")


@dataclass(frozen=True)
class Waits:
    kind: str
    latency: float
    waits: int
    over_1s: int
    wait_sum: float
    syncs: int
    sync_sum: float


def _delta(after: Histogram, before: list[int], before_sum: float) -> tuple[list[int], float]:
    return [a - b for a, b in zip(after.counts, before, strict=True)], after.sum - before_sum


def _owner(kind: str) -> tuple[Resource, dict[str, Any]]:
    labels = {"app": kind}
    template = {"metadata": {"labels": labels},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "pause"}]}}
    meta = {"name": kind, "namespace": "bench", "uid": f"uid-{kind}", "generation": 1}
    if kind == "replicaset":
        return REPLICASETS, {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": meta,
                             "spec": {"replicas": PODS_PER_OWNER, "selector": {"matchLabels": labels},
                                      "template": template}}
    return JOBS, {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
                  "spec": {"parallelism": PODS_PER_OWNER, "completions": PODS_PER_OWNER,
                           "selector": {"matchLabels": labels}, "template": template}}


async def one(kind: str, latency: float) -> Waits:
    """One owner of ``PODS_PER_OWNER`` pods created, its controller's queue waits until it settles."""
    clock = FakeClock()
    client = LatencyClient(clock, latency)
    factory = SharedInformerFactory(client, clock)  # type: ignore[arg-type]  # never run: the client feeds it
    client.factory = factory
    ctx = ControllerContext(client=client, informers=factory, clock=clock,  # type: ignore[arg-type]
                            events=EventBroadcaster(client, clock))  # type: ignore[arg-type]
    ctrl: Controller = ReplicaSetController(ctx) if kind == "replicaset" else JobController(ctx)
    res, obj = _owner(kind)
    for informed in (res, PODS):
        factory.informer(informed)._reflector._rv = "1"  # listed, empty
    stats = ctrl.queue._stats  # shared by name across runs: measure this run's part
    waits0, wait_sum0 = list(stats.queue_duration.counts), stats.queue_duration.sum
    syncs0, sync_sum0 = list(stats.work_duration.counts), stats.work_duration.sum
    runner = asyncio.create_task(run_controller(ctrl, ctrl.default_workers))
    client.show(res, obj, "ADDED")
    steps = 0
    while steps * STEP < SETTLE or not runner.done():
        if steps * STEP >= SETTLE:
            ctrl.queue.shut_down()
        clock.advance(STEP)
        for _ in range(5):
            await asyncio.sleep(0)
        steps += 1
    waits, wait_sum = _delta(stats.queue_duration, waits0, wait_sum0)
    syncs, sync_sum = _delta(stats.work_duration, syncs0, sync_sum0)
    over = sum(waits[BUCKETS.index(1.0) + 1:])  # the buckets above le="1.0"
    return Waits(kind, latency, sum(waits), over, wait_sum, sum(syncs), sync_sum)


async def run(latencies: list[float]) -> list[Waits]:
    return [await one(kind, latency) for kind in ("replicaset", "job") for latency in latencies]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.creation_waits", description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, action="append", help="API write latency, s (repeatable)")
    args = parser.parse_args(argv)
    from bench.__main__ import quiet_logs

    quiet_logs()
    latencies = args.latency or [0.02, 0.1, 0.2, 0.3, 0.5]
    print("queue       write latency  waits  over 1 s  waits sum  syncs  syncs sum")
    for w in asyncio.run(run(latencies)):
        print(f"{w.kind:11s} {w.latency:10.2f} s  {w.waits:5d}  {w.over_1s:8d}  {w.wait_sum:7.2f} s  {w.syncs:5d}"
              f"  {w.sync_sum:7.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
