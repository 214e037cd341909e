"""Delegated authentication and authorization of the serving endpoints, as kube-controller-manager does it.

Guarantees:
- A bearer token is checked with a ``TokenReview`` (``authentication.k8s.io/v1``); the user it names is
  checked with a ``SubjectAccessReview`` (``authorization.k8s.io/v1``) for the non-resource URL path and the
  HTTP method as verb (``GET`` -> ``get``).
- No or unknown token -> 401, denied -> 403, each with the apiserver's ``Status`` body and messages
  (``forbidden: User "viewer" cannot get path "/metrics"``). A review the API server fails to answer -> 401
  (authentication) or 500 (authorization), logged, never cached.
- Paths in ``--authorization-always-allow-paths`` skip both (an entry ending in ``*`` is a prefix; as
  upstream notes, ``/healthz`` does not match ``/healthz/<check>``). Members of ``system:masters`` are
  allowed without an access review (kube-controller-manager's ``AlwaysAllowGroups``).
- Answers are cached as upstream's delegating options do: token reviews 10 s, allowed and denied access
  reviews 10 s each; tokens are cached by SHA-256 digest, never as given. Caches are bounded.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from controller_manager.api.resources import SUBJECTACCESSREVIEWS, TOKENREVIEWS, Resource
from controller_manager.clock import Clock, RealClock

AUTHN_CACHE_TTL = 10.0
AUTHZ_ALLOW_TTL = 10.0
AUTHZ_DENY_TTL = 10.0
ALWAYS_ALLOW_GROUPS = frozenset({"system:masters"})
_CACHE_SIZE = 1024


class ReviewClient(Protocol):
    """The part of ``ApiClient`` reviews need."""

    async def create(self, res: Resource, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class UserInfo:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome for one request: ``status`` 0 means go on; else the HTTP status and its Status body."""

    status: int
    body: dict[str, Any] | None = None
    user: UserInfo | None = None

    @property
    def allowed(self) -> bool:
        return self.status == 0


def status_body(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """A ``metav1.Status`` failure as the apiserver writes it."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body


def unauthorized() -> Decision:
    return Decision(401, status_body(401, "Unauthorized", "Unauthorized"))


def forbidden(user: UserInfo, verb: str, path: str, reason: str = "") -> Decision:
    message = f'forbidden: User "{user.name}" cannot {verb} path "{path}"'
    if reason:
        message += f": {reason}"
    return Decision(403, status_body(403, "Forbidden", message, {}), user)


def internal_error(message: str) -> Decision:
    return Decision(500, status_body(500, "InternalError", f"Internal error occurred: {message}",
                                     {"causes": [{"message": message}]}))


def bearer_token(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, as the apiserver's bearertoken reads it."""
    if not header:
        return None
    parts = header.strip().split(" ")
    if len(parts) < 2 or parts[0].lower() != "bearer":
        return None
    token = parts[1]
    return token or None


class _TTLCache:
    """Entries expire ``ttl`` seconds after insertion; oldest entries are dropped beyond ``size``."""

    def __init__(self, clock: Clock, size: int = _CACHE_SIZE) -> None:
        self._clock = clock
        self._size = size
        self._entries: OrderedDict[Any, tuple[float, Any]] = OrderedDict()

    def get(self, key: Any) -> tuple[bool, Any]:
        entry = self._entries.get(key)
        if entry is None:
            return False, None
        expires, value = entry
        if self._clock.monotonic() >= expires:
            del self._entries[key]
            return False, None
        return True, value

    def put(self, key: Any, value: Any, ttl: float) -> None:
        self._entries[key] = (self._clock.monotonic() + ttl, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)


class DelegatingAuth:
    """Authenticate and authorize one request against the API server, with upstream's caching."""

    def __init__(
        self,
        client: ReviewClient,
        *,
        always_allow_paths: Iterable[str] = ("/healthz", "/readyz", "/livez"),
        clock: Clock | None = None,
        logger: Any = None,
    ) -> None:
        self._client = client
        self._exact = {p for p in always_allow_paths if p and not p.endswith("*")}
        self._prefixes = tuple(p[:-1] for p in always_allow_paths if p.endswith("*"))
        clock = clock or RealClock()
        self._authn_cache = _TTLCache(clock)
        self._authz_cache = _TTLCache(clock)
        self._log = logger
        self.reviews = {"token": 0, "access": 0}  # API round trips made, for tests and debugging

    def always_allowed(self, path: str) -> bool:
        return path in self._exact or any(path.startswith(p) for p in self._prefixes)

    async def decide(self, method: str, path: str, authorization: str | None) -> Decision:
        if self.always_allowed(path):
            return Decision(0)
        token = bearer_token(authorization)
        if token is None:
            return unauthorized()
        try:
            user = await self.authenticate(token)
        except Exception as exc:
            self._warn("token review failed", error=str(exc))
            return unauthorized()
        if user is None:
            return unauthorized()
        verb = method.lower()
        if ALWAYS_ALLOW_GROUPS.intersection(user.groups):
            return Decision(0, None, user)
        try:
            allowed, reason = await self.authorize(user, verb, path)
        except Exception as exc:
            self._warn("subject access review failed", error=str(exc), user=user.name, path=path)
            return internal_error(f"authorization error: {exc}")
        if not allowed:
            return forbidden(user, verb, path, reason)
        return Decision(0, None, user)

    async def authenticate(self, token: str) -> UserInfo | None:
        digest = hashlib.sha256(token.encode()).hexdigest()
        hit, cached = self._authn_cache.get(digest)
        if hit:
            return cached  # type: ignore[no-any-return]
        self.reviews["token"] += 1
        review = await self._client.create(TOKENREVIEWS, {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        })
        status = review.get("status") or {}
        user: UserInfo | None = None
        if status.get("authenticated"):
            info = status.get("user") or {}
            extra = info.get("extra") or {}
            user = UserInfo(
                name=str(info.get("username", "")),
                uid=str(info.get("uid", "")),
                groups=tuple(str(g) for g in info.get("groups") or ()),
                extra=tuple(sorted((str(k), tuple(str(x) for x in v or ())) for k, v in extra.items())),
            )
        self._authn_cache.put(digest, user, AUTHN_CACHE_TTL)
        return user

    async def authorize(self, user: UserInfo, verb: str, path: str) -> tuple[bool, str]:
        key = (user, verb, path)
        hit, cached = self._authz_cache.get(key)
        if hit:
            return cached  # type: ignore[no-any-return]
        spec: dict[str, Any] = {
            "nonResourceAttributes": {"path": path, "verb": verb},
            "user": user.name,
            "groups": list(user.groups),
        }
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        self.reviews["access"] += 1
        review = await self._client.create(SUBJECTACCESSREVIEWS, {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": spec,
        })
        status = review.get("status") or {}
        allowed = bool(status.get("allowed")) and not status.get("denied")
        answer = (allowed, str(status.get("reason") or ""))
        self._authz_cache.put(key, answer, AUTHZ_ALLOW_TTL if allowed else AUTHZ_DENY_TTL)
        return answer

    def _warn(self, event: str, **kw: Any) -> None:
        if self._log is not None:
            self._log.warning(event, **kw)
