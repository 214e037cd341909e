"""Server-side printing, kind by kind: the rows upstream's printers make, as tables of (object, expected cells).

Most cases are ported from ``pkg/printers/internalversion/printers_test.go`` (objects rewritten in their v1
JSON form); the server always prints the wide cells too, so a case lists the leading cells it checks. Ages are
relative to ``NOW``, the clock the table is printed at.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller_manager.api.meta import format_micro_time, format_time
from controller_manager.api.resources import CONFIGMAPS, NODES, PODS, Resource
from controller_manager.sim.apiserver import errors, schema
from controller_manager.sim.apiserver.tables import PRINTERS, check_include_object, human_duration, table
from tests.sim.apiserver.schema_strategies import objects

NOW = 1_700_000_000.0
MINUTE, HOUR, DAY = 60, 3600, 86400
Obj = dict[str, Any]


def ago(seconds: float) -> str:
    return format_time(NOW - seconds)


def res(group: str, kind: str) -> Resource:
    return Resource(group, "v1", kind.lower() + "s", kind, True)


def cells(group: str, kind: str, obj: Obj) -> list[Any]:
    row: list[Any] = table(res(group, kind), [obj], NOW)["rows"][0]["cells"]
    return row


# --- HumanDuration (apimachinery's duration_test.go) ----------------------------------------------------

MS = 0.001


@pytest.mark.parametrize(("seconds", "text"), [
    (-2, "<invalid>"), (-2 + 1e-9, "0s"), (0, "0s"), (1 - MS, "0s"), (1, "1s"), (70, "70s"),
    (2 * MINUTE - MS, "119s"), (2 * MINUTE, "2m"), (2 * MINUTE + 1, "2m1s"), (190, "3m10s"),
    (10 * MINUTE - MS, "9m59s"), (10 * MINUTE, "10m"), (10 * MINUTE + 1, "10m"), (70 * MINUTE, "70m"),
    (3 * HOUR - MS, "179m"), (3 * HOUR, "3h"), (3 * HOUR + MINUTE, "3h1m"), (8 * HOUR - MS, "7h59m"),
    (8 * HOUR, "8h"), (8 * HOUR + 59 * MINUTE, "8h"), (47 * HOUR, "47h"), (2 * DAY - MS, "47h"), (2 * DAY, "2d"),
    (49 * HOUR, "2d1h"), (8 * DAY - MS, "7d23h"), (8 * DAY, "8d"), (8 * DAY + 23 * HOUR, "8d"),
    (367 * DAY, "367d"), (2 * 365 * DAY - MS, "729d"), (2 * 365 * DAY, "2y"), (2 * 365 * DAY + 23 * HOUR, "2y"),
    (2 * 365 * DAY + DAY - MS, "2y"), (2 * 365 * DAY + DAY, "2y1d"), (2 * 365 * DAY + 25 * HOUR, "2y1d"),
    (7 * 365 * DAY, "7y"), (8 * 365 * DAY - MS, "7y364d"), (8 * 365 * DAY, "8y"), (8 * 365 * DAY + 2 * HOUR, "8y"),
    (8 * 365 * DAY + 364 * DAY, "8y"), (9 * 365 * DAY, "9y"),
])
def test_human_duration(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


@pytest.mark.parametrize(("created", "text"), [
    (ago(-2.1), "<invalid>"), (ago(-1.9), "0s"), (ago(0), "0s"), (None, "<unknown>"), (ago(30), "30s"),
    (ago(300), "5m"), (ago(6000), "100m"), (ago(2 * DAY), "2d"), (ago(90 * DAY), "90d"),
    (ago(10 * 365 * DAY), "10y"),
])
def test_age_comes_from_the_given_clock(created: str | None, text: str) -> None:
    # translateTimestampSince; second-precision timestamps make "-2.1s" read as -2s or -3s: both "<invalid>"
    obj: Obj = {"metadata": {"name": "n", **({"creationTimestamp": created} if created else {})}}
    assert cells("", "Namespace", obj)[2] == text


# --- pods -----------------------------------------------------------------------------------------------

def pod(name: str, containers: int = 2, *, init: list[Obj] | int = 0, **status: Any) -> Obj:
    init_specs = [{"name": f"init{i}"} for i in range(init)] if isinstance(init, int) else init
    return {"metadata": {"name": name},
            "spec": {"containers": [{"name": f"c{i}"} for i in range(containers)], "initContainers": init_specs},
            "status": status}


RUNNING: Obj = {"running": {}}
SIDECARS = [{"name": "restartable-init-1", "restartPolicy": "Always"},
            {"name": "restartable-init-2", "restartPolicy": "Always"}]


def restarted(seconds: float) -> Obj:
    return {"terminated": {"finishedAt": ago(seconds)}}


POD_CASES: list[tuple[Obj, list[Any]]] = [
    (pod("test1", phase="podPhase", containerStatuses=[{"ready": True, "restartCount": 3, "state": RUNNING},
                                                       {"restartCount": 3}]),
     ["test1", "1/2", "podPhase", "6", "<unknown>"]),
    (pod("test2", phase="podPhase", containerStatuses=[
        {"ready": True, "restartCount": 3, "state": RUNNING},
        {"state": {"waiting": {"reason": "ContainerWaitingReason"}}, "restartCount": 3}]),
     ["test2", "1/2", "ContainerWaitingReason", "6", "<unknown>"]),
    (pod("test3", phase="podPhase", containerStatuses=[
        {"state": {"waiting": {"reason": "ContainerWaitingReason"}}, "restartCount": 3},
        {"state": {"terminated": {"reason": "ContainerTerminatedReason"}}, "restartCount": 3}]),
     ["test3", "0/2", "ContainerWaitingReason", "6", "<unknown>"]),
    (pod("test4", phase="podPhase", containerStatuses=[{"ready": True, "restartCount": 3, "state": RUNNING},
                                                       {"ready": True, "restartCount": 3}]),
     ["test4", "1/2", "podPhase", "6", "<unknown>"]),
    (pod("test5", reason="podReason", phase="podPhase", containerStatuses=[
        {"ready": True, "restartCount": 3, "state": RUNNING}, {"ready": True, "restartCount": 3}]),
     ["test5", "1/2", "podReason", "6", "<unknown>"]),
    (pod("test6", phase="Running", containerStatuses=[
        {"ready": True, "restartCount": 3, "state": {"terminated": {"reason": "Completed", "exitCode": 0}}},
        {"ready": True, "restartCount": 3, "state": RUNNING}]),
     ["test6", "1/2", "NotReady", "6", "<unknown>"]),
    (pod("test6", phase="Running", conditions=[{"type": "Ready", "status": "True"}], containerStatuses=[
        {"ready": True, "restartCount": 3, "state": {"terminated": {"reason": "Completed", "exitCode": 0}}},
        {"ready": True, "restartCount": 3, "state": RUNNING}]),
     ["test6", "1/2", "Running", "6", "<unknown>"]),
    (pod("test7", 1, init=1, phase="podPhase",
         initContainerStatuses=[{"restartCount": 3, "state": RUNNING, "lastState": restarted(10)}],
         containerStatuses=[{"state": {"waiting": {}}}]),
     ["test7", "0/1", "Init:0/1", "3 (10s ago)", "<unknown>"]),
    (pod("test8", 1, init=2, phase="podPhase",
         initContainerStatuses=[{"restartCount": 3, "state": RUNNING, "lastState": restarted(10)},
                                {"state": {"waiting": {}}}],
         containerStatuses=[{"state": {"waiting": {}}}]),
     ["test8", "0/1", "Init:0/2", "3 (10s ago)", "<unknown>"]),
    (pod("test9", 1, init=2, phase="podPhase",
         initContainerStatuses=[{"state": {"terminated": {}}},
                                {"restartCount": 3, "state": RUNNING, "lastState": restarted(10)}],
         containerStatuses=[{"state": {"waiting": {}}}]),
     ["test9", "0/1", "Init:1/2", "3 (10s ago)", "<unknown>"]),
    (pod("test10", 1, init=2, phase="podPhase",
         initContainerStatuses=[{"restartCount": 2, "state": {"terminated": {}}, "lastState": restarted(120)},
                                {"restartCount": 3, "state": RUNNING, "lastState": restarted(10)}],
         containerStatuses=[{"state": {"waiting": {}}}]),
     ["test10", "0/1", "Init:1/2", "5 (10s ago)", "<unknown>"]),
    (pod("test11", 1, init=1, phase="Running",
         initContainerStatuses=[{"restartCount": 2, "state": {"terminated": {}}, "lastState": restarted(120)}],
         containerStatuses=[{"restartCount": 4, "state": RUNNING, "lastState": restarted(20)}]),
     ["test11", "0/1", "Running", "4 (20s ago)", "<unknown>"]),
    (pod("test12", 1, phase="Running",
         containerStatuses=[{"ready": True, "restartCount": 3, "state": RUNNING, "lastState": restarted(5 * DAY)}]),
     ["test12", "1/1", "Running", "3 (5d ago)", "<unknown>"]),
    (pod("test13", phase="Running", containerStatuses=[
        {"ready": True, "state": RUNNING},
        {"ready": True, "restartCount": 3, "state": RUNNING, "lastState": restarted(10 * DAY)}]),
     ["test13", "2/2", "Running", "3 (10d ago)", "<unknown>"]),
    (pod("test14", phase="Running", containerStatuses=[
        {"ready": True, "restartCount": 6, "state": RUNNING, "lastState": restarted(5 * DAY)},
        {"ready": True, "restartCount": 3, "state": RUNNING, "lastState": restarted(20 * DAY)}]),
     ["test14", "2/2", "Running", "9 (5d ago)", "<unknown>"]),
    (pod("test15", phase="podPhase",
         conditions=[{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]),
     ["test15", "0/2", "SchedulingGated", "0", "<unknown>"]),
    (pod("test16", 1, phase="Succeeded",
         containerStatuses=[{"state": {"terminated": {"reason": "Completed", "exitCode": 0}}}]),
     ["test16", "0/1", "Completed", "0", "<unknown>"]),
    (pod("test17", 1, phase="Failed",
         containerStatuses=[{"state": {"terminated": {"reason": "Error", "exitCode": 1}}}]),
     ["test17", "0/1", "Error", "0", "<unknown>"]),
    ({**pod("test18", 1, phase="Succeeded",
            containerStatuses=[{"state": {"terminated": {"reason": "Completed", "exitCode": 0}}}]),
      "metadata": {"name": "test18", "deletionTimestamp": ago(10)}},
     ["test18", "0/1", "Completed", "0", "<unknown>"]),
    ({**pod("test19", 1, phase="Running", containerStatuses=[{"state": RUNNING}]),
      "metadata": {"name": "test19", "deletionTimestamp": ago(10)}},
     ["test19", "0/1", "Terminating", "0", "<unknown>"]),
    ({**pod("test20", 1, phase="Pending"), "metadata": {"name": "test20", "deletionTimestamp": ago(10)}},
     ["test20", "0/1", "Terminating", "0", "<unknown>"]),
    ({**pod("lost", 1, phase="Running", reason="NodeLost"), "metadata": {"name": "lost", "deletionTimestamp": ago(1)}},
     ["lost", "0/1", "Unknown", "0", "<unknown>"]),
    (pod("exit", 1, phase="Running", containerStatuses=[{"state": {"terminated": {"exitCode": 2}}}]),
     ["exit", "0/1", "ExitCode:2", "0", "<unknown>"]),
    (pod("signal", 1, phase="Running", containerStatuses=[{"state": {"terminated": {"exitCode": 2, "signal": 9}}}]),
     ["signal", "0/1", "Signal:9", "0", "<unknown>"]),
    (pod("initfail", 1, init=1, phase="Pending",
         initContainerStatuses=[{"state": {"terminated": {"exitCode": 3}}}]),
     ["initfail", "0/1", "Init:ExitCode:3", "0", "<unknown>"]),
    (pod("initcrash", 1, init=1, phase="Pending",
         initContainerStatuses=[{"state": {"waiting": {"reason": "CrashLoopBackOff"}}}]),
     ["initcrash", "0/1", "Init:CrashLoopBackOff", "0", "<unknown>"]),
    (pod("crash", 1, phase="Running",
         containerStatuses=[{"restartCount": 5, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                             "lastState": restarted(90)}]),
     ["crash", "0/1", "CrashLoopBackOff", "5 (90s ago)", "<unknown>"]),
    # restartable init containers (sidecars)
    (pod("sidecar1", 1, init=SIDECARS, phase="Pending",
         conditions=[{"type": "Initialized", "status": "False"}],
         initContainerStatuses=[
             {"name": "restartable-init-1", "restartCount": 3, "state": RUNNING, "started": False,
              "lastState": restarted(10)},
             {"name": "restartable-init-2", "state": {"waiting": {}}, "started": False}],
         containerStatuses=[{"state": {"waiting": {}}}]),
     ["sidecar1", "0/3", "Init:0/2", "3 (10s ago)", "<unknown>"]),
    (pod("sidecar2", 1, init=SIDECARS, phase="Pending",
         conditions=[{"type": "Initialized", "status": "False"}],
         initContainerStatuses=[
             {"name": "restartable-init-1", "restartCount": 3, "state": RUNNING, "started": True,
              "lastState": restarted(10)},
             {"name": "restartable-init-2", "state": RUNNING, "started": False}],
         containerStatuses=[{"state": {"waiting": {}}}]),
     ["sidecar2", "0/3", "Init:1/2", "3 (10s ago)", "<unknown>"]),
    (pod("sidecar3", 1, init=SIDECARS, phase="Running",
         conditions=[{"type": "Initialized", "status": "True"}],
         initContainerStatuses=[
             {"name": "restartable-init-1", "restartCount": 3, "state": RUNNING, "started": True,
              "lastState": restarted(10)},
             {"name": "restartable-init-2", "state": RUNNING, "started": True}],
         containerStatuses=[{"ready": True, "restartCount": 4, "state": RUNNING, "lastState": restarted(20)}]),
     ["sidecar3", "1/3", "Running", "7 (10s ago)", "<unknown>"]),
    (pod("sidecar4", 1, init=SIDECARS, phase="Succeeded",
         conditions=[{"type": "Initialized", "status": "True"}],
         initContainerStatuses=[
             {"name": "restartable-init-1", "restartCount": 3, "started": False, "lastState": restarted(10),
              "state": {"terminated": {"reason": "Error", "exitCode": 137}}},
             {"name": "restartable-init-2", "started": False,
              "state": {"terminated": {"reason": "Error", "exitCode": 137}}}],
         containerStatuses=[{"restartCount": 4, "lastState": restarted(20),
                             "state": {"terminated": {"reason": "Completed", "exitCode": 0}}}]),
     ["sidecar4", "0/3", "Completed", "7 (10s ago)", "<unknown>"]),
    (pod("unknown-statuses", 1, init=[{"name": "init1"}, {"name": "sidecar1", "restartPolicy": "Always"}],
         phase="Running", initContainerStatuses=[{"name": "initinvalid"}, {"name": "init1"}, {"name": "sidecar1"}],
         containerStatuses=[{"name": "containerinvalid"}, {"name": "container1"}]),
     ["unknown-statuses", "0/2", "Init:0/2", "0", "<unknown>"]),
]


@pytest.mark.parametrize(("obj", "expected"), POD_CASES, ids=[c[1][0] for c in POD_CASES])
def test_pod_row(obj: Obj, expected: list[Any]) -> None:
    assert cells("", "Pod", obj)[:len(expected)] == expected


@pytest.mark.parametrize(("status", "wide"), [
    ({"phase": "podPhase", "podIPs": [{"ip": "1.1.1.1"}, {"ip": "2001:db8::"}], "nominatedNodeName": "node1",
      "conditions": [{"type": "condition1", "status": "False"}, {"type": "condition2", "status": "True"}]},
     ["1.1.1.1", "test1", "node1", "1/3"]),
    ({"phase": "podPhase", "podIP": "10.0.0.9"}, ["10.0.0.9", "test1", "<none>", "0/3"]),
])
def test_pod_wide_cells(status: Obj, wide: list[str]) -> None:
    obj = pod("p", **status)
    obj["spec"].update(nodeName="test1",
                       readinessGates=[{"conditionType": f"condition{i}"} for i in (1, 2, 3)])
    assert cells("", "Pod", obj)[5:] == wide
    assert cells("", "Pod", pod("bare", phase="Pending"))[5:] == ["<none>"] * 4


@pytest.mark.parametrize(("phase", "conditions"), [
    ("Running", None),
    ("Succeeded", [{"type": "Completed", "status": "True", "reason": "Succeeded",
                    "message": "The pod has completed successfully."}]),
    ("Failed", [{"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}]),
])
def test_pod_row_conditions(phase: str, conditions: list[Obj] | None) -> None:
    row = table(PODS, [pod("p", phase=phase)], NOW)["rows"][0]
    assert row.get("conditions") == conditions


# --- every other kind -------------------------------------------------------------------------------------

TEMPLATE: Obj = {"spec": {"containers": [{"name": "fake-container1", "image": "fake-image1"},
                                         {"name": "fake-container2", "image": "fake-image2"}]}}
JUST_NOW = ago(-1.9)

CASES: list[tuple[str, str, Obj, list[Any]]] = [
    ("", "Node", {"metadata": {"name": "foo1"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}},
     ["foo1", "Ready", "<none>", "<unknown>", ""]),
    ("", "Node", {"metadata": {"name": "foo2"}, "spec": {"unschedulable": True},
                  "status": {"conditions": [{"type": "Ready", "status": "True"}]}},
     ["foo2", "Ready,SchedulingDisabled", "<none>", "<unknown>", ""]),
    ("", "Node", {"metadata": {"name": "foo3"}, "status": {"conditions": [
        {"type": "Ready", "status": "True"}, {"type": "Ready", "status": "True"}]}},
     ["foo3", "Ready", "<none>", "<unknown>", ""]),
    ("", "Node", {"metadata": {"name": "foo4"}, "status": {"conditions": [{"type": "Ready", "status": "False"}]}},
     ["foo4", "NotReady", "<none>", "<unknown>", ""]),
    ("", "Node", {"metadata": {"name": "foo5"}, "spec": {"unschedulable": True},
                  "status": {"conditions": [{"type": "Ready", "status": "False"}]}},
     ["foo5", "NotReady,SchedulingDisabled", "<none>", "<unknown>", ""]),
    ("", "Node", {"metadata": {"name": "foo6"}, "status": {"conditions": [{"type": "InvalidValue", "status": "True"}]}},
     ["foo6", "Unknown", "<none>", "<unknown>", ""]),
    ("", "Node", {"metadata": {"name": "foo7"}, "spec": {"unschedulable": True}},
     ["foo7", "Unknown,SchedulingDisabled", "<none>", "<unknown>", ""]),
    ("", "Node", {"metadata": {"name": "foo8", "labels": {"node-role.kubernetes.io/master": "",
                                                          "node-role.kubernetes.io/control-plane": "",
                                                          "node-role.kubernetes.io/node": "",
                                                          "kubernetes.io/role": "node"}}},
     ["foo8", "Unknown", "control-plane,master,node", "<unknown>", ""]),
    ("", "Node", {"metadata": {"name": "foo9", "labels": {"kubernetes.io/role": "worker"}},
                  "status": {"nodeInfo": {"kubeletVersion": "v1.37.0", "osImage": "fake-os-image",
                                          "kernelVersion": "fake-kernel-version",
                                          "containerRuntimeVersion": "foo://1.2.3"},
                             "addresses": [{"type": "InternalIP", "address": "2.2.2.2"},
                                           {"type": "ExternalIP", "address": "3.3.3.3"},
                                           {"type": "InternalIP", "address": "4.4.4.4"}]}},
     ["foo9", "Unknown", "worker", "<unknown>", "v1.37.0", "2.2.2.2", "3.3.3.3", "fake-os-image",
      "fake-kernel-version", "foo://1.2.3"]),
    ("", "Node", {"metadata": {"name": "bare"}},
     ["bare", "Unknown", "<none>", "<unknown>", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"]),
    ("", "Service", {"metadata": {"name": "service1"}, "spec": {
        "clusterIPs": ["1.2.3.4"], "type": "LoadBalancer", "ports": [{"port": 80, "protocol": "TCP"}]},
        "status": {"loadBalancer": {"ingress": [{"ip": "3.4.5.6"}, {"ip": "2.3.4.5"}]}}},
     ["service1", "LoadBalancer", "1.2.3.4", "2.3.4.5,3.4.5.6", "80/TCP", "<unknown>", "<none>"]),
    ("", "Service", {"metadata": {"name": "service2"}, "spec": {
        "clusterIPs": ["1.3.4.5"], "type": "LoadBalancer",
        "ports": [{"port": 80, "protocol": "TCP"}, {"port": 8090, "protocol": "UDP"},
                  {"port": 8000, "protocol": "TCP"}, {"port": 7777, "protocol": "SCTP"}]}},
     ["service2", "LoadBalancer", "1.3.4.5", "<pending>", "80/TCP,8090/UDP,8000/TCP,7777/SCTP", "<unknown>"]),
    # the server prints wide, so a long address list is never elided
    ("", "Service", {"metadata": {"name": "service4"}, "spec": {
        "clusterIPs": ["1.5.6.7"], "type": "LoadBalancer", "selector": {"foo": "bar"},
        "ports": [{"port": 80, "protocol": "TCP"}]},
        "status": {"loadBalancer": {"ingress": [{"ip": "2.3.4.5"}, {"ip": "3.4.5.6"},
                                                {"ip": "5.6.7.8", "hostname": "host5678"}]}}},
     ["service4", "LoadBalancer", "1.5.6.7", "2.3.4.5,3.4.5.6,5.6.7.8", "80/TCP", "<unknown>", "foo=bar"]),
    ("", "Service", {"metadata": {"name": "lb-external"}, "spec": {
        "clusterIPs": ["10.0.0.1"], "type": "LoadBalancer", "externalIPs": ["9.9.9.9"],
        "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080}]},
        "status": {"loadBalancer": {"ingress": [{"hostname": "lb.example.com"}]}}},
     ["lb-external", "LoadBalancer", "10.0.0.1", "lb.example.com,9.9.9.9", "80:30080/TCP", "<unknown>"]),
    ("", "Service", {"metadata": {"name": "cluster"}, "spec": {"type": "ClusterIP", "clusterIP": "10.0.0.2",
                                                               "clusterIPs": ["10.0.0.2", "fd00::2"],
                                                               "externalIPs": ["1.1.1.1", "2.2.2.2"]}},
     ["cluster", "ClusterIP", "10.0.0.2", "1.1.1.1,2.2.2.2", "<none>", "<unknown>"]),
    ("", "Service", {"metadata": {"name": "headless"}, "spec": {"type": "ClusterIP", "clusterIP": "None",
                                                                "ports": [{"port": 53, "protocol": "UDP"}]}},
     ["headless", "ClusterIP", "None", "<none>", "53/UDP", "<unknown>"]),
    ("", "Service", {"metadata": {"name": "ext"}, "spec": {"type": "ExternalName", "externalName": "db.example"}},
     ["ext", "ExternalName", "<none>", "db.example", "<none>", "<unknown>"]),
    ("", "Endpoints", {"metadata": {"name": "none"}}, ["none", "<none>", "<unknown>"]),
    ("", "Endpoints", {"metadata": {"name": "ports"}, "subsets": [
        {"addresses": [{"ip": "1.2.3.4"}, {"ip": "5.6.7.8"}], "ports": [{"port": 8001}, {"port": 8002}]}]},
     ["ports", "1.2.3.4:8001,5.6.7.8:8001,1.2.3.4:8002 + 1 more...", "<unknown>"]),
    ("", "Endpoints", {"metadata": {"name": "headless"}, "subsets": [
        {"addresses": [{"ip": "1.2.3.4"}, {"ip": "fd00::1"}]}]}, ["headless", "1.2.3.4,fd00::1", "<unknown>"]),
    ("", "Endpoints", {"metadata": {"name": "v6"}, "subsets": [
        {"addresses": [{"ip": "fd00::1"}], "ports": [{"port": 80}]}]}, ["v6", "[fd00::1]:80", "<unknown>"]),
    ("", "Endpoints", {"metadata": {"name": "empty"}, "subsets": [{"ports": [{"port": 80}]}]},
     ["empty", "", "<unknown>"]),
    ("", "Event", {"metadata": {"name": "ev1"}, "involvedObject": {"kind": "Pod", "name": "web-1",
                                                                   "fieldPath": "spec.containers{c}"},
                   "type": "Warning", "reason": "BackOff", "message": "  restarting  ", "count": 3,
                   "firstTimestamp": ago(3 * HOUR), "lastTimestamp": ago(90),
                   "source": {"component": "kubelet", "host": "node-1"}},
     ["90s", "Warning", "BackOff", "pod/web-1", "spec.containers{c}", "kubelet, node-1", "restarting", "3h", 3,
      "ev1"]),
    ("", "Event", {"metadata": {"name": "ev2"}, "involvedObject": {"kind": "Node"}, "type": "Normal",
                   "reason": "Starting", "eventTime": format_micro_time(NOW - 30),
                   "reportingController": "kubelet", "reportingInstance": "node-2"},
     ["30s", "Normal", "Starting", "node", "", "kubelet, node-2", "", "30s", 1, "ev2"]),
    ("", "Event", {"metadata": {"name": "ev3"}, "involvedObject": {"kind": "Pod", "name": "p"},
                   "eventTime": format_micro_time(NOW - 600), "reportingController": "scheduler",
                   "series": {"count": 7, "lastObservedTime": format_micro_time(NOW - 5)}},
     ["5s", "", "", "pod/p", "", "scheduler", "", "10m", 7, "ev3"]),
    ("events.k8s.io", "Event", {"metadata": {"name": "ev4"}, "regarding": {"kind": "Deployment", "name": "web"},
                                "note": "Scaled up", "type": "Normal", "reason": "ScalingReplicaSet",
                                "eventTime": format_micro_time(NOW - 45), "reportingController": "deployment",
                                "deprecatedCount": 2, "deprecatedLastTimestamp": ago(20)},
     ["20s", "Normal", "ScalingReplicaSet", "deployment/web", "", "deployment", "Scaled up", "45s", 2, "ev4"]),
    ("", "Namespace", {"metadata": {"name": "ns", "creationTimestamp": ago(3 * DAY)}, "status": {"phase": "Active"}},
     ["ns", "Active", "3d"]),
    ("", "Secret", {"metadata": {"name": "s", "creationTimestamp": ago(5)}, "type": "Opaque",
                    "data": {"a": "", "b": ""}}, ["s", "Opaque", 2, "5s"]),
    ("", "ServiceAccount", {"metadata": {"name": "default"}}, ["default", 0, "<unknown>"]),
    ("", "ConfigMap", {"metadata": {"name": "cm"}, "data": {"a": "1"}, "binaryData": {"b": ""}},
     ["cm", 2, "<unknown>"]),
    ("", "PodTemplate", {"metadata": {"name": "pod-template-2"}, "template": TEMPLATE},
     ["pod-template-2", "fake-container1,fake-container2", "fake-image1,fake-image2", "<none>"]),
    ("", "PodTemplate", {"metadata": {"name": "pod-template-3"},
                         "template": {"metadata": {"labels": {"foo": "bar"}}, "spec": {"containers": []}}},
     ["pod-template-3", "", "", "foo=bar"]),
    ("", "ReplicationController", {"metadata": {"name": "rc1", "creationTimestamp": JUST_NOW},
                                   "spec": {"replicas": 5, "selector": {"a": "b"}, "template": TEMPLATE},
                                   "status": {"replicas": 5, "readyReplicas": 2}},
     ["rc1", 5, 5, 2, "0s", "fake-container1,fake-container2", "fake-image1,fake-image2", "a=b"]),
    ("", "PersistentVolume", {"metadata": {"name": "pv1"}, "spec": {
        "capacity": {"storage": "4Gi"}, "accessModes": ["ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"],
        "persistentVolumeReclaimPolicy": "Retain", "claimRef": {"namespace": "default", "name": "claim"},
        "storageClassName": "fast", "volumeMode": "Block"}, "status": {"phase": "Bound"}},
     ["pv1", "4Gi", "RWO,RWX,RWOP", "Retain", "Bound", "default/claim", "fast", "<unset>", "", "<unknown>",
      "Block"]),
    ("", "PersistentVolume", {"metadata": {"name": "pv2", "deletionTimestamp": ago(1),
                                           "annotations": {"volume.beta.kubernetes.io/storage-class": "beta"}},
                              "spec": {"storageClassName": "ignored"},
                              "status": {"phase": "Released", "reason": "why"}},
     ["pv2", "0", "", "", "Terminating", "", "beta", "<unset>", "why", "<unknown>", "<unset>"]),
    ("", "PersistentVolumeClaim", {"metadata": {"name": "pending"}, "spec": {
        "resources": {"requests": {"storage": "1Gi"}}, "storageClassName": "fast"}, "status": {"phase": "Pending"}},
     ["pending", "Pending", "", "", "", "fast", "<unset>", "<unknown>", "<unset>"]),
    ("", "PersistentVolumeClaim", {"metadata": {"name": "bound"}, "spec": {
        "volumeName": "pv1", "volumeAttributesClassName": "gold", "volumeMode": "Filesystem"},
        "status": {"phase": "Bound", "accessModes": ["ReadOnlyMany"], "capacity": {"storage": "2Gi"}}},
     ["bound", "Bound", "pv1", "2Gi", "ROX", "", "gold", "<unknown>", "Filesystem"]),
    ("", "ComponentStatus", {"metadata": {"name": "etcd-0"}, "conditions": [
        {"type": "Healthy", "status": "True", "message": "ok", "error": ""}]}, ["etcd-0", "Healthy", "ok", ""]),
    ("", "ComponentStatus", {"metadata": {"name": "scheduler"}}, ["scheduler", "Unknown", "", ""]),
    ("", "ResourceQuota", {"metadata": {"name": "q"}, "status": {
        "hard": {"pods": "10", "limits.cpu": "2", "requests.memory": "1Gi", "cpu": "1"},
        "used": {"pods": "3", "limits.cpu": "500m", "cpu": "250m"}}},
     ["q", "cpu: 250m/1, pods: 3/10, requests.memory: 0/1Gi", "limits.cpu: 500m/2", "<unknown>"]),
    ("apps", "Deployment", {"metadata": {"name": "test1", "creationTimestamp": JUST_NOW},
                            "spec": {"replicas": 5, "template": TEMPLATE,
                                     "selector": {"matchLabels": {"foo": "bar"}}},
                            "status": {"replicas": 10, "updatedReplicas": 2, "availableReplicas": 1,
                                       "unavailableReplicas": 4}},
     ["test1", "0/5", 2, 1, "0s", "fake-container1,fake-container2", "fake-image1,fake-image2", "foo=bar"]),
    ("apps", "DaemonSet", {"metadata": {"name": "test1", "creationTimestamp": JUST_NOW},
                           "spec": {"template": TEMPLATE, "selector": {"matchLabels": {"foo": "bar"}}},
                           "status": {"currentNumberScheduled": 2, "desiredNumberScheduled": 3, "numberReady": 1,
                                      "updatedNumberScheduled": 2, "numberAvailable": 0}},
     ["test1", 3, 2, 1, 2, 0, "<none>", "0s", "fake-container1,fake-container2", "fake-image1,fake-image2",
      "foo=bar"]),
    ("apps", "DaemonSet", {"metadata": {"name": "ds2"}, "spec": {"template": {"spec": {
        "nodeSelector": {"disk": "ssd", "arch": "arm"}}}}}, ["ds2", 0, 0, 0, 0, 0, "arch=arm,disk=ssd"]),
    ("apps", "ReplicaSet", {"metadata": {"name": "rs"}, "spec": {
        "replicas": 3, "template": TEMPLATE,
        "selector": {"matchLabels": {"app": "x"}, "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["b", "a"]}]}},
        "status": {"replicas": 2, "readyReplicas": 1}},
     ["rs", 3, 2, 1, "<unknown>", "fake-container1,fake-container2", "fake-image1,fake-image2",
      "app=x,tier in (a,b)"]),
    ("apps", "StatefulSet", {"metadata": {"name": "sts"}, "spec": {"replicas": 3, "template": TEMPLATE},
                             "status": {"readyReplicas": 2}},
     ["sts", "2/3", "<unknown>", "fake-container1,fake-container2", "fake-image1,fake-image2"]),
    ("apps", "ControllerRevision", {"metadata": {"name": "rev", "ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "controller": True, "uid": "u"}]},
        "revision": 4}, ["rev", "daemonset.apps/ds", 4, "<unknown>"]),
    ("apps", "ControllerRevision", {"metadata": {"name": "orphan"}, "revision": 1},
     ["orphan", "<none>", 1, "<unknown>"]),
    ("batch", "Job", {"metadata": {"name": "job1", "creationTimestamp": JUST_NOW}, "spec": {
        "completions": 2, "template": TEMPLATE, "selector": {"matchLabels": {"job-label": "job-label-value"}}},
        "status": {"succeeded": 1}},
     ["job1", "Running", "1/2", "", "0s", "fake-container1,fake-container2", "fake-image1,fake-image2",
      "job-label=job-label-value"]),
    ("batch", "Job", {"metadata": {"name": "job2", "creationTimestamp": ago(10 * 365 * DAY)}, "spec": {}},
     ["job2", "Running", "0/1", "", "10y"]),
    ("batch", "Job", {"metadata": {"name": "job3"}, "spec": {}, "status": {
        "startTime": ago(-MINUTE), "completionTime": ago(-31 * MINUTE)}}, ["job3", "Running", "0/1", "30m"]),
    ("batch", "Job", {"metadata": {"name": "job4"}, "spec": {"parallelism": 3},
                      "status": {"startTime": ago(20 * MINUTE)}}, ["job4", "Running", "0/1 of 3", "20m"]),
    ("batch", "Job", {"metadata": {"name": "job5"}, "spec": {}, "status": {
        "conditions": [{"type": "Complete", "status": "True"}]}}, ["job5", "Complete", "0/1", ""]),
    ("batch", "Job", {"metadata": {"name": "job6"}, "spec": {}, "status": {
        "conditions": [{"type": "Failed", "status": "True"}]}}, ["job6", "Failed", "0/1", ""]),
    ("batch", "Job", {"metadata": {"name": "job7"}, "spec": {}, "status": {
        "conditions": [{"type": "Suspended", "status": "True"}]}}, ["job7", "Suspended", "0/1", ""]),
    ("batch", "Job", {"metadata": {"name": "job8"}, "spec": {}, "status": {
        "conditions": [{"type": "FailureTarget", "status": "True"}]}}, ["job8", "FailureTarget", "0/1", ""]),
    ("batch", "Job", {"metadata": {"name": "job9", "deletionTimestamp": JUST_NOW}, "spec": {}},
     ["job9", "Terminating", "0/1", ""]),
    ("batch", "CronJob", {"metadata": {"name": "cronjob1", "creationTimestamp": JUST_NOW}, "spec": {
        "schedule": "0/5 * * * ?", "suspend": False, "jobTemplate": {"spec": {
            "template": TEMPLATE, "selector": {"matchLabels": {"a": "b"}}}}},
        "status": {"lastScheduleTime": ago(-1.9)}},
     ["cronjob1", "0/5 * * * ?", "<none>", "False", 0, "0s", "0s", "fake-container1,fake-container2",
      "fake-image1,fake-image2", "a=b"]),
    ("batch", "CronJob", {"metadata": {"name": "cronjob2", "creationTimestamp": ago(3 * HOUR)}, "spec": {
        "schedule": "0/5 * * * ?", "timeZone": "Europe/Paris", "jobTemplate": {"spec": {"template": {}}}},
        "status": {"lastScheduleTime": ago(30), "active": [{"name": "j"}]}},
     ["cronjob2", "0/5 * * * ?", "Europe/Paris", "<unset>", 1, "30s", "3h", "", "", "<none>"]),
    ("batch", "CronJob", {"metadata": {"name": "cronjob3"}, "spec": {"schedule": "@hourly", "suspend": True}},
     ["cronjob3", "@hourly", "<none>", "True", 0, "<none>"]),
    ("policy", "PodDisruptionBudget", {"metadata": {"name": "pdb1", "creationTimestamp": JUST_NOW},
                                       "spec": {"minAvailable": 22}, "status": {"disruptionsAllowed": 5}},
     ["pdb1", "22", "N/A", 5, "0s"]),
    ("policy", "PodDisruptionBudget", {"metadata": {"name": "pdb2"}, "spec": {"maxUnavailable": "11%"},
                                       "status": {"disruptionsAllowed": 5}}, ["pdb2", "N/A", "11%", 5, "<unknown>"]),
    ("coordination.k8s.io", "Lease", {"metadata": {"name": "kube-scheduler"},
                                      "spec": {"holderIdentity": "node-1_abc"}},
     ["kube-scheduler", "node-1_abc", "<unknown>"]),
    ("coordination.k8s.io", "Lease", {"metadata": {"name": "free"}, "spec": {}}, ["free", "", "<unknown>"]),
    ("coordination.k8s.io", "LeaseCandidate", {"metadata": {"name": "c"}, "spec": {
        "leaseName": "l", "binaryVersion": "1.37.0", "emulationVersion": "1.36.0"}},
     ["c", "l", "1.37.0", "1.36.0", "<unknown>"]),
    ("discovery.k8s.io", "EndpointSlice", {"metadata": {"name": "abcslice.123", "creationTimestamp": JUST_NOW},
                                           "addressType": "IPv4",
                                           "ports": [{"name": "http", "port": 80, "protocol": "TCP"}],
                                           "endpoints": [{"addresses": ["10.1.2.3", "2001:db8::1234:5678"]}]},
     ["abcslice.123", "IPv4", "80", "10.1.2.3,2001:db8::1234:5678", "0s"]),
    ("discovery.k8s.io", "EndpointSlice", {"metadata": {"name": "longerslicename.123"}, "addressType": "IPv6",
                                           "ports": [{"name": "http", "port": 80}, {"name": "https", "port": 443}],
                                           "endpoints": [{"addresses": ["10.1.2.3"]},
                                                         {"addresses": ["10.2.3.4", "10.2.3.5"]},
                                                         {"addresses": ["10.2.3.6"]}]},
     ["longerslicename.123", "IPv6", "80,443", "10.1.2.3,10.2.3.4,10.2.3.5 + 1 more...", "<unknown>"]),
    ("discovery.k8s.io", "EndpointSlice", {"metadata": {"name": "nothing"}, "addressType": "IPv4"},
     ["nothing", "IPv4", "<unset>", "<unset>", "<unknown>"]),
    ("discovery.k8s.io", "EndpointSlice", {"metadata": {"name": "named"}, "addressType": "FQDN",
                                           "ports": [{"name": "dns"}, {}, {"port": 1}, {"port": 2}]},
     ["named", "FQDN", "dns,*,1 + 1 more...", "<unset>", "<unknown>"]),
    ("rbac.authorization.k8s.io", "RoleBinding", {
        "metadata": {"name": "binding1", "creationTimestamp": JUST_NOW},
        "subjects": [{"kind": "User", "name": "system:kube-controller-manager"},
                     {"kind": "Group", "name": "system:masters"},
                     {"kind": "ServiceAccount", "name": "default", "namespace": "kube-system"},
                     {"kind": "User", "name": "alice"}],
        "roleRef": {"kind": "Role", "name": "extension-apiserver-authentication-reader"}},
     ["binding1", "Role/extension-apiserver-authentication-reader", "0s", "system:kube-controller-manager, alice",
      "system:masters", "kube-system/default"]),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding", {
        "metadata": {"name": "binding2"}, "roleRef": {"kind": "ClusterRole", "name": "system:kube-controller-manager"}},
     ["binding2", "ClusterRole/system:kube-controller-manager", "<unknown>", "", "", ""]),
    ("autoscaling", "HorizontalPodAutoscaler", {"metadata": {"name": "some-hpa"}, "spec": {
        "scaleTargetRef": {"name": "some-rc", "kind": "ReplicationController"}, "maxReplicas": 10},
        "status": {"currentReplicas": 4, "desiredReplicas": 5}},
     ["some-hpa", "ReplicationController/some-rc", "<none>", "<unset>", 10, 4, "<unknown>"]),
    ("autoscaling", "HorizontalPodAutoscaler", {"metadata": {"name": "ext"}, "spec": {
        "scaleTargetRef": {"name": "some-rc", "kind": "ReplicationController"}, "minReplicas": 2, "maxReplicas": 10,
        "metrics": [{"type": "External", "external": {"metric": {"name": "m"},
                                                      "target": {"type": "AverageValue", "averageValue": "100m"}}}]},
        "status": {"currentReplicas": 4, "currentMetrics": [
            {"type": "External", "external": {"metric": {"name": "m"}, "current": {"averageValue": "50m"}}}]}},
     ["ext", "ReplicationController/some-rc", "50m/100m (avg)", "2", 10, 4]),
    ("autoscaling", "HorizontalPodAutoscaler", {"metadata": {"name": "value"}, "spec": {
        "scaleTargetRef": {"name": "x", "kind": "Deployment"}, "maxReplicas": 3,
        "metrics": [{"type": "Object", "object": {"metric": {"name": "m"},
                                                  "target": {"type": "Value", "value": "100m"}}}]}},
     ["value", "Deployment/x", "<unknown>/100m", "<unset>", 3, 0]),
    ("autoscaling", "HorizontalPodAutoscaler", {"metadata": {"name": "many"}, "spec": {
        "scaleTargetRef": {"name": "x", "kind": "Deployment"}, "maxReplicas": 3, "metrics": [
            {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization",
                                                                        "averageUtilization": 80}}},
            {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue",
                                                                           "averageValue": "100Mi"}}},
            {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue",
                                                                           "averageValue": "10"}}},
            {"type": "ContainerResource", "containerResource": {"name": "cpu", "container": "c", "target": {
                "type": "Utilization"}}}]},
        "status": {"currentMetrics": [
            {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 50}}}]}},
     ["many", "Deployment/x", "cpu: 50%/80%, memory: <unknown>/100Mi + 2 more...", "<unset>", 3, 0]),
    ("autoscaling", "HorizontalPodAutoscaler", {"metadata": {"name": "v1"}, "spec": {
        "scaleTargetRef": {"name": "x", "kind": "Deployment"}, "minReplicas": 1, "maxReplicas": 3,
        "targetCPUUtilizationPercentage": 70}, "status": {"currentReplicas": 2, "currentCPUUtilizationPercentage": 35}},
     ["v1", "Deployment/x", "cpu: 35%/70%", "1", 3, 2]),
    ("networking.k8s.io", "Ingress", {"metadata": {"name": "test1", "creationTimestamp": ago(10 * 365 * DAY)},
                                      "spec": {"ingressClassName": "foo", "defaultBackend": {"service": {
                                          "name": "default-backend", "port": {"name": "default-backend"}}}},
                                      "status": {"loadBalancer": {"ingress": [
                                          {"ip": "2.3.4.5", "hostname": "localhost.localdomain"}]}}},
     ["test1", "foo", "*", "2.3.4.5", "80", "10y"]),
    ("networking.k8s.io", "Ingress", {"metadata": {"name": "hosts"}, "spec": {
        "rules": [{"host": "a"}, {}, {"host": "b"}, {"host": "c"}, {"host": "d"}], "tls": [{"hosts": ["a"]}]}},
     ["hosts", "<none>", "a,b,c + 2 more...", "", "80, 443", "<unknown>"]),
    ("networking.k8s.io", "IngressClass", {"metadata": {"name": "test1"}, "spec": {
        "controller": "example.com/controller",
        "parameters": {"apiGroup": "example.com", "kind": "customgroup", "name": "example"}}},
     ["test1", "example.com/controller", "customgroup.example.com/example", "<unknown>"]),
    ("networking.k8s.io", "IngressClass", {"metadata": {"name": "test2"}, "spec": {
        "controller": "example.com/controller2"}}, ["test2", "example.com/controller2", "<none>", "<unknown>"]),
    ("networking.k8s.io", "NetworkPolicy", {"metadata": {"name": "all"}, "spec": {"podSelector": {}}},
     ["all", "<none>", "<unknown>"]),
    ("networking.k8s.io", "NetworkPolicy", {"metadata": {"name": "web"}, "spec": {
        "podSelector": {"matchLabels": {"app": "web"}}}}, ["web", "app=web", "<unknown>"]),
    ("networking.k8s.io", "ServiceCIDR", {"metadata": {"name": "kubernetes"}, "spec": {
        "cidrs": ["10.96.0.0/12", "fd00::/108"]}}, ["kubernetes", "10.96.0.0/12,fd00::/108", "<unknown>"]),
    ("networking.k8s.io", "IPAddress", {"metadata": {"name": "10.96.0.1"}, "spec": {"parentRef": {
        "resource": "services", "namespace": "default", "name": "kubernetes"}}},
     ["10.96.0.1", "services/default/kubernetes", "<unknown>"]),
    ("networking.k8s.io", "IPAddress", {"metadata": {"name": "10.96.0.2"}, "spec": {"parentRef": {
        "group": "Example.com", "resource": "Gateways", "name": "gw"}}},
     ["10.96.0.2", "gateways.example.com/gw", "<unknown>"]),
    ("storage.k8s.io", "StorageClass", {"metadata": {"name": "sc1", "annotations": {
        "storageclass.kubernetes.io/is-default-class": "true"}}, "provisioner": "kubernetes.io/glusterfs"},
     ["sc1 (default)", "kubernetes.io/glusterfs", "Delete", "Immediate", False, "<unknown>"]),
    ("storage.k8s.io", "StorageClass", {"metadata": {"name": "sc2"}, "provisioner": "kubernetes.io/nfs",
                                        "reclaimPolicy": "Retain", "volumeBindingMode": "WaitForFirstConsumer",
                                        "allowVolumeExpansion": True},
     ["sc2", "kubernetes.io/nfs", "Retain", "WaitForFirstConsumer", True, "<unknown>"]),
    ("storage.k8s.io", "VolumeAttributesClass", {"metadata": {"name": "gold", "annotations": {
        "resource.kubernetes.io/is-default-class": "true"}}, "driverName": "csi.example.com"},
     ["gold (default)", "csi.example.com", "<unknown>"]),
    ("storage.k8s.io", "VolumeAttachment", {"metadata": {"name": "va1"}, "spec": {
        "attacher": "a", "source": {"persistentVolumeName": "pv1"}, "nodeName": "n1"}, "status": {"attached": True}},
     ["va1", "a", "pv1", "n1", True, "<unknown>"]),
    ("storage.k8s.io", "CSINode", {"metadata": {"name": "n1"}, "spec": {"drivers": [{"name": "d1"}, {"name": "d2"}]}},
     ["n1", 2, "<unknown>"]),
    ("storage.k8s.io", "CSIDriver", {"metadata": {"name": "d1"}, "spec": {}},
     ["d1", True, False, False, "<unset>", False, "<none>", "<unknown>"]),
    ("storage.k8s.io", "CSIDriver", {"metadata": {"name": "d2"}, "spec": {
        "attachRequired": False, "podInfoOnMount": True, "storageCapacity": True, "requiresRepublish": True,
        "tokenRequests": [{"audience": "a"}, {"audience": "b"}], "volumeLifecycleModes": ["Persistent", "Ephemeral"]}},
     ["d2", False, True, True, "a,b", True, "Persistent,Ephemeral", "<unknown>"]),
    ("storage.k8s.io", "CSIStorageCapacity", {"metadata": {"name": "cap"}, "storageClassName": "fast",
                                              "capacity": "1Gi"}, ["cap", "fast", "1Gi"]),
    ("storage.k8s.io", "CSIStorageCapacity", {"metadata": {"name": "cap2"}, "storageClassName": "fast"},
     ["cap2", "fast", "<unset>"]),
    ("scheduling.k8s.io", "PriorityClass", {"metadata": {"name": "pc1"}, "value": 1, "globalDefault": True,
                                            "preemptionPolicy": "PreemptLowerPriority"},
     ["pc1", 1, True, "<unknown>", "PreemptLowerPriority"]),
    ("node.k8s.io", "RuntimeClass", {"metadata": {"name": "gvisor"}, "handler": "runsc"},
     ["gvisor", "runsc", "<unknown>"]),
    ("certificates.k8s.io", "CertificateSigningRequest", {"metadata": {"name": "csr1"}, "spec": {
        "signerName": "example.com/signer", "username": "CSRRequestor", "expirationSeconds": 7200},
        "status": {"conditions": [{"type": "Approved"}, {"type": "Failed"}], "certificate": "Y2VydA=="}},
     ["csr1", "<unknown>", "example.com/signer", "CSRRequestor", "120m", "Approved,Failed,Issued"]),
    ("certificates.k8s.io", "CertificateSigningRequest", {"metadata": {"name": "csr2"}, "spec": {},
                                                          "status": {"conditions": [{"type": "Approved"},
                                                                                    {"type": "Denied"}]}},
     ["csr2", "<unknown>", "<none>", "", "<none>", "Denied"]),
    ("certificates.k8s.io", "CertificateSigningRequest", {"metadata": {"name": "csr3"}, "spec": {}},
     ["csr3", "<unknown>", "<none>", "", "<none>", "Pending"]),
    ("certificates.k8s.io", "ClusterTrustBundle", {"metadata": {"name": "b"}, "spec": {"signerName": "x/y"}},
     ["b", "x/y"]),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration", {
        "metadata": {"name": "hooks"}, "webhooks": [{"name": "a"}, {"name": "b"}]}, ["hooks", 2, "<unknown>"]),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration", {"metadata": {"name": "none"}},
     ["none", 0, "<unknown>"]),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy", {"metadata": {"name": "p"}, "spec": {
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}, "validations": [{"expression": "true"}]}},
     ["p", 1, "v1/ConfigMap", "<unknown>"]),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy", {"metadata": {"name": "q"}, "spec": {}},
     ["q", 0, "<unset>", "<unknown>"]),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding", {"metadata": {"name": "b1"}, "spec": {
        "policyName": "p", "paramRef": {"name": "cm"}}}, ["b1", "p", "*/cm", "<unknown>"]),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding", {"metadata": {"name": "b2"}, "spec": {
        "policyName": "p", "paramRef": {"name": "cm", "namespace": "ns"}}}, ["b2", "p", "ns/cm", "<unknown>"]),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicyBinding", {"metadata": {"name": "b3"}, "spec": {
        "policyName": "p", "paramRef": {"selector": {"matchLabels": {"a": "b"}}}}},
     ["b3", "p", "&LabelSelector{MatchLabels:map[string]string{a: b,},MatchExpressions:[]LabelSelectorRequirement{},}",
      "<unknown>"]),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicy", {"metadata": {"name": "m"}, "spec": {
        "mutations": [{}, {}]}}, ["m", 2, "<unset>", "<unknown>"]),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema", {"metadata": {"name": "fs"}, "spec": {
        "priorityLevelConfiguration": {"name": "workload-low"}, "matchingPrecedence": 9000,
        "distinguisherMethod": {"type": "ByUser"}},
        "status": {"conditions": [{"type": "Dangling", "status": "False"}]}},
     ["fs", "workload-low", 9000, "ByUser", "<unknown>", "False"]),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema", {"metadata": {"name": "exempt"}, "spec": {
        "priorityLevelConfiguration": {"name": "exempt"}, "matchingPrecedence": 1}},
     ["exempt", "exempt", 1, "<none>", "<unknown>", "?"]),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration", {"metadata": {"name": "exempt"},
                                                                    "spec": {"type": "Exempt"}},
     ["exempt", "Exempt", "<none>", "<none>", "<none>", "<none>", "<unknown>"]),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration", {"metadata": {"name": "global-default"}, "spec": {
        "type": "Limited", "limited": {"nominalConcurrencyShares": 20, "limitResponse": {
            "type": "Queue", "queuing": {"queues": 128, "handSize": 6, "queueLengthLimit": 50}}}}},
     ["global-default", "Limited", 20, 128, 6, 50, "<unknown>"]),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration", {"metadata": {"name": "reject"}, "spec": {
        "type": "Limited", "limited": {"nominalConcurrencyShares": 5, "limitResponse": {"type": "Reject"}}}},
     ["reject", "Limited", 5, "<none>", "<none>", "<none>", "<unknown>"]),
    ("internal.apiserver.k8s.io", "StorageVersion", {"metadata": {"name": "sv"}, "status": {
        "commonEncodingVersion": "v1", "storageVersions": [
            {"apiServerID": f"s{i}", "encodingVersion": "v1"} for i in range(5)]}},
     ["sv", "v1", "s0=v1,s1=v1,s2=v1 + 2 more...", "<unknown>"]),
    ("internal.apiserver.k8s.io", "StorageVersion", {"metadata": {"name": "empty"}},
     ["empty", "<unset>", "<unset>", "<unknown>"]),
    ("resource.k8s.io", "ResourceClaim", {"metadata": {"name": "pending"}}, ["pending", "pending", "<unknown>"]),
    ("resource.k8s.io", "ResourceClaim", {"metadata": {"name": "reserved", "deletionTimestamp": ago(1)}, "status": {
        "allocation": {}, "reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]}},
     ["reserved", "deleted,allocated,reserved", "<unknown>"]),
    ("resource.k8s.io", "ResourceClaim", {"metadata": {"name": "gone", "deletionTimestamp": ago(1)}},
     ["gone", "deleted", "<unknown>"]),
    ("resource.k8s.io", "DeviceClass", {"metadata": {"name": "gpu"}}, ["gpu", "<unknown>"]),
    ("resource.k8s.io", "ResourceClaimTemplate", {"metadata": {"name": "t"}}, ["t", "<unknown>"]),
    ("resource.k8s.io", "ResourceSlice", {"metadata": {"name": "s"}, "spec": {
        "nodeName": "n1", "driver": "gpu.example.com", "pool": {"name": "pool-a"}}},
     ["s", "n1", "gpu.example.com", "pool-a", "<unknown>"]),
    ("storagemigration.k8s.io", "StorageVersionMigration", {"metadata": {"name": "m"}, "spec": {
        "resource": {"group": "apps", "resource": "deployments"}}}, ["m", "deployments.apps"]),
    ("autoscaling", "Scale", {"metadata": {"name": "web"}, "spec": {"replicas": 3}, "status": {"replicas": 2}},
     ["web", 3, 2, "<unknown>"]),
]


@pytest.mark.parametrize(("group", "kind", "obj", "expected"), CASES,
                         ids=[f"{g or 'core'}.{k}.{o['metadata']['name']}" for g, k, o, _ in CASES])
def test_row(group: str, kind: str, obj: Obj, expected: list[Any]) -> None:
    assert cells(group, kind, obj)[:len(expected)] == expected


def test_flow_schemas_list_in_matching_order() -> None:
    schemas = [{"metadata": {"name": n}, "spec": {"matchingPrecedence": p}} for n, p in
               [("b", 100), ("z", 1), ("a", 100)]]
    rows = table(res("flowcontrol.apiserver.k8s.io", "FlowSchema"), schemas, NOW, "9")["rows"]
    assert [r["cells"][0] for r in rows] == ["z", "a", "b"]


# --- columns and the Table's shape ----------------------------------------------------------------------

def columns(group: str, kind: str) -> list[tuple[str, str, int]]:
    doc = table(res(group, kind), [], NOW, "1")
    return [(c["name"], c["type"], c["priority"]) for c in doc["columnDefinitions"]]


def test_column_definitions() -> None:
    assert columns("", "Pod") == [
        ("Name", "string", 0), ("Ready", "string", 0), ("Status", "string", 0), ("Restarts", "string", 0),
        ("Age", "string", 0), ("IP", "string", 1), ("Node", "string", 1), ("Nominated Node", "string", 1),
        ("Readiness Gates", "string", 1)]
    assert columns("batch", "CronJob") == [
        ("Name", "string", 0), ("Schedule", "string", 0), ("Timezone", "string", 0), ("Suspend", "boolean", 0),
        ("Active", "integer", 0), ("Last Schedule", "string", 0), ("Age", "string", 0),
        ("Containers", "string", 1), ("Images", "string", 1), ("Selector", "string", 1)]
    assert columns("", "Event") == [
        ("Last Seen", "string", 0), ("Type", "string", 0), ("Reason", "string", 0), ("Object", "string", 0),
        ("Subobject", "string", 1), ("Source", "string", 1), ("Message", "string", 0), ("First Seen", "string", 1),
        ("Count", "string", 1), ("Name", "string", 1)]
    assert columns("events.k8s.io", "Event") == columns("", "Event")
    assert columns("rbac.authorization.k8s.io", "Role") == [("Name", "string", 0), ("Created At", "date", 0)]
    doc = table(PODS, [], NOW, "1")
    assert doc["columnDefinitions"][0] == {"name": "Name", "type": "string", "format": "name",
                                           "description": "Name of the object.", "priority": 0}


def test_default_table_for_kinds_without_a_printer() -> None:
    doc = table(res("rbac.authorization.k8s.io", "ClusterRole"),
                [{"metadata": {"name": "c", "creationTimestamp": "2024-01-01T00:00:00Z"}}], NOW, "1",
                include_object="None")
    assert [c["name"] for c in doc["columnDefinitions"]] == ["Name", "Created At"]
    assert doc["rows"] == [{"cells": ["c", "2024-01-01T00:00:00Z"], "object": None}]


def test_table_shape() -> None:
    node: Obj = {"metadata": {"name": "n1", "resourceVersion": "7", "labels": {"a": "b"}}, "spec": {}}
    doc = table(NODES, [node], NOW, "12", continue_token="tok", remaining=3)
    assert doc["kind"] == "Table"
    assert doc["apiVersion"] == "meta.k8s.io/v1"
    assert doc["metadata"] == {"resourceVersion": "12", "continue": "tok", "remainingItemCount": 3}
    assert doc["rows"][0]["object"] == {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                                        "metadata": node["metadata"]}
    assert table(NODES, [node], NOW, include_object="Object")["rows"][0]["object"] is node
    one = table(NODES, [node], NOW, with_columns=False)
    assert one["metadata"] == {"resourceVersion": "7"}  # a single object's table carries its version
    assert one["columnDefinitions"] is None
    assert table(CONFIGMAPS, [], NOW, "3")["rows"] == []


@pytest.mark.parametrize("value", ["", "Metadata", "Object", "None"])
def test_include_object_values(value: str) -> None:
    check_include_object(value)


def test_unknown_include_object_is_a_bad_request() -> None:
    with pytest.raises(errors.StatusError) as e:
        check_include_object("unrecognized")
    assert e.value.code == 400
    assert "Invalid value: \"unrecognized\": must be 'Metadata', 'Object', 'None', or empty" in e.value.status[
        "message"]


# --- property: every printer fills every column, whatever the object --------------------------------------

def _served_version(group: str, kind: str) -> str | None:
    """The apiVersion to draw a kind's objects from: v1 if the schema has it, else its first other version."""
    versions = [gvk.rpartition("/")[0] for gvk in schema.kinds()
                if gvk.rpartition("/")[2] == kind and gvk.rpartition("/")[0].rpartition("/")[0] == group]
    preferred = f"{group}/v1" if group else "v1"
    return preferred if preferred in versions else (versions[0] if versions else None)


