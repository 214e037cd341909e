"""Strategic-merge metadata of the built-in kinds: which lists merge, and by which key.

This is the ``patchStrategy``/``patchMergeKey`` struct tags of k8s.io/api core/v1, apps/v1,
batch/v1 (and the few other groups kube-sim serves), written as a type graph: a struct type
maps field names to a nested struct type name or to a :class:`ListMeta`. Fields not listed
behave as untagged Go fields do: objects merge key by key, lists are replaced whole.
``retainKeys`` needs no entry: applying a patch only honours the ``$retainKeys`` directive the
client wrote.

Notable upstream facts kept here: ``tolerations``, ``readinessGates``, ``spec.taints`` of a Node and
``status.containerStatuses`` carry no strategy (replaced whole); ``finalizers`` and a Node's
``podCIDRs`` are merged primitive lists.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ListMeta:
    merge_key: str | None = None  # None: a list of primitives merged as a set
    item: str | None = None  # struct type of the items, for nested lookups


def merged(key: str | None = None, item: str | None = None) -> ListMeta:
    return ListMeta(key, item)


Field = str | ListMeta

_CONDITIONS = merged("type")

TYPES: dict[str, dict[str, Field]] = {
    "ObjectMeta": {"ownerReferences": merged("uid"), "finalizers": merged()},
    "PodTemplateSpec": {"metadata": "ObjectMeta", "spec": "PodSpec"},
    "PodSpec": {
        "volumes": merged("name"),
        "initContainers": merged("name", "Container"),
        "containers": merged("name", "Container"),
        "ephemeralContainers": merged("name", "Container"),
        "imagePullSecrets": merged("name"),
        "hostAliases": merged("ip"),
        "topologySpreadConstraints": merged("topologyKey"),
        "resourceClaims": merged("name"),
        "schedulingGates": merged("name"),
    },
    "Container": {
        "ports": merged("containerPort"),
        "env": merged("name"),
        "volumeMounts": merged("mountPath"),
        "volumeDevices": merged("devicePath"),
    },
    "PodStatus": {
        "conditions": _CONDITIONS,
        "podIPs": merged("ip"),
        "hostIPs": merged("ip"),
        "resourceClaimStatuses": merged("name"),
    },
    "Pod": {"metadata": "ObjectMeta", "spec": "PodSpec", "status": "PodStatus"},
    "PodTemplate": {"metadata": "ObjectMeta", "template": "PodTemplateSpec"},
    "NodeSpec": {"podCIDRs": merged()},
    "NodeStatus": {"conditions": _CONDITIONS, "addresses": merged("type")},
    "Node": {"metadata": "ObjectMeta", "spec": "NodeSpec", "status": "NodeStatus"},
    "ConditionsStatus": {"conditions": _CONDITIONS},
    "Namespace": {"metadata": "ObjectMeta", "status": "ConditionsStatus"},
    "ServiceSpec": {"ports": merged("port")},
    "Service": {"metadata": "ObjectMeta", "spec": "ServiceSpec", "status": "ConditionsStatus"},
    "ServiceAccount": {"metadata": "ObjectMeta", "secrets": merged("name")},
    "PersistentVolumeClaim": {"metadata": "ObjectMeta", "status": "ConditionsStatus"},
    "ReplicationControllerSpec": {"template": "PodTemplateSpec"},
    "ReplicationController": {"metadata": "ObjectMeta", "spec": "ReplicationControllerSpec",
                              "status": "ConditionsStatus"},
    # apps/v1
    "WorkloadSpec": {"template": "PodTemplateSpec"},
    "Deployment": {"metadata": "ObjectMeta", "spec": "WorkloadSpec", "status": "ConditionsStatus"},
    "ReplicaSet": {"metadata": "ObjectMeta", "spec": "WorkloadSpec", "status": "ConditionsStatus"},
    "DaemonSet": {"metadata": "ObjectMeta", "spec": "WorkloadSpec", "status": "ConditionsStatus"},
    "StatefulSet": {"metadata": "ObjectMeta", "spec": "WorkloadSpec", "status": "ConditionsStatus"},
    "ControllerRevision": {"metadata": "ObjectMeta"},
    # batch/v1
    "Job": {"metadata": "ObjectMeta", "spec": "WorkloadSpec", "status": "ConditionsStatus"},
    "JobTemplateSpec": {"metadata": "ObjectMeta", "spec": "WorkloadSpec"},
    "CronJobSpec": {"jobTemplate": "JobTemplateSpec"},
    "CronJob": {"metadata": "ObjectMeta", "spec": "CronJobSpec"},
    # other groups: only metadata carries strategies
    "PodDisruptionBudget": {"metadata": "ObjectMeta", "status": "ConditionsStatus"},
    # networking.k8s.io/v1
    "ServiceCIDR": {"metadata": "ObjectMeta", "status": "ConditionsStatus"},
    # certificates.k8s.io/v1
    "PodCertificateRequest": {"metadata": "ObjectMeta", "status": "ConditionsStatus"},
    "Plain": {"metadata": "ObjectMeta"},
}

# Kinds compiled into the real apiserver: strategic merge patch is accepted for these only.
_PLAIN_KINDS = (
    "ConfigMap", "Secret", "Endpoints", "Event", "LimitRange", "ResourceQuota", "PersistentVolume", "Binding",
    "Lease", "EndpointSlice", "PriorityClass", "StorageClass", "Role", "RoleBinding", "ClusterRole",
    "ClusterRoleBinding", "HorizontalPodAutoscaler", "NetworkPolicy", "Ingress", "IngressClass",
    "CustomResourceDefinition", "APIService", "PodTemplate", "TokenReview", "SubjectAccessReview", "Scale",
    "IPAddress",
)

ROOTS: dict[str, str] = {
    kind: kind for kind in (
        "Pod", "PodTemplate", "Node", "Namespace", "Service", "ServiceAccount", "PersistentVolumeClaim",
        "ReplicationController", "Deployment", "ReplicaSet", "DaemonSet", "StatefulSet", "ControllerRevision", "Job",
        "CronJob", "PodDisruptionBudget", "ServiceCIDR", "PodCertificateRequest",
    )
}
for _kind in _PLAIN_KINDS:
    ROOTS.setdefault(_kind, "Plain")


def field_meta(type_name: str | None, field: str) -> Field | None:
    """The tagged metadata of ``field`` in struct ``type_name`` (None: untagged)."""
    if type_name is None:
        return None
    return TYPES.get(type_name, {}).get(field)
