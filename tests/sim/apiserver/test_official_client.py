"""Every kind kube-sim serves, read by the official ``kubernetes`` client's typed models and checked against
upstream's OpenAPI schema (the ``kubernetes-validate`` package).

The official client's models reject a response that lacks a field Go always writes (a non-``omitempty``
zero such as ``ReplicaSetStatus.replicas``) or that holds a value of the wrong type, so each kind is read
back in each state a client meets: just created, after a controller wrote its status, and terminating
(deletion requested, a finalizer holding it), as a get, as a list, and as a watch event.
"""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import jsonschema
import kubernetes
import orjson
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from controller_manager.api.resources import BUILTIN, Resource
from tests.sim.apiserver import upstream_schema
from tests.sim.apiserver.conftest import ADMIN, Client

POD_SPEC: dict[str, Any] = {"containers": [{"name": "c", "image": "nginx"}]}
POD_TEMPLATE = {"metadata": {"labels": {"app": "x"}}, "spec": POD_SPEC}
SELECTOR = {"matchLabels": {"app": "x"}}

def ca_pem(ca: bool = True) -> str:
    """A self-signed certificate (a CA's when ``ca``), PEM."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "root")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM).decode()


# A small valid object of each kind, as a user or a controller would first write it.
# A PEM certificate request (CN=alice, P-256), as `openssl req -new` writes one.
CSR_REQUEST = (
    "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0KTUlIS01ISUNBUUF3RURFT01Bd0dBMVVFQXd3RllXeHBZMlV3V1RB"
    "VEJnY3Foa2pPUFFJQkJnZ3Foa2pPUFFNQgpCd05DQUFSVDU5V2dkVFpmOERZa2lUY21mT0VnSXpmdUYwYXBqN1hJcHhBV2lpL3Vj"
    "UUZpcGZGVkFyUWt0KzVZCjJBM2VyN2dvdEZONVhneE1DOUVRQU8xbDZFckhvQUF3Q2dZSUtvWkl6ajBFQXdJRFNBQXdSUUlnUHBy"
    "NStkWmUKYkljRlowWHFFaC9tMzRkWEZKTzhQem9iWVVPZ1RPRFd3NmdDSVFEdE43elljZHBSVkFxV1Z0WjQ2WWN6NGxYRgpJcUhB"
    "MmVLa0VBQVRFVWRrQ1E9PQotLS0tLUVORCBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0K"
)
ADMISSION_RULE = {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}
WEBHOOK = {"name": "check.example.com", "clientConfig": {"url": "https://hook.example.com/"},
           "rules": [ADMISSION_RULE], "sideEffects": "None", "admissionReviewVersions": ["v1"]}
OBJECTS: dict[str, dict[str, Any]] = {
    "Namespace": {},
    "Node": {},
    "Pod": {"spec": POD_SPEC},
    "Event": {"involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"}, "reason": "Started",
              "message": "started", "type": "Normal"},
    "Service": {"spec": {"selector": {"app": "x"}, "ports": [{"port": 80}]}},
    "Endpoints": {"subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80}]}]},
    "ConfigMap": {"data": {"a": "b"}},
    "Secret": {"stringData": {"a": "b"}},
    "ServiceAccount": {},
    "PersistentVolumeClaim": {"spec": {"accessModes": ["ReadWriteOnce"],
                                       "resources": {"requests": {"storage": "1Gi"}}}},
    "Deployment": {"spec": {"selector": SELECTOR, "template": POD_TEMPLATE}},
    "ReplicaSet": {"spec": {"replicas": 0, "selector": SELECTOR, "template": POD_TEMPLATE}},
    "DaemonSet": {"spec": {"selector": SELECTOR, "template": POD_TEMPLATE}},
    "StatefulSet": {"spec": {"selector": SELECTOR, "template": POD_TEMPLATE, "serviceName": "x"}},
    "ControllerRevision": {"revision": 1, "data": {"spec": {}}},
    "Job": {"spec": {"template": {"spec": {**POD_SPEC, "restartPolicy": "Never"}}}},
    "CronJob": {"spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {
        "spec": {**POD_SPEC, "restartPolicy": "OnFailure"}}}}}},
    "Lease": {"spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}},
    "EndpointSlice": {"addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"]}], "ports": [{"port": 80}]},
    "PodDisruptionBudget": {"spec": {"minAvailable": 1, "selector": SELECTOR}},
    "ClusterRole": {"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]},
    "Role": {"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]},
    "ClusterRoleBinding": {"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                       "name": "view"},
                           "subjects": [{"kind": "User", "name": "u", "apiGroup": "rbac.authorization.k8s.io"}]},
    "RoleBinding": {"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                    "subjects": [{"kind": "User", "name": "u", "apiGroup": "rbac.authorization.k8s.io"}]},
    "PriorityClass": {"value": 1000},
    "TokenReview": {"spec": {"token": "not-a-token"}},
    "SubjectAccessReview": {"spec": {"user": "u", "resourceAttributes": {"verb": "get", "resource": "pods"}}},
    "SelfSubjectAccessReview": {"spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}},
    "LocalSubjectAccessReview": {"spec": {"user": "u", "resourceAttributes": {"namespace": "default", "verb": "get",
                                                                              "resource": "pods"}}},
    "SelfSubjectRulesReview": {"spec": {"namespace": "default"}},
    "SelfSubjectReview": {},
    "ResourceQuota": {"spec": {"hard": {"pods": "10", "requests.cpu": "4"}}},
    "LimitRange": {"spec": {"limits": [{"type": "Container", "max": {"cpu": "1"}}]}},
    "ReplicationController": {"spec": {"selector": {"app": "x"}, "template": {
        "metadata": {"labels": {"app": "x"}}, "spec": POD_SPEC}}},
    "HorizontalPodAutoscaler": {"spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                                            "name": "web"}, "maxReplicas": 3}},
    "PersistentVolume": {"spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                                  "hostPath": {"path": "/data"}}},
    "Ingress": {"spec": {"defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}}},
    "IngressClass": {"spec": {"controller": "example.com/ingress"}},
    "NetworkPolicy": {"spec": {"podSelector": {}, "policyTypes": ["Ingress"]}},
    "StorageClass": {"provisioner": "example.com/disk"},
    "VolumeAttachment": {"spec": {"attacher": "example.com/disk", "nodeName": "n1",
                                  "source": {"persistentVolumeName": "pv1"}}},
    "CSIDriver": {"spec": {"attachRequired": True}},
    "CSINode": {"spec": {"drivers": [{"name": "example.com/disk", "nodeID": "n1"}]}},
    "VolumeAttributesClass": {"driverName": "example.com/disk", "parameters": {"iops": "3000"}},
    "CertificateSigningRequest": {"spec": {"request": CSR_REQUEST, "signerName": "example.com/signer",
                                           "usages": ["digital signature"]}},
    "ValidatingWebhookConfiguration": {"webhooks": [WEBHOOK]},
    "MutatingWebhookConfiguration": {"webhooks": [WEBHOOK]},
    "ValidatingAdmissionPolicy": {"spec": {"matchConstraints": {"resourceRules": [ADMISSION_RULE]},
                                           "validations": [{"expression": "true"}]}},
    "ValidatingAdmissionPolicyBinding": {"spec": {"policyName": "p", "validationActions": ["Deny"]}},
    "ServiceCIDR": {"spec": {"cidrs": ["10.200.0.0/24"]}},
    "ClusterTrustBundle": {"spec": {"trustBundle": ca_pem()}},
    "PodCertificateRequest": {"spec": {"signerName": "example.com/pods", "podName": "p", "podUID": "pod-uid",
                                       "serviceAccountName": "default", "serviceAccountUID": "sa-uid",
                                       "nodeName": "n1", "nodeUID": "node-uid", "maxExpirationSeconds": 86400,
                                       "stubPKCS10Request": "AAAA"}},
    "IPAddress": {"spec": {"parentRef": {"resource": "services", "namespace": "default", "name": "a"}}},
    "PodTemplate": {"template": POD_TEMPLATE},
    "ComponentStatus": {},  # computed, never created: read in test_official_client_reads_computed_kinds
    "RuntimeClass": {"handler": "runc", "overhead": {"podFixed": {"cpu": "10m"}},
                     "scheduling": {"nodeSelector": {"sandbox": "true"}}},
    "CSIStorageCapacity": {"storageClassName": "standard", "capacity": "10Gi",
                           "nodeTopology": {"matchLabels": {"topology.kubernetes.io/zone": "a"}}},
    "DeviceClass": {"spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}},
    "ResourceClaim": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}},
    "ResourceClaimTemplate": {"spec": {"spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}},
    "FlowSchema": {"spec": {"priorityLevelConfiguration": {"name": "workload-low"}, "matchingPrecedence": 5000,
                            "rules": [{"subjects": [{"kind": "Group", "group": {"name": "team"}}],
                                       "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/x"]}]}]}},
    "PriorityLevelConfiguration": {"spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Reject"}}}},
    "APIService": {"spec": {"group": "custom.metrics.k8s.io", "version": "v1beta2", "groupPriorityMinimum": 100,
                            "versionPriority": 200, "insecureSkipTLSVerify": True,
                            "service": {"namespace": "monitoring", "name": "adapter"}}},
    "ResourceSlice": {"spec": {"driver": "gpu.example.com", "pool": {"name": "n1", "resourceSliceCount": 1},
                               "nodeName": "n1", "devices": [{"name": "gpu-0"}]}},
}
EVENTS_V1_OBJECT = {"eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "x/y",
                    "reportingInstance": "i", "action": "Start", "reason": "Started", "type": "Normal",
                    "regarding": {"kind": "Pod", "name": "p", "namespace": "default"}}

# A status as a controller or kubelet first writes it: a few fields set, the rest left at their zero.
STATUSES: dict[str, dict[str, Any]] = {
    "Namespace": {"phase": "Active"},
    "Node": {"conditions": [{"type": "Ready", "status": "True"}], "capacity": {"cpu": "4"}},
    "Pod": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]},
    "Service": {"loadBalancer": {}},
    "PersistentVolumeClaim": {"phase": "Bound"},
    "Deployment": {"observedGeneration": 1, "conditions": [{"type": "Progressing", "status": "True",
                                                            "reason": "NewReplicaSetAvailable"}]},
    "ReplicaSet": {"observedGeneration": 1},
    "DaemonSet": {"observedGeneration": 1},
    "StatefulSet": {"observedGeneration": 1, "currentRevision": "x-1"},
    "Job": {"active": 1, "startTime": "2026-01-01T00:00:00Z"},
    "CronJob": {"lastScheduleTime": "2026-01-01T00:00:00Z"},
    "PodDisruptionBudget": {"observedGeneration": 1, "expectedPods": 1},
    "ResourceQuota": {"hard": {"pods": "10"}, "used": {"pods": "0"}},
    "ReplicationController": {"replicas": 1, "observedGeneration": 1},
    "HorizontalPodAutoscaler": {"currentReplicas": 1, "desiredReplicas": 1},
    "PersistentVolume": {"phase": "Available"},
    "Ingress": {"loadBalancer": {}},
    "VolumeAttachment": {"attached": True},
    "CertificateSigningRequest": {"conditions": [{"type": "Approved", "status": "True", "reason": "R"}]},
    "ResourceClaim": {"allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com",
                                                              "pool": "n1", "device": "gpu-0"}]}},
                      "reservedFor": [{"resource": "pods", "name": "p", "uid": "pod-uid"}]},
    "FlowSchema": {"conditions": [{"type": "Dangling", "status": "False"}]},
    "APIService": {"conditions": [{"type": "Available", "status": "False", "reason": "MissingEndpoints"}]},
    "PodCertificateRequest": {"conditions": [{"type": "Denied", "status": "True", "reason": "Policy", "message": "no",
                                              "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
}


def list_model_name(res: Resource) -> str:
    """The official client's list model (``V1ResourceClaimList``: only the item's name carries a group prefix)."""
    return f"{res.version.capitalize()}{res.kind}List" if res.kind == "ResourceClaim" else f"{model_name(res)}List"


def model_name(res: Resource) -> str:
    """The official client's model class for a resource's kind (``V1Deployment``, ``CoreV1Event``)."""
    if res.kind == "Event":
        return "CoreV1Event" if res.group == "" else "EventsV1Event"
    if res.kind == "ResourceClaim":  # core/v1 has a ResourceClaim of its own (a pod's claim reference)
        return "ResourceV1ResourceClaim"
    return f"{res.version.capitalize()}{res.kind}"


# Kinds whose names have a form of their own (an IPAddress is named by its address).
NAMES = {"IPAddress": "10.250.0.1", "APIService": "v1beta2.custom.metrics.k8s.io"}

# Access reviews must come with empty metadata (a real server answers 422 "must be empty").
_NAMELESS = {"SubjectAccessReview", "SelfSubjectAccessReview", "LocalSubjectAccessReview", "SelfSubjectRulesReview"}


def body_of(res: Resource, name: str) -> dict[str, Any]:
    extra = EVENTS_V1_OBJECT if res.kind == "Event" and res.group else OBJECTS[res.kind]
    meta = {} if res.kind in _NAMELESS else {"name": name}
    return {"apiVersion": res.api_version, "kind": res.kind, "metadata": meta, **extra}


def typed(kind_model: str, data: Any) -> Any:
    """Read ``data`` as the official client reads a response body into its model (raises when it cannot),
    after checking it against upstream's OpenAPI schema of the release (required fields, types, no unknown
    fields; lists are checked item by item, as the package has no list schemas)."""
    if "items" in data:
        for item in data["items"]:
            upstream_schema.check({"apiVersion": data["apiVersion"], "kind": data["kind"].removesuffix("List"),
                                   **item})
    else:
        upstream_schema.check(data)
    api_client = kubernetes.client.ApiClient()
    result = api_client.deserialize(orjson.dumps(data).decode(), kind_model, "application/json")
    assert result is not None
    return result


def served(verb: str) -> list[Resource]:
    return [r for r in BUILTIN if verb in r.verbs]


def path(res: Resource, name: str = "", sub: str = "") -> str:
    return res.path("default" if res.namespaced else None, name or None, sub or None)


async def test_every_kind_is_covered() -> None:
    assert {r.kind for r in BUILTIN} <= set(OBJECTS)


@pytest.mark.parametrize("res", served("create"), ids=lambda r: f"{r.group or 'core'}.{r.kind}")
async def test_official_client_reads_every_kind_in_every_state(client: Client, res: Resource) -> None:
    model = model_name(res)
    name = NAMES.get(res.kind, "obj-1")
    status, created = await client.post(path(res), body_of(res, name))
    assert status in (200, 201), created
    typed(model, created)
    if "get" not in res.verbs:
        return  # a review: its answer is all there is to read

    status, got = await client.get(path(res, name))
    assert status == 200, got
    typed(model, got)

    if "status" in res.subresources and res.kind in STATUSES:
        status, written = await client.put(path(res, name, "status"), {**got, "status": STATUSES[res.kind]})
        assert status == 200, written
        typed(model, written)

    status, listed = await client.get(path(res))
    assert status == 200, listed
    typed(list_model_name(res), listed)

    if res.kind != "Namespace":  # a namespace's deletion is the namespace controller's to finish
        status, meta = await client.patch(path(res, name), {"metadata": {"finalizers": ["example.com/hold"]}})
        assert status == 200, meta
        status, deleting = await client.delete(path(res, name))
        assert status in (200, 202), deleting
        status, terminating = await client.get(path(res, name))
        assert status == 200, terminating
        assert terminating["metadata"].get("deletionTimestamp"), terminating
        typed(model, terminating)

    async with client.tc.get(path(res), params={"watch": "1", "resourceVersion": "0"},
                             headers=ADMIN) as resp:
        assert resp.status == 200
        event = orjson.loads(await asyncio.wait_for(resp.content.readline(), 10))
    typed(model, event["object"])  # the watch from 0 replays the object first


@pytest.mark.parametrize("res", [r for r in BUILTIN if "create" not in r.verbs and "get" in r.verbs],
                         ids=lambda r: f"{r.group or 'core'}.{r.kind}")
async def test_official_client_reads_computed_kinds(client: Client, res: Resource) -> None:
    status, listed = await client.get(path(res))
    assert status == 200, listed
    typed(list_model_name(res), listed)
    assert listed["items"]
    status, got = await client.get(path(res, listed["items"][0]["metadata"]["name"]))
    assert status == 200, got
    typed(model_name(res), got)


def test_the_schema_check_catches_what_go_would_have_written() -> None:
    """The checks above can fail: a status missing a non-omitempty field, or an unknown field, is rejected."""
    rs: dict[str, Any] = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "a"},
          "spec": {"selector": SELECTOR, "template": POD_TEMPLATE}}
    upstream_schema.check(rs)
    with pytest.raises(jsonschema.ValidationError, match="'replicas' is a required property"):
        upstream_schema.check({**rs, "status": {}})
    with pytest.raises(jsonschema.ValidationError, match="replica"):
        upstream_schema.check({**rs, "spec": {**rs["spec"], "replica": 1}})
    with pytest.raises(ValueError, match="replicas"):
        kubernetes.client.ApiClient().deserialize(orjson.dumps({**rs, "status": {}}).decode(), "V1ReplicaSet",
                                                  "application/json")
