"""The RBAC the daemon needs: one table of PolicyRules per controller, plus the manager's own rules.

Guarantees:
- :data:`CONTROLLER_ROLES` is the single source of the permissions each controller uses, keyed by the
  canonical ``--controllers`` name (``controller_manager.manager.registry``). Each row is upstream's bootstrap
  role ``system:controller:<role>`` (``plugin/pkg/auth/authorizer/rbac/bootstrappolicy/controller_policy.go``)
  with two deliberate differences: the ``extensions`` API group is dropped (this daemon only speaks
  ``apps/v1``, and no supported API server serves workloads under ``extensions``), and the
  taint-eviction-controller and node-ipam-controller, which upstream run with the node-controller's role, get
  only the part of it that they use (taint eviction: pods, pods/status, reading nodes, events; node IPAM:
  reading and patching nodes, events). Controllers without an upstream role of their own
  (serviceaccount-token, bootstrap-signer, token-cleaner, cloud-node-lifecycle) have no row:
  asking for their rules is a :class:`KeyError`.
- :data:`MANAGER_RULES` are what the process needs whatever runs: ``create`` on TokenReviews and
  SubjectAccessReviews (delegated authn/authz of ``/metrics``) and writing Events (the leader-election
  events). :func:`leader_election_rules` are namespaced rules for the Lease, in a Role of its namespace.
- :func:`normalize` gives the canonical form every consumer compares: one rule per (API group, resource,
  resource names), verbs de-duplicated and sorted, rules sorted. :func:`rules_for` merges the rows of a set
  of controllers (and the manager's rules) into that form; the Helm chart's ClusterRole renders to the same.
- ``python -m controller_manager.manager.rbac --controllers '*,-job'`` prints the ClusterRole (YAML) for what
  that flag would run (implemented controllers only, unless ``--all``).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller_manager.manager.options import DEFAULT_LEASE_NAME, parse_string_slice
from controller_manager.manager.registry import Registry, UnknownControllersError, default_registry


@dataclass(frozen=True, slots=True, order=True)
class PolicyRule:
    """``rbac.authorization.k8s.io/v1`` PolicyRule over resources (non-resource URLs are never needed)."""

    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    resource_names: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        # Keys in the order the API server (and Helm's toYaml) prints them: alphabetical.
        out: dict[str, Any] = {"apiGroups": list(self.api_groups)}
        if self.resource_names:
            out["resourceNames"] = list(self.resource_names)
        out["resources"] = list(self.resources)
        out["verbs"] = list(self.verbs)
        return out

    @classmethod
    def from_dict(cls, rule: Mapping[str, Any]) -> PolicyRule:
        return cls(tuple(rule.get("apiGroups") or ()), tuple(rule.get("resources") or ()),
                   tuple(rule.get("verbs") or ()), tuple(rule.get("resourceNames") or ()))


@dataclass(frozen=True, slots=True)
class ControllerRole:
    """One row: the upstream role a controller's rules come from, and the rules."""

    upstream_role: str  # the name after "system:controller:" upstream
    rules: tuple[PolicyRule, ...]


def _rule(spec: str) -> PolicyRule:
    """``"verbs | groups | resources [| resourceNames]"``, each part comma-separated; ``core`` is the "" group."""
    parts = [p.strip() for p in spec.split("|")]
    verbs, groups, resources = (tuple(x.strip() for x in p.split(",")) for p in parts[:3])
    names = tuple(x.strip() for x in parts[3].split(",")) if len(parts) > 3 else ()
    return PolicyRule(tuple("" if g == "core" else g for g in groups), resources, verbs, names)


_EVENTS = "create,update,patch | core,events.k8s.io | events"


def _role(upstream: str, *specs: str) -> ControllerRole:
    return ControllerRole(upstream, tuple(_rule(s) for s in specs))


