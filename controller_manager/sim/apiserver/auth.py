"""Bearer-token authentication and a two-role authorizer, with the review APIs that expose them.

Guarantees:
- With no admin token configured, authentication is off and every request acts as the admin.
- The admin token's user (``admin``, group ``system:masters``) may do anything. The viewer token's user
  (``viewer``) may get/list/watch any resource and read the discovery, health and version paths, and
  nothing else. A request without a token is ``system:anonymous``, which may read only
  /healthz, /livez, /readyz and /version. An unknown token is 401.
- Denials are 403 Statuses with the RBAC authorizer's wording (``User "viewer" cannot create resource
  "pods" in API group "" in the namespace "default"``).
- TokenReview and SubjectAccessReview answer from the same tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controller_manager.sim.apiserver import errors

READ_VERBS = frozenset({"get", "list", "watch"})
_PUBLIC_PATHS = ("/healthz", "/livez", "/readyz", "/version")
_DISCOVERY_PATHS = (*_PUBLIC_PATHS, "/api", "/apis", "/openapi")


@dataclass(frozen=True)
class User:
    name: str
    uid: str
    groups: tuple[str, ...]

    def as_user_info(self) -> dict[str, Any]:
        return {"username": self.name, "uid": self.uid, "groups": list(self.groups)}


ADMIN = User("admin", "admin-uid", ("system:masters", "system:authenticated"))
VIEWER = User("viewer", "viewer-uid", ("system:authenticated",))
ANONYMOUS = User("system:anonymous", "", ("system:unauthenticated",))


class Authenticator:
    def __init__(self, admin_token: str | None, viewer_token: str | None) -> None:
        self.enabled = admin_token is not None
        self._tokens: dict[str, User] = {}
        if admin_token:
            self._tokens[admin_token] = ADMIN
        if viewer_token:
            self._tokens[viewer_token] = VIEWER

    def user_for_token(self, token: str) -> User | None:
        return self._tokens.get(token)

    def authenticate(self, authorization: str | None) -> User:
        """The request's user; raises 401 for a token nobody holds."""
        if not self.enabled:
            return ADMIN
        if not authorization:
            return ANONYMOUS
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise errors.unauthorized()
        user = self._tokens.get(token.strip())
        if user is None:
            raise errors.unauthorized()
        return user


def _path_allowed(path: str, prefixes: tuple[str, ...]) -> bool:
    return any(path == p or path.startswith(p + "/") for p in prefixes)


def allowed_resource(user: User, verb: str) -> bool:
    if "system:masters" in user.groups:
        return True
    return user.name == VIEWER.name and verb in READ_VERBS


def allowed_path(user: User, verb: str, path: str) -> bool:
    if "system:masters" in user.groups:
        return True
    if verb not in ("get", "head"):
        return False
    if "system:authenticated" in user.groups:
        return _path_allowed(path, _DISCOVERY_PATHS)
    return _path_allowed(path, _PUBLIC_PATHS)


def resource_forbidden(user: User, verb: str, group: str, resource: str, subresource: str, namespace: str,
                       name: str) -> errors.StatusError:
    full = f"{resource}/{subresource}" if subresource else resource
    scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    return errors.forbidden(group, resource, name,
                            f'User "{user.name}" cannot {verb} resource "{full}" in API group "{group}" {scope}')


def path_forbidden(user: User, verb: str, path: str) -> errors.StatusError:
    return errors.forbidden("", "", "", f'User "{user.name}" cannot {verb} path "{path}"')


def token_review(auth: Authenticator, review: dict[str, Any]) -> dict[str, Any]:
    token = str((review.get("spec") or {}).get("token") or "")
    user = auth.user_for_token(token) if auth.enabled else None
    if user is None:
        status: dict[str, Any] = {"user": {}, "error": "invalid bearer token"}
    else:
        status = {"authenticated": True, "user": user.as_user_info()}
    return {"kind": "TokenReview", "apiVersion": "authentication.k8s.io/v1",
            "metadata": review.get("metadata") or {"creationTimestamp": None},
            "spec": review.get("spec") or {}, "status": status}


def subject_access_review(review: dict[str, Any]) -> dict[str, Any]:
    spec = review.get("spec") or {}
    groups = tuple(spec.get("groups") or ())
    name = str(spec.get("user") or "")
    if name == ADMIN.name:
        user = ADMIN
    elif name == VIEWER.name:
        user = VIEWER
    else:
        user = User(name, str(spec.get("uid") or ""), groups)
    if "system:masters" in groups:
        user = User(user.name, user.uid, tuple({*user.groups, "system:masters"}))
    res_attrs = spec.get("resourceAttributes")
    if res_attrs is not None:
        ok = allowed_resource(user, str(res_attrs.get("verb") or ""))
    else:
        non = spec.get("nonResourceAttributes") or {}
        ok = allowed_path(user, str(non.get("verb") or ""), str(non.get("path") or ""))
    status: dict[str, Any] = {"allowed": ok}
    if ok and "system:masters" in user.groups:
        status["reason"] = ('RBAC: allowed by ClusterRoleBinding "cluster-admin" of ClusterRole "cluster-admin" '
                            'to Group "system:masters"')
    return {"kind": "SubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
            "metadata": review.get("metadata") or {"creationTimestamp": None}, "spec": spec, "status": status}
