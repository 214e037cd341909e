"""kube-sim's scheduling predicates as tables: upstream's MatchNodeSelectorTerms table, node selector
operators, the filter plugins in order, resource accounting, and kube-scheduler's FitError message."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.sim.predicates import (
    NodeInfo,
    PodRequest,
    Usage,
    filter_node,
    fit_error_message,
    fit_resources,
    is_bound_and_active,
    is_schedulable_candidate,
    match_node_selector_terms,
    num_feasible_nodes_to_find,
    score_node,
    static_filter,
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


# ----------------------------------------------------------------------------- scoring and candidates


def test_least_allocated_prefers_the_emptier_node() -> None:
    req = PodRequest.of(pod(cpu="1", memory="1Gi"))
    busy = Usage()
    busy.add(PodRequest.of(pod(cpu="2", memory="8Gi")))
    assert score_node(req, NodeInfo.of(node()), Usage()) > score_node(req, NodeInfo.of(node()), busy)


def test_requests_default_to_non_zero_for_scoring_only() -> None:
    req = PodRequest.of(pod())
    assert (req.milli_cpu, req.memory) == (0, 0)
    assert (req.nonzero_milli_cpu, req.nonzero_memory) == (100, 200 * 1024 * 1024)


CANDIDATES = [
    pytest.param({"spec": {}}, True, False, id="pending"),
    pytest.param({"spec": {"schedulerName": "default-scheduler"}}, True, False, id="named-default"),
    pytest.param({"spec": {"schedulerName": "other"}}, False, False, id="other-scheduler"),
    pytest.param({"spec": {"nodeName": "n1"}}, False, True, id="bound"),
    pytest.param({"spec": {"nodeName": "n1"}, "status": {"phase": "Succeeded"}}, False, False, id="bound-finished"),
    pytest.param({"spec": {}, "status": {"phase": "Failed"}}, False, False, id="failed-unbound"),
    pytest.param({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}, "spec": {}}, False, False,
                 id="being-deleted"),
]


@pytest.mark.parametrize(("the_pod", "candidate", "counted"), CANDIDATES)
def test_candidates_and_counted_pods(the_pod: dict[str, Any], candidate: bool, counted: bool) -> None:
    assert is_schedulable_candidate(the_pod) is candidate
    assert is_bound_and_active(the_pod) is counted


@pytest.mark.parametrize(("nodes", "want"), [
    (0, 0), (5, 5), (99, 99),  # below 100: every node
    (100, 100), (200, 100),  # 50%, 48%: still at least 100
    (1000, 420), (5000, 500), (6000, 300), (15000, 750),  # 50% less 1% per 125 nodes, at least 5%
])
def test_num_feasible_nodes_to_find_is_kube_schedulers_adaptive_default(nodes: int, want: int) -> None:
    assert num_feasible_nodes_to_find(nodes) == want


def test_num_feasible_nodes_to_find_with_a_set_percentage() -> None:
    assert num_feasible_nodes_to_find(1000, 20) == 200
    assert num_feasible_nodes_to_find(1000, 5) == 100


def test_filter_node_is_the_static_filters_then_resource_fit() -> None:
    tainted = NodeInfo.of(node(taints=[{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]))
    full = Usage(pods=110)
    req = PodRequest.of(pod())
    assert static_filter(req, tainted) == filter_node(req, tainted, full)  # a static reason comes first
    plain = NodeInfo.of(node())
    assert static_filter(req, plain) is None
    assert filter_node(req, plain, full) == (fit_resources(req, plain, full), "resolvable") == (["Too many pods"],
                                                                                               "resolvable")
