"""The Helm chart, rendered by a real Helm: every values case renders objects the Kubernetes schemas and
kube-sim accept, that reference each other correctly, and whose RBAC is exactly what the enabled controllers
need (from ``controller_manager.manager.rbac``)."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from controller_manager.manager.options import parse_options
from controller_manager.manager.rbac import PolicyRule, leader_election_rules, normalize, rules_for
from controller_manager.manager.registry import default_registry
from tests.packaging.chart import (
    by_kind,
    container,
    controller_keys,
    notes,
    render,
    render_error,
    schema_errors,
    sim_errors,
)
from tools.helm import run_helm
from tools.render_deploy import CHART, NAMESPACE, value_key

KEYS = controller_keys()
# Prometheus Operator's kinds: no Kubernetes schema to validate them against (test_alerts runs promtool).
OPERATOR_KINDS = ("ServiceMonitor", "PrometheusRule")


def _cases() -> Iterator[Any]:
    yield pytest.param({}, id="defaults")
    for key in KEYS:
        yield pytest.param({"controllers": {key: {"enabled": False}}}, id=f"without-{key}")
    yield pytest.param({"controllers": {key: {"enabled": False} for key in KEYS}}, id="no-controllers")
    yield pytest.param({"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}}, id="servicemonitor")
    yield pytest.param({"podDisruptionBudget": {"enabled": True}}, id="pdb")
    yield pytest.param({"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True,
                        "labels": {"release": "prom"}}, "grafanaDashboard": {"enabled": True}},
                       id="monitoring")
    yield pytest.param({"serviceMonitor": {"enabled": True}, "podDisruptionBudget": {"enabled": True,
                        "minAvailable": "50%"}}, id="servicemonitor-and-pdb")
    yield pytest.param({"leaderElection": {"enabled": False}, "replicaCount": 1}, id="no-leader-election")
    yield pytest.param({"leaderElection": {"namespace": "leases", "resourceName": "cm-lock"}}, id="lease-elsewhere")
    yield pytest.param({"rbac": {"create": False}, "serviceAccount": {"create": False, "name": "existing"}},
                       id="bring-your-own-rbac")
    yield pytest.param({
        "extraArgs": {"kube-api-qps": 50, "concurrent-deployment-syncs": 10, "min-resync-period": "1h"},
        "extraEnv": [{"name": "TZ", "value": "UTC"}],
        "nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
        "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists",
                         "effect": "NoSchedule"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]}}},
        "podAnnotations": {"a": "b"}, "podLabels": {"team": "platform"},
        "image": {"repository": "registry.example/cm", "tag": "dev", "pullPolicy": "Always"},
        "imagePullSecrets": [{"name": "pull"}], "priorityClassName": "",
        "serviceAccount": {"annotations": {"x": "y"}}, "service": {"annotations": {"s": "t"}},
    }, id="passthrough")


CASES = list(_cases())


@functools.cache
def _render(values_json: str) -> list[dict[str, Any]]:
    return render(json.loads(values_json))


def rendered(values: dict[str, Any]) -> list[dict[str, Any]]:
    return _render(json.dumps(values, sort_keys=True))


def enabled_names(values: dict[str, Any]) -> list[str]:
    overrides = values.get("controllers", {})
    registry = default_registry()
    names = []
    for key in KEYS:
        info = registry.get(f"{key}-controller")
        assert info is not None
        if overrides.get(key, {}).get("enabled", info.enabled_by_default):
            names.append(info.name)
    return sorted(names)


def args_of(objs: list[dict[str, Any]]) -> list[str]:
    result: list[str] = container(objs)["args"]
    return result


def test_chart_lints() -> None:
    done = run_helm("lint", str(CHART), "--strict")
    assert "0 chart(s) failed" in done.stdout


@pytest.mark.parametrize("values", CASES)
def test_rendered_objects_are_valid(values: dict[str, Any]) -> None:
    objs = rendered(values)
    errors = [e for obj in objs if obj["kind"] not in OPERATOR_KINDS for e in schema_errors(obj) + sim_errors(obj)]
    assert errors == []
    for obj in objs:
        assert obj["metadata"]["name"]
        if obj["kind"] not in ("ClusterRole", "ClusterRoleBinding"):
            assert obj["metadata"]["namespace"], obj["kind"]


@pytest.mark.parametrize("values", CASES)
def test_cluster_role_has_exactly_the_enabled_controllers_rules(values: dict[str, Any]) -> None:
    kinds = by_kind(rendered(values))
    if not values.get("rbac", {}).get("create", True):
        assert not {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} & set(kinds)
        return
    rules = [PolicyRule.from_dict(r) for r in kinds["ClusterRole"]["rules"]]
    assert rules == rules_for(enabled_names(values))
    assert rules == normalize(rules)  # the template merges as rbac.normalize does


@pytest.mark.parametrize("values", CASES)
def test_daemon_parses_the_args_and_runs_exactly_the_enabled_controllers(values: dict[str, Any]) -> None:
    registry = default_registry()
    options = parse_options(args_of(rendered(values)), registry.names(), registry.disabled_by_default())
    selection = registry.select(options.controllers)
    assert sorted(c.name for c in selection.enabled) == enabled_names(values)
    assert selection.not_implemented == ()
    assert options.leader_elect == values.get("leaderElection", {}).get("enabled", True)
    assert options.secure_port == 10257


@pytest.mark.parametrize("values", CASES)
def test_objects_reference_each_other(values: dict[str, Any]) -> None:
    objs = rendered(values)
    kinds = by_kind(objs)
    deployment = kinds["Deployment"]
    pod = deployment["spec"]["template"]
    sa_name = pod["spec"]["serviceAccountName"]
    pod_labels = pod["metadata"]["labels"]
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= pod_labels.items()
    if values.get("serviceAccount", {}).get("create", True):
        assert kinds["ServiceAccount"]["metadata"]["name"] == sa_name
    else:
        assert "ServiceAccount" not in kinds
    for binding in ("ClusterRoleBinding", "RoleBinding"):
        if binding in kinds:
            subject = kinds[binding]["subjects"][0]
            assert (subject["name"], subject["namespace"]) == (sa_name, NAMESPACE)
            role_kind = binding.removesuffix("Binding")
            assert kinds[binding]["roleRef"]["name"] == kinds[role_kind]["metadata"]["name"]
            assert kinds[binding]["metadata"].get("namespace") == kinds[role_kind]["metadata"].get("namespace")
    service = kinds["Service"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    port_names = {p["name"]: p["containerPort"] for p in container(objs)["ports"]}
    assert service["spec"]["ports"][0]["targetPort"] in port_names
    if "PodDisruptionBudget" in kinds:
        assert kinds["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    if "ServiceMonitor" in kinds:
        monitor = kinds["ServiceMonitor"]
        assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
        assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
        assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
        [endpoint] = monitor["spec"]["endpoints"]
        assert endpoint == {
            "port": service["spec"]["ports"][0]["name"], "scheme": "https", "path": "/metrics",
            "interval": "30s", "scrapeTimeout": "10s",
            "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
            "tlsConfig": {"insecureSkipVerify": True},
        }
        for key, value in values["serviceMonitor"].get("labels", {}).items():
            assert monitor["metadata"]["labels"][key] == value
    if "PrometheusRule" in kinds:
        rule = kinds["PrometheusRule"]
        assert rule["apiVersion"] == "monitoring.coreos.com/v1"
        assert rule["metadata"]["namespace"] == NAMESPACE
        for key, value in values["prometheusRule"].get("labels", {}).items():
            assert rule["metadata"]["labels"][key] == value
        # Its expressions select what the ServiceMonitor scrapes: Prometheus Operator's job label is the Service's name.
        for group in rule["spec"]["groups"]:
            for alert in group["rules"]:
                assert f'job="{service["metadata"]["name"]}",namespace="{NAMESPACE}"' in alert["expr"], alert["alert"]


@pytest.mark.parametrize("values", CASES)
def test_leader_election_role_covers_only_the_lease(values: dict[str, Any]) -> None:
    kinds = by_kind(rendered(values))
    election = {"namespace": "", "resourceName": "controller-manager-py", "enabled": True,
                **values.get("leaderElection", {})}
    rbac = values.get("rbac", {}).get("create", True)
    if not (election["enabled"] and rbac):
        assert "Role" not in kinds
        assert "RoleBinding" not in kinds
        return
    namespace = election["namespace"] or NAMESPACE
    role = kinds["Role"]
    assert role["metadata"]["namespace"] == namespace
    assert [PolicyRule.from_dict(r) for r in role["rules"]] == leader_election_rules(election["resourceName"])
    args = args_of(rendered(values))
    assert f"--leader-elect-resource-namespace={namespace}" in args
    assert f"--leader-elect-resource-name={election['resourceName']}" in args


def test_default_deployment_runs_two_hardened_replicas() -> None:
    objs = rendered({})
    deployment = by_kind(objs)["Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    main = container(objs)
    assert deployment["spec"]["replicas"] == 2
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert main["securityContext"] == {
        "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert main["image"] == "controller-manager:0.1.0"
    assert main["resources"]["requests"]
    assert main["resources"]["limits"]["memory"]
    assert main["ports"] == [{"name": "https", "containerPort": 10257, "protocol": "TCP"}]
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz"), ("startupProbe", "/healthz")):
        assert main[probe]["httpGet"] == {"path": path, "port": "https", "scheme": "HTTPS"}
    assert "--leader-elect=true" in main["args"]
    assert pod["affinity"]["podAntiAffinity"]  # replicas spread over nodes unless told otherwise


def test_passthrough_values_reach_the_pod() -> None:
    values = CASES[-1].values[0]
    objs = rendered(values)
    pod = by_kind(objs)["Deployment"]["spec"]["template"]
    main = container(objs)
    assert main["args"][-3:] == ["--concurrent-deployment-syncs=10", "--kube-api-qps=50", "--min-resync-period=1h"]
    assert main["env"] == values["extraEnv"]
    assert main["image"] == "registry.example/cm:dev"
    assert main["imagePullPolicy"] == "Always"
    for key in ("nodeSelector", "tolerations", "affinity", "imagePullSecrets"):
        assert pod["spec"][key] == values[key]
    assert "priorityClassName" not in pod["spec"]
    assert pod["metadata"]["annotations"] == {"a": "b"}
    assert pod["metadata"]["labels"]["team"] == "platform"


@pytest.mark.parametrize(("values", "message"), [
    pytest.param({"controllers": {"nosuch": {"enabled": True}}}, "additional properties 'nosuch'", id="unknown-ctrl"),
    pytest.param({"controllers": {KEYS[0]: {"enabled": "yes"}}}, "boolean", id="enabled-not-bool"),
    pytest.param({"replicacount": 3}, "additional properties 'replicacount'", id="misspelt-key"),
    pytest.param({"replicaCount": -1}, "minimum", id="negative-replicas"),
    pytest.param({"leaderElection": {"leaseDuration": "15 seconds"}}, "leaseDuration", id="bad-duration"),
    pytest.param({"logFormat": "xml"}, "logFormat", id="bad-log-format"),
    pytest.param({"extraArgs": {"controllers": "*"}}, "controllers", id="controllers-in-extra-args"),
    pytest.param({"securePort": 70000}, "maximum", id="port-out-of-range"),
])
def test_schema_refuses_bad_values(values: dict[str, Any], message: str) -> None:
    assert message in render_error(values)


def _kcm_flags(text: str) -> list[list[str]]:
    return [m.split(",") for m in re.findall(r"--controllers=(\S+)", text)]


@pytest.mark.parametrize("values", [CASES[0], CASES[1]])
def test_notes_tell_how_to_disable_the_same_controllers_in_kube_controller_manager(values: dict[str, Any]) -> None:
    text = notes(values)
    enabled = enabled_names(values)
    canonical, short = _kcm_flags(text)
    registry = default_registry()
    for flag in (canonical, short):
        assert flag[0] == "*"
        # kube-controller-manager with this flag runs every default controller except the ones enabled here
        kept = {c.name for c in registry.select(flag).enabled}
        assert kept == {c.name for c in registry.select(["*"]).enabled} - set(enabled)
    # the chart lists them by values key ("ttl" before "ttl-after-finished", unlike their full names)
    assert canonical[1:] == [f"-{name}" for name in sorted(enabled, key=value_key)]


def test_notes_without_controllers_say_so() -> None:
    text = notes({"controllers": {key: {"enabled": False} for key in KEYS}})
    assert _kcm_flags(text) == []
    assert "No controller is enabled" in text