_NODE_CONTROLLER = (
    "get,list,watch,update,delete,patch | core | nodes",
    "patch,update | core | nodes/status",
    "patch,update | core | pods/status",
    "list,watch,get,delete | core | pods",
    _EVENTS,
)
_CERTIFICATE_CONTROLLER = (
    "get,list,watch,delete | certificates.k8s.io | certificatesigningrequests",
    "update | certificates.k8s.io | certificatesigningrequests/status,certificatesigningrequests/approval",
    "approve | certificates.k8s.io | signers | kubernetes.io/kube-apiserver-client-kubelet",
    "sign | certificates.k8s.io | signers | kubernetes.io/legacy-unknown,kubernetes.io/kube-apiserver-client,"
    "kubernetes.io/kube-apiserver-client-kubelet,kubernetes.io/kubelet-serving",
    "create | authorization.k8s.io | subjectaccessreviews",
    _EVENTS,
)

# Canonical controller name -> its role. Rows follow upstream's file; comments say where they differ.
CONTROLLER_ROLES: Mapping[str, ControllerRole] = {
    "persistentvolume-attach-detach-controller": _role(
        "attachdetach-controller",
        "list,watch | core | persistentvolumes,persistentvolumeclaims",
        "get,list,watch | core | nodes",
        "patch,update | core | nodes/status",
        "list,watch | core | pods",
        _EVENTS,
        "get,create,delete,list,watch | storage.k8s.io | volumeattachments",
        "get,watch,list | storage.k8s.io | csidrivers",
        "get,watch,list | storage.k8s.io | csinodes",
    ),
    "certificatesigningrequest-signing-controller": _role("certificate-controller", *_CERTIFICATE_CONTROLLER),
    "certificatesigningrequest-approving-controller": _role("certificate-controller", *_CERTIFICATE_CONTROLLER),
    "certificatesigningrequest-cleaner-controller": _role("certificate-controller", *_CERTIFICATE_CONTROLLER),
    "clusterrole-aggregation-controller": _role(
        "clusterrole-aggregation-controller",
        "escalate,get,list,watch,update,patch | rbac.authorization.k8s.io | clusterroles",
    ),
    "cronjob-controller": _role(
        "cronjob-controller",
        "get,list,watch,update | batch | cronjobs",
        "get,list,watch,create,update,delete,patch | batch | jobs",
        "update | batch | cronjobs/status",
        "update | batch | cronjobs/finalizers",
        "list,watch,delete | core | pods",
        _EVENTS,
    ),
    "daemonset-controller": _role(
        "daemon-set-controller",
        "get,list,watch | apps | daemonsets",
        "update | apps | daemonsets/status",
        "update | apps | daemonsets/finalizers",
        "list,watch | core | nodes",
        "list,watch,create,delete,patch | core | pods",
        "create | core | pods/binding",
        "get,list,watch,create,delete,update,patch | apps | controllerrevisions",
        _EVENTS,
    ),
    "deployment-controller": _role(
        "deployment-controller",
        "get,list,watch,update | apps | deployments",
        "update | apps | deployments/status",
        "update | apps | deployments/finalizers",
        "get,list,watch,create,update,patch,delete | apps | replicasets",
        # upstream keeps pod "update" pending kubernetes#36897; kept for parity
        "get,list,watch,update | core | pods",
        _EVENTS,
    ),
    "device-taint-eviction-controller": _role(
        "device-taint-eviction-controller",
        "get,list,watch,delete | core | pods",
        "update,patch | core | pods/status",
        "get,list,watch | resource.k8s.io | resourceclaims",
        "get,list,watch | resource.k8s.io | resourceslices",
        "get,list,watch | resource.k8s.io | deviceclasses",
        _EVENTS,
    ),
    "disruption-controller": _role(
        "disruption-controller",
        "get,list,watch | apps | deployments",
        "get,list,watch | apps | replicasets",
        "get,list,watch | core | replicationcontrollers",
        "get,list,watch | policy | poddisruptionbudgets",
        "get,list,watch | apps | statefulsets",
        "update | policy | poddisruptionbudgets/status",
        "patch,update | core | pods/status",
        "get | * | */scale",
        _EVENTS,
    ),
    "endpoints-controller": _role(
        "endpoint-controller",
        "get,list,watch | core | services,pods",
        "get,list,watch,create,update,delete | core | endpoints",
        "create | core | endpoints/restricted",
        _EVENTS,
    ),
    "endpointslice-controller": _role(
        "endpointslice-controller",
        "get,list,watch | core | services,pods,nodes",
        "update | core | services/finalizers",
        "get,list,watch,create,update,delete | discovery.k8s.io | endpointslices",
        _EVENTS,
    ),
    "endpointslice-mirroring-controller": _role(
        "endpointslicemirroring-controller",
        "get,list,watch | core | services,endpoints",
        "update | core | services/finalizers",
        "update | core | endpoints/finalizers",
        "get,list,watch,create,update,delete | discovery.k8s.io | endpointslices",
        _EVENTS,
    ),
    "persistentvolume-expander-controller": _role(
        "expand-controller",
        "get,list,watch,update,patch | core | persistentvolumes",
        "update,patch | core | persistentvolumeclaims/status",
        "get,list,watch | core | persistentvolumeclaims",
        _EVENTS,
        "get | core | services",
    ),
    "ephemeral-volume-controller": _role(
        "ephemeral-volume-controller",
        "get,list,watch | core | pods",
        "update | core | pods/finalizers",
        "get,list,watch,create | core | persistentvolumeclaims",
        _EVENTS,
    ),
    "garbage-collector-controller": _role(
        "generic-garbage-collector",
        # list/watch, selective gets and owner-reference updates against any resource
        "get,list,watch,patch,update,delete | * | *",
        _EVENTS,
    ),
    "horizontal-pod-autoscaler-controller": _role(
        "horizontal-pod-autoscaler",
        "get,list,watch | autoscaling | horizontalpodautoscalers",
        "update | autoscaling | horizontalpodautoscalers/status",
        "get,update | * | */scale",
        # upstream grants "list" alone: its pod informer is the manager's shared one; ours watches with this role
        "list,watch | core | pods",
        "list | metrics.k8s.io | pods",
        "get,list | custom.metrics.k8s.io | *",
        "get,list | external.metrics.k8s.io | *",
        _EVENTS,
    ),
    "job-controller": _role(
        "job-controller",
        "get,list,watch,update,patch | batch | jobs",
        "update | batch | jobs/status",
        "update | batch | jobs/finalizers",
        "list,watch,create,delete,patch | core | pods",
        _EVENTS,
    ),
    "kube-apiserver-serving-clustertrustbundle-publisher-controller": _role(
        "kube-apiserver-serving-clustertrustbundle-publisher",
        "attest | certificates.k8s.io | signers | kubernetes.io/kube-apiserver-serving",
        "create,update,delete,list,watch | certificates.k8s.io | clustertrustbundles",
        _EVENTS,
    ),
    "legacy-serviceaccount-token-cleaner-controller": _role(
        "legacy-service-account-token-cleaner",
        "get | core | configmaps | kube-apiserver-legacy-service-account-token-tracking",
        "patch,delete | core | secrets",
    ),
    "namespace-controller": _role(
        "namespace-controller",
        "get,list,watch,delete | core | namespaces",
        "update | core | namespaces/finalize,namespaces/status",
        "get,list,watch,delete,deletecollection | * | *",
    ),
    # Upstream starts this controller with the node-controller's credentials; it uses only this part of them.
    "node-ipam-controller": _role(
        "node-controller",
        "list,watch,patch | core | nodes",
        _EVENTS,
    ),
    "node-lifecycle-controller": _role("node-controller", *_NODE_CONTROLLER),
    "persistentvolume-binder-controller": _role(
        "persistent-volume-binder",
        "get,list,watch,update,create,delete | core | persistentvolumes",
        "update | core | persistentvolumes/status",
        "get,list,watch,update | core | persistentvolumeclaims",
        "update | core | persistentvolumeclaims/status",
        "list,watch,get,create,delete | core | pods",
        "get,list,watch | storage.k8s.io | storageclasses",
        "list,watch | core | nodes",
        _EVENTS,
        "watch | core | events",
        "get | core | services",
    ),
    "podcertificaterequest-cleaner-controller": _role(
        "podcertificaterequestcleaner",
        "get,list,watch,delete | certificates.k8s.io | podcertificaterequests",
    ),
    "pod-garbage-collector-controller": _role(
        "pod-garbage-collector",
        "list,watch,delete | core | pods",
        "get,list,watch | core | nodes",
        "patch | core | pods/status",
    ),
    "persistentvolume-protection-controller": _role(
        "pv-protection-controller",
        "get,list,watch,update | core | persistentvolumes",
        _EVENTS,
    ),
    "persistentvolumeclaim-protection-controller": _role(
        "pvc-protection-controller",
        "get,list,watch,update | core | persistentvolumeclaims",
        "update | core | persistentvolumeclaims/status",
        "list,watch,get | core | pods",
        _EVENTS,
    ),
    "replicaset-controller": _role(
        "replicaset-controller",
        "get,list,watch,update | apps | replicasets",
        "update | apps | replicasets/status",
        "update | apps | replicasets/finalizers",
        "list,watch,patch,create,delete | core | pods",
        _EVENTS,
    ),
    "replicationcontroller-controller": _role(
        "replication-controller",
        "get,list,watch,update | core | replicationcontrollers",
        "update | core | replicationcontrollers/status",
        "update | core | replicationcontrollers/finalizers",
        "list,watch,patch,create,delete | core | pods",
        _EVENTS,
    ),
    "resourceclaim-controller": _role(
        "resource-claim-controller",
        "get,list,watch | core | pods",
        "update | core | pods/finalizers",
        "get,list,watch,create,delete | resource.k8s.io | resourceclaims",
        "update,patch | resource.k8s.io | resourceclaims,resourceclaims/status",
        "update,patch | core | pods/status",
        _EVENTS,
        "update,patch | resource.k8s.io | resourceclaims/binding",
    ),
    "resourcequota-controller": _role(
        "resourcequota-controller",
        "list,watch | * | *",
        "update | core | resourcequotas/status",
        _EVENTS,
    ),
    "root-ca-certificate-publisher-controller": _role(
        "root-ca-cert-publisher",
        "create,update | core | configmaps",
        _EVENTS,
    ),
    "node-route-controller": _role(
        "route-controller",
        "list,watch | core | nodes",
        "patch | core | nodes/status",
        _EVENTS,
    ),
    "selinux-warning-controller": _role(
        "selinux-warning-controller",
        _EVENTS,
        "get,list,watch | core | persistentvolumes",
        "get,list,watch | core | persistentvolumeclaims",
        "get,list,watch | core | pods",
        "get,list,watch | storage.k8s.io | csidrivers",
    ),
    "serviceaccount-controller": _role(
        "service-account-controller",
        "create | core | serviceaccounts",
        _EVENTS,
    ),
    "service-cidr-controller": _role(
        "service-cidrs-controller",
        "get,list,watch,patch,update | networking.k8s.io | servicecidrs",
        "patch,update | networking.k8s.io | servicecidrs/finalizers",
        "patch,update | networking.k8s.io | servicecidrs/status",
        "get,list,watch | networking.k8s.io | ipaddresses",
        _EVENTS,
    ),
    "service-lb-controller": _role(
        "service-controller",
        "get,list,watch | core | services",
        "patch,update | core | services/status",
        "list,watch | core | nodes",
        _EVENTS,
    ),
    "statefulset-controller": _role(
        "statefulset-controller",
        "list,watch | core | pods",
        "get,list,watch | apps | statefulsets",
        "update | apps | statefulsets/status",
        "update | apps | statefulsets/finalizers",
        "get,create,delete,update,patch | core | pods",
        "get,create,delete,update,patch,list,watch | apps | controllerrevisions",
        "get,create,list,watch | core | persistentvolumeclaims",
        "update,delete | core | persistentvolumeclaims",
        "update | core | pods/finalizers",
        _EVENTS,
    ),
    "storageversion-garbage-collector-controller": _role(
        "storage-version-garbage-collector",
        "get,list,watch | coordination.k8s.io | leases",
        "get,list,watch,patch,update,delete | internal.apiserver.k8s.io | storageversions",
        "get,patch,update | internal.apiserver.k8s.io | storageversions/status",
    ),
    "storage-version-migrator-controller": _role(
        "storage-version-migrator-controller",
        "list,watch,create,patch | * | *",
        "update | storagemigration.k8s.io | storageversionmigrations/status",
    ),
    # Upstream starts this controller with the node-controller's credentials; it uses only this part of them.
    "taint-eviction-controller": _role(
        "node-controller",
        "get,list,watch | core | nodes",
        "patch,update | core | pods/status",
        "list,watch,get,delete | core | pods",
        _EVENTS,
    ),
    "ttl-after-finished-controller": _role(
        "ttl-after-finished-controller",
        "get,list,watch,delete | batch | jobs",
        _EVENTS,
    ),
    "ttl-controller": _role(
        "ttl-controller",
        "update,patch,list,watch | core | nodes",
        _EVENTS,
    ),
    "validatingadmissionpolicy-status-controller": _role(
        "validatingadmissionpolicy-status-controller",
        "get,list,watch | admissionregistration.k8s.io | validatingadmissionpolicies",
        "get,patch,update | admissionregistration.k8s.io | validatingadmissionpolicies/status",
        _EVENTS,
    ),
    "volumeattributesclass-protection-controller": _role(
        "volumeattributesclass-protection-controller",
        "list,watch,get | core | persistentvolumeclaims",
        "list,watch,get | core | persistentvolumes",
        "get,list,watch,update | storage.k8s.io | volumeattributesclasses",
        _EVENTS,
    ),
}

