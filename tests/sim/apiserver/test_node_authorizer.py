"""The Node authorizer and NodeRestriction as a kubelet sees them over HTTP: a node user (``system:node:<name>`` in
``system:nodes``, reached here by impersonation) reads only what its pods use and writes only its own objects,
with upstream's reasons in the 403s."""

from __future__ import annotations

from typing import Any

import pytest

from tests.sim.apiserver.conftest import Client, configmap, pod

NODE1 = {"Impersonate-User": "system:node:n1", "Impersonate-Group": "system:nodes"}
NS = "/api/v1/namespaces/default"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
AUTHZ = "/apis/authorization.k8s.io/v1"


def secret(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "data": {"k": "dg=="}}


def cannot(verb: str, resource: str, reason: str, *, namespace: str = "default", user: str = "system:node:n1",
           group: str = "") -> str:
    scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    return f'User "{user}" cannot {verb} resource "{resource}" in API group "{group}" {scope}: {reason}'


async def created(client: Client, path: str, body: dict[str, Any], **kw: Any) -> dict[str, Any]:
    code, out = await client.post(path, body, **kw)
    assert code == 201, out
    return dict(out)


@pytest.fixture
async def cluster(client: Client) -> Client:
    """Nodes n1 and n2; pod p1 on n1 using secret s1, configmap c1, claim claim1 and ServiceAccount robot; pod p2 on
    n2 using secret s2; claim1 bound to volume pv1, which refers to secret pv-secret."""
    for name in ("n1", "n2"):
        await created(client, "/api/v1/nodes", {"metadata": {"name": name, "labels": {"team": "a"}}})
    for name in ("s1", "s2", "s3", "pv-secret"):
        await created(client, f"{NS}/secrets", secret(name))
    await created(client, f"{NS}/configmaps", configmap("c1"))
    await created(client, f"{NS}/configmaps", configmap("c2"))
    await created(client, f"{NS}/serviceaccounts", {"metadata": {"name": "robot"}})
    await created(client, f"{NS}/persistentvolumeclaims", {
        "metadata": {"name": "claim1"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    await created(client, "/api/v1/persistentvolumes", {
        "metadata": {"name": "pv1"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "claimRef": {"namespace": "default", "name": "claim1"},
                 "csi": {"driver": "d", "volumeHandle": "h",
                         "nodePublishSecretRef": {"name": "pv-secret", "namespace": "default"}}}})
    await created(client, "/api/v1/persistentvolumes", {
        "metadata": {"name": "pv2"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/x"}}})
    p1 = pod("p1", node="n1", serviceAccountName="robot", volumes=[
        {"name": "s", "secret": {"secretName": "s1"}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "claim1"}}])
    p1["spec"]["containers"][0]["envFrom"] = [{"configMapRef": {"name": "c1"}}]
    await created(client, f"{NS}/pods", p1)
    p2 = pod("p2", node="n2")
    p2["spec"]["containers"][0]["env"] = [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "s2", "key": "k"}}}]
    await created(client, f"{NS}/pods", p2)
    return client


# --- the Node authorizer ---------------------------------------------------------------------------------


async def test_a_node_reads_the_secrets_and_configmaps_its_pods_use_and_no_others(cluster: Client) -> None:
    for path in (f"{NS}/secrets/s1", f"{NS}/configmaps/c1", f"{NS}/secrets/pv-secret"):
        code, body = await cluster.get(path, headers=NODE1)
        assert code == 200, (path, body)
    code, body = await cluster.get(f"{NS}/secrets/s2", headers=NODE1)
    assert code == 403
    assert body["message"] == 'secrets "s2" is forbidden: ' + cannot(
        "get", "secrets", "no relationship found between node 'n1' and this object")
    code, body = await cluster.get(f"{NS}/configmaps/c2", headers=NODE1)
    assert code == 403
    assert body["details"] == {"name": "c2", "kind": "configmaps"}


async def test_a_node_lists_a_secret_only_by_name(cluster: Client) -> None:
    code, body = await cluster.get(f"{NS}/secrets", headers=NODE1)
    assert code == 403
    assert body["message"] == "secrets is forbidden: " + cannot("list", "secrets", "No Object name found")
    code, body = await cluster.get(f"{NS}/secrets", headers=NODE1, params={"fieldSelector": "metadata.name=s1"})
    assert code == 200, body
    assert [s["metadata"]["name"] for s in body["items"]] == ["s1"]
    code, body = await cluster.delete(f"{NS}/secrets/s1", headers=NODE1)
    assert code == 403
    assert body["message"].endswith(": can only read resources of this type")


async def test_volumes_and_claims_are_reachable_through_the_pods_claims(cluster: Client) -> None:
    assert (await cluster.get(f"{NS}/persistentvolumeclaims/claim1", headers=NODE1))[0] == 200
    assert (await cluster.get("/api/v1/persistentvolumes/pv1", headers=NODE1))[0] == 200
    code, body = await cluster.get("/api/v1/persistentvolumes/pv2", headers=NODE1)
    assert code == 403
    assert body["message"] == 'persistentvolumes "pv2" is forbidden: ' + cannot(
        "get", "persistentvolumes", "no relationship found between node 'n1' and this object", namespace="")
    code, body = await cluster.get(f"{NS}/persistentvolumeclaims", headers=NODE1)
    assert code == 403
    assert body["message"].endswith(": can only get individual resources of this type")


async def test_a_node_sees_its_own_node_and_pods_only(cluster: Client) -> None:
    assert (await cluster.get("/api/v1/nodes/n1", headers=NODE1))[0] == 200
    code, body = await cluster.get("/api/v1/nodes/n2", headers=NODE1)
    assert code == 403
    assert body["message"] == 'nodes "n2" is forbidden: ' + cannot(
        "get", "nodes", "node 'n1' cannot read 'n2', only its own Node object", namespace="")
    code, body = await cluster.get("/api/v1/nodes", headers=NODE1)
    assert body["message"] == "nodes is forbidden: " + cannot(
        "list", "nodes", "node 'n1' cannot read all nodes, only its own Node object", namespace="")
    code, body = await cluster.get("/api/v1/pods", headers=NODE1, params={"fieldSelector": "spec.nodeName=n1"})
    assert code == 200, body
    assert [p["metadata"]["name"] for p in body["items"]] == ["p1"]
    code, body = await cluster.get("/api/v1/pods", headers=NODE1)
    assert code == 403
    assert body["message"] == "pods is forbidden: " + cannot(
        "list", "pods", "can only list/watch pods with spec.nodeName field selector", namespace="")
    assert (await cluster.get(f"{NS}/pods/p1", headers=NODE1))[0] == 200
    assert (await cluster.get(f"{NS}/pods/p2", headers=NODE1))[0] == 403


async def test_the_static_node_rules_decide_the_rest(cluster: Client) -> None:
    # services are readable by every node (the system:node rules); deployments are not.
    assert (await cluster.get(f"{NS}/services", headers=NODE1))[0] == 200
    code, body = await cluster.get("/apis/apps/v1/namespaces/default/deployments", headers=NODE1)
    assert code == 403
    assert body["message"] == 'deployments.apps is forbidden: User "system:node:n1" cannot list resource ' \
        '"deployments" in API group "apps" in the namespace "default"'


async def test_a_user_named_like_a_node_without_the_group_is_not_a_node(cluster: Client) -> None:
    code, body = await cluster.get(f"{NS}/secrets/s1", headers={"Impersonate-User": "system:node:n1"})
    assert code == 403
    assert body["message"] == 'secrets "s1" is forbidden: ' + cannot("get", "secrets", "").removesuffix(": ")
    code, body = await cluster.get(f"{NS}/secrets/s1", headers={"Impersonate-User": "system:node:",
                                                                  "Impersonate-Group": "system:nodes"})
    assert body["message"] == 'secrets "s1" is forbidden: ' + cannot(
        "get", "secrets", 'unknown node for user "system:node:"', user="system:node:")


async def test_a_node_has_no_rule_list_of_its_own(cluster: Client) -> None:
    code, body = await cluster.post(f"{AUTHZ}/selfsubjectrulesreviews", {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {"namespace": "default"}},
        headers=NODE1)
    assert code == 201, body
    assert body["status"]["incomplete"] is True
    assert body["status"]["evaluationError"] == "node authorizer does not support user rule resolution"


# --- NodeRestriction ----------------------------------------------------------------------------------------


async def test_a_node_writes_only_its_own_node(cluster: Client) -> None:
    code, body = await cluster.patch("/api/v1/nodes/n1", {"metadata": {"labels": {"kubernetes.io/hostname": "n1",
                                                                                  "team": "b"}}}, headers=NODE1)
    assert code == 200, body
    code, body = await cluster.patch("/api/v1/nodes/n2", {"metadata": {"labels": {"team": "b"}}}, headers=NODE1)
    assert code == 403
    assert body["message"] == 'nodes "n2" is forbidden: node "n1" is not allowed to modify node "n2"'
    code, body = await cluster.patch("/api/v1/nodes/n1", {"metadata": {"labels": {
        "node-role.kubernetes.io/control-plane": "", "node-restriction.kubernetes.io/pool": "x"}}}, headers=NODE1)
    assert code == 403
    assert body["message"] == ('nodes "n1" is forbidden: is not allowed to modify labels: '
                               "node-restriction.kubernetes.io/pool, node-role.kubernetes.io/control-plane")
    code, body = await cluster.patch("/api/v1/nodes/n1", {"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}},
                                     headers=NODE1)
    assert code == 403
    assert body["message"] == 'nodes "n1" is forbidden: node "n1" is not allowed to modify taints'
    code, body = await cluster.patch("/api/v1/nodes/n1/status", {"status": {"capacity": {"cpu": "4"}}},
                                     headers=NODE1)
    assert code == 200, body


async def test_a_node_registers_itself_without_restricted_labels(client: Client) -> None:
    n3 = {"Impersonate-User": "system:node:n3", "Impersonate-Group": "system:nodes"}
    code, body = await client.post("/api/v1/nodes", {"metadata": {"name": "n3", "labels": {
        "kubernetes.io/hostname": "n3", "node-role.kubernetes.io/worker": ""}}}, headers=n3)
    assert code == 403
    assert body["message"] == ('nodes "n3" is forbidden: node "n3" is not allowed to set the following labels: '
                               "node-role.kubernetes.io/worker")
    code, body = await client.post("/api/v1/nodes", {"metadata": {"name": "n3", "labels": {
        "kubernetes.io/hostname": "n3", "node.kubernetes.io/instance-type": "m"}}}, headers=n3)
    assert code == 201, body


async def test_a_node_creates_only_mirror_pods_owned_by_itself(cluster: Client) -> None:
    code, body = await cluster.post(f"{NS}/pods", pod("plain", node="n1"), headers=NODE1)
    assert code == 403
    assert body["message"] == ('pods "plain" is forbidden: pod does not have "kubernetes.io/config.mirror" '
                               'annotation, node "n1" can only create mirror pods')
    _, n1 = await cluster.get("/api/v1/nodes/n1")
    mirror = pod("static-web-n1", node="n1")
    mirror["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "hash"}
    code, body = await cluster.post(f"{NS}/pods", mirror, headers=NODE1)
    assert code == 403
    assert body["message"].endswith('node "n1" can only create pods with an owner reference set to itself')
    owner = {"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": n1["metadata"]["uid"], "controller": True}
    mirror["metadata"]["ownerReferences"] = [owner]
    mirror["spec"]["volumes"] = [{"name": "s", "secret": {"secretName": "s1"}}]
    code, body = await cluster.post(f"{NS}/pods", mirror, headers=NODE1)
    assert code == 403
    assert body["message"] == 'pods "static-web-n1" is forbidden: node "n1" can not create pods that reference secrets'
    del mirror["spec"]["volumes"]
    code, body = await cluster.post(f"{NS}/pods", mirror, headers=NODE1)
    assert code == 201, body
    other = pod("static-web-n2", node="n2")
    other["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "hash"}
    code, body = await cluster.post(f"{NS}/pods", other, headers=NODE1)
    assert body["message"].endswith('node "n1" can only create pods with spec.nodeName set to itself')


async def test_a_node_deletes_evicts_and_reports_on_its_own_pods_only(cluster: Client) -> None:
    code, body = await cluster.delete(f"{NS}/pods/p2", headers=NODE1)
    assert code == 403
    assert body["message"] == 'pods "p2" is forbidden: node "n1" can only delete pods with spec.nodeName set to itself'
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p2"}}
    code, body = await cluster.post(f"{NS}/pods/p2/eviction", eviction, headers=NODE1)
    assert code == 403
    assert body["message"] == 'pods "p2" is forbidden: node n1 can only evict pods with spec.nodeName set to itself'
    code, body = await cluster.patch(f"{NS}/pods/p2/status", {"status": {"message": "x"}}, headers=NODE1)
    assert code == 403
    assert body["message"] == ('pods "p2" is forbidden: node "n1" can only update pod status for pods with '
                               "spec.nodeName set to itself")
    code, body = await cluster.patch(f"{NS}/pods/p1/status", {"metadata": {"labels": {"x": "y"}}}, headers=NODE1)
    assert code == 403
    assert body["message"] == 'pods "p1" is forbidden: node "n1" cannot update labels through pod status'
    code, body = await cluster.patch(f"{NS}/pods/p1/status", {"status": {"message": "running"}}, headers=NODE1)
    assert code == 200, body
    code, body = await cluster.patch(f"{NS}/pods/p1", {"metadata": {"labels": {"x": "y"}}}, headers=NODE1)
    assert code == 403  # the Node authorizer allows no plain pod update
    code, body = await cluster.delete(f"{NS}/pods/p1", headers=NODE1)
    assert code == 200, body


async def test_a_node_takes_tokens_only_for_its_own_pods(cluster: Client) -> None:
    _, p1 = await cluster.get(f"{NS}/pods/p1")
    request: dict[str, Any] = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                               "spec": {"audiences": ["api"]}}
    code, body = await cluster.post(f"{NS}/serviceaccounts/robot/token", request, headers=NODE1)
    assert code == 403
    assert body["message"] == 'serviceaccounts "robot" is forbidden: node requested token not bound to a pod'
    request["spec"]["boundObjectRef"] = {"apiVersion": "v1", "kind": "Pod", "name": "p1",
                                         "uid": p1["metadata"]["uid"]}
    code, body = await cluster.post(f"{NS}/serviceaccounts/robot/token", request, headers=NODE1)
    assert code == 201, body
    code, body = await cluster.post(f"{NS}/serviceaccounts/default/token", request, headers=NODE1)
    assert code == 403
    assert body["message"].endswith(": no relationship found between node 'n1' and this object")


async def test_a_node_holds_only_its_own_lease(cluster: Client) -> None:
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "n1"},
             "spec": {"holderIdentity": "n1"}}
    assert (await cluster.post(LEASES, lease, headers=NODE1))[0] == 201
    code, body = await cluster.post(LEASES, {**lease, "metadata": {"name": "n2"}}, headers=NODE1)
    assert code == 403
    assert body["message"] == ('leases.coordination.k8s.io "n2" is forbidden: can only access node lease with the '
                               "same name as the requesting node")
    code, body = await cluster.get("/apis/coordination.k8s.io/v1/namespaces/default/leases/n1", headers=NODE1)
    assert code == 403
    assert body["message"].endswith(': can only access leases in the "kube-node-lease" system namespace')


async def test_a_node_changes_only_capacity_and_conditions_of_a_claims_status(cluster: Client) -> None:
    path = f"{NS}/persistentvolumeclaims/claim1/status"
    code, body = await cluster.patch(path, {"status": {"capacity": {"storage": "2Gi"}}}, headers=NODE1)
    assert code == 200, body
    code, body = await cluster.patch(path, {"status": {"phase": "Lost"}}, headers=NODE1)
    assert code == 403
    assert body["message"].startswith('persistentvolumeclaims "claim1" is forbidden: node "n1" is not allowed to '
                                      "update fields other than status.capacity and status.conditions")
