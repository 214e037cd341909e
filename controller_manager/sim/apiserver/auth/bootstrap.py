"""The RBAC objects kube-apiserver creates at start-up (plugin/pkg/auth/authorizer/rbac/bootstrappolicy).

Guarantees:
- :func:`install` creates the bootstrap ClusterRoles (``cluster-admin``, the aggregated ``admin``/``edit``/
  ``view`` and the ``system:aggregate-to-*`` roles feeding them, ``system:discovery``, ``system:basic-user``,
  ``system:public-info-viewer``, ``system:monitoring``, ``system:node``, ``system:kube-scheduler``,
  ``system:kube-controller-manager`` ...), the ``system:controller:*`` roles of kube-controller-manager's
  controllers, and their ClusterRoleBindings, each labelled ``kubernetes.io/bootstrapping: rbac-defaults``
  and annotated ``rbac.authorization.kubernetes.io/autoupdate: "true"``; plus the Roles and RoleBindings
  upstream puts in kube-system and kube-public.
- kube-sim's own viewer token gets read access through ``kube-sim:viewer`` (a ClusterRole and binding that
  are kube-sim's, not upstream's), so RBAC alone decides for it too.
- Rules are listed as upstream builds them with default feature gates (each rule's lists sorted, as upstream's
  rule builder leaves them); aggregated roles start empty and are filled by :mod:`aggregation`.
  tests/sim/apiserver/test_bootstrap_policy.py holds this against upstream's bootstrappolicy testdata.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import orjson

from controller_manager.api.resources import CLUSTERROLEBINDINGS, CLUSTERROLES, NAMESPACES, ROLEBINDINGS, ROLES

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer

Obj = dict[str, Any]

LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
ANNOTATIONS = {"rbac.authorization.kubernetes.io/autoupdate": "true"}
AGGREGATE_TO = "rbac.authorization.k8s.io/aggregate-to-"
RBAC_GROUP = "rbac.authorization.k8s.io"

READ = "get list watch"
WRITE = "create update patch delete deletecollection"
READ_WRITE = f"{READ} {WRITE}"
READ_UPDATE = "get list watch update patch"


def rule(verbs: str, groups: str, resources: str, names: str = "") -> Obj:
    """A resource rule; each argument is a space-separated list ("-" names the core group ""). Each list is
    sorted, as upstream's rule builder leaves them."""
    out: Obj = {"verbs": sorted(verbs.split()), "apiGroups": sorted("" if g == "-" else g for g in groups.split()),
                "resources": sorted(resources.split())}
    if names:
        out["resourceNames"] = sorted(names.split())
    return out


def urls(verbs: str, paths: str) -> Obj:
    return {"verbs": sorted(verbs.split()), "nonResourceURLs": sorted(paths.split())}


def events_rule() -> Obj:
    return rule("create update patch", "- events.k8s.io", "events")


