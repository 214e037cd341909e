"""kube-sim's scheduler: filter rules as tables (upstream's MatchNodeSelectorTerms table included), the
FitError message, and the actor against an in-process API server (binding, events, retries, speed)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from controller_manager.api.resources import EVENTS, NODES, PODS
from controller_manager.clock import FakeClock
from controller_manager.sim.apiserver import ApiServer
from controller_manager.sim.kubelet import KubeletConfig, node_object
from controller_manager.sim.scheduler import (
    NodeInfo,
    PodRequest,
    Scheduler,
    Usage,
    filter_node,
    fit_error_message,
    match_node_selector_terms,
)

# ----------------------------------------------------------------------------- builders


def node(name: str = "n1", *, labels: dict[str, str] | None = None, taints: list[dict[str, Any]] | None = None,
         unschedulable: bool = False, ready: str | None = "True", cpu: str = "4", memory: str = "16Gi",
         pods: str = "110") -> dict[str, Any]:
    conditions = [] if ready is None else [{"type": "Ready", "status": ready}]
    spec: dict[str, Any] = {"taints": taints or []}
    if unschedulable:
        spec["unschedulable"] = True
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": spec,
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods}, "conditions": conditions}}


def pod(*, selector: dict[str, str] | None = None, terms: list[dict[str, Any]] | None = None,
        tolerations: list[dict[str, Any]] | None = None, cpu: str | None = None, memory: str | None = None
        ) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if cpu or memory:
        resources["requests"] = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "nginx", "resources": resources}]}
    if selector:
        spec["nodeSelector"] = selector
    if terms is not None:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": terms}}}
    if tolerations:
        spec["tolerations"] = tolerations
    return {"metadata": {"name": "p", "namespace": "default"}, "spec": spec}


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": op, "values": list(values)} if values else {"key": key, "operator": op}


def check(p: dict[str, Any], n: dict[str, Any], usage: Usage | None = None) -> list[str]:
    return filter_node(PodRequest.of(p), NodeInfo.of(n), usage or Usage())[0]


AFFINITY = "node(s) didn't match Pod's node affinity/selector"

# ----------------------------------------------------------------------------- node selector terms (upstream)

MATCH_TERMS = [
    pytest.param(None, "n", {}, False, id="nil-terms"),
    pytest.param([{"matchExpressions": [expr("label_1", "In", "label_1_val")]}], "", {"label_1": "label_1_val"}, True,
                 id="node-label-matches-matchExpressions"),
    pytest.param([{"matchFields": [expr("metadata.name", "In", "host_1")]}], "host_1", {}, True,
                 id="node-field-matches-matchFields"),
    pytest.param([{"matchFields": [expr("metadata.name", "In", "host_1", "host_2")]}], "host_1", {}, False,
                 id="invalid-node-field-requirement"),
    pytest.param([{"matchFields": [expr("metadata.name", "In", "host_1")]}], "not_host_1",
                 {"metadata.name": "host_1"}, False, id="fieldSelectorTerm-with-node-labels"),
    pytest.param([{"matchExpressions": [expr("metadata.name", "In", "host_1")]}], "host_1", {}, False,
                 id="labelSelectorTerm-with-node-fields"),
    pytest.param([{"matchExpressions": [expr("label_1", "In", "label_1_val")],
                   "matchFields": [expr("metadata.name", "In", "host_1")]}], "host_1", {}, False,
                 id="both-set-only-node-fields"),
    pytest.param([{"matchExpressions": [expr("label_1", "In", "label_1_val")],
                   "matchFields": [expr("metadata.name", "In", "host_1")]}], "host_1", {"label_1": "label_1_val"},
                 True, id="both-set-both-match"),
    pytest.param([{"matchExpressions": [expr("label_1", "In", "label_1_val")],
                   "matchFields": [expr("metadata.name", "In", "host_1")]}], "host_1",
                 {"label_1": "label_1_val-failed"}, False, id="both-set-one-mismatched"),
    pytest.param([{"matchExpressions": [expr("label_1", "In", "label_1_val")]},
                  {"matchFields": [expr("metadata.name", "In", "host_1")]}], "host_1",
                 {"label_1": "label_1_val-failed"}, True, id="multi-term-ored-one-matches"),
    pytest.param([{}], "host_1", {"a": "b"}, False, id="empty-term-matches-nothing"),
    pytest.param([], "host_1", {"a": "b"}, False, id="no-terms-match-nothing"),
]


@pytest.mark.parametrize(("terms", "name", "labels", "want"), MATCH_TERMS)
def test_match_node_selector_terms(terms: list[dict[str, Any]] | None, name: str, labels: dict[str, str],
                                   want: bool) -> None:
    assert match_node_selector_terms(terms, name, labels) is want


OPERATORS = [
    pytest.param(expr("zone", "In", "a", "b"), {"zone": "b"}, True, id="in"),
    pytest.param(expr("zone", "In", "a"), {}, False, id="in-missing-key"),
    pytest.param(expr("zone", "NotIn", "a"), {"zone": "b"}, True, id="notin"),
    pytest.param(expr("zone", "NotIn", "a"), {"zone": "a"}, False, id="notin-excluded"),
    pytest.param(expr("zone", "NotIn", "a"), {}, True, id="notin-missing-key-matches"),
    pytest.param(expr("gpu", "Exists"), {"gpu": ""}, True, id="exists"),
    pytest.param(expr("gpu", "Exists"), {}, False, id="exists-missing"),
    pytest.param(expr("gpu", "DoesNotExist"), {}, True, id="doesnotexist"),
    pytest.param(expr("gpu", "DoesNotExist"), {"gpu": "1"}, False, id="doesnotexist-present"),
    pytest.param(expr("cores", "Gt", "4"), {"cores": "8"}, True, id="gt"),
    pytest.param(expr("cores", "Gt", "8"), {"cores": "8"}, False, id="gt-equal"),
    pytest.param(expr("cores", "Lt", "8"), {"cores": "4"}, True, id="lt"),
    pytest.param(expr("cores", "Gt", "4"), {"cores": "many"}, False, id="gt-not-a-number"),
    pytest.param(expr("cores", "Gt", "4"), {}, False, id="gt-missing"),
    pytest.param(expr("zone", "Bogus", "a"), {"zone": "a"}, False, id="unknown-operator"),
]


@pytest.mark.parametrize(("requirement", "labels", "want"), OPERATORS)
def test_match_expression_operators(requirement: dict[str, Any], labels: dict[str, str], want: bool) -> None:
    assert match_node_selector_terms([{"matchExpressions": [requirement]}], "n", labels) is want


def test_expressions_in_a_term_are_anded() -> None:
    term = {"matchExpressions": [expr("a", "In", "1"), expr("b", "Exists")]}
    assert match_node_selector_terms([term], "n", {"a": "1", "b": "x"})
    assert not match_node_selector_terms([term], "n", {"a": "1"})


# ----------------------------------------------------------------------------- filters

NO_SCHEDULE = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}

FILTERS = [
    pytest.param(pod(), node(), [], id="fits"),
    pytest.param(pod(selector={"disk": "ssd"}), node(labels={"disk": "ssd"}), [], id="nodeSelector-matches"),
    pytest.param(pod(selector={"disk": "ssd"}), node(labels={"disk": "hdd"}), [AFFINITY], id="nodeSelector-differs"),
    pytest.param(pod(selector={"disk": "ssd"}), node(), [AFFINITY], id="nodeSelector-missing-label"),
    pytest.param(pod(terms=[{"matchFields": [expr("metadata.name", "In", "n1")]}]), node("n1"), [],
                 id="daemon-pod-matchFields-own-node"),
    pytest.param(pod(terms=[{"matchFields": [expr("metadata.name", "In", "n2")]}]), node("n1"), [AFFINITY],
                 id="daemon-pod-matchFields-other-node"),
    pytest.param(pod(selector={"a": "1"}, terms=[{"matchExpressions": [expr("b", "Exists")]}]),
                 node(labels={"a": "1"}), [AFFINITY], id="selector-and-affinity-both-required"),
    pytest.param(pod(), node(taints=[NO_SCHEDULE]), ["node(s) had untolerated taint {dedicated: gpu}"],
                 id="noschedule-taint"),
    pytest.param(pod(), node(taints=[{"key": "k", "effect": "NoExecute"}]), ["node(s) had untolerated taint {k: }"],
                 id="noexecute-taint"),
    pytest.param(pod(), node(taints=[{"key": "k", "effect": "PreferNoSchedule"}]), [], id="prefer-no-schedule-ignored"),
    pytest.param(pod(tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]),
                 node(taints=[NO_SCHEDULE]), [], id="taint-tolerated"),
    pytest.param(pod(tolerations=[{"operator": "Exists"}]), node(taints=[NO_SCHEDULE]), [], id="tolerate-everything"),
    pytest.param(pod(), node(unschedulable=True), ["node(s) were unschedulable"], id="unschedulable"),
    pytest.param(pod(tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
                                   "effect": "NoSchedule"}]), node(unschedulable=True), [],
                 id="unschedulable-tolerated"),
    pytest.param(pod(), node(ready="False"), ["node(s) had untolerated taint {node.kubernetes.io/not-ready: }"],
                 id="not-ready"),
    pytest.param(pod(), node(ready="Unknown"), ["node(s) had untolerated taint {node.kubernetes.io/unreachable: }"],
                 id="unreachable"),
    pytest.param(pod(), node(ready=None), ["node(s) had untolerated taint {node.kubernetes.io/unreachable: }"],
                 id="no-ready-condition"),
    pytest.param(pod(), node(ready="Unknown", taints=[{"key": "node.kubernetes.io/unreachable",
                                                       "effect": "NoExecute"}]),
                 ["node(s) had untolerated taint {node.kubernetes.io/unreachable: }"], id="unreachable-tainted"),
    pytest.param(pod(cpu="4"), node(cpu="4"), [], id="cpu-exactly-fits"),
    pytest.param(pod(cpu="4001m"), node(cpu="4"), ["Insufficient cpu"], id="cpu-too-much"),
    pytest.param(pod(memory="17Gi"), node(memory="16Gi"), ["Insufficient memory"], id="memory-too-much"),
    pytest.param(pod(cpu="5", memory="17Gi"), node(), ["Insufficient cpu", "Insufficient memory"], id="both"),
    pytest.param(pod(), node(pods="0"), ["Too many pods"], id="pod-limit"),
    pytest.param(pod(selector={"x": "y"}), node(unschedulable=True), ["node(s) were unschedulable"],
                 id="first-failing-filter-wins"),
]


@pytest.mark.parametrize(("the_pod", "the_node", "reasons"), FILTERS)
def test_filters(the_pod: dict[str, Any], the_node: dict[str, Any], reasons: list[str]) -> None:
    assert check(the_pod, the_node) == reasons


def test_resources_count_what_is_already_bound() -> None:
    used = Usage()
    used.add(PodRequest.of(pod(cpu="3", memory="8Gi")))
    assert check(pod(cpu="1"), node(), used) == []
    assert check(pod(cpu="1500m"), node(), used) == ["Insufficient cpu"]
    full = Usage(pods=110)
    assert check(pod(), node(), full) == ["Too many pods"]


def test_requests_default_to_limits_and_init_containers_take_the_max() -> None:
    p = {"spec": {"containers": [{"name": "a", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}},
                                 {"name": "b", "resources": {"requests": {"cpu": "500m"}}}],
                  "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "2"}}}]}}
    req = PodRequest.of(p)
    assert (req.milli_cpu, req.memory) == (2000, 1024**3)


# ----------------------------------------------------------------------------- FitError message

MESSAGES = [
    pytest.param(3, {"a": (["node(s) had untolerated taint {node.kubernetes.io/unreachable: }"], "unresolvable"),
                     "b": ([AFFINITY], "unresolvable"), "c": ([AFFINITY], "unresolvable")},
                 "0/3 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }, "
                 "2 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: "
                 "3 Preemption is not helpful for scheduling.", id="unresolvable"),
    pytest.param(2, {"a": (["Insufficient cpu"], "resolvable"), "b": (["Insufficient cpu", "Insufficient memory"],
                                                                      "resolvable")},
                 "0/2 nodes are available: 1 Insufficient memory, 2 Insufficient cpu. preemption: 0/2 nodes are "
                 "available: 2 No preemption victims found for incoming pod.", id="resources"),
    pytest.param(0, {}, "no nodes available to schedule pods", id="no-nodes"),
]


@pytest.mark.parametrize(("total", "failures", "message"), MESSAGES)
def test_fit_error_message(total: int, failures: dict[str, tuple[list[str], str]], message: str) -> None:
    assert fit_error_message(total, failures) == message


# ----------------------------------------------------------------------------- the actor, in-process


async def eventually(predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if loop.time() > deadline:
            pytest.fail(f"condition not met within {timeout}s")
        await asyncio.sleep(0.002)


class Cluster:
    def __init__(self, api: ApiServer, scheduler: Scheduler) -> None:
        self.api = api
        self.scheduler = scheduler
        self.index = 0

    def add_node(self, name: str, **config: Any) -> None:
        self.api.create(NODES, node_object(name, self.index, "zone-a", KubeletConfig(**config), time.time()))
        self.index += 1

    def add_pod(self, name: str, **spec: Any) -> None:
        self.api.create(PODS, {"metadata": {"name": name, "namespace": "default"},
                               "spec": {"containers": [{"name": "c", "image": "nginx"}], **spec}})

    def node_of(self, name: str) -> str | None:
        return self.api.get(PODS, "default", name)["spec"].get("nodeName")

    def scheduled_condition(self, name: str) -> dict[str, Any] | None:
        for c in self.api.get(PODS, "default", name)["status"].get("conditions") or ():
            if c["type"] == "PodScheduled":
                return dict(c)
        return None

    def events(self, reason: str) -> list[dict[str, Any]]:
        return [e for e in self.api.list(EVENTS, "default")[0] if e["reason"] == reason]


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    api = ApiServer(FakeClock())
    scheduler = Scheduler(api, api.clock)
    task = asyncio.create_task(scheduler.run(), name="test-scheduler")
    try:
        yield Cluster(api, scheduler)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        api.close_all_watches()


async def test_binds_spreads_and_records_events(cluster: Cluster) -> None:
    for name in ("n1", "n2", "n3"):
        cluster.add_node(name)
    for i in range(6):
        cluster.add_pod(f"p{i}")
    await eventually(lambda: all(cluster.node_of(f"p{i}") for i in range(6)))
    assert sorted(cluster.node_of(f"p{i}") or "" for i in range(6)) == ["n1", "n1", "n2", "n2", "n3", "n3"]
    assert cluster.node_of("p0") == "n1"  # ties broken by name
    pod = cluster.api.get(PODS, "default", "p0")
    assert any(c["type"] == "PodScheduled" and c["status"] == "True" for c in pod["status"]["conditions"])
    scheduled = {e["involvedObject"]["name"]: e for e in cluster.events("Scheduled")}
    assert scheduled["p0"]["message"] == "Successfully assigned default/p0 to n1"
    assert scheduled["p0"]["type"] == "Normal"
    assert scheduled["p0"]["source"] == {"component": "default-scheduler"}
    assert scheduled["p0"]["involvedObject"]["uid"] == pod["metadata"]["uid"]


async def test_unschedulable_condition_event_and_retry_on_node_change(cluster: Cluster) -> None:
    cluster.add_node("n1", cpu="1")
    cluster.add_pod("big", **{"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "2"}}}]})
    cond = await eventually(lambda: cluster.scheduled_condition("big"))
    assert cond["status"] == "False"
    assert cond["reason"] == "Unschedulable"
    assert cond["message"] == ("0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: "
                               "1 No preemption victims found for incoming pod.")
    assert cond["lastTransitionTime"]
    failed = await eventually(lambda: cluster.events("FailedScheduling"))
    assert failed[0]["type"] == "Warning"
    assert failed[0]["message"] == cond["message"]
    cluster.add_node("n2", cpu="8")
    await eventually(lambda: cluster.node_of("big") == "n2")
    assert len(cluster.events("FailedScheduling")) == 1  # one event per distinct message


async def test_freed_capacity_retries_pending_pods(cluster: Cluster) -> None:
    cluster.add_node("n1", pods="1")
    cluster.add_pod("first")
    await eventually(lambda: cluster.node_of("first") == "n1")
    cluster.add_pod("second")
    cond = await eventually(lambda: cluster.scheduled_condition("second"))
    assert cond["message"].startswith("0/1 nodes are available: 1 Too many pods.")
    cluster.api.delete(PODS, "default", "first", grace_period_seconds=0)
    await eventually(lambda: cluster.node_of("second") == "n1")


async def test_terminal_pods_do_not_count(cluster: Cluster) -> None:
    cluster.add_node("n1", pods="1")
    cluster.add_pod("done")
    await eventually(lambda: cluster.node_of("done") == "n1")
    cluster.add_pod("next")
    await eventually(lambda: cluster.scheduled_condition("next"))
    cluster.api.patch(PODS, "default", "done", {"status": {"phase": "Succeeded"}}, "merge", subresource="status")
    await eventually(lambda: cluster.node_of("next") == "n1")


async def test_daemon_style_pod_lands_on_its_node_and_tolerations_matter(cluster: Cluster) -> None:
    cluster.add_node("n1")
    cluster.add_node("n2")
    cluster.api.patch(NODES, None, "n2", {"spec": {"taints": [{"key": "dedicated", "effect": "NoSchedule"}]}},
                      "merge")
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]}}}
    cluster.add_pod("daemon", affinity=affinity)
    cond = await eventually(lambda: cluster.scheduled_condition("daemon"))
    assert cond["message"].startswith("0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
                                      "1 node(s) had untolerated taint {dedicated: }.")
    cluster.add_pod("daemon-tolerant", affinity=affinity, tolerations=[{"operator": "Exists"}])
    await eventually(lambda: cluster.node_of("daemon-tolerant") == "n2")


async def test_other_schedulers_and_gated_pods_are_left_alone(cluster: Cluster) -> None:
    cluster.add_node("n1")
    cluster.add_pod("custom", schedulerName="my-scheduler")
    cluster.add_pod("gated", schedulingGates=[{"name": "example.com/wait"}])
    cluster.add_pod("normal")
    await eventually(lambda: cluster.node_of("normal") == "n1")
    cond = await eventually(lambda: cluster.scheduled_condition("gated"))
    assert cond["reason"] == "SchedulingGated"
    assert cluster.node_of("custom") is None
    assert cluster.scheduled_condition("custom") is None
    cluster.api.patch(PODS, "default", "gated", {"spec": {"schedulingGates": None}}, "merge")
    await eventually(lambda: cluster.node_of("gated") == "n1")


async def test_higher_priority_first(cluster: Cluster) -> None:
    cluster.add_pod("low", priority=1)
    cluster.add_pod("high", priority=100)
    await eventually(lambda: cluster.scheduled_condition("low") and cluster.scheduled_condition("high"))
    assert cluster.scheduled_condition("high")["message"] == "no nodes available to schedule pods"  # type: ignore[index]
    cluster.add_node("n1", pods="1")
    await eventually(lambda: cluster.node_of("high") == "n1")
    assert cluster.node_of("low") is None


async def test_a_thousand_pods_bind_fast(cluster: Cluster) -> None:
    for i in range(5):
        cluster.add_node(f"n{i}", pods="300")
    start = time.perf_counter()
    for i in range(1000):
        cluster.add_pod(f"p{i}")
    await eventually(lambda: cluster.scheduler.scheduled == 1000, timeout=30)
    elapsed = time.perf_counter() - start
    assert elapsed < 5.0, elapsed
    per_node = {f"n{i}": 0 for i in range(5)}
    for p in cluster.api.list(PODS, "default")[0]:
        per_node[p["spec"]["nodeName"]] += 1
    assert set(per_node.values()) == {200}
