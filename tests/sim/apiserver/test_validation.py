"""Validation: tables in the spirit of pkg/apis/{core,apps,batch}/validation tests, and the 422 Status shape."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from controller_manager.api.resources import (
    CLUSTERROLES,
    CRONJOBS,
    DAEMONSETS,
    DEPLOYMENTS,
    ENDPOINTSLICES,
    JOBS,
    LEASES,
    NAMESPACES,
    NODES,
    PODS,
    REPLICASETS,
    ROLES,
    SERVICES,
    STATEFULSETS,
    Resource,
)
from controller_manager.sim.apiserver.defaults import apply_defaults, job_selector_defaults
from controller_manager.sim.apiserver.validation import FieldError, invalid_status, validate
from controller_manager.sim.apiserver.validation_workloads import schedule_error

Mut = Callable[[dict[str, Any]], None]


def _template() -> dict[str, Any]:
    return {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}


def _workload(res: Resource, name: str = "web") -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": {"matchLabels": {"app": "web"}}, "template": _template()}
    return apply_defaults(res, {"metadata": {"name": name, "namespace": "default"}, "spec": spec})


def _job(name: str = "pi") -> dict[str, Any]:
    job = {"metadata": {"name": name, "namespace": "default", "uid": "u-1"},
           "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "perl"}]}}}}
    return job_selector_defaults(apply_defaults(JOBS, job), "u-1")


def _cronjob(**spec: Any) -> dict[str, Any]:
    job_template = {"spec": {"template": {"spec": {"restartPolicy": "OnFailure",
                                                   "containers": [{"name": "c", "image": "busybox"}]}}}}
    return apply_defaults(CRONJOBS, {"metadata": {"name": "cj", "namespace": "default"},
                                     "spec": {"schedule": "*/5 * * * *", "jobTemplate": job_template, **spec}})


def _pod() -> dict[str, Any]:
    return apply_defaults(PODS, {"metadata": {"name": "p", "namespace": "default"},
                                 "spec": {"containers": [{"name": "c", "image": "nginx"}]}})


def _fields(errs: list[FieldError]) -> list[tuple[str, str]]:
    return [(e.type, e.field) for e in errs]


def _set(path: str, value: Any) -> Mut:
    def mutate(obj: dict[str, Any]) -> None:
        node = obj
        keys = path.split(".")
        for k in keys[:-1]:
            node = node[int(k)] if isinstance(node, list) else node.setdefault(k, {})
        if value is _DELETE:
            node.pop(keys[-1], None)
        elif isinstance(node, list):
            node[int(keys[-1])] = value
        else:
            node[keys[-1]] = value
    return mutate


_DELETE = object()


@pytest.mark.parametrize(
    ("res", "make"),
    [(DEPLOYMENTS, lambda: _workload(DEPLOYMENTS)), (REPLICASETS, lambda: _workload(REPLICASETS)),
     (DAEMONSETS, lambda: _workload(DAEMONSETS)), (STATEFULSETS, lambda: _workload(STATEFULSETS)),
     (JOBS, _job), (CRONJOBS, _cronjob), (PODS, _pod),
     (NAMESPACES, lambda: apply_defaults(NAMESPACES, {"metadata": {"name": "team"}})),
     (NODES, lambda: {"metadata": {"name": "node-1"}, "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}}),
     (LEASES, lambda: {"metadata": {"name": "l", "namespace": "kube-system"}, "spec": {"leaseDurationSeconds": 15}}),
     (SERVICES, lambda: apply_defaults(SERVICES, {"metadata": {"name": "svc", "namespace": "default"},
                                                  "spec": {"ports": [{"port": 80}]}}))],
)
def test_valid_objects_pass(res: Resource, make: Callable[[], dict[str, Any]]) -> None:
    obj = make()
    assert validate(res, obj, None) == []
    assert validate(res, obj, copy.deepcopy(obj)) == []


META_CASES = [
    pytest.param(_set("metadata.name", "Web"), [("FieldValueInvalid", "metadata.name")], id="uppercase-name"),
    pytest.param(_set("metadata.name", ""), [("FieldValueRequired", "metadata.name")], id="no-name"),
    pytest.param(_set("metadata.generateName", "Bad_"), [("FieldValueInvalid", "metadata.generateName")],
                 id="bad-generate-name"),
    pytest.param(_set("metadata.generateName", "web-"), [], id="generate-name-trailing-dash"),
    pytest.param(_set("metadata.labels", {"-bad": "x"}), [("FieldValueInvalid", "metadata.labels")], id="label-key"),
    pytest.param(_set("metadata.labels", {"ok": "bad value"}), [("FieldValueInvalid", "metadata.labels")],
                 id="label-value"),
    pytest.param(_set("metadata.annotations", {"a/b/c": "x"}), [("FieldValueInvalid", "metadata.annotations")],
                 id="annotation-key"),
    pytest.param(_set("metadata.finalizers", ["custom"]), [("FieldValueInvalid", "metadata.finalizers")],
                 id="unqualified-finalizer"),
    pytest.param(_set("metadata.finalizers", ["orphan", "example.com/x"]), [], id="good-finalizers"),
    pytest.param(_set("metadata.namespace", ""), [("FieldValueRequired", "metadata.namespace")], id="no-namespace"),
]


@pytest.mark.parametrize(("mutate", "want"), META_CASES)
def test_object_meta(mutate: Mut, want: list[tuple[str, str]]) -> None:
    obj = _workload(DEPLOYMENTS)
    mutate(obj)
    assert _fields(validate(DEPLOYMENTS, obj, None)) == want


@pytest.mark.parametrize(
    ("res", "name", "ok"),
    [(NAMESPACES, "a.b", False), (NAMESPACES, "team-a", True), (SERVICES, "1svc", False), (SERVICES, "svc-1", True),
     (PODS, "a.b", True), (PODS, "a" * 254, False)],
)
def test_name_rules_per_kind(res: Resource, name: str, ok: bool) -> None:
    meta: dict[str, Any] = {"name": name}
    if res.namespaced:
        meta["namespace"] = "default"
    obj = apply_defaults(res, {"metadata": meta, "spec": {"ports": [{"port": 80}],
                                                          "containers": [{"name": "c", "image": "x"}]}})
    errs = [e for e in validate(res, obj, None) if e.field == "metadata.name"]
    assert (errs == []) is ok


DEPLOYMENT_CASES = [
    pytest.param(_set("spec.replicas", -1), [("FieldValueInvalid", "spec.replicas")], id="negative-replicas"),
    pytest.param(_set("spec.selector", _DELETE), [("FieldValueRequired", "spec.selector"),
                                                  ("FieldValueInvalid", "spec.template.metadata.labels")],
                 id="no-selector-also-matches-nothing"),
    pytest.param(_set("spec.selector", {}), [("FieldValueInvalid", "spec.selector")], id="empty-selector"),
    pytest.param(_set("spec.selector", {"matchLabels": {"app": "other"}}),
                 [("FieldValueInvalid", "spec.template.metadata.labels")], id="selector-mismatch"),
    pytest.param(_set("spec.selector", {"matchExpressions": [{"key": "app", "operator": "Bogus"}]}),
                 [("FieldValueInvalid", "spec.selector")], id="bad-operator"),
    pytest.param(_set("spec.template.spec.containers", []), [("FieldValueRequired", "spec.template.spec.containers")],
                 id="no-containers"),
    pytest.param(_set("spec.template.spec.containers.0.image", ""),
                 [("FieldValueRequired", "spec.template.spec.containers[0].image")], id="no-image"),
    pytest.param(_set("spec.template.spec.containers.0.name", "Bad_Name"),
                 [("FieldValueInvalid", "spec.template.spec.containers[0].name")], id="bad-container-name"),
    pytest.param(_set("spec.template.spec.restartPolicy", "Never"),
                 [("FieldValueNotSupported", "spec.template.spec.restartPolicy")], id="restart-never"),
    pytest.param(_set("spec.strategy.rollingUpdate", {"maxSurge": 0, "maxUnavailable": 0}),
                 [("FieldValueInvalid", "spec.strategy.rollingUpdate.maxUnavailable")], id="surge-and-unavailable-0"),
    pytest.param(_set("spec.strategy.rollingUpdate", {"maxSurge": "25%", "maxUnavailable": "110%"}),
                 [("FieldValueInvalid", "spec.strategy.rollingUpdate.maxUnavailable")], id="over-100-percent"),
    pytest.param(_set("spec.strategy.rollingUpdate", {"maxSurge": "x", "maxUnavailable": 1}),
                 [("FieldValueInvalid", "spec.strategy.rollingUpdate.maxSurge")], id="bad-percent"),
    pytest.param(_set("spec.strategy", {"type": "Recreate", "rollingUpdate": {"maxSurge": 1}}),
                 [("FieldValueForbidden", "spec.strategy.rollingUpdate")], id="recreate-with-rolling"),
    pytest.param(_set("spec.strategy", {"type": "Canary"}), [("FieldValueNotSupported", "spec.strategy")],
                 id="unknown-strategy"),
    pytest.param(_set("spec.minReadySeconds", 600), [("FieldValueInvalid", "spec.progressDeadlineSeconds")],
                 id="deadline-not-above-min-ready"),
    pytest.param(_set("spec.template.spec.containers.1", {"name": "c", "image": "x"}),
                 [("FieldValueDuplicate", "spec.template.spec.containers[1].name")], id="duplicate-container"),
]


@pytest.mark.parametrize(("mutate", "want"), DEPLOYMENT_CASES)
def test_deployment(mutate: Mut, want: list[tuple[str, str]]) -> None:
    obj = _workload(DEPLOYMENTS)
    obj["spec"]["template"]["spec"]["containers"].append({"name": "d", "image": "x"})
    mutate(obj)
    assert _fields(validate(DEPLOYMENTS, obj, None)) == want


def test_selector_mismatch_status_is_exactly_upstreams() -> None:
    obj = _workload(DEPLOYMENTS)
    obj["spec"]["selector"] = {"matchLabels": {"app": "y"}}
    obj["spec"]["template"]["metadata"]["labels"] = {"app": "x"}
    status = invalid_status(DEPLOYMENTS, "web", validate(DEPLOYMENTS, obj, None))
    assert status == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'Deployment.apps "web" is invalid: spec.template.metadata.labels: Invalid value: '
                   '{"app":"x"}: `selector` does not match template `labels`',
        "reason": "Invalid",
        "details": {"name": "web", "group": "apps", "kind": "Deployment", "causes": [
            {"reason": "FieldValueInvalid",
             "message": 'Invalid value: {"app":"x"}: `selector` does not match template `labels`',
             "field": "spec.template.metadata.labels"}]},
        "code": 422,
    }


def test_several_errors_are_bracketed_and_core_kinds_have_no_group() -> None:
    errs = [FieldError("FieldValueRequired", "spec.containers"),
            FieldError("FieldValueNotSupported", "spec.restartPolicy", 'supported values: "Always"', "Sometimes"),
            FieldError("FieldValueRequired", "spec.containers")]
    status = invalid_status(PODS, "p", errs)
    assert status["message"] == ('Pod "p" is invalid: [spec.containers: Required value, spec.restartPolicy: '
                                 'Unsupported value: "Sometimes": supported values: "Always"]')
    assert "group" not in status["details"]
    assert len(status["details"]["causes"]) == 3


def test_immutable_selector_message() -> None:
    old = _workload(DEPLOYMENTS)
    new = copy.deepcopy(old)
    new["spec"]["selector"] = {"matchLabels": {"app": "web", "tier": "x"}}
    new["spec"]["template"]["metadata"]["labels"]["tier"] = "x"
    errs = validate(DEPLOYMENTS, new, old)
    assert [str(e) for e in errs] == [
        'spec.selector: Invalid value: {"matchLabels":{"app":"web","tier":"x"}}: field is immutable']


def test_surge_and_unavailable_zero_message() -> None:
    obj = _workload(DEPLOYMENTS)
    obj["spec"]["strategy"]["rollingUpdate"] = {"maxSurge": 0, "maxUnavailable": 0}
    assert [str(e) for e in validate(DEPLOYMENTS, obj, None)] == [
        'spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0: '
        "may not be 0 when `maxSurge` is 0"]


@pytest.mark.parametrize(
    ("rolling", "want"),
    [
        pytest.param({"maxUnavailable": 1, "maxSurge": 1},
                     [("FieldValueInvalid", "spec.updateStrategy.rollingUpdate.maxSurge")], id="both-set"),
        pytest.param({"maxUnavailable": 0, "maxSurge": 0},
                     [("FieldValueRequired", "spec.updateStrategy.rollingUpdate.maxUnavailable")], id="both-zero"),
        pytest.param({"maxUnavailable": 0, "maxSurge": "10%"}, [], id="surge-only"),
    ],
)
def test_daemonset_rolling_update(rolling: dict[str, Any], want: list[tuple[str, str]]) -> None:
    obj = _workload(DAEMONSETS)
    obj["spec"]["updateStrategy"]["rollingUpdate"] = rolling
    assert _fields(validate(DAEMONSETS, obj, None)) == want


def test_daemonset_and_statefulset_rules() -> None:
    ds = _workload(DAEMONSETS)
    ds["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    ds["spec"]["selector"] = {}
    assert _fields(validate(DAEMONSETS, ds, None)) == [
        ("FieldValueInvalid", "spec.selector"), ("FieldValueNotSupported", "spec.template.spec.restartPolicy")]
    sts = _workload(STATEFULSETS)
    sts["spec"]["podManagementPolicy"] = "Random"
    assert _fields(validate(STATEFULSETS, sts, None)) == [("FieldValueInvalid", "spec.podManagementPolicy")]
    old = _workload(STATEFULSETS)
    new = copy.deepcopy(old)
    new["spec"]["serviceName"] = "changed"
    assert _fields(validate(STATEFULSETS, new, old)) == [("FieldValueForbidden", "spec")]
    new = copy.deepcopy(old)
    new["spec"]["replicas"] = 5
    assert validate(STATEFULSETS, new, old) == []


JOB_CASES = [
    pytest.param(_set("spec.parallelism", -1), [("FieldValueInvalid", "spec.parallelism")], id="parallelism"),
    pytest.param(_set("spec.completions", -1), [("FieldValueInvalid", "spec.completions")], id="completions"),
    pytest.param(_set("spec.backoffLimit", -1), [("FieldValueInvalid", "spec.backoffLimit")], id="backoff"),
    pytest.param(_set("spec.template.spec.restartPolicy", "Always"),
                 [("FieldValueRequired", "spec.template.spec.restartPolicy")], id="restart-always"),
    pytest.param(_set("spec.completionMode", "Sometimes"), [("FieldValueNotSupported", "spec.completionMode")],
                 id="completion-mode"),
    pytest.param(_set("spec.selector", {"matchLabels": {"batch.kubernetes.io/controller-uid": "other"}}),
                 [("FieldValueInvalid", "spec.selector"), ("FieldValueInvalid", "spec.template.metadata.labels")],
                 id="selector-not-generated"),
    pytest.param(_set("spec.template.metadata.labels.job-name", "other"),
                 [("FieldValueInvalid", "spec.template.metadata.labels[job-name]")], id="wrong-job-name-label"),
    pytest.param(_set("spec.backoffLimitPerIndex", 1), [("FieldValueInvalid", "spec.backoffLimitPerIndex")],
                 id="per-index-needs-indexed"),
]


@pytest.mark.parametrize(("mutate", "want"), JOB_CASES)
def test_job(mutate: Mut, want: list[tuple[str, str]]) -> None:
    obj = _job()
    mutate(obj)
    assert _fields(validate(JOBS, obj, None)) == want


def test_job_manual_selector_must_match_template() -> None:
    job = apply_defaults(JOBS, {"metadata": {"name": "m", "namespace": "default", "uid": "u"},
                                "spec": {"manualSelector": True, "selector": {"matchLabels": {"a": "b"}},
                                         "template": {"metadata": {"labels": {"a": "c"}}, "spec": {
                                             "restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}})
    assert _fields(validate(JOBS, job, None)) == [("FieldValueInvalid", "spec.template.metadata.labels")]


def test_job_update_immutability() -> None:
    old = _job()
    new = copy.deepcopy(old)
    new["spec"]["completionMode"] = "Indexed"
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "perl:2"
    new["spec"]["parallelism"] = 4
    assert _fields(validate(JOBS, new, old)) == [("FieldValueInvalid", "spec.completionMode"),
                                                 ("FieldValueInvalid", "spec.template")]
    suspended = copy.deepcopy(old)
    suspended["spec"]["suspend"] = True
    resumed = copy.deepcopy(suspended)
    resumed["spec"]["suspend"] = False
    resumed["spec"]["template"]["spec"]["nodeSelector"] = {"zone": "a"}
    assert validate(JOBS, resumed, suspended) == []
    old["status"] = {"startTime": "2024-01-01T00:00:00Z"}
    started = copy.deepcopy(resumed)
    assert _fields(validate(JOBS, started, {**suspended, "status": old["status"]})) == [
        ("FieldValueInvalid", "spec.template")]


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        pytest.param({"schedule": "@hourly"}, [], id="macro"),
        pytest.param({"schedule": "@every 1h30m"}, [], id="every"),
        pytest.param({"schedule": "0 0 * * MON-FRI"}, [], id="names"),
        pytest.param({"schedule": "* * * *"}, [("FieldValueInvalid", "spec.schedule")], id="four-fields"),
        pytest.param({"schedule": "61 * * * *"}, [("FieldValueInvalid", "spec.schedule")], id="minute-range"),
        pytest.param({"schedule": "@sometimes"}, [("FieldValueInvalid", "spec.schedule")], id="bad-macro"),
        pytest.param({"schedule": "TZ=UTC * * * * *"}, [("FieldValueInvalid", "spec.schedule")], id="tz-in-schedule"),
        pytest.param({"schedule": ""}, [("FieldValueRequired", "spec.schedule")], id="no-schedule"),
        pytest.param({"timeZone": "Europe/Paris"}, [], id="iana-zone"),
        pytest.param({"timeZone": "Mars/Olympus"}, [("FieldValueInvalid", "spec.timeZone")], id="unknown-zone"),
        pytest.param({"timeZone": "Local"}, [("FieldValueInvalid", "spec.timeZone")], id="local-zone"),
        pytest.param({"timeZone": ""}, [("FieldValueInvalid", "spec.timeZone")], id="empty-zone"),
        pytest.param({"concurrencyPolicy": "Sometimes"}, [("FieldValueNotSupported", "spec.concurrencyPolicy")],
                     id="concurrency"),
        pytest.param({"successfulJobsHistoryLimit": -1}, [("FieldValueInvalid", "spec.successfulJobsHistoryLimit")],
                     id="history-limit"),
    ],
)
def test_cronjob(spec: dict[str, Any], want: list[tuple[str, str]]) -> None:
    assert _fields(validate(CRONJOBS, _cronjob(**spec), None)) == want


def test_cronjob_name_limit_and_job_template_rules() -> None:
    cj = _cronjob()
    cj["metadata"]["name"] = "a" * 53
    cj["spec"]["jobTemplate"]["spec"]["selector"] = {"matchLabels": {"a": "b"}}
    cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    assert _fields(validate(CRONJOBS, cj, None)) == [
        ("FieldValueInvalid", "metadata.name"),
        ("FieldValueRequired", "spec.jobTemplate.spec.template.spec.restartPolicy"),
        ("FieldValueInvalid", "spec.jobTemplate.spec.selector")]
    assert schedule_error("* * * *") == "expected exactly 5 fields, found 4: [* * * *]"


POD_UPDATE_CASES = [
    pytest.param(_set("spec.containers.0.image", "nginx:2"), [], id="image"),
    pytest.param(_set("spec.activeDeadlineSeconds", 30), [], id="set-deadline"),
    pytest.param(_set("spec.tolerations", [*_pod()["spec"]["tolerations"], {"key": "x", "operator": "Exists"}]), [],
                 id="add-toleration"),
    pytest.param(_set("spec.tolerations", []), [("FieldValueForbidden", "spec.tolerations")], id="drop-toleration"),
    pytest.param(_set("spec.restartPolicy", "Never"), [("FieldValueForbidden", "spec")], id="restart-policy"),
    pytest.param(_set("spec.containers.0.name", "d"), [("FieldValueForbidden", "spec")], id="rename-container"),
]


@pytest.mark.parametrize(("mutate", "want"), POD_UPDATE_CASES)
def test_pod_update(mutate: Mut, want: list[tuple[str, str]]) -> None:
    old = _pod()
    new = copy.deepcopy(old)
    mutate(new)
    errs = validate(PODS, new, old)
    assert _fields(errs) == want
    if want == [("FieldValueForbidden", "spec")]:
        assert errs[0].detail.startswith("pod updates may not change fields other than `spec.containers[*].image`")


def test_pod_spec_basics_and_status_updates() -> None:
    pod = _pod()
    pod["spec"]["restartPolicy"] = "Sometimes"
    pod["spec"]["containers"][0]["ports"] = [{"containerPort": 70000, "protocol": "TCP"}]
    pod["spec"]["tolerations"] = [{"key": "a", "operator": "Exists", "value": "x"}]
    assert _fields(validate(PODS, pod, None)) == [
        ("FieldValueInvalid", "spec.containers[0].ports[0].containerPort"),
        ("FieldValueNotSupported", "spec.restartPolicy"),
        ("FieldValueInvalid", "spec.tolerations[0].operator")]
    old = _pod()
    new = copy.deepcopy(old)
    new["spec"]["restartPolicy"] = "Never"
    assert validate(PODS, new, old, subresource="status") == []


def test_metadata_update_rules() -> None:
    old = _pod()
    old["metadata"]["uid"] = "a"
    new = copy.deepcopy(old)
    new["metadata"]["uid"] = "b"
    new["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    new["metadata"]["finalizers"] = ["example.com/x"]
    assert _fields(validate(PODS, new, old)) == [("FieldValueInvalid", "metadata.uid"),
                                                 ("FieldValueForbidden", "metadata.finalizers")]


def test_node_namespace_lease_service() -> None:
    node = {"metadata": {"name": "n"}, "spec": {"taints": [{"key": "a", "effect": "Sometimes"},
                                                           {"key": "b"}]}}
    assert _fields(validate(NODES, node, None)) == [("FieldValueNotSupported", "spec.taints[0].effect"),
                                                    ("FieldValueRequired", "spec.taints[1].effect")]
    ns = {"metadata": {"name": "team"}, "spec": {"finalizers": ["kubernetes", "custom"]}}
    assert _fields(validate(NAMESPACES, ns, None)) == [("FieldValueInvalid", "spec.finalizers")]
    lease = {"metadata": {"name": "l", "namespace": "kube-system"}, "spec": {"leaseDurationSeconds": 0}}
    assert _fields(validate(LEASES, lease, None)) == [("FieldValueInvalid", "spec.leaseDurationSeconds")]
    svc = apply_defaults(SERVICES, {"metadata": {"name": "svc", "namespace": "default"},
                                    "spec": {"ports": [{"port": 80}, {"port": 443}]}})
    assert _fields(validate(SERVICES, svc, None)) == [("FieldValueRequired", "spec.ports[0].name"),
                                                      ("FieldValueRequired", "spec.ports[1].name")]


RULE_CASES = [
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}, True, []),
    ({"apiGroups": [""], "resources": ["pods"]}, True,
     ["rules[0].verbs: Required value: verbs must contain at least one value"]),
    ({"verbs": ["get"]}, True,
     ["rules[0].apiGroups: Required value: resource rules must supply at least one api group",
      "rules[0].resources: Required value: resource rules must supply at least one resource"]),
    ({"verbs": ["get"], "nonResourceURLs": ["/healthz"]}, False, []),
    ({"verbs": ["get"], "nonResourceURLs": ["/healthz"]}, True,
     ['rules[0].nonResourceURLs: Invalid value: ["/healthz"]: namespaced rules cannot apply to non-resource '
      "URLs"]),
    ({"verbs": ["get"], "nonResourceURLs": ["/healthz"], "resources": ["pods"]}, False,
     ['rules[0].nonResourceURLs: Invalid value: ["/healthz"]: rules cannot apply to both regular resources '
      "and non-resource URLs"]),
]


@pytest.mark.parametrize(("rule", "namespaced", "want"), RULE_CASES)
def test_policy_rules(rule: dict[str, Any], namespaced: bool, want: list[str]) -> None:
    res = ROLES if namespaced else CLUSTERROLES
    obj = {"metadata": {"name": "r", **({"namespace": "default"} if namespaced else {})}, "rules": [rule]}
    assert [str(e) for e in validate(res, obj, None)] == want


def test_endpoint_slice_addresses_and_type() -> None:
    obj = {"metadata": {"name": "s", "namespace": "default"}, "addressType": "IPv4",
           "endpoints": [{"addresses": ["10.0.0.1"]}, {"addresses": []}]}
    assert [str(e) for e in validate(ENDPOINTSLICES, obj, None)] == [
        "endpoints[1].addresses: Required value: must contain at least 1 address"]
    obj = {"metadata": {"name": "s", "namespace": "default"}, "addressType": "IP"}
    assert [str(e) for e in validate(ENDPOINTSLICES, obj, None)] == [
        'addressType: Unsupported value: "IP": supported values: "FQDN", "IPv4", "IPv6"']