def _cluster_roles() -> list[tuple[str, list[Obj], dict[str, str], list[str]]]:
    """(name, rules, extra labels, aggregated-from label names) of each bootstrap ClusterRole."""
    view_label = {f"{AGGREGATE_TO}view": "true"}
    edit_label = {f"{AGGREGATE_TO}edit": "true"}
    admin_label = {f"{AGGREGATE_TO}admin": "true"}
    return [
        ("cluster-admin", [rule("*", "*", "*"), urls("*", "*")], {}, []),
        ("system:discovery", [urls("get", "/api /api/* /apis /apis/* /healthz /livez /openapi /openapi/* /readyz "
                                          "/version /version/")], {}, []),
        ("system:monitoring", [urls("get", "/healthz /healthz/* /livez /livez/* /metrics /metrics/slis /readyz "
                                           "/readyz/*")], {}, []),
        ("system:basic-user", [rule("create", "authorization.k8s.io",
                                    "selfsubjectaccessreviews selfsubjectrulesreviews"),
                               rule("create", "authentication.k8s.io", "selfsubjectreviews")], {}, []),
        ("system:public-info-viewer", [urls("get", "/healthz /livez /readyz /version /version/")], {}, []),
        ("admin", [], {}, ["admin"]),
        ("edit", [], admin_label, ["edit"]),
        ("view", [], edit_label, ["view"]),
        ("system:aggregate-to-admin", [
            rule("create", "authorization.k8s.io", "localsubjectaccessreviews"),
            rule(READ_WRITE, RBAC_GROUP, "roles rolebindings"),
        ], admin_label, []),
        ("system:aggregate-to-edit", [
            rule(READ, "-", "pods/attach pods/proxy pods/exec pods/portforward secrets services/proxy"),
            rule("impersonate", "-", "serviceaccounts"),
            rule(WRITE, "-", "pods pods/attach pods/proxy pods/exec pods/portforward"),
            rule("create", "-", "pods/eviction"),
            rule(WRITE, "-", "replicationcontrollers replicationcontrollers/scale serviceaccounts services "
                             "services/proxy persistentvolumeclaims configmaps secrets events"),
            rule("create", "-", "serviceaccounts/token"),
            rule(WRITE, "apps", "statefulsets statefulsets/scale daemonsets deployments deployments/scale "
                                "deployments/rollback replicasets replicasets/scale"),
            rule(WRITE, "autoscaling", "horizontalpodautoscalers"),
            rule(WRITE, "batch", "jobs cronjobs"),
            rule(WRITE, "extensions", "daemonsets deployments deployments/scale deployments/rollback ingresses "
                                      "replicasets replicasets/scale replicationcontrollers/scale networkpolicies"),
            rule(WRITE, "policy", "poddisruptionbudgets"),
            rule(WRITE, "networking.k8s.io", "networkpolicies ingresses"),
            rule(READ_WRITE, "coordination.k8s.io", "leases"),
        ], edit_label, []),
        ("system:aggregate-to-view", [
            rule(READ, "-", "pods replicationcontrollers replicationcontrollers/scale serviceaccounts services "
                            "services/status endpoints persistentvolumeclaims persistentvolumeclaims/status "
                            "configmaps"),
            rule(READ, "-", "limitranges resourcequotas bindings events pods/status resourcequotas/status "
                            "namespaces/status replicationcontrollers/status pods/log"),
            rule(READ, "-", "namespaces"),
            rule(READ, "discovery.k8s.io", "endpointslices"),
            rule(READ, "apps", "controllerrevisions statefulsets statefulsets/status statefulsets/scale daemonsets "
                               "daemonsets/status deployments deployments/status deployments/scale replicasets "
                               "replicasets/status replicasets/scale"),
            rule(READ, "autoscaling", "horizontalpodautoscalers horizontalpodautoscalers/status"),
            rule(READ, "batch", "jobs jobs/status cronjobs cronjobs/status"),
            rule(READ, "extensions", "daemonsets daemonsets/status deployments deployments/scale "
                                     "deployments/status ingresses ingresses/status replicasets replicasets/scale "
                                     "replicasets/status replicationcontrollers/scale networkpolicies"),
            rule(READ, "policy", "poddisruptionbudgets poddisruptionbudgets/status"),
            rule(READ, "networking.k8s.io", "ingresses ingresses/status networkpolicies"),
        ], view_label, []),
        ("system:heapster", [rule(READ, "-", "events pods nodes namespaces"),
                             rule(READ, "extensions", "deployments")], {}, []),
        ("system:node", [
            rule("create", "authentication.k8s.io", "tokenreviews"),
            rule("create", "authorization.k8s.io", "subjectaccessreviews localsubjectaccessreviews"),
            rule(READ, "-", "services"),
            rule("create get list watch", "-", "nodes"),
            rule("update patch", "-", "nodes/status"),
            rule("update patch", "-", "nodes"),
            rule("create update patch", "-", "events"),
            rule(READ, "-", "pods"),
            rule("create delete", "-", "pods"),
            rule("update patch", "-", "pods/status"),
            rule("create", "-", "pods/eviction"),
            rule(READ, "-", "configmaps secrets"),
            rule("get", "-", "persistentvolumeclaims persistentvolumes"),
            rule("get", "-", "endpoints"),
            rule("create get list watch", "certificates.k8s.io", "certificatesigningrequests"),
            rule("get create update patch delete", "coordination.k8s.io", "leases"),
            rule("get", "storage.k8s.io", "volumeattachments"),
            rule("create", "-", "serviceaccounts/token"),
            rule("get update patch", "-", "persistentvolumeclaims/status"),
            rule(READ, "storage.k8s.io", "csidrivers"),
            rule("get create update patch delete", "storage.k8s.io", "csinodes"),
            rule(READ, "node.k8s.io", "runtimeclasses"),
        ], {}, []),
        ("system:node-problem-detector", [rule("get", "-", "nodes"), rule("patch", "-", "nodes/status"),
                                          events_rule()], {}, []),
        ("system:kubelet-api-admin", [rule(READ, "-", "nodes"), rule("proxy", "-", "nodes"),
                                      rule("*", "-", "nodes/proxy nodes/metrics nodes/stats nodes/log")], {}, []),
        ("system:node-bootstrapper", [rule("create get list watch", "certificates.k8s.io",
                                           "certificatesigningrequests")], {}, []),
        ("system:auth-delegator", [rule("create", "authentication.k8s.io", "tokenreviews"),
                                   rule("create", "authorization.k8s.io", "subjectaccessreviews")], {}, []),
        ("system:kube-aggregator", [rule(READ, "-", "services endpoints")], {}, []),
        ("system:kube-controller-manager", [
            events_rule(),
            rule("create", "coordination.k8s.io", "leases"),
            rule("get update", "coordination.k8s.io", "leases", "kube-controller-manager"),
            rule("create", "-", "secrets serviceaccounts"),
            rule("delete", "-", "secrets"),
            rule("get", "-", "configmaps namespaces secrets serviceaccounts"),
            rule("update", "-", "secrets serviceaccounts"),
            rule("create", "authentication.k8s.io", "tokenreviews"),
            rule("create", "authorization.k8s.io", "subjectaccessreviews"),
            rule("list watch", "*", "*"),
            rule("create", "-", "serviceaccounts/token"),
        ], {}, []),
        ("system:kube-dns", [rule("list watch", "-", "endpoints services")], {}, []),
        ("system:persistent-volume-provisioner", [
            rule("get list watch create delete", "-", "persistentvolumes"),
            rule("get list watch update", "-", "persistentvolumeclaims"),
            rule(READ, "storage.k8s.io", "storageclasses"),
            rule("watch", "-", "events"),
            events_rule(),
        ], {}, []),
        ("system:certificates.k8s.io:certificatesigningrequests:nodeclient", [
            rule("create", "certificates.k8s.io", "certificatesigningrequests/nodeclient")], {}, []),
        ("system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", [
            rule("create", "certificates.k8s.io", "certificatesigningrequests/selfnodeclient")], {}, []),
        ("system:volume-scheduler", [rule(READ_UPDATE, "-", "persistentvolumes"),
                                     rule(READ, "storage.k8s.io", "storageclasses"),
                                     rule(READ_UPDATE, "-", "persistentvolumeclaims")], {}, []),
        ("system:certificates.k8s.io:legacy-unknown-approver", [
            rule("approve", "certificates.k8s.io", "signers", "kubernetes.io/legacy-unknown")], {}, []),
        ("system:certificates.k8s.io:kubelet-serving-approver", [
            rule("approve", "certificates.k8s.io", "signers", "kubernetes.io/kubelet-serving")], {}, []),
        ("system:certificates.k8s.io:kube-apiserver-client-approver", [
            rule("approve", "certificates.k8s.io", "signers", "kubernetes.io/kube-apiserver-client")], {}, []),
        ("system:certificates.k8s.io:kube-apiserver-client-kubelet-approver", [
            rule("approve", "certificates.k8s.io", "signers", "kubernetes.io/kube-apiserver-client-kubelet")],
         {}, []),
        ("system:service-account-issuer-discovery", [
            urls("get", "/.well-known/openid-configuration /openid/v1/jwks")], {}, []),
        ("system:node-proxier", [rule("list watch", "-", "services endpoints"), rule("get list watch", "-", "nodes"),
                                 events_rule(), rule("list watch", "discovery.k8s.io", "endpointslices")], {}, []),
        ("system:kube-scheduler", [
            events_rule(),
            rule("create", "coordination.k8s.io", "leases"),
            rule("get update", "coordination.k8s.io", "leases", "kube-scheduler"),
            rule(READ, "-", "nodes"),
            rule("delete get list watch", "-", "pods"),
            rule("create", "-", "bindings pods/binding"),
            rule("patch update", "-", "pods/status"),
            rule(READ, "-", "replicationcontrollers services"),
            rule(READ, "apps extensions", "replicasets"),
            rule(READ, "apps", "statefulsets"),
            rule(READ, "policy", "poddisruptionbudgets"),
            rule(READ, "-", "persistentvolumeclaims persistentvolumes"),
            rule("create", "authentication.k8s.io", "tokenreviews"),
            rule("create", "authorization.k8s.io", "subjectaccessreviews"),
            rule(READ, "storage.k8s.io", "csinodes"),
            rule(READ, "-", "namespaces"),
            rule(READ, "storage.k8s.io", "csidrivers"),
            rule(READ, "storage.k8s.io", "csistoragecapacities"),
        ], {}, []),
    ]


