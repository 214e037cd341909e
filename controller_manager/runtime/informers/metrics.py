"""Prometheus metrics of the informers (default registry), labelled ``name`` = ``group/version/plural``.

Guarantees:
- Counters move as reflectors act: ``reflector_lists_total`` (list attempts, paged or streamed),
  ``reflector_list_errors_total``, ``reflector_watches_total`` (watch requests, streaming lists included),
  ``reflector_watch_errors_total`` (watches that ended with an error, 410 Gone included),
  ``reflector_relists_total`` (re-lists forced by 410 Gone), ``reflector_watch_list_fallbacks_total``
  (streaming lists the server refused, listed in pages instead) and ``reflector_malformed_objects_total``
  (objects skipped for an unexpected shape).
- ``informer_cached_objects{name, selector}`` is computed at scrape time from the live informers (no bookkeeping
  on the hot path); ``selector`` is the label selector the informer lists and watches with (empty: every
  object), so a shard member's own caches (``--sharding=true``) are told apart from the leader's cluster-wide
  ones. Informers that share both (one per factory) are summed. An informer served from another's cache (a
  view, ``SharedInformer.follow``) holds no objects of its own: it is counted in ``informer_view_objects{name,
  selector}`` instead, so ``informer_cached_objects`` summed over selectors is the objects a process decoded and
  keeps.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import Protocol

from prometheus_client import REGISTRY, Counter
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

LISTS = Counter("reflector_lists_total", "Lists started by informer reflectors.", ["name"])
LIST_ERRORS = Counter("reflector_list_errors_total", "Lists by informer reflectors that failed.", ["name"])
WATCHES = Counter("reflector_watches_total", "Watches started by informer reflectors.", ["name"])
WATCH_ERRORS = Counter(
    "reflector_watch_errors_total", "Watches by informer reflectors that ended with an error (410 Gone included).",
    ["name"],
)
RELISTS = Counter("reflector_relists_total", "Re-lists forced by a 410 Gone (resourceVersion expired).", ["name"])
WATCH_LIST_FALLBACKS = Counter(
    "reflector_watch_list_fallbacks_total",
    "Streaming lists (sendInitialEvents) the server would not serve, listed in pages instead.", ["name"],
)
MALFORMED = Counter(
    "reflector_malformed_objects_total", "Objects skipped by informer reflectors because of an unexpected shape.",
    ["name"],
)


class _Counted(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def label_selector(self) -> str | None: ...

    @property
    def is_view(self) -> bool: ...

    def cached_count(self) -> int: ...


_live: weakref.WeakSet[_Counted] = weakref.WeakSet()


def track(informer: _Counted) -> None:
    """Report ``informer``'s cache size at every scrape, for as long as it lives."""
    _live.add(informer)


class _CachedObjectsCollector(Collector):
    def describe(self) -> Iterator[Metric]:
        yield from _families()

    def collect(self) -> Iterator[Metric]:
        cached: dict[tuple[str, str], int] = {}
        viewed: dict[tuple[str, str], int] = {}
        for informer in list(_live):
            key = (informer.name, informer.label_selector or "")
            totals = viewed if informer.is_view else cached
            totals[key] = totals.get(key, 0) + informer.cached_count()
        families = _families()
        for family, totals in zip(families, (cached, viewed), strict=True):
            for labels, count in sorted(totals.items()):
                family.add_metric(list(labels), count)
        yield from families


def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
    return (
        GaugeMetricFamily("informer_cached_objects", "Objects in each informer's cache.", labels=["name", "selector"]),
        GaugeMetricFamily("informer_view_objects",
                          "Objects an informer serves from another informer's cache (the same objects, not copies).",
                          labels=["name", "selector"]),
    )


REGISTRY.register(_CachedObjectsCollector())
