"""Descriptors of the API resources the daemon and kube-sim know, keyed by group/version/plural.

A :class:`Resource` says where a kind lives on the wire (``/api/v1/namespaces/ns/pods``,
``/apis/apps/v1/deployments``) and whether it is namespaced. The table holds the built-in kinds
kube-controller-manager's controllers read or write; other kinds (CRDs) are described at run
time from discovery with the same class.
"""

from __future__ import annotations

from dataclasses import dataclass, field

_ALL = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True, slots=True)
class Resource:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()  # e.g. ("status", "scale")
    verbs: tuple[str, ...] = _ALL
    categories: tuple[str, ...] = ()
    singular: str = field(default="")

    @property
    def api_version(self) -> str:
        """``v1`` for the core group, ``group/version`` otherwise (the objects' apiVersion)."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_resource(self) -> str:
        """``deployments.apps``, ``pods``: how RBAC and error messages name the resource."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def singular_name(self) -> str:
        return self.singular or self.kind.lower()

    def base_path(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        """The URL path of the collection, or of one object (and its subresource)."""
        parts = [self.base_path()]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{namespace}")
        parts.append(self.plural)
        if name is not None:
            parts.append(name)
            if subresource:
                parts.append(subresource)
        return "/".join(parts)


_CREATE_ONLY = ("create",)

NAMESPACES = Resource("", "v1", "namespaces", "Namespace", False, ("ns",), ("status", "finalize"),
                      ("create", "delete", "get", "list", "patch", "update", "watch"))
NODES = Resource("", "v1", "nodes", "Node", False, ("no",), ("status",))
PODS = Resource("", "v1", "pods", "Pod", True, ("po",), ("status", "binding", "eviction", "log", "attach", "exec",
                                                          "portforward"),
                categories=("all",))
EVENTS = Resource("", "v1", "events", "Event", True, ("ev",))
SERVICES = Resource("", "v1", "services", "Service", True, ("svc",), ("status",), categories=("all",))
ENDPOINTS = Resource("", "v1", "endpoints", "Endpoints", True, ("ep",))
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", True, ("cm",))
SECRETS = Resource("", "v1", "secrets", "Secret", True)
SERVICEACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount", True, ("sa",), ("token",))
PERSISTENTVOLUMECLAIMS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, ("pvc",),
                                  ("status",))
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment", True, ("deploy",), ("status", "scale"),
                       categories=("all",))
REPLICASETS = Resource("apps", "v1", "replicasets", "ReplicaSet", True, ("rs",), ("status", "scale"),
                       categories=("all",))
DAEMONSETS = Resource("apps", "v1", "daemonsets", "DaemonSet", True, ("ds",), ("status",), categories=("all",))
STATEFULSETS = Resource("apps", "v1", "statefulsets", "StatefulSet", True, ("sts",), ("status", "scale"),
                        categories=("all",))
CONTROLLERREVISIONS = Resource("apps", "v1", "controllerrevisions", "ControllerRevision", True)
JOBS = Resource("batch", "v1", "jobs", "Job", True, (), ("status",), categories=("all",))
CRONJOBS = Resource("batch", "v1", "cronjobs", "CronJob", True, ("cj",), ("status",), categories=("all",))
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", True)
ENDPOINTSLICES = Resource("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True)
PODDISRUPTIONBUDGETS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, ("pdb",),
                                ("status",))
EVENTS_V1 = Resource("events.k8s.io", "v1", "events", "Event", True, ("ev",))
TOKENREVIEWS = Resource("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", False, verbs=_CREATE_ONLY)
SUBJECTACCESSREVIEWS = Resource("authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview",
                                False, verbs=_CREATE_ONLY)
SELFSUBJECTACCESSREVIEWS = Resource("authorization.k8s.io", "v1", "selfsubjectaccessreviews",
                                    "SelfSubjectAccessReview", False, verbs=_CREATE_ONLY)
