"""The RBAC table against what the controllers really do: every implemented controller runs against an
in-process kube-sim while workloads roll out, and every API request they send (as the apiserver's
RequestInfo names it: verb, group, resource/subresource, name) must be allowed by the ClusterRole the chart
gives them (``rbac.rules_for``). The test objects are written in-process, so only the controllers' (and
their manager's event writer's) requests reach the HTTP server."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from aiohttp import web

from controller_manager.api.resources import (
    CERTIFICATESIGNINGREQUESTS,
    DAEMONSETS,
    DEPLOYMENTS,
    ENDPOINTS,
    ENDPOINTSLICES,
    HORIZONTALPODAUTOSCALERS,
    JOBS,
    NODES,
    PERSISTENTVOLUMECLAIMS,
    PERSISTENTVOLUMES,
    PODS,
    REPLICATIONCONTROLLERS,
    RESOURCEQUOTAS,
    SECRETS,
    SERVICEACCOUNTS,
    SERVICECIDRS,
    SERVICES,
    STATEFULSETS,
    STORAGECLASSES,
    VOLUMEATTRIBUTESCLASSES,
)
from controller_manager.controllers import ALL
from controller_manager.manager.rbac import PolicyRule, rules_for
from controller_manager.sim.apiserver import requestinfo
from controller_manager.sim.apiserver.requestinfo import RequestInfo
from tests.controllers.certificates.pki import csr_object, csr_pem, new_ca
from tests.controllers.harness import controller_harness, wait_for
from tests.controllers.serviceaccounttoken.test_e2e import key_pair

NS = "default"


def allows(rules: Iterable[PolicyRule], info: RequestInfo) -> bool:
    """RBAC's rule matching (``pkg/apis/rbac/v1/evaluation_helpers.go``) for a resource request."""
    resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
    for rule in rules:
        if info.verb not in rule.verbs and "*" not in rule.verbs:
            continue
        if info.group not in rule.api_groups and "*" not in rule.api_groups:
            continue
        if not any(r in ("*", resource) or (r.startswith("*/") and info.subresource and r[2:] == info.subresource)
                   for r in rule.resources):
            continue
        if rule.resource_names and info.name not in rule.resource_names:
            continue
        return True
    return False


def _template(name: str) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "c", "image": "registry.example/app:1"}]}}