# Whatever controllers run: delegated authentication and authorization of /metrics (as
# system:auth-delegator grants), and the Events written on leader-election transitions.
MANAGER_RULES: tuple[PolicyRule, ...] = (
    _rule("create | authentication.k8s.io | tokenreviews"),
    _rule("create | authorization.k8s.io | subjectaccessreviews"),
    _rule(_EVENTS),
)


def leader_election_rules(lease_name: str = DEFAULT_LEASE_NAME) -> list[PolicyRule]:
    """Namespaced rules for the Lease (a Role in ``--leader-elect-resource-namespace``).

    ``create`` cannot be limited by name (the object does not exist yet when it is authorized); reads and
    renewals are limited to the one Lease, as upstream's ``system:kube-controller-manager`` does.
    """
    return normalize([
        _rule("create | coordination.k8s.io | leases"),
        _rule(f"get,update | coordination.k8s.io | leases | {lease_name}"),
    ])


def normalize(rules: Iterable[PolicyRule]) -> list[PolicyRule]:
    """One rule per (group, resource, resource names) with the union of its verbs, all sorted."""
    merged: dict[tuple[str, str, tuple[str, ...]], set[str]] = {}
    for rule in rules:
        names = tuple(sorted(set(rule.resource_names)))
        for group in rule.api_groups:
            for resource in rule.resources:
                merged.setdefault((group, resource, names), set()).update(rule.verbs)
    return [PolicyRule((group,), (resource,), tuple(sorted(verbs)), names)
            for (group, resource, names), verbs in sorted(merged.items())]


