"""The RBAC table: it matches upstream's bootstrap controller roles, merges and normalises as documented,
covers every controller the daemon implements, and its CLI prints a ClusterRole a cluster accepts."""

from __future__ import annotations

from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]  # ships no type information
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from controller_manager.manager import rbac
from controller_manager.manager.rbac import (
    CONTROLLER_ROLES,
    MANAGER_RULES,
    PolicyRule,
    controller_rules,
    leader_election_rules,
    normalize,
    rules_for,
)
from controller_manager.manager.registry import KNOWN_CONTROLLERS, default_registry

EVENTS = ("core/events: create patch update", "events.k8s.io/events: create patch update")

# Ported from upstream's testdata/controller-roles.yaml (plugin/pkg/auth/authorizer/rbac/bootstrappolicy), one
# line per (group/resource: verbs), for the controllers this project implements or plans; the "extensions"
# group is left out on purpose (see rbac.py).
UPSTREAM: dict[str, tuple[str, ...]] = {
    "deployment-controller": (
        "apps/deployments: get list update watch", "apps/deployments/status: update",
        "apps/deployments/finalizers: update", "apps/replicasets: create delete get list patch update watch",
        "core/pods: get list update watch", *EVENTS),
    "replicaset-controller": (
        "apps/replicasets: get list update watch", "apps/replicasets/status: update",
        "apps/replicasets/finalizers: update", "core/pods: create delete list patch watch", *EVENTS),
    "daemonset-controller": (
        "apps/daemonsets: get list watch", "apps/daemonsets/status: update", "apps/daemonsets/finalizers: update",
        "core/nodes: list watch", "core/pods: create delete list patch watch", "core/pods/binding: create",
        "apps/controllerrevisions: create delete get list patch update watch", *EVENTS),
    "job-controller": (
        "batch/jobs: get list patch update watch", "batch/jobs/status: update", "batch/jobs/finalizers: update",
        "core/pods: create delete list patch watch", *EVENTS),
    "cronjob-controller": (
        "batch/cronjobs: get list update watch", "batch/jobs: create delete get list patch update watch",
        "batch/cronjobs/status: update", "batch/cronjobs/finalizers: update", "core/pods: delete list watch",
        *EVENTS),
    "statefulset-controller": (
        "core/pods: create delete get list patch update watch", "apps/statefulsets: get list watch",
        "apps/statefulsets/status: update", "apps/statefulsets/finalizers: update",
        "apps/controllerrevisions: create delete get list patch update watch",
        "core/persistentvolumeclaims: create delete get list update watch", "core/pods/finalizers: update",
        *EVENTS),
    "ttl-after-finished-controller": ("batch/jobs: delete get list watch", *EVENTS),
    "pod-garbage-collector-controller": (
        "core/pods: delete list watch", "core/nodes: get list watch", "core/pods/status: patch"),
    "garbage-collector-controller": ("*/*: delete get list patch update watch", *EVENTS),
    "namespace-controller": (
        "core/namespaces: delete get list watch", "core/namespaces/finalize: update",
        "core/namespaces/status: update", "*/*: delete deletecollection get list watch"),
    "node-lifecycle-controller": (
        "core/nodes: delete get list patch update watch", "core/nodes/status: patch update",
        "core/pods/status: patch update", "core/pods: delete get list watch", *EVENTS),
    "endpoints-controller": (
        "core/pods: get list watch", "core/services: get list watch",
        "core/endpoints: create delete get list update watch", "core/endpoints/restricted: create", *EVENTS),
    "endpointslice-controller": (
        "core/nodes: get list watch", "core/pods: get list watch", "core/services: get list watch",
        "core/services/finalizers: update", "discovery.k8s.io/endpointslices: create delete get list update watch",
        *EVENTS),
    "disruption-controller": (
        "apps/deployments: get list watch", "apps/replicasets: get list watch", "apps/statefulsets: get list watch",
        "core/replicationcontrollers: get list watch", "policy/poddisruptionbudgets: get list watch",
        "policy/poddisruptionbudgets/status: update", "core/pods/status: patch update", "*/*/scale: get", *EVENTS),
    "replicationcontroller-controller": (
        "core/replicationcontrollers: get list update watch", "core/replicationcontrollers/status: update",
        "core/replicationcontrollers/finalizers: update", "core/pods: create delete list patch watch", *EVENTS),
    # upstream runs it with the node-controller's role; only the pod-eviction part of it is needed
    "taint-eviction-controller": (
        "core/nodes: get list watch", "core/pods: delete get list watch", "core/pods/status: patch update",
        *EVENTS),
}


def permissions(lines: tuple[str, ...]) -> set[tuple[str, str, str]]:
    out = set()
    for line in lines:
        target, verbs = line.split(": ")
        group, resource = target.split("/", 1)
        out |= {("" if group == "core" else group, resource, verb) for verb in verbs.split()}
    return out


def granted(rules: list[PolicyRule]) -> set[tuple[str, str, str]]:
    return {(g, r, v) for rule in rules for g in rule.api_groups for r in rule.resources for v in rule.verbs}


@pytest.mark.parametrize("name", sorted(UPSTREAM))
def test_rules_match_upstream_bootstrap_roles(name: str) -> None:
    assert granted(controller_rules(name)) == permissions(UPSTREAM[name])


def test_every_row_is_a_known_controller_and_every_implemented_controller_has_a_row() -> None:
    known = {c.name for c in KNOWN_CONTROLLERS}
    assert set(CONTROLLER_ROLES) <= known
    implemented = {c.name for c in default_registry() if c.implemented}
    assert implemented <= set(CONTROLLER_ROLES)
    assert set(UPSTREAM) <= set(CONTROLLER_ROLES)


