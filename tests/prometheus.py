"""Reading one sample of the default Prometheus registry in a test.

``REGISTRY.get_sample_value`` collects every metric in the process to find one sample, and a test worker's
registry keeps growing with the series earlier tests made (a ``host`` label per kube-sim port, a ``name`` per
queue, ...): late in a run a single lookup cost tens of milliseconds, and the metric-checking tests make dozens.
:func:`sample_value` gives the same answer from the one collector that exports the name.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import REGISTRY

__all__ = ["sample_value"]


def sample_value(name: str, labels: Mapping[str, str] | None = None) -> float | None:
    """The value of the sample ``name`` with exactly ``labels`` (none: no labels), or None if there is none."""
    want = dict(labels or {})
    for metric in REGISTRY.restricted_registry([name]).collect():
        for sample in metric.samples:
            if sample.name == name and sample.labels == want:
                return float(sample.value)
    return None