# kube-controller-manager's controllers: each runs as ServiceAccount kube-system/<name> with ClusterRole
# system:controller:<name> (controller_policy.go).
def _controller_roles() -> list[tuple[str, list[Obj]]]:
    return [
        ("attachdetach-controller", [
            rule("list watch", "-", "persistentvolumes persistentvolumeclaims"),
            rule("get list watch", "-", "nodes"),
            rule("patch update", "-", "nodes/status"),
            rule("list watch", "-", "pods"),
            events_rule(),
            rule("get create delete list watch", "storage.k8s.io", "volumeattachments"),
            rule("get list watch", "storage.k8s.io", "csidrivers"),
            rule("get list watch", "storage.k8s.io", "csinodes"),
        ]),
        ("certificate-controller", [
            rule("get list watch delete", "certificates.k8s.io", "certificatesigningrequests"),
            rule("update", "certificates.k8s.io",
                 "certificatesigningrequests/status certificatesigningrequests/approval"),
            rule("approve", "certificates.k8s.io", "signers", "kubernetes.io/kube-apiserver-client-kubelet"),
            rule("sign", "certificates.k8s.io", "signers",
                 "kubernetes.io/kube-apiserver-client kubernetes.io/kube-apiserver-client-kubelet "
                 "kubernetes.io/kubelet-serving kubernetes.io/legacy-unknown"),
            rule("create", "authorization.k8s.io", "subjectaccessreviews"),
            events_rule(),
        ]),
        ("clusterrole-aggregation-controller", [rule("escalate get list patch update watch", RBAC_GROUP,
                                                     "clusterroles")]),
        ("cronjob-controller", [
            rule("get list watch update", "batch", "cronjobs"),
            rule("get list watch create update delete patch", "batch", "jobs"),
            rule("update", "batch", "cronjobs/status"),
            rule("update", "batch", "cronjobs/finalizers"),
            rule("list watch delete", "-", "pods"),
            events_rule(),
        ]),
        ("daemon-set-controller", [
            rule("get list watch", "extensions apps", "daemonsets"),
            rule("update", "extensions apps", "daemonsets/status"),
            rule("update", "extensions apps", "daemonsets/finalizers"),
            rule("list watch", "-", "nodes"),
            rule("list watch create delete patch", "-", "pods"),
            rule("create", "-", "pods/binding"),
            rule("get list watch create delete update patch", "apps", "controllerrevisions"),
            events_rule(),
        ]),
        ("deployment-controller", [
            rule("get list watch update", "extensions apps", "deployments"),
            rule("update", "extensions apps", "deployments/status"),
            rule("update", "extensions apps", "deployments/finalizers"),
            rule("get list watch create update patch delete", "extensions apps", "replicasets"),
            rule("get list watch update", "-", "pods"),
            events_rule(),
        ]),
        ("device-taint-eviction-controller", [
            rule("get list watch delete", "-", "pods"),
            rule("update patch", "-", "pods/status"),
            rule(READ, "resource.k8s.io", "resourceclaims"),
            rule(READ, "resource.k8s.io", "resourceslices"),
            rule(READ, "resource.k8s.io", "deviceclasses"),
            events_rule(),
        ]),
        ("disruption-controller", [
            rule("get list watch", "extensions apps", "deployments"),
            rule("get list watch", "apps extensions", "replicasets"),
            rule("get list watch", "-", "replicationcontrollers"),
            rule("get list watch", "policy", "poddisruptionbudgets"),
            rule("get list watch", "apps", "statefulsets"),
            rule("update", "policy", "poddisruptionbudgets/status"),
            rule("patch update", "-", "pods/status"),
            rule("get", "*", "*/scale"),
            events_rule(),
        ]),
        ("endpoint-controller", [
            rule("get list watch", "-", "services pods"),
            rule("get list watch create update delete", "-", "endpoints"),
            rule("create", "-", "endpoints/restricted"),
            events_rule(),
        ]),
        ("endpointslice-controller", [
            rule("get list watch", "-", "services pods nodes"),
            rule("update", "-", "services/finalizers"),
            rule("get list watch create update delete", "discovery.k8s.io", "endpointslices"),
            events_rule(),
        ]),
        ("endpointslicemirroring-controller", [
            rule("get list watch", "-", "services endpoints"),
            rule("update", "-", "services/finalizers"),
            rule("update", "-", "endpoints/finalizers"),
            rule("get list watch create update delete", "discovery.k8s.io", "endpointslices"),
            events_rule(),
        ]),
        ("ephemeral-volume-controller", [
            rule("get list watch", "-", "pods"),
            rule("update", "-", "pods/finalizers"),
            rule("get list watch create", "-", "persistentvolumeclaims"),
            events_rule(),
        ]),
        ("expand-controller", [
            rule("get list watch update patch", "-", "persistentvolumes"),
            rule("update patch", "-", "persistentvolumeclaims/status"),
            rule("get list watch", "-", "persistentvolumeclaims"),
            events_rule(),
        ]),
        ("generic-garbage-collector", [rule("get list watch patch update delete", "*", "*"), events_rule()]),
        ("horizontal-pod-autoscaler", [
            rule("get list watch", "autoscaling", "horizontalpodautoscalers"),
            rule("update", "autoscaling", "horizontalpodautoscalers/status"),
            rule("get update", "*", "*/scale"),
            rule("list watch", "-", "pods"),
            rule("list watch", "metrics.k8s.io", "pods"),
            rule("get list watch", "custom.metrics.k8s.io", "*"),
            rule("get list watch", "external.metrics.k8s.io", "*"),
            events_rule(),
        ]),
        ("job-controller", [
            rule("get list watch update patch", "batch", "jobs"),
            rule("update", "batch", "jobs/status"),
            rule("update", "batch", "jobs/finalizers"),
            rule("list watch create delete patch", "-", "pods"),
            events_rule(),
        ]),
        ("legacy-service-account-token-cleaner", [
            rule("get", "-", "configmaps", "kube-apiserver-legacy-service-account-token-tracking"),
            rule("patch delete", "-", "secrets"),
        ]),
        ("namespace-controller", [
            rule("get list watch delete", "-", "namespaces"),
            rule("update", "-", "namespaces/finalize namespaces/status"),
            rule("get list watch delete deletecollection", "*", "*"),
        ]),
        ("node-controller", [
            rule("get list watch update delete patch", "-", "nodes"),
            rule("patch update", "-", "nodes/status"),
            rule("patch update", "-", "pods/status"),
            rule("get list watch delete", "-", "pods"),
            events_rule(),
        ]),
        ("persistent-volume-binder", [
            rule("get list watch update create delete", "-", "persistentvolumes"),
            rule("update", "-", "persistentvolumes/status"),
            rule("get list watch update", "-", "persistentvolumeclaims"),
            rule("update", "-", "persistentvolumeclaims/status"),
            rule("list watch get create delete", "-", "pods"),
            rule("get list watch", "storage.k8s.io", "storageclasses"),
            rule("list watch", "-", "nodes"),
            events_rule(),
            rule("watch", "-", "events"),
        ]),
        ("pod-garbage-collector", [
            rule("list watch delete", "-", "pods"),
            rule("get list watch", "-", "nodes"),
            rule("patch", "-", "pods/status"),
        ]),
        ("pv-protection-controller", [rule("get list watch update", "-", "persistentvolumes"), events_rule()]),
        ("pvc-protection-controller", [
            rule("get list watch update", "-", "persistentvolumeclaims"),
            rule("update", "-", "persistentvolumeclaims/status"),
            rule("list watch get", "-", "pods"),
            events_rule(),
        ]),
        ("replicaset-controller", [
            rule("get list watch update", "apps extensions", "replicasets"),
            rule("update", "apps extensions", "replicasets/status"),
            rule("update", "apps extensions", "replicasets/finalizers"),
            rule("list watch patch create delete", "-", "pods"),
            events_rule(),
        ]),
        ("replication-controller", [
            rule("get list watch update", "-", "replicationcontrollers"),
            rule("update", "-", "replicationcontrollers/status"),
            rule("update", "-", "replicationcontrollers/finalizers"),
            rule("list watch patch create delete", "-", "pods"),
            events_rule(),
        ]),
        ("resource-claim-controller", [
            rule("get list watch", "-", "pods"),
            rule("update", "-", "pods/finalizers"),
            rule("get list watch create delete", "resource.k8s.io", "resourceclaims"),
            rule("update patch", "resource.k8s.io", "resourceclaims resourceclaims/status"),
            rule("update patch", "-", "pods/status"),
            events_rule(),
            rule("update patch", "resource.k8s.io", "resourceclaims/binding"),
        ]),
        ("resourcequota-controller", [
            rule("list watch", "*", "*"),
            rule("update", "-", "resourcequotas/status"),
            events_rule(),
        ]),
        ("root-ca-cert-publisher", [rule("create update", "-", "configmaps"), events_rule()]),
        ("route-controller", [rule("list watch", "-", "nodes"), rule("patch", "-", "nodes/status"),
                              events_rule()]),
        ("selinux-warning-controller", [
            events_rule(),
            rule(READ, "-", "persistentvolumes"),
            rule(READ, "-", "persistentvolumeclaims"),
            rule(READ, "-", "pods"),
            rule(READ, "storage.k8s.io", "csidrivers"),
        ]),
        ("service-account-controller", [rule("create", "-", "serviceaccounts"), events_rule()]),
        ("service-cidrs-controller", [
            rule("get list watch patch update", "networking.k8s.io", "servicecidrs"),
            rule("patch update", "networking.k8s.io", "servicecidrs/finalizers"),
            rule("patch update", "networking.k8s.io", "servicecidrs/status"),
            rule("get list watch", "networking.k8s.io", "ipaddresses"),
            events_rule(),
        ]),
        ("service-controller", [
            rule("get list watch", "-", "services"),
            rule("patch update", "-", "services/status"),
            rule("list watch", "-", "nodes"),
            events_rule(),
        ]),
        ("statefulset-controller", [
            rule("list watch", "-", "pods"),
            rule("get list watch", "apps", "statefulsets"),
            rule("update", "apps", "statefulsets/status"),
            rule("update", "apps", "statefulsets/finalizers"),
            rule("get create delete update patch", "-", "pods"),
            rule("get create delete update patch list watch", "apps", "controllerrevisions"),
            rule("get list watch create", "-", "persistentvolumeclaims"),
            rule("update delete", "-", "persistentvolumeclaims"),
            rule("update", "-", "pods/finalizers"),
            events_rule(),
        ]),
        ("ttl-after-finished-controller", [rule("get list watch delete", "batch", "jobs"), events_rule()]),
        ("ttl-controller", [rule("update patch list watch", "-", "nodes"), events_rule()]),
        ("validatingadmissionpolicy-status-controller", [
            rule("get list watch", "admissionregistration.k8s.io", "validatingadmissionpolicies"),
            rule("get patch update", "admissionregistration.k8s.io", "validatingadmissionpolicies/status"),
            events_rule(),
        ]),
        ("volumeattributesclass-protection-controller", [
            rule(READ, "-", "persistentvolumeclaims"),
            rule(READ, "-", "persistentvolumes"),
            rule("get list watch update", "storage.k8s.io", "volumeattributesclasses"),
            events_rule(),
        ]),
    ]