LOCALSUBJECTACCESSREVIEWS = Resource("authorization.k8s.io", "v1", "localsubjectaccessreviews",
                                     "LocalSubjectAccessReview", True, verbs=_CREATE_ONLY)
SELFSUBJECTRULESREVIEWS = Resource("authorization.k8s.io", "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview",
                                   False, verbs=_CREATE_ONLY)
SELFSUBJECTREVIEWS = Resource("authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview", False,
                              verbs=_CREATE_ONLY)
CLUSTERROLES = Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False)
CLUSTERROLEBINDINGS = Resource("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False)
ROLES = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role", True)
ROLEBINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True)
PRIORITYCLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, ("pc",))
RESOURCEQUOTAS = Resource("", "v1", "resourcequotas", "ResourceQuota", True, ("quota",), ("status",))
LIMITRANGES = Resource("", "v1", "limitranges", "LimitRange", True, ("limits",))
REPLICATIONCONTROLLERS = Resource("", "v1", "replicationcontrollers", "ReplicationController", True, ("rc",),
                                  ("status", "scale"), categories=("all",))
HORIZONTALPODAUTOSCALERS = Resource("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True,
                                    ("hpa",), ("status",), categories=("all",))
HORIZONTALPODAUTOSCALERS_V1 = Resource("autoscaling", "v1", "horizontalpodautoscalers", "HorizontalPodAutoscaler",
                                       True, ("hpa",), ("status",), categories=("all",))
