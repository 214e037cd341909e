"""The demo's two views of one cluster snapshot: in a terminal one ``rich`` screen redrawn in place (tables,
progress bars, the leader, recent events); elsewhere the plain table, printed again only when it changed."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.live import Live

from controller_manager.demo import Demo

T0 = "2026-11-27T06:00:00Z"


def snapshot(updated: int, holder: str = "node-a_1234") -> dict[str, list[dict[str, Any]]]:
    return {
        "nodes": [{"metadata": {"name": f"node-{i}"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
                  for i in range(2)],
        "deployments": [{
            "metadata": {"name": "web", "namespace": "default", "generation": 2,
                         "annotations": {"deployment.kubernetes.io/revision": "2"}},
            "spec": {"replicas": 4},
            "status": {"observedGeneration": 2, "replicas": 4, "updatedReplicas": updated, "readyReplicas": 4,
                       "availableReplicas": 4},
        }],
        "daemonsets": [{"metadata": {"name": "agent", "namespace": "kube-system"}, "status": {
            "desiredNumberScheduled": 2, "currentNumberScheduled": 2, "numberReady": 1, "updatedNumberScheduled": 2,
            "numberAvailable": 1}}],
        "jobs": [{"metadata": {"name": "pi", "namespace": "default"}, "spec": {"completions": 5},
                  "status": {"succeeded": 2, "active": 1}}],
        "cronjobs": [{"metadata": {"name": "tick", "namespace": "default"}, "spec": {"schedule": "*/1 * * * *"},
                      "status": {}}],
        "pods": [{"metadata": {"name": f"web-{i}"}, "status": {"phase": "Running"}} for i in range(4)],
        "events": [{"involvedObject": {"kind": "Deployment", "name": "web"}, "reason": "ScalingReplicaSet",
                    "message": "Scaled up replica set web-7d4b9 from 0 to 4", "lastTimestamp": T0}],
        "leases": [{"metadata": {"name": "controller-manager-py", "namespace": "kube-system"},
                    "spec": {"holderIdentity": holder}}],
    }


@pytest.fixture
def demo(tmp_path: Path) -> Demo:
    d = Demo(tmp_path, nodes=2, zones=1, exit_after=None)
    d.sim_url = "https://127.0.0.1:6443"
    return d


def test_terminal_view_shows_progress_the_leader_and_events(demo: Demo) -> None:
    demo.tty = True
    console = Console(file=io.StringIO(), width=160, color_system=None, force_terminal=False)
    console.print(demo.view(snapshot(updated=3)))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "leader node-a_1234" in text
    assert "nodes 2/2 Ready" in text
    rows = {line.split()[0]: line for line in text.splitlines() if line.split()}
    assert "rolling out: 3 of 4 updated" in rows["web"]
    assert "3/4" in rows["web"]  # the progress bar's count: updated and available
    assert "1/2" in rows["kube-system/agent"]
    assert "2/5" in rows["pi"]
    assert "Running" in rows["pi"]
    assert "Scaled up replica set web-7d4b9 from 0 to 4" in text
    assert "kubectl rollout status deployment/web" in text
    console = Console(file=io.StringIO(), width=160, color_system=None)
    console.print(demo.view(snapshot(updated=4, holder="")))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "leader none" in text
    assert "complete" in text


def test_terminal_frames_are_redrawn_in_place(demo: Demo) -> None:
    out = io.StringIO()
    console = Console(file=out, width=120, height=200, force_terminal=True, color_system=None)
    with Live(console=console, auto_refresh=False) as live:
        demo._live = live
        demo.show(snapshot(updated=3))
        first = out.getvalue()
        demo.show(snapshot(updated=4))
    second = out.getvalue()[len(first):]
    # The second frame moves the cursor back up over the first and rewrites it: no scrolling.
    assert "\x1b[2K" in second
    assert "\x1b[1A" in second or "\x1b[A" in second
    assert "complete" in second


def test_plain_view_prints_only_changes(demo: Demo, capsys: pytest.CaptureFixture[str]) -> None:
    demo.tty = False
    demo.show(snapshot(updated=3))
    demo.show(snapshot(updated=3))
    out = capsys.readouterr().out
    assert out.count("DEPLOYMENT") == 1
    assert "leader: node-a_1234" in out
    assert "\x1b[" not in out
    web = next(line for line in out.splitlines() if line.startswith("web "))
    assert web.split()[4:] == ["2", "rolling", "out:", "3", "of", "4", "updated"]
    demo.show(snapshot(updated=4))
    out = capsys.readouterr().out
    assert next(line for line in out.splitlines() if line.startswith("web ")).split()[4:6] == ["2", "complete"]
