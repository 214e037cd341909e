"""Figures, the table printed at the end of a run, and ``bench/results.json``.

Guarantees:
- A :class:`Figure` is one measured number next to the reference it was measured beside in the same run, so
  the ratio holds on a noisy machine. ``ratio`` is ``value / reference``; ``met`` is None when the figure has no
  target (it is there for context).
- The table has one row per figure: name, value, reference, ratio, target, met?; ``results.json`` holds the same
  plus the details each benchmark adds (profiles' findings, sizes, raw samples' summaries).
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Figure:
    benchmark: str
    name: str
    value: float
    unit: str
    reference: float | None = None
    reference_name: str = ""
    target: str = ""
    check: Callable[[float, float | None], bool] | None = field(default=None, repr=False)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        if self.reference is None or self.reference == 0:
            return None
        return self.value / self.reference

    @property
    def met(self) -> bool | None:
        if self.check is None:
            return None
        return bool(self.check(self.value, self.ratio))

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("check")
        out["ratio"] = self.ratio
        out["met"] = self.met
        return out


def at_least(limit: float) -> Callable[[float, float | None], bool]:
    return lambda value, _ratio: value >= limit


def at_most(limit: float) -> Callable[[float, float | None], bool]:
    return lambda value, _ratio: value <= limit


def ratio_at_least(limit: float) -> Callable[[float, float | None], bool]:
    return lambda _value, ratio: ratio is not None and ratio >= limit


def percentile(samples: Iterable[float], q: float) -> float:
    """The nearest-rank ``q`` quantile (0 < q <= 1): the smallest sample with at least ``q`` of the samples at or
    below it, so it is always one of the samples (a p99 of fewer than 100 samples is their maximum)."""
    ordered = sorted(samples)
    if not ordered:
        raise ValueError("no samples")
    # The epsilon: q * n in floating point can land just above a whole number (0.7 * 10 is 7.000000000000001).
    return ordered[max(0, math.ceil(q * len(ordered) - 1e-9) - 1)]


def fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    if abs(value) >= 100_000:
        text = f"{value:,.0f}"
    elif abs(value) >= 100:
        text = f"{value:.0f}"
    elif abs(value) >= 10:
        text = f"{value:.1f}"
    elif abs(value) >= 0.1:
        text = f"{value:.2f}"
    else:
        text = f"{value:.3g}"
    return f"{text} {unit}".strip()


def table(figures: Iterable[Figure]) -> str:
    rows = [("figure", "value", "reference", "ratio", "target", "met?")]
    for f in figures:
        ref = f"{fmt(f.reference, f.unit)} ({f.reference_name})" if f.reference is not None else "-"
        ratio = "-" if f.ratio is None else (f"{f.ratio:.2f}x" if f.ratio < 100 else f"{f.ratio:.0f}x")
        met = {True: "yes", False: "NO", None: ""}[f.met]
        rows.append((f"{f.benchmark}: {f.name}", fmt(f.value, f.unit), ref, ratio, f.target, met))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for n, r in enumerate(rows):
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown(figures: Iterable[Figure]) -> str:
    out = ["| figure | value | reference | ratio | target | met? |", "|---|---|---|---|---|---|"]
    for f in figures:
        ref = f"{fmt(f.reference, f.unit)} ({f.reference_name})" if f.reference is not None else "-"
        ratio = "-" if f.ratio is None else f"{f.ratio:.2f}x"
        met = {True: "yes", False: "**no**", None: ""}[f.met]
        out.append(f"| {f.benchmark}: {f.name} | {fmt(f.value, f.unit)} | {ref} | {ratio} | {f.target} | {met} |")
    return "\n".join(out)


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"python": platform.python_version(), "platform": platform.platform(), "cpu": cpu,
            "cores": os.cpu_count()}


def write_json(path: Path, figures: list[Figure], *, quick: bool, errors: dict[str, str]) -> None:
    doc = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "quick": quick,
        "machine": machine(),
        "figures": [f.as_json() for f in figures],
        "errors": errors,
    }
    path.write_text(json.dumps(doc, indent=2, default=str) + "\n")
