"""The Grafana dashboard the chart ships (``charts/controller-manager/files/dashboard.json``), built from code.

Guarantees:
- :func:`dashboard` is the whole dashboard as a dict: rows for leader election and replicas, per-controller
  work queues and syncs, API requests, informers and the process; one Prometheus query per panel target.
- Every query selects series with ``{job=~"$job",namespace=~"$namespace"}`` (the dashboard's variables,
  filled from ``leader_election_master_status``), so each metric name in a query is written ``name{`` and
  :func:`metric_names` finds them all. ``up`` is the only series not exported by the daemon itself
  (Prometheus records it per scrape).
- :func:`dashboard_file` is the JSON text as written (sorted keys, two-space indent, trailing newline):
  ``tools.render_deploy`` writes it and its ``--check`` reports drift.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

UID = "controller-manager-py"
SEL = 'job=~"$job",namespace=~"$namespace"'
RATE = "$__rate_interval"
PROMETHEUS_SERIES = frozenset({"up"})  # recorded by Prometheus for every scrape, not served on /metrics
_METRIC = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{")


@dataclass(frozen=True)
class Panel:
    title: str
    targets: tuple[tuple[str, str], ...]  # (expr, legend)
    unit: str = "short"
    kind: str = "timeseries"
    width: int = 12
    description: str = ""


def _p99(metric: str, by: str) -> str:
    return f"histogram_quantile(0.99, sum by ({by}, le) (rate({metric}_bucket{{{SEL}}}[{RATE}])))"


ROWS: tuple[tuple[str, tuple[Panel, ...]], ...] = (
    ("Leader election and replicas", (
        Panel("Leader", ((f"max by (pod) (leader_election_master_status{{{SEL}}})", "{{pod}}"),),
              kind="stat", width=8, description="1 on the replica that holds the Lease, 0 on standbys."),
        Panel("Replicas up", ((f"sum(up{{{SEL}}})", "up"),), kind="stat", width=8,
              description="Replicas answering Prometheus' scrapes."),
        Panel("Failing health checks", ((
            f"sum by (pod, name) (increase(kubernetes_healthchecks_total{{{SEL},status=\"error\"}}[{RATE}]))",
            "{{pod}} {{name}}"),), width=8, description="Checks of /healthz, /livez, /readyz that failed."),
    )),
    ("Controllers", (
        Panel("Work queue depth", ((f"sum by (name) (workqueue_depth{{{SEL}}})", "{{name}}"),)),
        Panel("Work queue wait (p99)", ((_p99("workqueue_queue_duration_seconds", "name"), "{{name}}"),), unit="s",
              description="How long a key waits in the queue before a worker takes it."),
        Panel("Work duration (p99)", ((_p99("workqueue_work_duration_seconds", "name"), "{{name}}"),), unit="s"),
        Panel("Queue adds and retries", (
            (f"sum by (name) (rate(workqueue_adds_total{{{SEL}}}[{RATE}]))", "{{name}} adds"),
            (f"sum by (name) (rate(workqueue_retries_total{{{SEL}}}[{RATE}]))", "{{name}} retries"),
        ), unit="ops"),
        Panel("Sync rate", ((f"sum by (controller) (rate(controller_sync_duration_seconds_count{{{SEL}}}[{RATE}]))",
                             "{{controller}}"),), unit="ops"),
        Panel("Sync duration (p99)", ((_p99("controller_sync_duration_seconds", "controller"), "{{controller}}"),),
              unit="s"),
        Panel("Sync errors", ((f"sum by (controller) (rate(controller_sync_errors_total{{{SEL}}}[{RATE}]))",
                               "{{controller}}"),), unit="ops"),
        Panel("Longest running sync", ((f"max by (name) (workqueue_longest_running_processor_seconds{{{SEL}}})",
                                        "{{name}}"),), unit="s"),
    )),
    ("API requests", (
        Panel("Requests by method and code", ((
            f"sum by (method, code) (rate(rest_client_requests_total{{{SEL}}}[{RATE}]))", "{{method}} {{code}}"),),
            unit="reqps"),
        Panel("Request latency by verb (p99)", ((_p99("rest_client_request_duration_seconds", "verb"), "{{verb}}"),),
              unit="s"),
        Panel("Rate-limiter wait by verb (p99)", ((_p99("rest_client_rate_limiter_duration_seconds", "verb"),
                                                   "{{verb}}"),), unit="s",
              description="Time requests waited for the client-side limiter (--kube-api-qps, --kube-api-burst)."),
    )),
    ("Informers", (
        Panel("Cached objects", ((f"sum by (name) (informer_cached_objects{{{SEL}}})", "{{name}}"),)),
        Panel("Lists and watch errors", (
            (f"sum by (name) (rate(reflector_lists_total{{{SEL}}}[{RATE}]))", "{{name}} lists"),
            (f"sum by (name) (rate(reflector_watch_errors_total{{{SEL}}}[{RATE}]))", "{{name}} watch errors"),
        ), unit="ops"),
    )),
    ("Process", (
        Panel("Event-loop lag", ((f"max by (pod) (controller_manager_event_loop_lag_seconds{{{SEL}}})", "{{pod}}"),),
              unit="s", width=8),
        Panel("Resident memory", ((f"sum by (pod) (process_resident_memory_bytes{{{SEL}}})", "{{pod}}"),),
              unit="bytes", width=8),
        Panel("CPU", ((f"sum by (pod) (rate(process_cpu_seconds_total{{{SEL}}}[{RATE}]))", "{{pod}}"),),
              unit="percentunit", width=8),
    )),
)


def _variable(name: str, label: str, query: str) -> dict[str, Any]:
    return {
        "name": name, "label": label, "type": "query", "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "query": {"query": query, "refId": f"{name}-variable"}, "definition": query, "refresh": 2,
        "includeAll": False, "multi": False, "sort": 1, "current": {},
    }


def _panels() -> Iterator[dict[str, Any]]:
    ident, y = 1, 0
    for title, panels in ROWS:
        yield {"id": ident, "type": "row", "title": title, "collapsed": False,
               "gridPos": {"x": 0, "y": y, "w": 24, "h": 1}, "panels": []}
        ident, y, x = ident + 1, y + 1, 0
        for panel in panels:
            if x + panel.width > 24:
                x, y = 0, y + 8
            yield {
                "id": ident, "type": panel.kind, "title": panel.title, "description": panel.description,
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "gridPos": {"x": x, "y": y, "w": panel.width, "h": 8},
                "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
                "options": {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                            "tooltip": {"mode": "multi", "sort": "desc"}} if panel.kind == "timeseries" else {},
                "targets": [{"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend, "range": True}
                            for i, (expr, legend) in enumerate(panel.targets)],
            }
            ident, x = ident + 1, x + panel.width
        y += 8


def dashboard() -> dict[str, Any]:
    return {
        "uid": UID,
        "title": "Controller manager (controller-manager-py)",
        "description": "The asyncio controller manager: leader, work queues, syncs, API requests, informers, process.",
        "tags": ["kubernetes", "controller-manager"],
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": 39,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-1h", "to": "now"},
        "timezone": "browser",
        "annotations": {"list": []},
        "links": [],
        "templating": {"list": [
            {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
             "current": {}, "refresh": 1},
            _variable("namespace", "Namespace", "label_values(leader_election_master_status, namespace)"),
            _variable("job", "Job", 'label_values(leader_election_master_status{namespace=~"$namespace"}, job)'),
        ]},
        "panels": list(_panels()),
    }


def queries(board: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, expr) for every target of every panel."""
    return [(panel["title"], target["expr"]) for panel in board["panels"] for target in panel.get("targets", [])]


def metric_names(expr: str) -> set[str]:
    """The series names a query selects (each written ``name{...}``, see the module's guarantees)."""
    return set(_METRIC.findall(expr))


def dashboard_file() -> str:
    return json.dumps(dashboard(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
