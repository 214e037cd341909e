"""The Grafana dashboard the chart ships: off by default, a ConfigMap Grafana's sidecar picks up when enabled,
holding the generated dashboard (``tools.dashboard``) with a panel for each thing an operator watches.
(tests/e2e/test_dashboard_metrics.py checks its queries against a running daemon's /metrics.)"""

from __future__ import annotations

import json
from typing import Any

from tests.packaging.chart import by_kind, render, schema_errors, sim_errors
from tools.dashboard import SEL, dashboard, metric_names, queries
from tools.render_deploy import NAMESPACE


def dashboard_map(values: dict[str, Any]) -> dict[str, Any]:
    configmaps = [o for o in render({"grafanaDashboard": {"enabled": True, **values}}) if o["kind"] == "ConfigMap"]
    assert len(configmaps) == 1
    return configmaps[0]


def test_off_by_default() -> None:
    assert "ConfigMap" not in by_kind(render())


def test_configmap_carries_the_dashboard_for_grafanas_sidecar() -> None:
    cm = dashboard_map({})
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["namespace"] == NAMESPACE
    assert json.loads(cm["data"]["controller-manager.json"]) == dashboard()
    assert schema_errors(cm) == []
    assert sim_errors(cm) == []
    other = dashboard_map({"namespace": "monitoring", "labels": {"team": "platform"},
                           "annotations": {"grafana_folder": "Kubernetes"}})
    assert other["metadata"]["namespace"] == "monitoring"
    assert other["metadata"]["labels"]["team"] == "platform"
    assert other["metadata"]["annotations"] == {"grafana_folder": "Kubernetes"}


def test_panels_cover_what_an_operator_watches() -> None:
    board = dashboard()
    names = set().union(*(metric_names(expr) for _, expr in queries(board)))
    assert {
        "leader_election_master_status", "workqueue_depth", "workqueue_queue_duration_seconds_bucket",
        "controller_sync_duration_seconds_count", "controller_sync_errors_total", "rest_client_requests_total",
        "rest_client_request_duration_seconds_bucket", "rest_client_rate_limiter_duration_seconds_bucket",
        "informer_cached_objects", "controller_manager_event_loop_lag_seconds", "process_resident_memory_bytes",
        "process_cpu_seconds_total",
    } <= names
    for title, expr in queries(board):
        assert metric_names(expr), f"{title}: no metric selector in {expr!r}"
        assert expr.count("{") == expr.count(SEL) + expr.count("{{"), f"{title}: a selector without $job/$namespace"


def test_panels_do_not_overlap() -> None:
    taken: set[tuple[int, int]] = set()
    ids = set()
    for panel in dashboard()["panels"]:
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24
        cells = {(pos["x"] + dx, pos["y"] + dy) for dx in range(pos["w"]) for dy in range(pos["h"])}
        assert not cells & taken, panel["title"]
        taken |= cells
        assert panel["id"] not in ids
        ids.add(panel["id"])