async def test_controllers_only_send_requests_their_rbac_allows(tmp_path: Path) -> None:
    names = sorted(kind.name for kind in ALL)
    rules = rules_for(names)
    seen: list[RequestInfo] = []

    def record(request: web.Request) -> float:
        seen.append(requestinfo.parse(request.method, request.path, request.query))
        return 0.0  # no delay: the latency hook is only used to observe each HTTP request

    cert_file, key_file, _ = new_ca(tmp_path)
    sa_key_file, _ = key_pair(tmp_path)
    signing = {"cluster_signing_cert_file": str(cert_file), "cluster_signing_key_file": str(key_file),
               "horizontal_pod_autoscaler_sync_period": 0.5, "service_account_private_key_file": str(sa_key_file)}
    async with controller_harness(*ALL, nodes=2, start=False, options=signing) as h:
        h.cluster.faults.set_latency(record)
        await h.start()
        api = h.cluster.api
        api.create(DEPLOYMENTS, {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                                 "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                                          "template": _template("web")}}, NS)
        api.create(DAEMONSETS, {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
                                "spec": {"selector": {"matchLabels": {"app": "agent"}},
                                         "template": _template("agent")}}, NS)
        job_template = _template("batch")
        job_template["spec"]["restartPolicy"] = "Never"
        job_template["metadata"]["annotations"] = {"sim.controller-manager.io/run-seconds": "0"}
        api.create(JOBS, {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once"},
                          "spec": {"template": job_template, "ttlSecondsAfterFinished": 3600}}, NS)
        api.create(SERVICES, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                              "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}, NS)
        api.create(STATEFULSETS, {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
                                  "spec": {"replicas": 2, "serviceName": "db",
                                           "selector": {"matchLabels": {"app": "db"}}, "template": _template("db"),
                                           "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                                               "accessModes": ["ReadWriteOnce"],
                                               "resources": {"requests": {"storage": "1Gi"}}}}]}}, NS)
        # Volumes for the StatefulSet's claims (no provisioner here): the scheduler binds its pods only once the
        # persistentvolume-binder has bound the claims to them.
        for i in range(2):
            api.create(PERSISTENTVOLUMES, {"apiVersion": "v1", "kind": "PersistentVolume",
                                           "metadata": {"name": f"data-{i}"},
                                           "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                                                    "csi": {"driver": "csi.example.com", "volumeHandle": f"v{i}"}}})

        api.create(REPLICATIONCONTROLLERS, {"apiVersion": "v1", "kind": "ReplicationController",
                                            "metadata": {"name": "legacy"},
                                            "spec": {"replicas": 2, "selector": {"app": "legacy"},
                                                     "template": _template("legacy")}}, NS)
        # a selector-less Service with hand-written Endpoints: the mirroring controller's slices
        api.create(SERVICES, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "manual"},
                              "spec": {"ports": [{"port": 80}]}}, NS)
        api.create(ENDPOINTS, {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "manual"},
                               "subsets": [{"addresses": [{"ip": "10.9.0.1"}], "ports": [{"port": 80}]}]}, NS)
        # an HPA on the Deployment reading every kind of metric (none can be computed: the Deployment stays put)
        api.create(HORIZONTALPODAUTOSCALERS, {
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "minReplicas": 1, "maxReplicas": 2, "metrics": [
                         {"type": "Resource", "resource": {"name": "cpu", "target": {
                             "type": "Utilization", "averageUtilization": 50}}},
                         {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {
                             "type": "AverageValue", "averageValue": "1"}}},
                         {"type": "External", "external": {"metric": {"name": "queue"}, "target": {
                             "type": "Value", "value": "1"}}}]}}, NS)
        api.create(SERVICEACCOUNTS, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}}, NS)
        api.create(SECRETS, {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
                             "metadata": {"name": "robot-token",
                                          "annotations": {"kubernetes.io/service-account.name": "robot"}}}, NS)
        api.create(RESOURCEQUOTAS, {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "counts"},
                                    "spec": {"hard": {"pods": "100", "count/deployments.apps": "10"}}}, NS)

        async def settled() -> bool:
            deployment = api.get(DEPLOYMENTS, NS, "web")
            rc = api.get(REPLICATIONCONTROLLERS, NS, "legacy")
            daemonset = api.get(DAEMONSETS, NS, "agent")
            job = api.get(JOBS, NS, "once")
            statefulset = api.get(STATEFULSETS, NS, "db")
            slices, _ = api.list(ENDPOINTSLICES, NS)
            endpoints, _ = api.list(ENDPOINTS, NS)
            mirrored = [s for s in slices if (s["metadata"].get("labels") or {}).get(
                "endpointslice.kubernetes.io/managed-by") == "endpointslicemirroring-controller.k8s.io"]
            default_cidr = api.get(SERVICECIDRS, None, "kubernetes")
            checks = {
                "endpointslice-controller": sum(len(s.get("endpoints") or ()) for s in slices
                                                if s not in mirrored) == 2,
                "endpointslice-mirroring-controller": len(mirrored) == 1,
                "service-cidr-controller": "networking.k8s.io/service-cidr-finalizer" in (
                    default_cidr["metadata"].get("finalizers") or ()) and "Service CIDR is ready" in str(
                    (default_cidr.get("status") or {}).get("conditions")),
                "endpoints-controller": sum(len(s.get("addresses") or ()) for e in endpoints
                                            if e["metadata"]["name"] != "manual"
                                            for s in e.get("subsets") or ()) == 2,
                "statefulset-controller": (statefulset.get("status") or {}).get("readyReplicas") == 2,
                "deployment-controller": (deployment.get("status") or {}).get("updatedReplicas") == 2,
                "daemonset-controller": (daemonset.get("status") or {}).get("currentNumberScheduled") == 2,
                "job-controller": (job.get("status") or {}).get("succeeded") == 1,
                "replicationcontroller-controller": (rc.get("status") or {}).get("readyReplicas") == 2,
                "horizontal-pod-autoscaler-controller": bool(
                    (api.get(HORIZONTALPODAUTOSCALERS, NS, "web").get("status") or {}).get("conditions")),
                "serviceaccount-token-controller": "token" in (api.get(SECRETS, NS, "robot-token").get("data") or {}),
                "resourcequota-controller": "count/deployments.apps" in (
                    api.get(RESOURCEQUOTAS, NS, "counts").get("status") or {}).get("used", {}),
            }
            return all(ok for name, ok in checks.items() if name in names)

        await wait_for(settled, timeout=30, what="workloads to converge")
        # a rolling update exercises the deployment's ReplicaSet writes and scale-down deletes
        deployment = api.get(DEPLOYMENTS, NS, "web")
        updated = {**deployment, "spec": {**deployment["spec"], "template": {
            **deployment["spec"]["template"],
            "spec": {"containers": [{"name": "c", "image": "registry.example/app:2"}]}}}}
        api.update(DEPLOYMENTS, updated)

        async def rolled() -> bool:
            status = api.get(DEPLOYMENTS, NS, "web").get("status") or {}
            done = status.get("updatedReplicas") == 2 and status.get("replicas") == 2
            return done or "deployment-controller" not in names

        await wait_for(rolled, timeout=30, what="the rollout to finish")
        # a node whose TTL annotation is off makes the ttl-controller patch it back
        node_name = sorted(n["metadata"]["name"] for n in api.list(NODES, None)[0])[0]
        node = api.get(NODES, None, node_name)
        api.update(NODES, {**node, "metadata": {**node["metadata"], "annotations": {
            **(node["metadata"].get("annotations") or {}), "node.alpha.kubernetes.io/ttl": "5"}}})

        async def ttl_reset() -> bool:
            annotations = api.get(NODES, None, node_name)["metadata"].get("annotations") or {}
            return annotations.get("node.alpha.kubernetes.io/ttl") == "0" or "ttl-controller" not in names

        await wait_for(ttl_reset, timeout=30, what="the node's TTL annotation to be reset")
        # a kubelet client CSR from a cluster admin: SubjectAccessReview, /approval, then /status with the cert
        csr = csr_object("node-csr", csr_pem("system:node:n"), "kubernetes.io/kube-apiserver-client-kubelet",
                         ["digital signature", "client auth"], username="admin")
        csr["spec"]["groups"] = ["system:masters", "system:authenticated"]  # type: ignore[index]
        api.create(CERTIFICATESIGNINGREQUESTS, csr)

        async def issued() -> bool:
            status = api.get(CERTIFICATESIGNINGREQUESTS, None, "node-csr").get("status") or {}
            signing_runs = {"certificatesigningrequest-approving-controller",
                            "certificatesigningrequest-signing-controller"} <= set(names)
            return bool(status.get("certificate")) or not signing_runs

        await wait_for(issued, timeout=30, what="the CSR to be approved and signed")
        await _exercise_storage(api, names)
        h.cluster.faults.set_latency(None)

    resource_requests = [info for info in seen if info.is_resource]
    denied = sorted({(i.verb, i.group, i.resource, i.subresource) for i in resource_requests if not allows(rules, i)})
    assert denied == []
    # the check has teeth: the manager's own rules alone would refuse most of these requests
    assert [i for i in resource_requests if not allows(rules_for([]), i)]
    verbs = {(i.verb, i.resource) for i in resource_requests}
    # not vacuous: the controllers listed, watched and wrote through the recorded HTTP server
    assert {("list", "pods"), ("watch", "pods"), ("create", "events")} <= verbs
    if "deployment-controller" in names:
        assert ("create", "replicasets") in verbs
    if "replicaset-controller" in names:
        assert ("create", "pods") in verbs
    if "endpointslice-controller" in names:
        assert ("create", "endpointslices") in verbs
    if "replicationcontroller-controller" in names:
        assert ("update", "replicationcontrollers") in verbs
    if "ttl-controller" in names:
        assert ("patch", "nodes") in verbs
    if "statefulset-controller" in names:
        assert ("create", "persistentvolumeclaims") in verbs
    if "endpoints-controller" in names:
        assert {("create", "endpoints"), ("update", "endpoints")} <= verbs
    if "certificatesigningrequest-signing-controller" in names:
        assert ("update", "certificatesigningrequests") in verbs
    if "certificatesigningrequest-approving-controller" in names:
        assert ("create", "subjectaccessreviews") in verbs
    if "resourcequota-controller" in names:
        assert ("update", "resourcequotas") in verbs
    if "service-cidr-controller" in names:
        assert ("patch", "servicecidrs") in verbs
    if "horizontal-pod-autoscaler-controller" in names:
        assert ("update", "horizontalpodautoscalers") in verbs
        assert any(i.subresource == "scale" for i in resource_requests)
        assert ("list", "pods") in {(i.verb, i.resource) for i in resource_requests if i.group == "metrics.k8s.io"}
    if "ephemeral-volume-controller" in names:
        assert ("create", "persistentvolumeclaims") in verbs
    if "persistentvolumeclaim-protection-controller" in names:
        assert {("update", "persistentvolumeclaims"), ("list", "pods")} <= verbs
    if "persistentvolume-protection-controller" in names:
        assert ("update", "persistentvolumes") in verbs
    if "volumeattributesclass-protection-controller" in names:
        assert ("update", "volumeattributesclasses") in verbs
    if "persistentvolume-expander-controller" in names:
        assert {("get", "persistentvolumes"), ("patch", "persistentvolumeclaims")} <= verbs
    if "serviceaccount-token-controller" in names:
        assert ("update", "secrets") in verbs