def _cluster_bindings() -> list[tuple[str, str, list[Obj]]]:
    """(binding name, ClusterRole name, subjects) of each bootstrap ClusterRoleBinding."""
    def group(name: str) -> Obj:
        return {"kind": "Group", "apiGroup": RBAC_GROUP, "name": name}

    def user(name: str) -> Obj:
        return {"kind": "User", "apiGroup": RBAC_GROUP, "name": name}

    return [
        ("cluster-admin", "cluster-admin", [group("system:masters")]),
        ("system:monitoring", "system:monitoring", [group("system:monitoring")]),
        ("system:discovery", "system:discovery", [group("system:authenticated")]),
        ("system:basic-user", "system:basic-user", [group("system:authenticated")]),
        ("system:public-info-viewer", "system:public-info-viewer",
         [group("system:authenticated"), group("system:unauthenticated")]),
        ("system:node-proxier", "system:node-proxier", [user("system:kube-proxy")]),
        ("system:kube-controller-manager", "system:kube-controller-manager",
         [user("system:kube-controller-manager")]),
        ("system:kube-dns", "system:kube-dns",
         [{"kind": "ServiceAccount", "name": "kube-dns", "namespace": "kube-system"}]),
        ("system:kube-scheduler", "system:kube-scheduler", [user("system:kube-scheduler")]),
        ("system:volume-scheduler", "system:volume-scheduler", [user("system:kube-scheduler")]),
        ("system:node", "system:node", []),
        ("system:service-account-issuer-discovery", "system:service-account-issuer-discovery",
         [group("system:serviceaccounts")]),
    ]