_KINDS_WITH_SCHEMA = sorted((group, kind, version) for group, kind in PRINTERS
                            if (version := _served_version(group, kind)) is not None)
_EXTRA_CELLS = {("networking.k8s.io", "IPAddress"): 1}  # upstream's row has an Age its columns do not name


def test_every_printer_has_a_schema_to_draw_from() -> None:
    assert {(g, k) for g, k, _ in _KINDS_WITH_SCHEMA} == set(PRINTERS)


@pytest.mark.parametrize(("group", "kind", "api_version"), _KINDS_WITH_SCHEMA,
                         ids=[f"{g or 'core'}.{k}" for g, k, _ in _KINDS_WITH_SCHEMA])
def test_every_row_fills_the_columns(group: str, kind: str, api_version: str) -> None:
    struct = schema.kind(api_version, kind)
    assert struct is not None

    @settings(max_examples=15, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(obj=objects(struct.name, 4), now=st.floats(0, 4e9))
    def check(obj: Obj, now: float) -> None:
        doc = table(res(group, kind), [obj], now, "1")
        (row,) = doc["rows"]
        assert len(row["cells"]) == len(doc["columnDefinitions"]) + _EXTRA_CELLS.get((group, kind), 0)
        assert all(isinstance(c, (str, int, bool)) for c in row["cells"]), row["cells"]

    check()
