"""Defaulting: before/after tables per kind, as pkg/apis/*/v1/defaults_test.go checks them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller_manager.api.resources import DEPLOYMENTS, PODS
from controller_manager.sim.apiserver.defaults import apply_defaults, image_pull_policy, job_selector_defaults
from tests.sim.apiserver.conftest import Client

TEMPLATE_SPEC_DEFAULTS = {
    "dnsPolicy": "ClusterFirst",
    "restartPolicy": "Always",
    "securityContext": {},
    "terminationGracePeriodSeconds": 30,
    "schedulerName": "default-scheduler",
}
CONTAINER_DEFAULTS = {
    "terminationMessagePath": "/dev/termination-log",
    "terminationMessagePolicy": "File",
    "resources": {},
}


def _template(image: str = "nginx:1.25") -> dict[str, Any]:
    return {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": image}]}}


def _defaulted_template(image: str = "nginx:1.25", pull: str = "IfNotPresent") -> dict[str, Any]:
    return {"metadata": {"labels": {"app": "x"}},
            "spec": {"containers": [{"name": "c", "image": image, **CONTAINER_DEFAULTS, "imagePullPolicy": pull}],
                     **TEMPLATE_SPEC_DEFAULTS}}


@pytest.mark.parametrize(
    ("kind", "before", "after"),
    [
        pytest.param("Deployment", {"spec": {"template": _template()}},
                     {"spec": {"replicas": 1, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
                               "strategy": {"type": "RollingUpdate",
                                            "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
                               "template": _defaulted_template()}}, id="deployment"),
        pytest.param("Deployment", {"spec": {"replicas": 0, "strategy": {"type": "Recreate"},
                                             "template": _template()}},
                     {"spec": {"replicas": 0, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
                               "strategy": {"type": "Recreate"}, "template": _defaulted_template()}},
                     id="deployment-recreate-keeps-zero-replicas"),
        pytest.param("Deployment", {"spec": {"strategy": {"rollingUpdate": {"maxSurge": 0}}, "template": _template()}},
                     {"spec": {"replicas": 1, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
                               "strategy": {"type": "RollingUpdate",
                                            "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 0}},
                               "template": _defaulted_template()}}, id="deployment-keeps-zero-surge"),
        pytest.param("ReplicaSet", {"spec": {"template": _template()}},
                     {"spec": {"replicas": 1, "template": _defaulted_template()}}, id="replicaset"),
        pytest.param("DaemonSet", {"spec": {"template": _template()}},
                     {"spec": {"updateStrategy": {"type": "RollingUpdate",
                                                  "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
                               "revisionHistoryLimit": 10, "template": _defaulted_template()}}, id="daemonset"),
        pytest.param("DaemonSet", {"spec": {"updateStrategy": {"type": "OnDelete"}, "template": _template()}},
                     {"spec": {"updateStrategy": {"type": "OnDelete"}, "revisionHistoryLimit": 10,
                               "template": _defaulted_template()}}, id="daemonset-ondelete"),
        pytest.param("StatefulSet", {"spec": {"template": _template(), "volumeClaimTemplates": [
            {"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]}},
            {"spec": {"podManagementPolicy": "OrderedReady", "replicas": 1, "revisionHistoryLimit": 10,
                      "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
                      "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
                      "volumeClaimTemplates": [{"metadata": {"name": "data"},
                                                "spec": {"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem"},
                                                "status": {"phase": "Pending"}}],
                      "template": _defaulted_template()}}, id="statefulset"),
        pytest.param("Job", {"metadata": {"name": "j"}, "spec": {"template": _template()}},
                     {"metadata": {"name": "j", "labels": {"app": "x"}},
                      "spec": {"completions": 1, "parallelism": 1, "backoffLimit": 6, "completionMode": "NonIndexed",
                               "suspend": False, "manualSelector": False,
                               "podReplacementPolicy": "TerminatingOrFailed", "template": _defaulted_template()}},
                     id="job"),
        pytest.param("Job", {"metadata": {"name": "j", "labels": {"own": "1"}},
                             "spec": {"parallelism": 3, "backoffLimitPerIndex": 1, "completionMode": "Indexed",
                                      "podFailurePolicy": {"rules": [
                                          {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]},
                                      "template": _template()}},
                     {"metadata": {"name": "j", "labels": {"own": "1"}},
                      "spec": {"parallelism": 3, "backoffLimit": 2**31 - 1, "backoffLimitPerIndex": 1,
                               "completionMode": "Indexed", "suspend": False, "manualSelector": False,
                               "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [
                                   {"type": "DisruptionTarget", "status": "True"}]}]},
                               "podReplacementPolicy": "Failed", "template": _defaulted_template()}},
                     id="job-parallelism-without-completions"),
        pytest.param("CronJob", {"spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": _template()}}}},
                     {"spec": {"schedule": "* * * * *", "concurrencyPolicy": "Allow", "suspend": False,
                               "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1,
                               "jobTemplate": {"spec": {"template": _defaulted_template()}}}}, id="cronjob"),
        pytest.param("ReplicationController", {"spec": {"template": _template()}},
                     {"metadata": {"labels": {"app": "x"}},
                      "spec": {"replicas": 1, "selector": {"app": "x"}, "template": _defaulted_template()}},
                     id="replicationcontroller"),
        pytest.param("Service", {"spec": {"ports": [{"port": 80}, {"port": 53, "protocol": "UDP",
                                                                    "targetPort": "dns"}]}},
                     {"spec": {"type": "ClusterIP", "sessionAffinity": "None", "internalTrafficPolicy": "Cluster",
                               "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80},
                                         {"port": 53, "protocol": "UDP", "targetPort": "dns"}]}}, id="service"),
        pytest.param("Service", {"spec": {"type": "LoadBalancer", "sessionAffinity": "ClientIP"}},
                     {"spec": {"type": "LoadBalancer", "sessionAffinity": "ClientIP",
                               "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10800}},
                               "externalTrafficPolicy": "Cluster", "internalTrafficPolicy": "Cluster",
                               "allocateLoadBalancerNodePorts": True}}, id="service-loadbalancer"),
        pytest.param("Service", {"spec": {"type": "ExternalName", "externalName": "example.com"}},
                     {"spec": {"type": "ExternalName", "externalName": "example.com", "sessionAffinity": "None"}},
                     id="service-externalname"),
        pytest.param("Namespace", {"metadata": {"name": "team"}},
                     {"metadata": {"name": "team", "labels": {"kubernetes.io/metadata.name": "team"}},
                      "status": {"phase": "Active"}}, id="namespace"),
        pytest.param("Namespace", {"metadata": {"name": "team"}, "status": {"phase": "Terminating"}},
                     {"metadata": {"name": "team", "labels": {"kubernetes.io/metadata.name": "team"}},
                      "status": {"phase": "Terminating"}}, id="namespace-terminating"),
        pytest.param("Node", {"metadata": {"name": "n"}, "status": {"capacity": {"cpu": "4"}}},
                     {"metadata": {"name": "n"}, "status": {"capacity": {"cpu": "4"}, "allocatable": {"cpu": "4"}}},
                     id="node-allocatable"),
        pytest.param("Lease", {"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}},
                     {"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}}, id="lease-untouched"),
        pytest.param("Event", {"metadata": {"name": "e"}, "reason": "X"}, {"metadata": {"name": "e"}, "reason": "X"},
                     id="event-untouched"),
        pytest.param("Secret", {"metadata": {"name": "s"}}, {"metadata": {"name": "s"}, "type": "Opaque"}, id="secret"),
    ],
)
def test_defaults_by_kind(kind: str, before: dict[str, Any], after: dict[str, Any]) -> None:
    snapshot = copy.deepcopy(before)
    out = apply_defaults(kind, before)
    assert out == after
    assert before == snapshot
    assert apply_defaults(kind, out) == out


def _pod(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}


NOT_READY = {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300}
UNREACHABLE = {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
               "tolerationSeconds": 300}


def test_pod_defaults_and_admission_fields() -> None:
    out = apply_defaults(PODS, _pod())
    assert out["spec"] == {
        "containers": [{"name": "c", "image": "busybox", "imagePullPolicy": "Always", **CONTAINER_DEFAULTS}],
        **TEMPLATE_SPEC_DEFAULTS,
        "enableServiceLinks": True,
        "serviceAccountName": "default",
        "serviceAccount": "default",
        "tolerations": [NOT_READY, UNREACHABLE],
    }
    assert apply_defaults(PODS, out) == out


@pytest.mark.parametrize(
    ("tolerations", "want"),
    [
        pytest.param([], [NOT_READY, UNREACHABLE], id="none"),
        pytest.param([{"operator": "Exists"}], [{"operator": "Exists"}], id="tolerate-everything"),
        pytest.param([{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                       "tolerationSeconds": 5}],
                     [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                       "tolerationSeconds": 5}, UNREACHABLE], id="own-not-ready"),
        pytest.param([{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoSchedule"}],
                     [{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoSchedule"},
                      NOT_READY, UNREACHABLE], id="noschedule-does-not-count"),
    ],
)
def test_default_toleration_seconds(tolerations: list[Any], want: list[Any]) -> None:
    assert apply_defaults(PODS, _pod(tolerations=tolerations))["spec"]["tolerations"] == want


def test_pod_only_fields_stay_out_of_templates() -> None:
    spec = apply_defaults(DEPLOYMENTS, {"spec": {"template": _template()}})["spec"]["template"]["spec"]
    for field in ("tolerations", "enableServiceLinks", "priority", "serviceAccountName", "preemptionPolicy"):
        assert field not in spec


def test_pod_requests_default_to_limits_and_host_ports() -> None:
    pod = _pod(hostNetwork=True)
    pod["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1"}, "requests": {"memory": "1Gi"}}
    pod["spec"]["containers"][0]["ports"] = [{"containerPort": 8080}]
    c = apply_defaults(PODS, pod)["spec"]["containers"][0]
    assert c["resources"] == {"limits": {"cpu": "1"}, "requests": {"memory": "1Gi", "cpu": "1"}}
    assert c["ports"] == [{"containerPort": 8080, "protocol": "TCP", "hostPort": 8080}]


def test_container_probe_env_and_volume_defaults() -> None:
    pod = _pod(volumes=[{"name": "a"}, {"name": "s", "secret": {"secretName": "x"}},
                        {"name": "h", "hostPath": {"path": "/x"}}])
    pod["spec"]["containers"][0].update({
        "livenessProbe": {"httpGet": {"port": 80}},
        "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
    })
    out = apply_defaults(PODS, pod)["spec"]
    c = out["containers"][0]
    assert c["livenessProbe"] == {"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1,
                                  "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3}
    assert c["env"][0]["valueFrom"]["fieldRef"] == {"fieldPath": "metadata.name", "apiVersion": "v1"}
    assert out["volumes"] == [{"name": "a", "emptyDir": {}},
                              {"name": "s", "secret": {"secretName": "x", "defaultMode": 420}},
                              {"name": "h", "hostPath": {"path": "/x", "type": ""}}]


@pytest.mark.parametrize(
    ("image", "policy"),
    [("nginx", "Always"), ("nginx:latest", "Always"), ("nginx:1.25", "IfNotPresent"),
     ("registry:5000/team/app", "Always"), ("registry:5000/team/app:v1", "IfNotPresent"),
     ("nginx@sha256:" + "a" * 64, "IfNotPresent"), ("nginx:latest@sha256:" + "a" * 64, "Always")],
)
def test_image_pull_policy(image: str, policy: str) -> None:
    assert image_pull_policy(image) == policy


def test_job_selector_defaults_generate_selector_and_labels() -> None:
    job = apply_defaults("Job", {"metadata": {"name": "pi"}, "spec": {"template": {"spec": {"containers": []}}}})
    out = job_selector_defaults(job, "uid-1")
    want_labels = {"batch.kubernetes.io/controller-uid": "uid-1", "controller-uid": "uid-1",
                   "batch.kubernetes.io/job-name": "pi", "job-name": "pi"}
    assert out["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": "uid-1"}}
    assert out["spec"]["template"]["metadata"]["labels"] == want_labels
    assert out["metadata"]["labels"] == want_labels
    assert "selector" not in job["spec"]


def test_job_selector_defaults_keep_user_labels_and_manual_selector() -> None:
    job = {"metadata": {"name": "pi", "labels": {"team": "a"}},
           "spec": {"template": {"metadata": {"labels": {"job-name": "custom"}}}}}
    out = job_selector_defaults(job, "u")
    assert out["spec"]["template"]["metadata"]["labels"]["job-name"] == "custom"
    assert out["metadata"]["labels"] == {"team": "a"}
    manual = {"metadata": {"name": "pi"}, "spec": {"manualSelector": True, "selector": {"matchLabels": {"a": "b"}}}}
    assert job_selector_defaults(manual, "u") == manual


# ----------------------------------------------------------------------------- copying: cheap, but never shared


def _rich_pod() -> dict[str, Any]:
    pod = _pod(tolerations=[{"operator": "Exists"}], volumes=[{"name": "v"}])
    pod["spec"]["containers"][0].update({"resources": {"limits": {"cpu": "1"}}, "ports": [{"containerPort": 80}],
                                         "readinessProbe": {"httpGet": {"port": 80}}})
    return pod


def _all_containers(value: Any) -> list[int]:
    """The ids of every dict and list inside ``value``."""
    if isinstance(value, dict):
        return [id(value), *(i for v in value.values() for i in _all_containers(v))]
    if isinstance(value, list):
        return [id(value), *(i for v in value for i in _all_containers(v))]
    return []


def test_output_shares_nothing_with_the_input() -> None:
    pod = _rich_pod()
    before = copy.deepcopy(pod)
    out = apply_defaults(PODS, pod)
    assert pod == before  # the input is untouched
    assert not set(_all_containers(out)) & set(_all_containers(pod))  # and nothing of it lives on in the output
    pod["spec"]["containers"][0]["ports"][0]["containerPort"] = 1
    assert out["spec"]["containers"][0]["ports"][0]["containerPort"] == 80


def test_owned_objects_are_defaulted_in_place() -> None:
    pod = _rich_pod()
    want = apply_defaults(PODS, pod)
    out = apply_defaults(PODS, pod, owned=True)
    assert out is pod
    assert out == want


def test_objects_json_cannot_carry_still_copy() -> None:
    pod = _pod()
    pod["spec"]["containers"][0]["resources"] = {"limits": {"cpu": 2**70}}  # beyond orjson's integers
    out = apply_defaults(PODS, pod)
    assert out["spec"]["containers"][0]["resources"]["requests"] == {"cpu": 2**70}
    assert "requests" not in pod["spec"]["containers"][0]["resources"]


@pytest.mark.parametrize("kind", ["Pod", "Deployment", "Job", "CronJob", "Service", "ConfigMap"])
def test_defaulting_is_idempotent(kind: str) -> None:
    obj: dict[str, Any] = {"spec": {"template": _rich_pod(), "jobTemplate": {"spec": {"template": _rich_pod()}},
                                    **_rich_pod()["spec"], "ports": [{"port": 80}]}}
    once = apply_defaults(kind, obj)
    assert apply_defaults(kind, once) == once


async def test_secret_string_data_is_merged_into_data_and_not_stored(client: Client) -> None:
    body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "data": {"a": "b2xk", "b": "Yg=="}, "stringData": {"a": "new", "c": "ü"}}
    status, created = await client.post("/api/v1/namespaces/default/secrets", body)
    assert status == 201, created
    assert "stringData" not in created
    assert created["data"] == {"a": "bmV3", "b": "Yg==", "c": "w7w="}