def test_no_rule_names_the_extensions_group() -> None:
    groups = {g for role in CONTROLLER_ROLES.values() for rule in role.rules for g in rule.api_groups}
    assert "extensions" not in groups


@pytest.mark.parametrize(("rules", "expected"), [
    pytest.param([], [], id="empty"),
    pytest.param(
        [PolicyRule(("apps", ""), ("b", "a"), ("watch", "get"))],
        [PolicyRule(("",), ("a",), ("get", "watch")), PolicyRule(("",), ("b",), ("get", "watch")),
         PolicyRule(("apps",), ("a",), ("get", "watch")), PolicyRule(("apps",), ("b",), ("get", "watch"))],
        id="split-per-group-and-resource"),
    pytest.param(
        [PolicyRule(("",), ("pods",), ("list", "create")), PolicyRule(("",), ("pods",), ("create", "delete"))],
        [PolicyRule(("",), ("pods",), ("create", "delete", "list"))],
        id="verbs-merged-and-deduplicated"),
    pytest.param(
        [PolicyRule(("x",), ("leases",), ("get",), ("b", "a")), PolicyRule(("x",), ("leases",), ("create",))],
        [PolicyRule(("x",), ("leases",), ("create",)), PolicyRule(("x",), ("leases",), ("get",), ("a", "b"))],
        id="named-rules-kept-apart"),
])
def test_normalize(rules: list[PolicyRule], expected: list[PolicyRule]) -> None:
    assert normalize(rules) == expected
    assert normalize(expected) == expected


_rule = st.builds(
    PolicyRule,
    st.lists(st.sampled_from(["", "apps", "batch"]), min_size=1, max_size=2).map(tuple),
    st.lists(st.sampled_from(["pods", "jobs", "pods/status"]), min_size=1, max_size=2).map(tuple),
    st.lists(st.sampled_from(["get", "list", "create", "delete"]), min_size=1, max_size=3).map(tuple),
    st.lists(st.sampled_from(["a", "b"]), max_size=1).map(tuple),
)


@given(st.lists(_rule, max_size=6))
def test_normalize_keeps_exactly_the_same_permissions(rules: list[PolicyRule]) -> None:
    def named(rs: list[PolicyRule]) -> set[tuple[Any, ...]]:
        return {(*p, r.resource_names) for r in rs for p in granted([r])}

    assert named(normalize(rules)) == named(rules)


def test_rules_for_merges_controllers_with_the_manager_rules() -> None:
    merged = rules_for(["deployment-controller", "replicaset-controller"])
    assert granted(merged) == (granted(list(MANAGER_RULES)) | permissions(UPSTREAM["deployment-controller"])
                               | permissions(UPSTREAM["replicaset-controller"]))
    assert merged == normalize(merged)
    assert len([r for r in merged if r.resources == ("events",)]) == 2  # once per group, not per controller
    assert granted(rules_for([])) == granted(list(MANAGER_RULES))
    with pytest.raises(KeyError):
        rules_for(["cloud-node-lifecycle-controller"])  # not implemented here: no row


def test_manager_rules_allow_delegated_auth_and_events() -> None:
    assert {("authentication.k8s.io", "tokenreviews", "create"),
            ("authorization.k8s.io", "subjectaccessreviews", "create"),
            ("", "events", "create"), ("events.k8s.io", "events", "patch")} <= granted(list(MANAGER_RULES))


def test_leader_election_rules_limit_reads_and_writes_to_the_one_lease() -> None:
    assert leader_election_rules("my-lock") == [
        PolicyRule(("coordination.k8s.io",), ("leases",), ("create",)),
        PolicyRule(("coordination.k8s.io",), ("leases",), ("get", "update"), ("my-lock",)),
    ]


def test_cli_prints_a_valid_cluster_role_for_a_controllers_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert rbac.main(["--controllers", "*,-job", "--name", "cm", "--lease-name", "lk"]) == 0
    cluster_role, role = yaml.safe_load_all(capsys.readouterr().out)
    registry = default_registry()
    expected = sorted(c.name for c in registry.select(["*", "-job"]).runnable)
    assert "job-controller" not in expected
    assert [PolicyRule.from_dict(r) for r in cluster_role["rules"]] == rules_for(expected)
    assert cluster_role["metadata"]["name"] == "cm"
    assert [PolicyRule.from_dict(r) for r in role["rules"]] == leader_election_rules("lk")
    for obj in (cluster_role, role):
        kubernetes_validate.validate(obj, kubernetes_validate.latest_version(), strict=True)


def test_cli_all_includes_unimplemented_controllers_that_have_rules(capsys: pytest.CaptureFixture[str]) -> None:
    assert rbac.main(["--controllers", "resourcequota,deployment", "--all"]) == 0
    cluster_role = next(yaml.safe_load_all(capsys.readouterr().out))
    rules = [PolicyRule.from_dict(r) for r in cluster_role["rules"]]
    assert rules == rules_for(["deployment-controller", "resourcequota-controller"])


def test_cli_refuses_unknown_controllers(capsys: pytest.CaptureFixture[str]) -> None:
    assert rbac.main(["--controllers", "*,-nosuch"]) == 1
    assert capsys.readouterr().err == 'Error: "nosuch" is not in the list of known controllers\n'


@given(st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.from_regex(r"[a-zA-Z]{1,6}", fullmatch=True),
                                                                  inner, max_size=3),
    max_leaves=10,
))
def test_to_yaml_round_trips(value: Any) -> None:
    assert yaml.safe_load(rbac.to_yaml(value)) == value
