"""The Node authorizer (plugin/pkg/auth/authorizer/node): what a kubelet, user ``system:node:<name>`` in group
``system:nodes``, may do, decided before RBAC (kube-apiserver's ``--authorization-mode=Node,RBAC``).

Guarantees:
- Anyone else gets no opinion (RBAC decides alone). A node user is one named ``system:node:<name>`` in group
  ``system:nodes``; ``system:node:`` with no name gets no opinion with ``unknown node for user "..."``.
- Secrets and ConfigMaps: get/list/watch of one named object (a list or watch names it by a ``metadata.name``
  field selector), only when a pod bound to the node refers to it (a Secret also through a PersistentVolume
  that a pod's claim is bound to); PersistentVolumeClaims, PersistentVolumes and VolumeAttachments: get only,
  related the same way (pod -> claim -> volume; an attachment by its ``spec.nodeName``); a PVC's status:
  update/patch when related; ServiceAccounts: create of the ``token`` subresource for one a bound pod runs as.
  Leases: get/create/update/patch/delete in ``kube-node-lease`` of the node's own name (any name on create,
  which NodeRestriction checks); CSINodes likewise, cluster-wide. Nodes: create/update/patch (status too)
  allowed, NodeRestriction limits them to the node's own; get/list/watch only of its own Node. Pods: get of a
  bound pod, list/watch with a ``spec.nodeName=<node>`` field selector (or of one related named pod),
  create/delete and status update/patch and eviction allowed (NodeRestriction limits them).
- Everything else is allowed by the rules of the ``system:node`` ClusterRole as upstream defines it (not as
  stored: nodes are not bound to it). Denials carry upstream's reasons ("no relationship found between node
  'n1' and this object", "can only read resources of this type", ...).
- Relationships are worked out from the stored objects at each request rather than from upstream's graph kept
  by informers; the answers are the same, with no informer lag.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from controller_manager.api.resources import (
    CSINODES,
    LEASES,
    NODES,
    PERSISTENTVOLUMECLAIMS,
    PERSISTENTVOLUMES,
    PODS,
    VOLUMEATTACHMENTS,
    Resource,
)
from controller_manager.sim.apiserver import errors
from controller_manager.sim.apiserver.auth.users import User

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.auth.rbac import Attributes
    from controller_manager.sim.apiserver.server import ApiServer

Obj = dict[str, Any]
NODES_GROUP = "system:nodes"
NODE_USER_PREFIX = "system:node:"
NODE_LEASE_NAMESPACE = "kube-node-lease"


def node_identity(user: User) -> tuple[str, bool]:
    """(node name, is a node) as nodeidentifier.NewDefaultNodeIdentifier reads a user."""
    if not user.name.startswith(NODE_USER_PREFIX) or NODES_GROUP not in user.groups:
        return "", False
    return user.name[len(NODE_USER_PREFIX):], True


# --- what a pod refers to (podutil.VisitPodSecretNames / VisitPodConfigmapNames) ---------------------------

_SECRET_REF_VOLUMES = ("cephfs", "cinder", "flexVolume", "rbd", "scaleIO", "iscsi", "storageos")


def _containers(pod: Obj) -> Iterator[Obj]:
    spec = pod.get("spec") or {}
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for c in spec.get(key) or ():
            if isinstance(c, dict):
                yield c


def _name(ref: Any) -> str:
    return str(ref.get("name") or "") if isinstance(ref, dict) else ""


def pod_secret_names(pod: Obj) -> set[str]:
    spec = pod.get("spec") or {}
    out = {_name(r) for r in spec.get("imagePullSecrets") or ()}
    for c in _containers(pod):
        for env in c.get("env") or ():
            out.add(_name(((env or {}).get("valueFrom") or {}).get("secretKeyRef")))
        for src in c.get("envFrom") or ():
            out.add(_name((src or {}).get("secretRef")))
    for vol in spec.get("volumes") or ():
        if not isinstance(vol, dict):
            continue
        out.add(str((vol.get("secret") or {}).get("secretName") or ""))
        out.add(str((vol.get("azureFile") or {}).get("secretName") or ""))
        out.add(_name((vol.get("csi") or {}).get("nodePublishSecretRef")))
        for kind in _SECRET_REF_VOLUMES:
            out.add(_name((vol.get(kind) or {}).get("secretRef")))
        for src in (vol.get("projected") or {}).get("sources") or ():
            out.add(_name((src or {}).get("secret")))
    out.discard("")
    return out


def pod_configmap_names(pod: Obj) -> set[str]:
    spec = pod.get("spec") or {}
    out: set[str] = set()
    for c in _containers(pod):
        for env in c.get("env") or ():
            out.add(_name(((env or {}).get("valueFrom") or {}).get("configMapKeyRef")))
        for src in c.get("envFrom") or ():
            out.add(_name((src or {}).get("configMapRef")))
    for vol in spec.get("volumes") or ():
        if not isinstance(vol, dict):
            continue
        out.add(_name(vol.get("configMap")))
        for src in (vol.get("projected") or {}).get("sources") or ():
            out.add(_name((src or {}).get("configMap")))
    out.discard("")
    return out


def pod_claim_names(pod: Obj) -> set[str]:
    """The PersistentVolumeClaims a pod uses: named ones, and those of its generic ephemeral volumes."""
    out: set[str] = set()
    pod_name = str((pod.get("metadata") or {}).get("name") or "")
    for vol in (pod.get("spec") or {}).get("volumes") or ():
        if not isinstance(vol, dict):
            continue
        claim = str((vol.get("persistentVolumeClaim") or {}).get("claimName") or "")
        if claim:
            out.add(claim)
        if vol.get("ephemeral") is not None:
            out.add(f"{pod_name}-{vol.get('name')}")
    return out


def pv_secret_refs(pv: Obj) -> set[tuple[str, str]]:
    """(namespace, name) of the Secrets a PersistentVolume refers to (VisitPVSecretNames)."""
    spec = pv.get("spec") or {}
    claim_ns = str((spec.get("claimRef") or {}).get("namespace") or "")
    out: set[tuple[str, str]] = set()

    def add(ref: Any, default_ns: str) -> None:
        if isinstance(ref, dict) and ref.get("name"):
            out.add((str(ref.get("namespace") or default_ns), str(ref["name"])))

    csi = spec.get("csi") or {}
    for key in ("controllerPublishSecretRef", "nodeStageSecretRef", "nodePublishSecretRef",
                "controllerExpandSecretRef", "nodeExpandSecretRef"):
        add(csi.get(key), "")
    azure = spec.get("azureFile") or {}
    if azure.get("secretName"):
        out.add((str(azure.get("secretNamespace") or claim_ns or "default"), str(azure["secretName"])))
    for kind in (*_SECRET_REF_VOLUMES, "cephfs"):
        add((spec.get(kind) or {}).get("secretRef"), claim_ns)
    return out


class NodeAuthorizer:
    def __init__(self, api: ApiServer, node_rules: list[Obj], rule_allows: Callable[[Attributes, Obj], bool]) -> None:
        self.api = api
        self.node_rules = node_rules
        self.rule_allows = rule_allows  # the RBAC rule matcher, for the static node rules

    # --- the objects related to a node ---------------------------------------------------------------

    def _objects(self, res: Resource, namespace: str | None = None) -> Iterator[Obj]:
        try:
            store = self.api.store(res)
        except errors.StatusError:
            return
        for stored in store.iter_from(namespace):
            yield stored.obj

    def _pods(self, node: str, namespace: str | None = None) -> Iterator[Obj]:
        for pod in self._objects(PODS, namespace):
            if (pod.get("spec") or {}).get("nodeName") == node:
                yield pod

    def _claims(self, node: str) -> set[tuple[str, str]]:
        return {(str(p["metadata"].get("namespace") or ""), c) for p in self._pods(node) for c in pod_claim_names(p)}

    def _volumes(self, node: str) -> Iterator[Obj]:
        claims = self._claims(node)
        for pv in self._objects(PERSISTENTVOLUMES):
            ref = (pv.get("spec") or {}).get("claimRef") or {}
            if (str(ref.get("namespace") or ""), str(ref.get("name") or "")) in claims:
                yield pv

    def related(self, node: str, resource: str, namespace: str, name: str) -> bool:
        """Whether the object has a path to the node in upstream's graph."""
        if resource == "pods":
            return any(p["metadata"]["name"] == name for p in self._pods(node, namespace))
        if resource == "secrets":
            return any(name in pod_secret_names(p) for p in self._pods(node, namespace)) or \
                any((namespace, name) in pv_secret_refs(pv) for pv in self._volumes(node))
        if resource == "configmaps":
            return any(name in pod_configmap_names(p) for p in self._pods(node, namespace))
        if resource == "persistentvolumeclaims":
            return (namespace, name) in self._claims(node)
        if resource == "persistentvolumes":
            return any(pv["metadata"]["name"] == name for pv in self._volumes(node))
        if resource == "serviceaccounts":
            return any((p.get("spec") or {}).get("serviceAccountName") == name for p in self._pods(node, namespace))
        if resource == "volumeattachments":
            return any(va["metadata"]["name"] == name and (va.get("spec") or {}).get("nodeName") == node
                       for va in self._objects(VOLUMEATTACHMENTS))
        return False

    # --- the decision ------------------------------------------------------------------------------

    def authorize(self, attrs: Attributes) -> tuple[bool, str]:
        """(allowed, reason); not allowed is "no opinion": the next authorizer decides."""
        node, is_node = node_identity(attrs.user)
        if not is_node:
            return False, ""
        if not node:
            return False, f'unknown node for user "{attrs.user.name}"'
        if attrs.resource_request:
            decided = self._subdivided(node, attrs)
            if decided is not None:
                return decided
        return any(self.rule_allows(attrs, rule) for rule in self.node_rules), ""

    def _subdivided(self, node: str, attrs: Attributes) -> tuple[bool, str] | None:
        group, resource, sub, verb = attrs.group, attrs.resource, attrs.subresource, attrs.verb
        if group == "" and resource in ("secrets", "configmaps"):
            if verb not in ("get", "list", "watch"):
                return False, "can only read resources of this type"
            if sub:
                return False, "cannot read subresource"
            if not attrs.namespace:
                return False, "can only read namespaced object of this type"
            return self._related(node, attrs)
        if group == "" and resource == PERSISTENTVOLUMECLAIMS.plural and sub == "status":
            if verb not in ("update", "patch"):
                return False, "can only get/update/patch this type"
            return self._related(node, attrs)
        if (group, resource) in (("", PERSISTENTVOLUMECLAIMS.plural), ("", PERSISTENTVOLUMES.plural),
                                 (VOLUMEATTACHMENTS.group, VOLUMEATTACHMENTS.plural)):
            return self._get(node, attrs)
        if group == "" and resource == "serviceaccounts":
            if verb != "create" or not attrs.name:
                return False, "can only create tokens for individual service accounts"
            if sub != "token":
                return False, "can only create token subresource of serviceaccount"
            return self._related(node, attrs)
        if (group, resource) == (LEASES.group, LEASES.plural):
            if verb not in ("get", "create", "update", "patch", "delete"):
                return False, "can only get, create, update, patch, or delete a node lease"
            if attrs.namespace != NODE_LEASE_NAMESPACE:
                return False, f'can only access leases in the "{NODE_LEASE_NAMESPACE}" system namespace'
            if verb != "create" and attrs.name != node:
                return False, "can only access node lease with the same name as the requesting node"
            return True, ""
        if (group, resource) == (CSINODES.group, CSINODES.plural):
            if verb not in ("get", "create", "update", "patch", "delete"):
                return False, "can only get, create, update, patch, or delete a CSINode"
            if sub:
                return False, "cannot authorize CSINode subresources"
            if verb != "create" and attrs.name != node:
                return False, "can only access CSINode with the same name as the requesting node"
            return True, ""
        if (group, resource) == (NODES.group, NODES.plural):
            return self._node(node, attrs)
        if (group, resource) == (PODS.group, PODS.plural):
            return self._pod(node, attrs)
        return None

    def _related(self, node: str, attrs: Attributes) -> tuple[bool, str]:
        if not attrs.name:
            return False, "No Object name found"
        if self.related(node, attrs.resource, attrs.namespace, attrs.name):
            return True, ""
        return False, f"no relationship found between node '{node}' and this object"

    def _get(self, node: str, attrs: Attributes) -> tuple[bool, str]:
        if attrs.verb != "get":
            return False, "can only get individual resources of this type"
        if attrs.subresource:
            return False, "cannot get subresource"
        return self._related(node, attrs)

    def _node(self, node: str, attrs: Attributes) -> tuple[bool, str]:
        verb = attrs.verb
        if not attrs.subresource:
            if verb in ("create", "update", "patch"):
                return True, ""
            if verb in ("get", "list", "watch"):
                if attrs.name == node:
                    return True, ""
                if not attrs.name:
                    return False, f"node '{node}' cannot read all nodes, only its own Node object"
                return False, f"node '{node}' cannot read '{attrs.name}', only its own Node object"
        elif attrs.subresource == "status" and verb in ("update", "patch"):
            return True, ""
        return False, ""

    def _pod(self, node: str, attrs: Attributes) -> tuple[bool, str]:
        verb, sub = attrs.verb, attrs.subresource
        if not sub:
            if verb == "get":
                return self._get(node, attrs)
            if verb in ("list", "watch"):
                if attrs.fields.get("spec.nodeName") == node:
                    return True, ""
                if attrs.name:
                    return self._related(node, attrs)
                return False, "can only list/watch pods with spec.nodeName field selector"
            if verb in ("create", "delete"):
                return True, ""
        elif (sub == "status" and verb in ("update", "patch")) or (sub == "eviction" and verb == "create"):
            return True, ""
        return False, ""