# Roles upstream creates in kube-system and kube-public (namespace_policy.go): leader election (Leases and, for
# coordinated leader election, LeaseCandidates) and the bootstrap-signer's and token-cleaner's access.
def _namespace_roles() -> list[tuple[str, str, list[Obj], str, list[Obj]]]:
    """(namespace, Role name, rules, RoleBinding name, the binding's subjects)."""
    def sa(name: str) -> Obj:
        return {"kind": "ServiceAccount", "name": name, "namespace": "kube-system"}

    def user(name: str) -> Obj:
        return {"kind": "User", "apiGroup": RBAC_GROUP, "name": name}

    leader_locking = [rule("create get list update watch", "coordination.k8s.io", "leases"),
                      rule("create get list update watch", "coordination.k8s.io", "leasecandidates")]
    return [
        ("kube-system", "extension-apiserver-authentication-reader",
         [rule("get list watch", "-", "configmaps", "extension-apiserver-authentication")],
         "system::extension-apiserver-authentication-reader",
         [user("system:kube-controller-manager"), user("system:kube-scheduler")]),
        ("kube-system", "system:controller:bootstrap-signer",
         [rule("get list watch", "-", "secrets")], "system:controller:bootstrap-signer",
         [sa("bootstrap-signer")]),
        ("kube-system", "system:controller:cloud-provider",
         [rule("create get list watch", "-", "configmaps")], "system:controller:cloud-provider",
         [sa("cloud-provider")]),
        ("kube-system", "system:controller:token-cleaner",
         [rule("delete get list watch", "-", "secrets"), events_rule()], "system:controller:token-cleaner",
         [sa("token-cleaner")]),
        ("kube-system", "system::leader-locking-kube-controller-manager", leader_locking,
         "system::leader-locking-kube-controller-manager",
         [user("system:kube-controller-manager"), sa("kube-controller-manager"), sa("leader-election-controller")]),
        ("kube-system", "system::leader-locking-kube-scheduler", leader_locking,
         "system::leader-locking-kube-scheduler", [user("system:kube-scheduler"), sa("kube-scheduler")]),
        ("kube-public", "system:controller:bootstrap-signer",
         [rule("get list watch", "-", "configmaps"),
          rule("update", "-", "configmaps", "cluster-info"), events_rule()],
         "system:controller:bootstrap-signer", [sa("bootstrap-signer")]),
    ]


