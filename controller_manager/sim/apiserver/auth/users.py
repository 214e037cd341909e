"""Who a request is: the authenticated user as the apiserver's ``user.Info`` holds it.

Guarantees:
- :data:`ADMIN` is in ``system:masters`` (the privileged group every authorizer lets through), :data:`VIEWER`
  and every token-authenticated user in ``system:authenticated``, :data:`ANONYMOUS` in
  ``system:unauthenticated``.
- A ServiceAccount's user is ``system:serviceaccount:<ns>:<name>`` in ``system:serviceaccounts``,
  ``system:serviceaccounts:<ns>`` and ``system:authenticated`` (serviceaccount.UserInfo).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
SERVICEACCOUNTS = "system:serviceaccounts"
_SA_PREFIX = "system:serviceaccount:"


@dataclass(frozen=True)
class User:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def privileged(self) -> bool:
        """In system:masters: allowed everything before RBAC is asked (the superuser authorizer)."""
        return MASTERS in self.groups

    def as_user_info(self) -> dict[str, Any]:
        """authentication.k8s.io/v1 UserInfo (uid, groups and extra omitted when empty)."""
        out: dict[str, Any] = {"username": self.name}
        if self.uid:
            out["uid"] = self.uid
        if self.groups:
            out["groups"] = list(self.groups)
        if self.extra:
            out["extra"] = {k: list(v) for k, v in self.extra.items()}
        return out


ADMIN = User("admin", "admin-uid", (MASTERS, AUTHENTICATED))
VIEWER = User("viewer", "viewer-uid", (AUTHENTICATED,))
ANONYMOUS = User("system:anonymous", "", (UNAUTHENTICATED,))


def service_account_username(namespace: str, name: str) -> str:
    return f"{_SA_PREFIX}{namespace}:{name}"


def split_service_account_username(username: str) -> tuple[str, str] | None:
    """(namespace, name) of a ``system:serviceaccount:<ns>:<name>`` user, else None."""
    if not username.startswith(_SA_PREFIX):
        return None
    namespace, sep, name = username[len(_SA_PREFIX):].partition(":")
    if not sep or not namespace or not name or ":" in name:
        return None
    return namespace, name


def service_account_groups(namespace: str) -> tuple[str, ...]:
    return (SERVICEACCOUNTS, f"{SERVICEACCOUNTS}:{namespace}", AUTHENTICATED)


def service_account_user(namespace: str, name: str, uid: str,
                         extra: dict[str, tuple[str, ...]] | None = None) -> User:
    return User(service_account_username(namespace, name), uid, service_account_groups(namespace), extra or {})
