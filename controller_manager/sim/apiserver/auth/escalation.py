"""RBAC's escalation checks on Role and binding writes (pkg/registry/rbac/*/policybased, rbac/validation).

Guarantees:
- A user outside ``system:masters`` may write a Role or ClusterRole only with rules it holds itself in that
  namespace (or cluster-wide), unless RBAC allows it the ``escalate`` verb on that role; and a RoleBinding or
  ClusterRoleBinding only to a role whose rules it holds, unless it may ``bind`` that role.
- Coverage is upstream's: each requested rule is split per group, resource, verb (and name or URL), and each
  piece must be covered by one held rule (``*``, exact, ``*/<subresource>``, trailing-``*`` URLs, resourceNames).
- A refusal is upstream's 403: ``roles.rbac.authorization.k8s.io "x" is forbidden: user "bob"
  (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:`` followed by
  the missing rules, compacted and sorted, one per line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from controller_manager.sim.apiserver import errors
from controller_manager.sim.apiserver.auth.rbac import Attributes, Authorizer

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.auth.users import User

Obj = dict[str, Any]
RBAC_GROUP = "rbac.authorization.k8s.io"
_ROLE_KINDS = {"Role": "roles", "ClusterRole": "clusterroles"}
_BINDING_KINDS = {"RoleBinding": "rolebindings", "ClusterRoleBinding": "clusterrolebindings"}


def atoms(rule: Obj) -> list[Obj]:
    """BreakdownRule: one rule per group/resource/verb (and name), or per URL/verb."""
    out: list[Obj] = []
    verbs = rule.get("verbs") or []
    for group in rule.get("apiGroups") or []:
        for resource in rule.get("resources") or []:
            for verb in verbs:
                names = rule.get("resourceNames") or []
                if names:
                    out.extend({"apiGroups": [group], "resources": [resource], "resourceNames": [n],
                                "verbs": [verb]} for n in names)
                else:
                    out.append({"apiGroups": [group], "resources": [resource], "verbs": [verb]})
    for url in rule.get("nonResourceURLs") or []:
        out.extend({"nonResourceURLs": [url], "verbs": [verb]} for verb in verbs)
    return out


def _has(values: list[str], wanted: str) -> bool:
    return "*" in values or wanted in values


def _resource_covered(held: list[str], wanted: str) -> bool:
    if "*" in held or wanted in held:
        return True
    return "/" in wanted and f"*/{wanted.split('/', 1)[1]}" in held


def _url_covered(held: list[str], wanted: str) -> bool:
    return any(u == "*" or u == wanted or (u.endswith("*") and wanted.startswith(u[:-1])) for u in held)


def covers(owner: Obj, atom: Obj) -> bool:
    if not _has(owner.get("verbs") or [], atom["verbs"][0]):
        return False
    if "nonResourceURLs" in atom:
        return _url_covered(owner.get("nonResourceURLs") or [], atom["nonResourceURLs"][0])
    if not _has(owner.get("apiGroups") or [], atom["apiGroups"][0]):
        return False
    if not _resource_covered(owner.get("resources") or [], atom["resources"][0]):
        return False
    names = owner.get("resourceNames") or []
    wanted = atom.get("resourceNames") or []
    if not wanted:  # all objects: only a rule naming none covers it
        return not names
    return not names or all(n in names for n in wanted)


def _compact(missing: list[Obj]) -> list[Obj]:
    """CompactRules: atoms differing only by verb (no names) merge into one rule."""
    out: list[Obj] = []
    merged: dict[tuple[str, str], Obj] = {}
    for atom in missing:
        if "resources" in atom and not atom.get("resourceNames"):
            key = (atom["apiGroups"][0], atom["resources"][0])
            if key in merged:
                merged[key]["verbs"].append(atom["verbs"][0])
                continue
            merged[key] = {**atom, "verbs": list(atom["verbs"])}
            out.append(merged[key])
        else:
            out.append(atom)
    return out


def _go_quoted(values: list[str]) -> str:
    return "[" + " ".join(f'"{v}"' for v in values) + "]"


def compact_string(rule: Obj) -> str:
    parts = []
    for field, label in (("apiGroups", "APIGroups"), ("resources", "Resources"),
                         ("nonResourceURLs", "NonResourceURLs"), ("resourceNames", "ResourceNames"),
                         ("verbs", "Verbs")):
        if rule.get(field):
            parts.append(f"{label}:{_go_quoted(rule[field])}")
    return "{" + ", ".join(parts) + "}"


def _rule_string(rule: Obj) -> str:
    """rbacv1helpers.String, the sort key of missing rules."""
    parts = []
    for field, label in (("apiGroups", "APIGroups"), ("resources", "Resources"),
                         ("resourceNames", "ResourceNames"), ("nonResourceURLs", "NonResourceURLs")):
        if rule.get(field):
            parts.append(f"{label}:{_go_quoted(rule[field])}")
    parts.append(f"Verbs:{_go_quoted(rule.get('verbs') or [])}")
    return "PolicyRule{" + ", ".join(parts) + "}"


def _check_held(authorizer: Authorizer, user: User, namespace: str, rules: list[Obj], group: str, resource: str,
                name: str) -> None:
    held, non_resource, errs = authorizer.rules_for(user, namespace)
    owned = held + non_resource
    missing = [atom for rule in rules for atom in atoms(rule) if not any(covers(o, atom) for o in owned)]
    if not missing:
        return
    lines = "\n".join(compact_string(r) for r in sorted(_compact(missing), key=_rule_string))
    groups = _go_quoted(list(user.groups))
    why = f'user "{user.name}" (groups={groups}) is attempting to grant RBAC permissions not currently held:\n{lines}'
    if errs:
        why += "; resolution errors: [" + ", ".join(errs) + "]"
    raise errors.forbidden(group, resource, name, why)


def check(authorizer: Authorizer, user: User, kind: str, namespace: str, obj: Obj) -> None:
    """Raise the 403 a write of ``obj`` (a Role, ClusterRole or binding) by ``user`` gets, if it escalates."""
    if user.privileged:
        return
    name = str((obj.get("metadata") or {}).get("name") or "")
    if kind in _ROLE_KINDS:
        resource = _ROLE_KINDS[kind]
        escalate = Attributes(user, "escalate", True, group=RBAC_GROUP, resource=resource, namespace=namespace,
                              name=name)
        if authorizer.authorize(escalate).allowed:
            return
        _check_held(authorizer, user, namespace, list(obj.get("rules") or []), RBAC_GROUP, resource, name)
        return
    if kind not in _BINDING_KINDS:
        return
    resource = _BINDING_KINDS[kind]
    ref = obj.get("roleRef") or {}
    ref_kind, ref_name = str(ref.get("kind") or ""), str(ref.get("name") or "")
    bind = Attributes(user, "bind", True, group=RBAC_GROUP, resource=_ROLE_KINDS.get(ref_kind, ""),
                      namespace=namespace, name=ref_name)
    if authorizer.authorize(bind).allowed:
        return
    rules = authorizer.role_rules(ref, namespace)
    if rules is None:
        what = "clusterrole" if ref_kind == "ClusterRole" else "role"
        raise errors.forbidden(RBAC_GROUP, resource, name, f'{what}.rbac.authorization.k8s.io "{ref_name}" not found')
    _check_held(authorizer, user, namespace, rules, RBAC_GROUP, resource, name)