def _meta(name: str, extra_labels: dict[str, str] | None = None, namespace: str = "") -> Obj:
    out: Obj = {"name": name, "labels": {**(extra_labels or {}), **LABELS}, "annotations": dict(ANNOTATIONS)}
    if namespace:
        out["namespace"] = namespace
    return out


def _role_ref(kind: str, name: str) -> Obj:
    return {"apiGroup": RBAC_GROUP, "kind": kind, "name": name}


def cluster_roles() -> list[Obj]:
    """Every bootstrap ClusterRole, as created (aggregated roles with no rules yet)."""
    out: list[Obj] = []
    for name, rules, labels, aggregate_from in _cluster_roles():
        role: Obj = {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRole", "metadata": _meta(name, labels)}
        if aggregate_from:
            role["aggregationRule"] = {"clusterRoleSelectors": [
                {"matchLabels": {f"{AGGREGATE_TO}{target}": "true"}} for target in aggregate_from]}
        role["rules"] = rules
        out.append(role)
    for name, rules in _controller_roles():
        out.append({"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRole",
                    "metadata": _meta(f"system:controller:{name}"), "rules": rules})
    return out


def cluster_role_bindings() -> list[Obj]:
    out = [{"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRoleBinding", "metadata": _meta(name),
            "roleRef": _role_ref("ClusterRole", role), "subjects": subjects}
           for name, role, subjects in _cluster_bindings()]
    for name, _rules in _controller_roles():
        full = f"system:controller:{name}"
        out.append({"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRoleBinding", "metadata": _meta(full),
                    "roleRef": _role_ref("ClusterRole", full),
                    "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": "kube-system"}]})
    return out