PERSISTENTVOLUMES = Resource("", "v1", "persistentvolumes", "PersistentVolume", False, ("pv",), ("status",))
INGRESSES = Resource("networking.k8s.io", "v1", "ingresses", "Ingress", True, ("ing",), ("status",))
INGRESSCLASSES = Resource("networking.k8s.io", "v1", "ingressclasses", "IngressClass", False)
NETWORKPOLICIES = Resource("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True, ("netpol",))
SERVICECIDRS = Resource("networking.k8s.io", "v1", "servicecidrs", "ServiceCIDR", False, (), ("status",))
IPADDRESSES = Resource("networking.k8s.io", "v1", "ipaddresses", "IPAddress", False, ("ip",))
STORAGECLASSES = Resource("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, ("sc",))
VOLUMEATTACHMENTS = Resource("storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", False, (),
                             ("status",))
CSIDRIVERS = Resource("storage.k8s.io", "v1", "csidrivers", "CSIDriver", False)
CSINODES = Resource("storage.k8s.io", "v1", "csinodes", "CSINode", False)
VOLUMEATTRIBUTESCLASSES = Resource("storage.k8s.io", "v1", "volumeattributesclasses", "VolumeAttributesClass", False,
                                   ("vac",))
CERTIFICATESIGNINGREQUESTS = Resource("certificates.k8s.io", "v1", "certificatesigningrequests",
                                      "CertificateSigningRequest", False, ("csr",), ("approval", "status"))
CLUSTERTRUSTBUNDLES = Resource("certificates.k8s.io", "v1", "clustertrustbundles", "ClusterTrustBundle", False)
PODCERTIFICATEREQUESTS = Resource("certificates.k8s.io", "v1", "podcertificaterequests", "PodCertificateRequest", True,
                                  (), ("status",))
VALIDATINGWEBHOOKCONFIGURATIONS = Resource("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
                                           "ValidatingWebhookConfiguration", False)
MUTATINGWEBHOOKCONFIGURATIONS = Resource("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
                                         "MutatingWebhookConfiguration", False)
VALIDATINGADMISSIONPOLICIES = Resource("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies",
                                       "ValidatingAdmissionPolicy", False, (), ("status",))
VALIDATINGADMISSIONPOLICYBINDINGS = Resource("admissionregistration.k8s.io", "v1",
                                             "validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding",
                                             False)
PODTEMPLATES = Resource("", "v1", "podtemplates", "PodTemplate", True)
# Deprecated since 1.19 and computed on each read from the control plane's health (get and list only).
COMPONENTSTATUSES = Resource("", "v1", "componentstatuses", "ComponentStatus", False, ("cs",), verbs=("get", "list"))
RUNTIMECLASSES = Resource("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", False)
CSISTORAGECAPACITIES = Resource("storage.k8s.io", "v1", "csistoragecapacities", "CSIStorageCapacity", True)
DEVICECLASSES = Resource("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False)
RESOURCECLAIMS = Resource("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True, (), ("status",))
RESOURCECLAIMTEMPLATES = Resource("resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", True)
RESOURCESLICES = Resource("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False)
FLOWSCHEMAS = Resource("flowcontrol.apiserver.k8s.io", "v1", "flowschemas", "FlowSchema", False, (), ("status",))
PRIORITYLEVELCONFIGURATIONS = Resource("flowcontrol.apiserver.k8s.io", "v1", "prioritylevelconfigurations",
                                       "PriorityLevelConfiguration", False, (), ("status",))
APISERVICES = Resource("apiregistration.k8s.io", "v1", "apiservices", "APIService", False, (), ("status",),
                       categories=("api-extensions",))

BUILTIN: tuple[Resource, ...] = (
    NAMESPACES, NODES, PODS, EVENTS, SERVICES, ENDPOINTS, CONFIGMAPS, SECRETS, SERVICEACCOUNTS,
    PERSISTENTVOLUMECLAIMS, DEPLOYMENTS, REPLICASETS, DAEMONSETS, STATEFULSETS, CONTROLLERREVISIONS, JOBS,
    CRONJOBS, LEASES, ENDPOINTSLICES, PODDISRUPTIONBUDGETS, EVENTS_V1, TOKENREVIEWS, SUBJECTACCESSREVIEWS,
    SELFSUBJECTACCESSREVIEWS, LOCALSUBJECTACCESSREVIEWS, SELFSUBJECTRULESREVIEWS, SELFSUBJECTREVIEWS,
    CLUSTERROLES, CLUSTERROLEBINDINGS, ROLES, ROLEBINDINGS, PRIORITYCLASSES, RESOURCEQUOTAS, LIMITRANGES,
    REPLICATIONCONTROLLERS, HORIZONTALPODAUTOSCALERS, HORIZONTALPODAUTOSCALERS_V1, PERSISTENTVOLUMES, INGRESSES,
    INGRESSCLASSES, NETWORKPOLICIES, STORAGECLASSES, VOLUMEATTACHMENTS, CSIDRIVERS, CSINODES,
    VOLUMEATTRIBUTESCLASSES,
    CERTIFICATESIGNINGREQUESTS, VALIDATINGWEBHOOKCONFIGURATIONS, MUTATINGWEBHOOKCONFIGURATIONS,
    VALIDATINGADMISSIONPOLICIES, VALIDATINGADMISSIONPOLICYBINDINGS, SERVICECIDRS, IPADDRESSES,
    CLUSTERTRUSTBUNDLES, PODCERTIFICATEREQUESTS, PODTEMPLATES, COMPONENTSTATUSES,
    RUNTIMECLASSES, CSISTORAGECAPACITIES, DEVICECLASSES, RESOURCECLAIMS, RESOURCECLAIMTEMPLATES, RESOURCESLICES,
    FLOWSCHEMAS, PRIORITYLEVELCONFIGURATIONS, APISERVICES,
)

_BY_GVR = {(r.group, r.version, r.plural): r for r in BUILTIN}
_BY_KIND = {(r.api_version, r.kind): r for r in BUILTIN}


def lookup(group: str, version: str, plural: str) -> Resource | None:
    """The built-in resource at group/version/plural, or None."""
    return _BY_GVR.get((group, version, plural))


def for_kind(api_version: str, kind: str) -> Resource | None:
    """The built-in resource of an object's ``apiVersion`` and ``kind`` (ownerReferences carry these)."""
    return _BY_KIND.get((api_version, kind))
