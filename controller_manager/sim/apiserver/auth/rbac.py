"""The RBAC authorizer: Roles, ClusterRoles and their bindings decide, as plugin/pkg/auth/authorizer/rbac does.

Guarantees:
- Users in ``system:masters`` are allowed everything first, with no reason (the superuser authorizer runs
  before RBAC). Everyone else is allowed exactly what a rule reachable through a binding grants:
  ClusterRoleBindings first, then the RoleBindings of the request's namespace (for a namespaced request).
- A binding applies to a User subject by name, a Group subject by membership, a ServiceAccount subject by
  its ``system:serviceaccount:<ns>:<name>`` user (an empty namespace in a RoleBinding is the binding's).
- A rule matches on verb, API group and resource (``*`` wildcards, ``<resource>/<subresource>``,
  ``*/<subresource>``), resourceNames (a request without a name matches none), and for paths on
  nonResourceURLs (``*``, exact, or a trailing ``*`` prefix).
- An allowing answer carries upstream's reason (``RBAC: allowed by ClusterRoleBinding "x" of ClusterRole
  "y" to Group "z"``); a denial's reason lists the roles bindings point at that do not exist.
- :func:`rules_for` lists what a user may do in a namespace (SelfSubjectRulesReview's answer).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from controller_manager.api.resources import CLUSTERROLEBINDINGS, CLUSTERROLES, ROLEBINDINGS, ROLES
from controller_manager.sim.apiserver import errors
from controller_manager.sim.apiserver.auth import bootstrap
from controller_manager.sim.apiserver.auth.node import NodeAuthorizer
from controller_manager.sim.apiserver.auth.users import User

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer

Obj = dict[str, Any]


@dataclass(frozen=True)
class Attributes:
    """What a request asks for (authorizer.Attributes)."""

    user: User
    verb: str
    resource_request: bool
    path: str = ""
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    # A list's or watch's field selector's exact-match requirements (field -> value), as the authorizers see
    # them (AuthorizeWithSelectors).
    fields: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""


def _has(values: Any, wanted: str) -> bool:
    return isinstance(values, list) and ("*" in values or wanted in values)


def rule_allows(attrs: Attributes, rule: Obj) -> bool:
    if not _has(rule.get("verbs"), attrs.verb):
        return False
    if not attrs.resource_request:
        return any(u == "*" or u == attrs.path or (u.endswith("*") and attrs.path.startswith(u[:-1]))
                   for u in rule.get("nonResourceURLs") or () if isinstance(u, str))
    if not _has(rule.get("apiGroups"), attrs.group):
        return False
    combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    resources = rule.get("resources") or ()
    if not any(r == "*" or r == combined or (attrs.subresource and r == f"*/{attrs.subresource}")
               for r in resources):
        return False
    names = rule.get("resourceNames") or ()
    return not names or attrs.name in names


def _subject_applies(subject: Obj, user: User, binding_namespace: str) -> bool:
    kind = subject.get("kind")
    name = subject.get("name")
    if kind == "User":
        return bool(user.name == name)
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        return bool(namespace) and user.name == f"system:serviceaccount:{namespace}:{name}"
    return False


def _describe_subject(subject: Obj, binding_namespace: str) -> str:
    if subject.get("kind") == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        return f'ServiceAccount "{subject.get("name")}/{namespace}"'
    return f'{subject.get("kind")} "{subject.get("name")}"'


@dataclass(frozen=True)
class _Grant:
    """The rules one binding gives one user, and how to name that binding in a reason."""

    source: str
    rules: list[Obj]


class Authorizer:
    """The authorizer chain of a kubeadm cluster's kube-apiserver: the ``system:masters`` superuser check, then
    ``--authorization-mode=Node,RBAC``."""

    def __init__(self, api: ApiServer) -> None:
        self.api = api
        self.node = NodeAuthorizer(api, bootstrap.node_rules(), rule_allows)

    def _objects(self, res: Any, namespace: str | None) -> Iterator[Obj]:
        for stored in self.api.store(res).iter_from(namespace):
            yield stored.obj

    def role_rules(self, ref: Obj, namespace: str) -> list[Obj] | None:
        """The rules of the role a binding refers to (None when it does not exist)."""
        kind, name = ref.get("kind"), str(ref.get("name") or "")
        if kind == "ClusterRole":
            found = self.api.stored_object(CLUSTERROLES, None, name)
        elif kind == "Role" and namespace:
            found = self.api.stored_object(ROLES, namespace, name)
        else:
            return None
        return None if found is None else list(found.get("rules") or ())

    def _grants(self, user: User, namespace: str, errs: list[str]) -> Iterator[_Grant]:
        """Each applicable binding's rules: cluster bindings first, then the namespace's (VisitRulesFor)."""
        scopes: list[tuple[Any, str | None]] = [(CLUSTERROLEBINDINGS, None)]
        if namespace:
            scopes.append((ROLEBINDINGS, namespace))
        for res, ns in scopes:
            for binding in self._objects(res, ns):
                binding_ns = str(binding["metadata"].get("namespace") or "")
                subject = next((s for s in binding.get("subjects") or () if _subject_applies(s, user, binding_ns)),
                               None)
                if subject is None:
                    continue
                ref = binding.get("roleRef") or {}
                rules = self.role_rules(ref, binding_ns)
                if rules is None:
                    kind = "clusterrole" if ref.get("kind") == "ClusterRole" else "role"
                    errs.append(f'{kind}.rbac.authorization.k8s.io "{ref.get("name")}" not found')
                    continue
                name = binding["metadata"]["name"]
                what = (f'RoleBinding "{name}/{binding_ns}"' if binding_ns else f'ClusterRoleBinding "{name}"')
                source = (f'{what} of {ref.get("kind")} "{ref.get("name")}" to '
                          f"{_describe_subject(subject, binding_ns)}")
                yield _Grant(source, rules)

    def authorize(self, attrs: Attributes) -> Decision:
        if attrs.user.privileged:
            return Decision(True)
        node_allowed, node_reason = self.node.authorize(attrs)
        if node_allowed:
            return Decision(True, node_reason)
        errs: list[str] = []
        for grant in self._grants(attrs.user, attrs.namespace if attrs.resource_request else "", errs):
            if any(rule_allows(attrs, rule) for rule in grant.rules):
                return Decision(True, f"RBAC: allowed by {grant.source}")
        reasons = [node_reason] if node_reason else []
        if errs:
            reasons.append("RBAC: " + (errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]"))
        # No authorizer had an opinion: their reasons, one a line (the union authorizer).
        return Decision(False, "\n".join(reasons))

    def rules_for(self, user: User, namespace: str) -> tuple[list[Obj], list[Obj], list[str]]:
        """(resourceRules, nonResourceRules, evaluation errors) as SelfSubjectRulesReview reports them."""
        resource_rules: list[Obj] = []
        non_resource_rules: list[Obj] = []
        if user.privileged:
            resource_rules.append({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})
            non_resource_rules.append({"verbs": ["*"], "nonResourceURLs": ["*"]})
        errs: list[str] = []
        for grant in self._grants(user, namespace, errs):
            for rule in grant.rules:
                verbs = list(rule.get("verbs") or ())
                if rule.get("nonResourceURLs"):
                    non_resource_rules.append({"verbs": verbs, "nonResourceURLs": list(rule["nonResourceURLs"])})
                if rule.get("resources") or rule.get("apiGroups"):
                    converted: Obj = {"verbs": verbs, "apiGroups": list(rule.get("apiGroups") or ()),
                                      "resources": list(rule.get("resources") or ())}
                    if rule.get("resourceNames"):
                        converted["resourceNames"] = list(rule["resourceNames"])
                    resource_rules.append(converted)
        return resource_rules, non_resource_rules, errs


def forbidden(attrs: Attributes, reason: str = "") -> errors.StatusError:
    """The 403 a denied request gets (responsewriters.Forbidden), naming the user and what it may not do."""
    user = attrs.user.name
    if not attrs.resource_request:
        why = f'User "{user}" cannot {attrs.verb} path "{attrs.path}"'
        return errors.forbidden("", "", "", why + (f": {reason}" if reason else ""))
    full = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    scope = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    why = f'User "{user}" cannot {attrs.verb} resource "{full}" in API group "{attrs.group}" {scope}'
    return errors.forbidden(attrs.group, attrs.resource, attrs.name, why + (f": {reason}" if reason else ""))