def _gone(api: Any, res: Any, namespace: str | None, name: str) -> bool:
    try:
        api.get(res, namespace, name)
    except Exception:
        return True
    return False


async def _exercise_storage(api: Any, names: list[str]) -> None:
    """A generic ephemeral volume's claim; a Bound claim's Unused condition; an unused claim, volume and
    VolumeAttributesClass deleted through their protection finalizers."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "scratch"}, "spec": {
        "containers": [{"name": "c", "image": "registry.example/app:1"}],
        "volumes": [{"name": "tmp", "ephemeral": {"volumeClaimTemplate": {"spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}}]}}
    api.create(PODS, pod, NS)
    api.create(VOLUMEATTRIBUTESCLASSES, {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttributesClass",
                                         "metadata": {"name": "gold"}, "driverName": "csi.example.com"})
    # Pre-bound both ways, so the persistentvolume-binder binds the pair (the ephemeral claim, which fits any
    # free 1Gi volume, cannot take this one) and the claim goes Bound.
    api.create(PERSISTENTVOLUMES, {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-loose"},
                                   "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                                            "storageClassName": "", "hostPath": {"path": "/tmp/x"},
                                            "claimRef": {"namespace": NS, "name": "loose"}}})
    api.create(PERSISTENTVOLUMECLAIMS, {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "loose"},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": "pv-loose",
                 "resources": {"requests": {"storage": "1Gi"}}}}, NS)

    async def storage_settled() -> bool:
        checks = {
            "ephemeral-volume-controller": not _gone(api, PERSISTENTVOLUMECLAIMS, NS, "scratch-tmp"),
            "persistentvolumeclaim-protection-controller": any(
                c.get("type") == "Unused" for c in (api.get(PERSISTENTVOLUMECLAIMS, NS, "loose").get("status") or {})
                .get("conditions") or ()),
            "volumeattributesclass-protection-controller": "kubernetes.io/vac-protection" in (
                api.get(VOLUMEATTRIBUTESCLASSES, None, "gold")["metadata"].get("finalizers") or ()),
        }
        return all(ok for name, ok in checks.items() if name in names)

    await wait_for(storage_settled, timeout=30, what="the storage controllers to act")
    api.delete(PERSISTENTVOLUMECLAIMS, NS, "loose")
    api.delete(PERSISTENTVOLUMES, None, "pv-loose")
    api.delete(VOLUMEATTRIBUTESCLASSES, None, "gold")

    async def released() -> bool:
        owners = {"persistentvolumeclaim-protection-controller": (PERSISTENTVOLUMECLAIMS, NS, "loose"),
                  "persistentvolume-protection-controller": (PERSISTENTVOLUMES, None, "pv-loose"),
                  "volumeattributesclass-protection-controller": (VOLUMEATTRIBUTESCLASSES, None, "gold")}
        return all(_gone(api, *where) for name, where in owners.items() if name in names)

    await wait_for(released, timeout=30, what="the protection finalizers to be removed")

    # A CSI-migrated volume's claim grows: the expander reads the volume and annotates the claim via /status.
    api.create(STORAGECLASSES, {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                                "metadata": {"name": "gp2"}, "provisioner": "kubernetes.io/aws-ebs",
                                "allowVolumeExpansion": True})
    grow = api.create(PERSISTENTVOLUMECLAIMS, {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "grow"},
        "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": "pv-grow", "storageClassName": "gp2",
                 "resources": {"requests": {"storage": "1Gi"}}}}, NS)
    api.create(PERSISTENTVOLUMES, {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-grow"},
                                   "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                                            "awsElasticBlockStore": {"volumeID": "vol-1"},
                                            "claimRef": {"namespace": NS, "name": "grow",
                                                         "uid": grow["metadata"]["uid"]}}})
    grow = api.update(PERSISTENTVOLUMECLAIMS, {**grow, "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}}},
                      subresource="status")
    api.update(PERSISTENTVOLUMECLAIMS, {**grow, "spec": {**grow["spec"], "resources": {
        "requests": {"storage": "2Gi"}}}})

    async def annotated() -> bool:
        annotations = api.get(PERSISTENTVOLUMECLAIMS, NS, "grow")["metadata"].get("annotations") or {}
        return "volume.kubernetes.io/storage-resizer" in annotations or "persistentvolume-expander-controller" \
            not in names

    await wait_for(annotated, timeout=30, what="the expander to hand the claim to its resizer")
