"""Prometheus metrics for work queues, under client-go's names, with one label: ``name`` (the queue's name).

Guarantees:
- The families are client-go's (``k8s.io/component-base/metrics/prometheus/workqueue``):
  ``workqueue_depth``, ``workqueue_adds_total``, ``workqueue_queue_duration_seconds``,
  ``workqueue_work_duration_seconds`` (histograms, buckets 1e-6 * 10**i for i in 0..9, as upstream's
  ``ExponentialBuckets(10e-7, 10, 10)``), ``workqueue_retries_total``, ``workqueue_unfinished_work_seconds`` and
  ``workqueue_longest_running_processor_seconds``.
- They live in prometheus_client's default registry, registered once, at import.
- The hot path is plain attribute arithmetic: a queue bumps integers and bucket counts in a ``QueueStats``
  object, and a custom collector turns them into samples only when someone scrapes. The two "unfinished work"
  gauges are computed at scrape time from the live queues' processing start times; no background task runs.
- Queues sharing a name share one ``QueueStats`` (as client-go's queues share one labelled child), and the
  counters of a queue that has gone away are kept, so counters never go backwards. A queue with an empty
  name is not exported (client-go registers no metrics for unnamed queues).
"""

from __future__ import annotations

import weakref
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import REGISTRY
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

# Upstream: ExponentialBuckets(10e-7, 10, 10), i.e. 1 microsecond to 1000 seconds.
BUCKETS: tuple[float, ...] = tuple(float(f"1e{exp}") for exp in range(-6, 4))
# "le" label values spelled as prometheus_client spells its own bucket bounds.
_BUCKET_LABELS: tuple[str, ...] = (
    "1e-06",
    "1e-05",
    "0.0001",
    "0.001",
    "0.01",
    "0.1",
    "1.0",
    "10.0",
    "100.0",
    "1000.0",
    "+Inf",
)

_HELP = {
    "depth": "Current depth of workqueue",
    "adds": "Total number of adds handled by workqueue",
    "queue_duration": "How long in seconds an item stays in workqueue before being requested.",
    "work_duration": "How long in seconds processing an item from workqueue takes.",
    "unfinished": (
        "How many seconds of work has done that is in progress and hasn't been observed by work_duration. "
        "Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate "
        "at which this increases."
    ),
    "longest": "How many seconds has the longest running processor for workqueue been running.",
    "retries": "Total number of retries handled by workqueue",
}


class Histogram:
    """Bucket counts plus a sum; ``observe`` is a bisect and two additions."""

    __slots__ = ("counts", "sum")

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS) + 1)  # the last slot is +Inf
        self.sum = 0.0

    def observe(self, value: float) -> None:
        # bisect_left finds the first bound >= value, which is the "le" bucket the value belongs to.
        self.counts[bisect_left(BUCKETS, value)] += 1
        self.sum += value

    def cumulative(self) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        running = 0
        for label, count in zip(_BUCKET_LABELS, self.counts, strict=True):
            running += count
            out.append((label, float(running)))
        return out


class InFlight:
    """What a live queue exposes to the scrape-time gauges: its clock and its processing start times."""

    __slots__ = ("__weakref__", "monotonic", "started")

    def __init__(self, monotonic: Callable[[], float], started: Mapping[Any, float]) -> None:
        self.monotonic = monotonic
        self.started = started


class QueueStats:
    """The counters behind one ``name`` label value. Mutated directly by the queues, read by the collector."""

    __slots__ = ("adds", "depth", "live", "queue_duration", "retries", "work_duration")

    def __init__(self) -> None:
        self.depth = 0
        self.adds = 0
        self.retries = 0
        self.queue_duration = Histogram()
        self.work_duration = Histogram()
        self.live: weakref.WeakSet[InFlight] = weakref.WeakSet()

    def unfinished(self) -> tuple[float, float]:
        """(total seconds in progress, oldest in-progress age) over the live queues of this name."""
        total = 0.0
        oldest = 0.0
        for flight in list(self.live):
            now = flight.monotonic()
            for start in list(flight.started.values()):
                age = now - start
                total += age
                if age > oldest:
                    oldest = age
        return total, oldest


_stats: dict[str, QueueStats] = {}


def stats_for(name: str) -> QueueStats:
    """The shared stats for ``name``; an unnamed queue gets a private, unexported one."""
    if not name:
        return QueueStats()
    stats = _stats.get(name)
    if stats is None:
        stats = _stats[name] = QueueStats()
    return stats


class _WorkqueueCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        depth = GaugeMetricFamily("workqueue_depth", _HELP["depth"], labels=["name"])
        adds = CounterMetricFamily("workqueue_adds_total", _HELP["adds"], labels=["name"])
        latency = HistogramMetricFamily("workqueue_queue_duration_seconds", _HELP["queue_duration"], labels=["name"])
        work = HistogramMetricFamily("workqueue_work_duration_seconds", _HELP["work_duration"], labels=["name"])
        unfinished = GaugeMetricFamily("workqueue_unfinished_work_seconds", _HELP["unfinished"], labels=["name"])
        longest = GaugeMetricFamily("workqueue_longest_running_processor_seconds", _HELP["longest"], labels=["name"])
        retries = CounterMetricFamily("workqueue_retries_total", _HELP["retries"], labels=["name"])
        for name, stats in sorted(_stats.items()):
            labels = [name]
            depth.add_metric(labels, stats.depth)
            adds.add_metric(labels, stats.adds)
            latency.add_metric(labels, stats.queue_duration.cumulative(), stats.queue_duration.sum)
            work.add_metric(labels, stats.work_duration.cumulative(), stats.work_duration.sum)
            total, oldest = stats.unfinished()
            unfinished.add_metric(labels, total)
            longest.add_metric(labels, oldest)
            retries.add_metric(labels, stats.retries)
        yield from (depth, adds, latency, work, unfinished, longest, retries)

    def describe(self) -> Iterator[Metric]:
        # Names only, so the registry can detect clashes without running a full collection.
        yield GaugeMetricFamily("workqueue_depth", _HELP["depth"], labels=["name"])
        yield CounterMetricFamily("workqueue_adds_total", _HELP["adds"], labels=["name"])
        yield HistogramMetricFamily("workqueue_queue_duration_seconds", _HELP["queue_duration"], labels=["name"])
        yield HistogramMetricFamily("workqueue_work_duration_seconds", _HELP["work_duration"], labels=["name"])
        yield GaugeMetricFamily("workqueue_unfinished_work_seconds", _HELP["unfinished"], labels=["name"])
        yield GaugeMetricFamily("workqueue_longest_running_processor_seconds", _HELP["longest"], labels=["name"])
        yield CounterMetricFamily("workqueue_retries_total", _HELP["retries"], labels=["name"])


COLLECTOR = _WorkqueueCollector()
REGISTRY.register(COLLECTOR)