def controller_rules(name: str) -> list[PolicyRule]:
    """The normalised rules of one controller (canonical name); :class:`KeyError` if it has no row."""
    return normalize(CONTROLLER_ROLES[name].rules)


def rules_for(controllers: Iterable[str], *, include_manager: bool = True) -> list[PolicyRule]:
    """The merged, normalised ClusterRole rules for a set of enabled controllers (canonical names)."""
    rules: list[PolicyRule] = list(MANAGER_RULES) if include_manager else []
    for name in controllers:
        rules.extend(CONTROLLER_ROLES[name].rules)
    return normalize(rules)


def cluster_role(name: str, rules: Sequence[PolicyRule]) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": [r.to_dict() for r in rules],
    }


def to_yaml(value: Any, indent: int = 0) -> str:
    """Block YAML for plain dicts, lists and scalars (strings quoted JSON-style, which YAML reads as is)."""
    pad = " " * indent
    if isinstance(value, dict):
        if not value:
            return pad + "{}\n"
        out = []
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                out.append(f"{pad}{_key(key)}:\n{to_yaml(item, indent + 2 if isinstance(item, dict) else indent)}")
            else:
                out.append(f"{pad}{_key(key)}: {_scalar(item)}\n")
        return "".join(out)
    if isinstance(value, list):
        if not value:
            return pad + "[]\n"
        out = []
        for item in value:
            text = to_yaml(item, indent + 2) if isinstance(item, (dict, list)) and item else None
            out.append(f"{pad}- {text[indent + 2:]}" if text is not None else f"{pad}- {_scalar(item)}\n")
        return "".join(out)
    return pad + _scalar(value) + "\n"


