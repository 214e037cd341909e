"""Health checks as the apiserver's ``healthz`` package serves them, and the event-loop lag probe.

Guarantees:
- A check is a named callable returning ``None`` when healthy or a reason string. Checks are grouped
  under ``healthz``, ``livez`` and ``readyz``; each group renders as ``k8s.io/apiserver/pkg/server/healthz``
  does: ``ok`` (200) when all pass, per-check ``[+]name ok`` lines with ``?verbose``, every line plus
  ``<group> check failed`` (500) when one fails, the reason withheld from the body (these paths are served
  without authentication) and logged instead. ``?exclude=name`` skips a check.
- A check that raises counts as failed with the exception as reason: a broken check never breaks serving.
- :class:`LoopLagProbe` measures how late the event loop wakes a sleeper; its check fails when the last
  lag (or the time since the probe last ran) exceeds the threshold (10 s by default), i.e. when the loop is
  blocked and the process should be restarted. It measures the real loop (``loop.time()``), never an
  injected clock: its subject is the loop itself.
- Rendering a group records each check it ran, as component-base's health metrics do:
  ``kubernetes_healthcheck{name,type}`` (1 passed, 0 failed; ``type`` is the group) and
  ``kubernetes_healthchecks_total{name,status,type}`` (``status`` ``success`` or ``error``). Excluded checks
  and single-check paths (``/healthz/<name>``) record nothing, as upstream.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import Counter, Gauge

HealthCheck = Callable[[], "str | None"]

EVENT_LOOP_LAG = Gauge(
    "controller_manager_event_loop_lag_seconds",
    "How late the asyncio event loop last woke a periodic sleeper, in seconds (0 = on time).",
)

HEALTHCHECK = Gauge(
    "kubernetes_healthcheck",
    "This metric records the result of a single healthcheck.",
    ["name", "type"],
)
HEALTHCHECKS_TOTAL = Counter(
    "kubernetes_healthchecks",
    "This metric records the results of all healthcheck.",
    ["name", "status", "type"],
)


def observe(name: str, group: str, passed: bool) -> None:
    """Record one run of check ``name`` in ``group`` (healthz, livez or readyz)."""
    HEALTHCHECK.labels(name, group).set(1 if passed else 0)
    HEALTHCHECKS_TOTAL.labels(name, "success" if passed else "error", group).inc()


@dataclass
class HealthChecks:
    """The named checks behind ``/healthz``, ``/livez`` and ``/readyz`` (insertion order is render order)."""

    healthz: dict[str, HealthCheck] = field(default_factory=dict)
    livez: dict[str, HealthCheck] = field(default_factory=dict)
    readyz: dict[str, HealthCheck] = field(default_factory=dict)

    def group(self, name: str) -> Mapping[str, HealthCheck]:
        if name not in ("healthz", "livez", "readyz"):
            raise KeyError(name)
        checks: dict[str, HealthCheck] = getattr(self, name)
        return checks

    def add(self, name: str, check: HealthCheck, *, groups: Iterable[str] = ("healthz",)) -> None:
        for group in groups:
            target: dict[str, HealthCheck] = getattr(self, group)
            target[name] = check


def run_check(check: HealthCheck) -> str | None:
    try:
        return check()
    except Exception as exc:
        return f"check raised {type(exc).__name__}: {exc}"


@dataclass(frozen=True, slots=True)
class Report:
    ok: bool
    body: str
    failures: dict[str, str]


def render(
    group: str,
    checks: Mapping[str, HealthCheck],
    *,
    verbose: bool,
    exclude: Iterable[str] = (),
    notes: Mapping[str, str] | None = None,
) -> Report:
    """One group's report. ``notes`` appends `` : text`` to a passing check's line (readyz's leader/standby)."""
    excluded = set(exclude)
    lines: list[str] = []
    failures: dict[str, str] = {}
    for name, check in checks.items():
        if name in excluded:
            lines.append(f"[+]{name} excluded: ok")
            continue
        reason = run_check(check)
        observe(name, group, reason is None)
        if reason is None:
            note = (notes or {}).get(name)
            lines.append(f"[+]{name} ok: {note}" if note else f"[+]{name} ok")
        else:
            failures[name] = reason
            lines.append(f"[-]{name} failed: reason withheld")
    for name in sorted(excluded - set(checks)):
        # apiserver warns about unknown exclusions in the body too
        lines.append(f"warn: some health checks cannot be excluded: no matches for \"{name}\"")
    listing = "".join(f"{line}\n" for line in lines)
    if failures:
        return Report(False, f"{listing}{group} check failed", failures)
    if verbose:
        return Report(True, f"{listing}{group} check passed\n", failures)
    return Report(True, "ok", failures)


class LoopLagProbe:
    """Wakes every ``interval`` seconds and records how late it woke."""

    def __init__(self, interval: float = 1.0, threshold: float = 10.0, gauge: Any = EVENT_LOOP_LAG) -> None:
        self.interval = interval
        self.threshold = threshold
        self.last_lag = 0.0
        self._gauge = gauge
        self._last_tick: float | None = None

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        self._last_tick = loop.time()
        while True:
            started = loop.time()
            await asyncio.sleep(self.interval)
            now = loop.time()
            self.last_lag = max(0.0, now - started - self.interval)
            self._last_tick = now
            self._gauge.set(self.last_lag)

    def check(self) -> str | None:
        if self.last_lag > self.threshold:
            return f"event loop lagged {self.last_lag:.1f}s (threshold {self.threshold:.0f}s)"
        if self._last_tick is not None:
            silent = asyncio.get_running_loop().time() - self._last_tick
            if silent > self.interval + self.threshold:
                return f"event loop lag probe has not run for {silent:.1f}s"
        return None
