"""The chart's Grafana dashboard against a running daemon: every metric name its queries select is one the
daemon serves on /metrics (scraped with a token allowed ``get /metrics``, after it led and synced a
Deployment), so no panel stays empty for a misspelt or never-exported name."""

from __future__ import annotations

import json

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import (
    ROOT,
    Https,
    Kubectl,
    KubeSim,
    Processes,
    start_manager,
    wait_for_default_service_account,
    wait_until,
)
from tests.packaging.chart import render
from tools.dashboard import PROMETHEUS_SERIES, metric_names, queries

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e-light")]

# The series names Prometheus stores for a family of each type (prometheus_client's text format).
_SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_count", "_sum", "_created"),
             "summary": ("_count", "_sum", "_created"), "gauge": ("",), "info": ("_info",), "untyped": ("",)}


def exported(text: str) -> set[str]:
    """Every series name the exposition declares, sampled yet or not (a labelled family with no child yet)."""
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names |= {family.name + suffix for suffix in _SUFFIXES.get(family.type, ("",))}
        names |= {sample.name for sample in family.samples}
    return names


async def test_every_dashboard_query_selects_exported_metrics(
        processes: Processes, sim: KubeSim, https: Https, kubectl: Kubectl) -> None:
    [configmap] = [o for o in render({"grafanaDashboard": {"enabled": True}}) if o["kind"] == "ConfigMap"]
    board = json.loads(configmap["data"]["controller-manager.json"])

    manager = await start_manager(processes, sim, https=https)
    await https.wait_role(manager, "leader")
    await wait_for_default_service_account(kubectl)
    await kubectl.ok("apply", "-f", str(ROOT / "deploy" / "examples" / "01-deployment.yaml"))
    assert (await https.get(manager, "/healthz"))[0] == 200  # the health metrics are recorded when checks run

    token = sim.token("admin")

    async def scraped() -> set[str] | None:
        status, body = await https.get(manager, "/metrics", token=token)
        assert status == 200, body
        names = exported(body)
        # Synced: the Deployment's queue has seen keys and the API client made requests.
        return names if 'workqueue_adds_total{name="deployment"}' in body and "rest_client_requests_total{" in body \
            else None

    names = await wait_until(scraped, what="the daemon to sync and serve its metrics")
    missing = {(title, name) for title, expr in queries(board) for name in metric_names(expr)
               if name not in names and name not in PROMETHEUS_SERIES}
    assert missing == set(), f"dashboard queries select series the daemon does not export: {sorted(missing)}"
    # The alerts' expressions too: they select the same families.
    [rule] = [o for o in render({"prometheusRule": {"enabled": True}}) if o["kind"] == "PrometheusRule"]
    alert_names = {name for group in rule["spec"]["groups"] for r in group["rules"] for name in metric_names(r["expr"])}
    assert alert_names - PROMETHEUS_SERIES <= names, sorted(alert_names - PROMETHEUS_SERIES - names)