VIEWER_ROLE = "kube-sim:viewer"


def _viewer_objects() -> tuple[Obj, Obj]:
    meta: Obj = {"name": VIEWER_ROLE, "labels": {"app.kubernetes.io/managed-by": "kube-sim"}}
    role = {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRole", "metadata": meta,
            "rules": [rule(READ, "*", "*")]}
    binding = {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRoleBinding", "metadata": dict(meta),
               "roleRef": _role_ref("ClusterRole", VIEWER_ROLE),
               "subjects": [{"kind": "User", "apiGroup": RBAC_GROUP, "name": "viewer"}]}
    return role, binding


def node_rules() -> list[Obj]:
    """The ``system:node`` ClusterRole's rules: what the Node authorizer allows every node outside the kinds it
    decides by relationship (NodeRules)."""
    return next(rules for name, rules, _labels, _agg in _cluster_roles() if name == "system:node")


@functools.cache
def _encoded_policy() -> bytes:
    """The cluster-scoped policy, built once per process (every ApiServer starts with a fresh copy)."""
    return orjson.dumps([cluster_roles(), cluster_role_bindings()])


def install(api: ApiServer, *, viewer: bool) -> None:
    """Create the bootstrap policy (and, with ``viewer``, kube-sim's viewer role) in a new ApiServer."""
    roles, bindings = orjson.loads(_encoded_policy())
    for role in roles:
        api.create(CLUSTERROLES, role)
    for binding in bindings:
        api.create(CLUSTERROLEBINDINGS, binding)
    namespaces = {s.obj["metadata"]["name"] for s in api.store(NAMESPACES).iter_from(None)}
    for namespace, name, rules, binding_name, subjects in _namespace_roles():
        if namespace not in namespaces:
            continue
        api.create(ROLES, {"metadata": _meta(name, namespace=namespace), "rules": rules}, namespace)
        api.create(ROLEBINDINGS, {"metadata": _meta(binding_name, namespace=namespace),
                                  "roleRef": _role_ref("Role", name), "subjects": subjects}, namespace)
    if viewer:
        role, binding = _viewer_objects()
        api.create(CLUSTERROLES, role)
        api.create(CLUSTERROLEBINDINGS, binding)
