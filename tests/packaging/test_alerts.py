"""The chart's PrometheusRule, checked and unit-tested by a real ``promtool`` (``tools.promtool``): every alert
fires on recorded series that show its trouble and stays silent on healthy ones, and each links a runbook
paragraph that exists in docs/runbooks.md."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.packaging.chart import by_kind, render
from tools.promtool import run_promtool
from tools.render_deploy import ROOT

RUNBOOKS = ROOT / "docs" / "runbooks.md"
JOB = {"job": "controller-manager", "namespace": "kube-system"}
POD_A = {**JOB, "pod": "controller-manager-a", "instance": "10.0.0.1:10257"}
POD_B = {**JOB, "pod": "controller-manager-b", "instance": "10.0.0.2:10257"}


def series(name: str, labels: dict[str, str], values: str) -> dict[str, str]:
    body = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return {"series": f"{name}{{{body}}}", "values": values}


def rule_spec(values: dict[str, Any] | None = None) -> dict[str, Any]:
    objs = render({"prometheusRule": {"enabled": True}, **(values or {})})
    spec: dict[str, Any] = by_kind(objs)["PrometheusRule"]["spec"]
    return spec


def alerts(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {rule["alert"]: rule for group in spec["groups"] for rule in group["rules"]}


def promtool_test(tmp_path: Path, spec: dict[str, Any], tests: list[dict[str, Any]]) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(spec))
    checked = run_promtool("check", "rules", "rules.yaml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump({
        "rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": tests}))
    done = run_promtool("test", "rules", "tests.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def case(input_series: list[dict[str, str]], *checks: tuple[str, str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {"interval": "1m", "input_series": input_series, "alert_rule_test": [
        {"eval_time": at, "alertname": name, "exp_alerts": expected} for at, name, expected in checks]}


def fired(labels: dict[str, str], alert: str, summary: str, description: str) -> dict[str, Any]:
    """One expected alert: its labels and its annotations as Alertmanager would receive them."""
    return {"exp_labels": labels, "exp_annotations": {
        "summary": summary, "description": description, "runbook_url": f"docs/runbooks.md#{alert.lower()}"}}


NO_LEADER = fired({"severity": "critical"}, "ControllerManagerNoLeader",
                  "No controller-manager replica holds the Lease controller-manager-py.",
                  "No replica of controller-manager in kube-system has been leading for longer than the lease "
                  "duration (15s): the controllers are not reconciling.")


def test_alerts_are_off_by_default() -> None:
    assert "PrometheusRule" not in by_kind(render())


def test_every_alert_links_its_runbook_paragraph() -> None:
    anchors = {re.sub(r"[^a-z0-9 -]", "", line[3:].strip().lower()).replace(" ", "-")
               for line in RUNBOOKS.read_text().splitlines() if line.startswith("## ")}
    rules = alerts(rule_spec({"prometheusRule": {"enabled": True, "runbookBaseURL": "https://x.test/runbooks"}}))
    assert len(rules) == 8
    for name, rule in rules.items():
        url = rule["annotations"]["runbook_url"]
        assert url == f"https://x.test/runbooks#{name.lower()}"
        assert name.lower() in anchors, f"docs/runbooks.md has no '## {name}' section"
        assert rule["labels"]["severity"] in ("critical", "warning")


def test_no_leader_alert_follows_the_chart_values() -> None:
    rules = alerts(rule_spec({"leaderElection": {"leaseDuration": "40s", "resourceName": "my-lock"}}))
    assert rules["ControllerManagerNoLeader"]["for"] == "40s"
    assert 'name="my-lock"' in rules["ControllerManagerNoLeader"]["expr"]
    without = alerts(rule_spec({"leaderElection": {"enabled": False}, "replicaCount": 1}))
    assert "ControllerManagerNoLeader" not in without
    assert "< 1" in without["ControllerManagerReplicaDown"]["expr"]


def test_rules_fire_on_trouble_and_stay_silent_otherwise(tmp_path: Path) -> None:
    lease = {"name": "controller-manager-py"}
    warning = {"severity": "warning"}
    tests = [
        # The leader stops leading at 2m and nobody takes over; then a handover with no gap.
        case([series("leader_election_master_status", {**POD_A, **lease}, "1 1 0 0 0 0"),
              series("leader_election_master_status", {**POD_B, **lease}, "0 0 0 0 0 0")],
             ("1m", "ControllerManagerNoLeader", []),
             ("4m", "ControllerManagerNoLeader", [NO_LEADER])),
        case([series("leader_election_master_status", {**POD_A, **lease}, "1 1 0 0 0 0"),
              series("leader_election_master_status", {**POD_B, **lease}, "0 0 1 1 1 1")],
             ("4m", "ControllerManagerNoLeader", [])),
        # No replica reports at all: no leader either.
        case([series("up", POD_A, "0x5")], ("3m", "ControllerManagerNoLeader", [NO_LEADER])),
        # One of the two replicas stops answering scrapes at 2m.
        case([series("up", POD_A, "1x12"), series("up", POD_B, "1 1 0x10")],
             ("4m", "ControllerManagerReplicaDown", []),
             ("9m", "ControllerManagerReplicaDown", [fired(
                 warning, "ControllerManagerReplicaDown",
                 "Fewer controller-manager replicas are up than the 2 deployed.",
                 "1 of 2 replicas of controller-manager in kube-system answer Prometheus' scrapes.")])),
        # deployment's queue grows 10 keys a minute; replicaset's is deep but steady.
        case([series("workqueue_depth", {**POD_A, "name": "deployment"}, "0+10x40"),
              series("workqueue_depth", {**POD_A, "name": "replicaset"}, "500x40")],
             ("10m", "ControllerManagerWorkQueueDepthGrowing", []),
             ("40m", "ControllerManagerWorkQueueDepthGrowing",
              [fired({**POD_A, "name": "deployment", **warning}, "ControllerManagerWorkQueueDepthGrowing",
                     "Work queue deployment keeps growing.",
                     "The work queue deployment of controller-manager-a holds 400 keys and has been growing for 15 "
                     "minutes: its controller falls behind.")])),
        # deployment's keys wait 10-60s each; replicaset's under a second.
        case([*(series("workqueue_queue_duration_seconds_bucket", {**POD_A, "name": "deployment", "le": le}, v)
                for le, v in (("1", "0x40"), ("10", "0x40"), ("60", "0+10x40"), ("+Inf", "0+10x40"))),
              *(series("workqueue_queue_duration_seconds_bucket", {**POD_A, "name": "replicaset", "le": le},
                       "0+10x40") for le in ("1", "10", "60", "+Inf"))],
             ("10m", "ControllerManagerWorkQueueLatencyHigh", []),
             ("30m", "ControllerManagerWorkQueueLatencyHigh",
              [fired({"namespace": "kube-system", "pod": POD_A["pod"], "name": "deployment", **warning},
                     "ControllerManagerWorkQueueLatencyHigh", "Keys wait over 10s in work queue deployment.",
                     "The 99th percentile of the time a key waits in deployment of controller-manager-a before a "
                     "worker takes it is 59.5s.")])),
        # deployment fails a sync a second; job one a minute.
        case([series("controller_sync_errors_total", {**POD_A, "controller": "deployment"}, "0+60x30"),
              series("controller_sync_errors_total", {**POD_A, "controller": "job"}, "0+1x30")],
             ("5m", "ControllerManagerSyncErrors", []),
             ("20m", "ControllerManagerSyncErrors",
              [fired({"namespace": "kube-system", "pod": POD_A["pod"], "controller": "deployment", **warning},
                     "ControllerManagerSyncErrors", "deployment fails syncs.",
                     "deployment on controller-manager-a fails 1 syncs a second (over 0.1).")])),
        # pod a's loop lags 2s from 5m on; pod b's 0.1s all along.
        case([series("controller_manager_event_loop_lag_seconds", POD_A, "0x5 2x20"),
              series("controller_manager_event_loop_lag_seconds", POD_B, "0.1x25")],
             ("4m", "ControllerManagerEventLoopLag", []),
             ("20m", "ControllerManagerEventLoopLag", [fired(
                 {**POD_A, **warning}, "ControllerManagerEventLoopLag", "The event loop of controller-manager-a lags.",
                 "The asyncio event loop of controller-manager-a wakes 2s late on average: every controller, "
                 "informer and the leader-election renewals in it are delayed.")])),
        # The deployments informer lists every minute; the pods informer listed once.
        case([series("reflector_lists_total", {**POD_A, "name": "apps/v1/deployments"}, "1+1x10"),
              series("reflector_lists_total", {**POD_A, "name": "v1/pods"}, "1x10")],
             ("1m", "ControllerManagerInformerRelisting", []),
             ("10m", "ControllerManagerInformerRelisting",
              [fired({"namespace": "kube-system", "pod": POD_A["pod"], "name": "apps/v1/deployments", **warning},
                     "ControllerManagerInformerRelisting", "The informer for apps/v1/deployments keeps re-listing.",
                     "The informer for apps/v1/deployments on controller-manager-a listed 11 times in 30 minutes: "
                     "its watches keep failing or expiring.")])),
        # /healthz/deployment-controller starts failing at 3m (three probes a minute); replicaset's never does.
        case([series("kubernetes_healthchecks_total",
                     {**POD_A, "name": "deployment-controller", "status": "error", "type": "healthz"},
                     "0 0 0 3 6 9"),
              series("kubernetes_healthchecks_total",
                     {**POD_A, "name": "replicaset-controller", "status": "error", "type": "healthz"}, "0x5"),
              series("kubernetes_healthchecks_total",
                     {**POD_A, "name": "deployment-controller", "status": "error", "type": "livez"}, "0 5 10 15")],
             ("2m", "ControllerManagerHealthCheckFailing", []),
             ("5m", "ControllerManagerHealthCheckFailing",
              [fired({"namespace": "kube-system", "pod": POD_A["pod"], "name": "deployment-controller", **warning},
                     "ControllerManagerHealthCheckFailing",
                     "/healthz/deployment-controller fails on controller-manager-a.",
                     "The health check deployment-controller of controller-manager-a failed in the last 10 minutes; "
                     "the kubelet restarts a container whose /healthz keeps failing.")])),
    ]
    promtool_test(tmp_path, rule_spec(), tests)


@pytest.mark.parametrize("threshold", [0.5, 5])
def test_thresholds_come_from_values(tmp_path: Path, threshold: float) -> None:
    spec = rule_spec({"prometheusRule": {"enabled": True, "thresholds": {"syncErrorsPerSecond": threshold}}})
    # One failure a second: over 0.5, under 5.
    expected = [fired({"namespace": "kube-system", "pod": POD_A["pod"], "controller": "deployment",
                       "severity": "warning"}, "ControllerManagerSyncErrors", "deployment fails syncs.",
                      f"deployment on controller-manager-a fails 1 syncs a second (over {threshold}).")]
    if threshold >= 1:
        expected = []
    promtool_test(tmp_path, spec, [case(
        [series("controller_sync_errors_total", {**POD_A, "controller": "deployment"}, "0+60x30")],
        ("20m", "ControllerManagerSyncErrors", expected))])
