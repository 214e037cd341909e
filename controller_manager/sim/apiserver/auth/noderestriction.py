"""The NodeRestriction admission plugin (plugin/pkg/admission/noderestriction), on by default as in a kubeadm
cluster: what a node user (``system:node:<name>`` in ``system:nodes``) may write, past the Node authorizer.

Guarantees (each refusal a 403 ``<resource> "<name>" is forbidden: <upstream's reason>``, the name being the
request's, else the object's, else ``Unknown``, as admission.NewForbidden names it):
- Pods: a node creates only mirror pods (the ``kubernetes.io/config.mirror`` annotation) bound to itself, owned
  by exactly its own Node (``v1``/``Node``, its uid, ``controller: true``, no ``blockOwnerDeletion``) and
  referring to no ServiceAccount, Secret, ConfigMap, ClusterTrustBundle or PersistentVolumeClaim; deletes and
  evicts only pods bound to itself; updates a pod's status only when bound to itself, without changing its
  labels or resource claim statuses. Other pod subresources are refused.
- Nodes: a node writes only its own Node; on create no label under ``node-restriction.kubernetes.io`` nor an
  unknown ``kubernetes.io``/``k8s.io`` label (the kubelet's own labels and the ``kubelet.kubernetes.io``,
  ``node.kubernetes.io`` namespaces are allowed), and no ``spec.configSource``; on update no taint change, no
  new configSource and no such label change.
- PersistentVolumeClaims: status only, changing nothing but ``status.capacity``, ``status.conditions``,
  ``status.allocatedResources`` and ``status.allocatedResourceStatuses``.
- ServiceAccount tokens: only bound to a pod (``v1``/``Pod``, with its uid) running on the node.
- Leases: only in ``kube-node-lease`` and of the node's own name; CSINodes only of the node's own name.
- Anyone else, and any other resource, passes untouched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from controller_manager.api.resources import NODES, PODS, Resource
from controller_manager.sim.apiserver import errors
from controller_manager.sim.apiserver.auth.node import (
    NODE_LEASE_NAMESPACE,
    node_identity,
    pod_configmap_names,
    pod_secret_names,
)
from controller_manager.sim.apiserver.auth.users import User

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer

Obj = dict[str, Any]
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
NODE_RESTRICTION_LABEL_NAMESPACE = "node-restriction.kubernetes.io"
# The labels a kubelet may set on its own Node (k8s.io/kubelet/pkg/apis well_known_labels.go).
KUBELET_LABELS = frozenset({
    "kubernetes.io/hostname", "topology.kubernetes.io/zone", "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
    "node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type", "kubernetes.io/os", "kubernetes.io/arch",
    "beta.kubernetes.io/os", "beta.kubernetes.io/arch",
})
KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")
# What a node may change in a claim's status (RecoverVolumeExpansionFailure is on by default).
_PVC_STATUS_FIELDS = ("capacity", "conditions", "allocatedResources", "allocatedResourceStatuses")


class _Refused(Exception):
    pass


def admit(api: ApiServer, user: User, operation: str, res: Resource, subresource: str, namespace: str, name: str,
          obj: Obj | None, old: Obj | None) -> None:
    """Raise the 403 NodeRestriction answers for this write, if any. ``operation`` is CREATE, UPDATE or DELETE;
    ``name`` the name the request is for (the object's own on a create); ``obj`` what is written (None for a
    delete; the Eviction or TokenRequest for those subresources); ``old`` the object it replaces or deletes."""
    node, is_node = node_identity(user)
    if not is_node:
        return
    try:
        if not node:
            raise _Refused(f'could not determine node from user "{user.name}"')
        _check(api, node, operation, res, subresource, namespace, name, obj, old)
    except _Refused as e:
        raise errors.forbidden(res.group, res.plural, _forbidden_name(name, obj), str(e)) from None


def _forbidden_name(name: str, obj: Obj | None) -> str:
    """The name a refusal gives: the request's, else the object's (or its generateName), else ``Unknown``."""
    meta = (obj or {}).get("metadata") or {}
    return name or str(meta.get("name") or meta.get("generateName") or "Unknown")


def _check(api: ApiServer, node: str, operation: str, res: Resource, subresource: str, namespace: str, name: str,
           obj: Obj | None, old: Obj | None) -> None:
    kind = (res.group, res.plural)
    if kind == ("", "pods"):
        if subresource == "":
            _pod(api, node, operation, namespace, obj, old)
        elif subresource == "status":
            _pod_status(node, operation, obj, old)
        elif subresource == "eviction":
            _pod_eviction(api, node, operation, namespace, name, obj)
        else:
            raise _Refused(f'unexpected pod subresource "{subresource}", only \'status\' and \'eviction\' are allowed')
    elif kind == ("", "nodes"):
        _node(node, operation, name, obj, old)
    elif kind == ("", "persistentvolumeclaims"):
        if subresource != "status":
            raise _Refused("may only update PVC status")
        _pvc_status(node, operation, obj, old)
    elif kind == ("", "serviceaccounts"):
        if operation == "CREATE" and subresource == "token":
            _token(api, node, namespace, obj)
    elif kind == ("coordination.k8s.io", "leases"):
        if namespace != NODE_LEASE_NAMESPACE:
            raise _Refused(f'can only access leases in the "{NODE_LEASE_NAMESPACE}" system namespace')
        if name != node:
            raise _Refused("can only access node lease with the same name as the requesting node")
    elif kind == ("storage.k8s.io", "csinodes") and name != node:
        raise _Refused("can only access CSINode with the same name as the requesting node")


def _spec(obj: Obj | None) -> Obj:
    spec = (obj or {}).get("spec")
    return spec if isinstance(spec, dict) else {}


def _pod(api: ApiServer, node: str, operation: str, namespace: str, obj: Obj | None, old: Obj | None) -> None:
    if operation == "CREATE":
        _pod_create(api, node, obj or {})
    elif operation == "DELETE":
        if old is not None and _spec(old).get("nodeName") != node:
            raise _Refused(f'node "{node}" can only delete pods with spec.nodeName set to itself')
    else:
        raise _Refused(f'unexpected operation "{operation}", node "{node}" can only create and delete mirror pods')


def _pod_create(api: ApiServer, node: str, pod: Obj) -> None:
    meta = pod.get("metadata") or {}
    if MIRROR_POD_ANNOTATION not in (meta.get("annotations") or {}):
        raise _Refused(f'pod does not have "{MIRROR_POD_ANNOTATION}" annotation, node "{node}" can only create '
                       "mirror pods")
    spec = _spec(pod)
    if spec.get("nodeName") != node:
        raise _Refused(f'node "{node}" can only create pods with spec.nodeName set to itself')
    owners = meta.get("ownerReferences") or []
    if len(owners) > 1:
        raise _Refused(f'node "{node}" can only create pods with a single owner reference set to itself')
    if not owners:
        raise _Refused(f'node "{node}" can only create pods with an owner reference set to itself')
    owner = owners[0] if isinstance(owners[0], dict) else {}
    if owner.get("apiVersion") != "v1" or owner.get("kind") != "Node" or owner.get("name") != node:
        raise _Refused(f'node "{node}" can only create pods with an owner reference set to itself')
    if owner.get("controller") is not True:
        raise _Refused(f'node "{node}" can only create pods with a controller owner reference set to itself')
    if owner.get("blockOwnerDeletion") is True:
        raise _Refused(f'node "{node}" must not set blockOwnerDeletion on an owner reference')
    stored_node = api.stored_object(NODES, None, node)
    if stored_node is None:
        raise errors.not_found("", "nodes", node)
    uid = str(stored_node["metadata"].get("uid") or "")
    if owner.get("uid") != uid:
        raise _Refused(f"node {node} UID mismatch: expected {owner.get('uid') or ''} got {uid}")
    if spec.get("serviceAccountName"):
        raise _Refused(f'node "{node}" can not create pods that reference a service account')
    if pod_secret_names(pod):
        raise _Refused(f'node "{node}" can not create pods that reference secrets')
    if pod_configmap_names(pod):
        raise _Refused(f'node "{node}" can not create pods that reference configmaps')
    volumes = [v for v in spec.get("volumes") or () if isinstance(v, dict)]
    for vol in volumes:
        for src in (vol.get("projected") or {}).get("sources") or ():
            if isinstance(src, dict) and src.get("clusterTrustBundle") is not None:
                raise _Refused(f'node "{node}" can not create pods that reference clustertrustbundles')
    if any(vol.get("persistentVolumeClaim") is not None for vol in volumes):
        raise _Refused(f'node "{node}" can not create pods that reference persistentvolumeclaims')


def _claim_statuses(pod: Obj | None) -> list[tuple[str, str | None]]:
    status = (pod or {}).get("status") or {}
    return [(str(s.get("name") or ""), s.get("resourceClaimName")) for s in status.get("resourceClaimStatuses") or ()
            if isinstance(s, dict)]


def _pod_status(node: str, operation: str, obj: Obj | None, old: Obj | None) -> None:
    if operation != "UPDATE":
        raise _Refused(f'unexpected operation "{operation}"')
    if _spec(old).get("nodeName") != node:
        raise _Refused(f'node "{node}" can only update pod status for pods with spec.nodeName set to itself')
    labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
    old_labels = ((old or {}).get("metadata") or {}).get("labels") or {}
    if labels != old_labels:
        raise _Refused(f'node "{node}" cannot update labels through pod status')
    if _claim_statuses(obj) != _claim_statuses(old):
        raise _Refused(f'node "{node}" cannot update resource claim statues')


def _pod_eviction(api: ApiServer, node: str, operation: str, namespace: str, name: str, eviction: Obj | None) -> None:
    if operation != "CREATE":
        raise _Refused(f"unexpected operation {operation}")
    pod_name = name or str(((eviction or {}).get("metadata") or {}).get("name") or "")
    if not pod_name:
        raise _Refused("could not determine pod from request data")
    pod = api.stored_object(PODS, namespace, pod_name)
    if pod is None:
        raise errors.not_found("", "pods", pod_name)
    if _spec(pod).get("nodeName") != node:
        raise _Refused(f"node {node} can only evict pods with spec.nodeName set to itself")


def _without(obj: Obj | None, status_fields: tuple[str, ...]) -> Obj:
    out = dict(obj or {})
    meta = {k: v for k, v in (out.get("metadata") or {}).items() if k not in ("resourceVersion", "managedFields")}
    out["metadata"] = meta
    out["status"] = {k: v for k, v in (out.get("status") or {}).items() if k not in status_fields}
    return out


def _pvc_status(node: str, operation: str, obj: Obj | None, old: Obj | None) -> None:
    if operation != "UPDATE":
        raise _Refused(f'unexpected operation "{operation}"')
    new_cmp, old_cmp = _without(obj, _PVC_STATUS_FIELDS), _without(old, _PVC_STATUS_FIELDS)
    if new_cmp != old_cmp:
        changed = sorted(k for k in {*new_cmp, *old_cmp} if new_cmp.get(k) != old_cmp.get(k))
        raise _Refused(f'node "{node}" is not allowed to update fields other than status.capacity and '
                       f"status.conditions: {', '.join(changed)} changed")


def _label_namespace(key: str) -> str:
    prefix, sep, _ = key.partition("/")
    return prefix if sep else ""


def _in_namespace(namespace: str, wanted: str) -> bool:
    return namespace == wanted or namespace.endswith("." + wanted)


def _forbidden_labels(labels: Obj, old_labels: Obj) -> list[str]:
    modified = {k for k in {*labels, *old_labels} if labels.get(k) != old_labels.get(k)}
    out: set[str] = set()
    for key in modified:
        namespace = _label_namespace(key)
        if _in_namespace(namespace, NODE_RESTRICTION_LABEL_NAMESPACE):
            out.add(key)
        kubernetes = _in_namespace(namespace, "kubernetes.io") or _in_namespace(namespace, "k8s.io")
        kubelet = key in KUBELET_LABELS or any(_in_namespace(namespace, ns) for ns in KUBELET_LABEL_NAMESPACES)
        if kubernetes and not kubelet:
            out.add(key)
    return sorted(out)


def _node(node: str, operation: str, name: str, obj: Obj | None, old: Obj | None) -> None:
    if name != node:
        raise _Refused(f'node "{node}" is not allowed to modify node "{name}"')
    labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
    if operation == "CREATE":
        if _spec(obj).get("configSource") is not None:
            raise _Refused(f'node "{node}" is not allowed to create pods with a non-nil configSource')
        forbidden = _forbidden_labels(labels, {})
        if forbidden:
            raise _Refused(f'node "{node}" is not allowed to set the following labels: {", ".join(forbidden)}')
    elif operation == "UPDATE":
        source = _spec(obj).get("configSource")
        if source is not None and source != _spec(old).get("configSource"):
            raise _Refused(f'node "{node}" is not allowed to update configSource to a new non-nil configSource')
        if (_spec(obj).get("taints") or []) != (_spec(old).get("taints") or []):
            raise _Refused(f'node "{node}" is not allowed to modify taints')
        forbidden = _forbidden_labels(labels, ((old or {}).get("metadata") or {}).get("labels") or {})
        if forbidden:
            raise _Refused(f"is not allowed to modify labels: {', '.join(forbidden)}")


def _token(api: ApiServer, node: str, namespace: str, request: Obj | None) -> None:
    ref = ((request or {}).get("spec") or {}).get("boundObjectRef")
    if not isinstance(ref, dict) or ref.get("apiVersion") != "v1" or ref.get("kind") != "Pod" or not ref.get("name"):
        raise _Refused("node requested token not bound to a pod")
    if not ref.get("uid"):
        raise _Refused("node requested token with a pod binding without a uid")
    pod = api.stored_object(PODS, namespace, str(ref["name"]))
    if pod is None:
        raise errors.not_found("", "pods", str(ref["name"]))
    if ref.get("uid") != pod["metadata"].get("uid"):
        raise _Refused(f"the UID in the bound object reference ({ref.get('uid')}) does not match the UID in record. "
                       "The object might have been deleted and then recreated")
    if _spec(pod).get("nodeName") != node:
        raise _Refused("node requested token bound to a pod scheduled on a different node")