_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*")
# Words YAML 1.1 (what PyYAML and many tools read) takes for booleans or null when unquoted.
_YAML_WORDS = frozenset({"y", "n", "yes", "no", "true", "false", "on", "off", "null"})


def _key(key: Any) -> str:
    """A mapping key: plain when YAML reads it back as the same string, else quoted."""
    text = str(key)
    if _PLAIN_KEY.fullmatch(text) and text.lower() not in _YAML_WORDS:
        return text
    return _quote(text)


def _scalar(value: Any) -> str:
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    if isinstance(value, str):
        return _quote(value)
    return json.dumps(value)


def _quote(text: str) -> str:
    """A YAML double-quoted scalar: printable ASCII as is, everything else escaped (YAML's \\u / \\U forms)."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0x20 <= code < 0x7F:
            out.append(ch)
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def main(argv: Sequence[str] | None = None, registry: Registry | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m controller_manager.manager.rbac",
        description="Print the ClusterRole the daemon needs for a --controllers value.")
    parser.add_argument("--controllers", default="*", help="as the daemon's --controllers (default: *)")
    parser.add_argument("--name", default="controller-manager", help="the ClusterRole's name")
    parser.add_argument("--all", action="store_true",
                        help="include controllers this build does not implement (when they have an upstream role)")
    parser.add_argument("--lease-name", default=DEFAULT_LEASE_NAME,
                        help="also print the leader-election Role for this Lease name")
    parser.add_argument("--lease-namespace", default="kube-system")
    args = parser.parse_args(argv)
    registry = registry or default_registry()
    try:
        selection = registry.select(parse_string_slice(args.controllers))
    except UnknownControllersError as exc:
        sys.stderr.write(f"Error: {exc}\n")
        return 1
    chosen = selection.enabled if args.all else selection.runnable
    missing = [c.name for c in chosen if c.name not in CONTROLLER_ROLES]
    if missing and not args.all:
        sys.stderr.write(f"Error: no RBAC rules known for {', '.join(missing)}\n")
        return 1
    names = [c.name for c in chosen if c.name in CONTROLLER_ROLES]
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": f"{args.name}:leader-election", "namespace": args.lease_namespace},
        "rules": [r.to_dict() for r in leader_election_rules(args.lease_name)],
    }
    sys.stdout.write(to_yaml(cluster_role(args.name, rules_for(names))))
    sys.stdout.write("---\n" + to_yaml(role))
    return 0


if __name__ == "__main__":
    sys.exit(main())
