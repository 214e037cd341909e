"""The kubelet's pod status builder as pure functions: stage tables, what carries over from the API's status and
what never does, readiness gates, container states, Go durations and containerd image names."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller_manager.api.meta import format_time
from controller_manager.sim.podstatus import PodRun, build_pod_status, go_duration, normalize_image

NOW = 1_700_000_100.0
EARLIER = "2023-11-14T22:13:20Z"
HOST = "172.18.0.2"


def run(stage: str, *, ready: bool = False, gates: tuple[str, ...] = (), host_network: bool = False,
        containers: tuple[str, ...] = ("web", "api")) -> PodRun:
    spec: dict[str, Any] = {"containers": [{"name": c, "image": "nginx"} for c in containers]}
    if gates:
        spec["readinessGates"] = [{"conditionType": g} for g in gates]
    if host_network:
        spec["hostNetwork"] = True
    r = PodRun(uid="u1", node="node-1", pod={"metadata": {"name": "p", "namespace": "ns", "uid": "u1"}, "spec": spec},
               stage=stage, ip="10.244.0.5", started_at=NOW - 10, ready=ready, start_time=EARLIER)
    if stage == "exited":
        r.terminated = r.terminated_state(0, NOW)
    return r


def conditions(status: dict[str, Any]) -> list[tuple[str, str, str | None, str | None]]:
    return [(c["type"], c["status"], c.get("reason"), c.get("message")) for c in status["conditions"]]


UNREADY = "containers with unready status: [web api]"  # spec order, as the kubelet lists them

STAGES = [
    pytest.param(run("creating"), "Pending", [
        ("PodReadyToStartContainers", "False", None, None), ("Initialized", "True", None, None),
        ("Ready", "False", "ContainersNotReady", UNREADY), ("ContainersReady", "False", "ContainersNotReady", UNREADY),
        ("PodScheduled", "True", None, None)], id="creating"),
    pytest.param(run("running"), "Running", [
        ("PodReadyToStartContainers", "True", None, None), ("Initialized", "True", None, None),
        ("Ready", "False", "ContainersNotReady", UNREADY), ("ContainersReady", "False", "ContainersNotReady", UNREADY),
        ("PodScheduled", "True", None, None)], id="running-unready"),
    pytest.param(run("running", ready=True), "Running", [
        ("PodReadyToStartContainers", "True", None, None), ("Initialized", "True", None, None),
        ("Ready", "True", None, None), ("ContainersReady", "True", None, None),
        ("PodScheduled", "True", None, None)], id="running-ready"),
    pytest.param(run("backoff"), "Running", [
        ("PodReadyToStartContainers", "True", None, None), ("Initialized", "True", None, None),
        ("Ready", "False", "ContainersNotReady", UNREADY), ("ContainersReady", "False", "ContainersNotReady", UNREADY),
        ("PodScheduled", "True", None, None)], id="backoff"),
    pytest.param(run("exited"), "Succeeded", [
        ("PodReadyToStartContainers", "False", None, None), ("Initialized", "True", "PodCompleted", None),
        ("Ready", "False", "PodCompleted", None), ("ContainersReady", "False", "PodCompleted", None),
        ("PodScheduled", "True", None, None)], id="succeeded"),
    pytest.param(run("running", ready=True, gates=("example.com/a", "example.com/b")), "Running", [
        ("PodReadyToStartContainers", "True", None, None), ("Initialized", "True", None, None),
        ("Ready", "False", "ReadinessGatesNotReady",
         'corresponding condition of pod readiness gate "example.com/a" does not exist., '
         'corresponding condition of pod readiness gate "example.com/b" does not exist.'),
        ("ContainersReady", "True", None, None), ("PodScheduled", "True", None, None)], id="readiness-gates"),
]


@pytest.mark.parametrize(("the_run", "phase", "want"), STAGES)
def test_phase_and_conditions_by_stage(the_run: PodRun, phase: str, want: list[Any]) -> None:
    status = build_pod_status(the_run, NOW, HOST, {"phase": "Pending", "qosClass": "BestEffort"})
    assert status["phase"] == phase
    assert conditions(status) == want
    assert list(status) == (["phase", "conditions", "hostIP", "hostIPs", "startTime", "containerStatuses", "qosClass"]
                            if phase == "Pending" else
                            ["phase", "conditions", "hostIP", "hostIPs", "podIP", "podIPs", "startTime",
                             "containerStatuses", "qosClass"])
    assert [c["name"] for c in status["containerStatuses"]] == ["api", "web"]


def test_killed_pod_fails() -> None:
    r = run("exited")
    r.terminated = r.terminated_state(143, NOW)
    status = build_pod_status(r, NOW, HOST, {}, killed=True)
    assert status["phase"] == "Failed"
    assert conditions(status)[1:4] == [("Initialized", "True", None, None), ("Ready", "False", "PodFailed", None),
                                       ("ContainersReady", "False", "PodFailed", None)]
    assert status["containerStatuses"][0]["state"]["terminated"]["reason"] == "Error"


def test_what_carries_over_from_the_api_and_what_does_not() -> None:
    disruption = {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager",
                  "message": "Taint manager: deleting due to NoExecute taint", "lastProbeTime": None,
                  "lastTransitionTime": EARLIER}
    current = {
        "phase": "Running",
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": EARLIER},
            {"type": "Ready", "status": "True", "reason": "ContainersNotReady", "message": "stale",
             "lastProbeTime": None, "lastTransitionTime": EARLIER},
            disruption,
        ],
        "reason": "SomethingElse", "nominatedNodeName": "n9", "qosClass": "Burstable", "startTime": "ignored",
    }
    before = copy.deepcopy(current)
    status = build_pod_status(run("running", ready=True), NOW, HOST, current)
    assert current == before  # inputs are never mutated
    assert status["conditions"][0] == disruption  # foreign conditions first, untouched
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready == {"type": "Ready", "status": "True", "lastProbeTime": None, "lastTransitionTime": EARLIER}
    now = format_time(NOW)
    assert next(c for c in status["conditions"] if c["type"] == "ContainersReady")["lastTransitionTime"] == now
    assert status["qosClass"] == "Burstable"
    assert status["startTime"] == EARLIER  # the kubelet's own, not whatever the API shows
    assert "reason" not in status
    assert "nominatedNodeName" not in status


def test_container_states() -> None:
    creating = build_pod_status(run("creating", containers=("c",)), NOW, HOST, {})["containerStatuses"][0]
    assert creating == {"name": "c", "state": {"waiting": {"reason": "ContainerCreating"}}, "lastState": {},
                        "ready": False, "restartCount": 0, "image": "nginx", "imageID": "", "started": False}
    r = run("backoff", containers=("c",))
    r.backoff = 20.0
    r.last_state, r.last_attempt = r.terminated_state(2, NOW), 0
    backoff = build_pod_status(r, NOW, HOST, {})["containerStatuses"][0]
    assert backoff["state"] == {"waiting": {"reason": "CrashLoopBackOff",
                                            "message": "back-off 20s restarting failed container=c pod=p_ns(u1)"}}
    assert backoff["lastState"]["terminated"]["exitCode"] == 2
    assert backoff["lastState"]["terminated"]["containerID"] == backoff["containerID"]
    assert backoff["image"] == "docker.io/library/nginx:latest"
    r.stage, r.restarts = "running", 1
    restarted = build_pod_status(r, NOW, HOST, {})["containerStatuses"][0]
    assert restarted["containerID"] != backoff["containerID"]
    assert restarted["lastState"] == backoff["lastState"]
    assert restarted["restartCount"] == 1


def test_host_network_pod_shows_the_node_ip() -> None:
    status = build_pod_status(run("running", host_network=True), NOW, HOST, {})
    assert status["podIP"] == HOST
    assert status["podIPs"] == [{"ip": HOST}]


# ----------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("seconds", "text"),
    [pytest.param(0, "0s", id="zero"), pytest.param(0.5, "500ms", id="millis"), pytest.param(1, "1s", id="one"),
     pytest.param(2.5, "2.5s", id="fraction"), pytest.param(10, "10s", id="ten"), pytest.param(80, "1m20s", id="min"),
     pytest.param(300, "5m0s", id="five-min"), pytest.param(3600, "1h0m0s", id="hour")],
)
def test_go_duration(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text


@pytest.mark.parametrize(
    ("image", "normal"),
    [pytest.param("nginx", "docker.io/library/nginx:latest", id="bare"),
     pytest.param("nginx:1.27", "docker.io/library/nginx:1.27", id="tag"),
     pytest.param("bitnami/redis", "docker.io/bitnami/redis:latest", id="user"),
     pytest.param("registry.k8s.io/pause:3.9", "registry.k8s.io/pause:3.9", id="registry"),
     pytest.param("localhost:5000/app", "localhost:5000/app:latest", id="registry-port")],
)
def test_normalize_image(image: str, normal: str) -> None:
    assert normalize_image(image) == normal


def test_created_containers_report_their_mounts() -> None:
    r = run("running", containers=("c",))
    r.pod["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "data", "mountPath": "/data"},
        {"name": "token", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": True}]
    status = build_pod_status(r, NOW, HOST, {})["containerStatuses"][0]
    assert list(status)[-1] == "volumeMounts"
    assert status["volumeMounts"] == [
        {"name": "data", "mountPath": "/data"},
        {"name": "token", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": True,
         "recursiveReadOnly": "Disabled"}]
    r.stage = "creating"
    assert "volumeMounts" not in build_pod_status(r, NOW, HOST, {})["containerStatuses"][0]
