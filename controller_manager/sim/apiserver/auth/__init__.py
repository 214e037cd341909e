"""kube-sim's authentication and authorization, as kube-apiserver's filters and authorizers behave.

Guarantees:
- With no admin token configured, authentication is off and every request acts as the admin.
- Bearer tokens: those of ``--token-auth-file`` (:mod:`tokenfile`, :meth:`Auth.add_static_tokens`), the admin
  token's user (``admin``, group ``system:masters``), the viewer token's user (``viewer``, bound to the
  ``kube-sim:viewer`` read-only ClusterRole), or a ServiceAccount token this server issued (:mod:`tokens`) for
  one of the API server's audiences. No token is ``system:anonymous``; anything else (an unknown, expired or
  revoked token, another scheme) is 401.
- ``Impersonate-User``/``-Group``/``-Uid``/``-Extra-*`` headers act as that user once the requester may
  ``impersonate`` each part (users, groups, serviceaccounts, uids, userextras), else 403.
- Every request by a user outside ``system:masters`` is decided as ``--authorization-mode=Node,RBAC`` decides:
  the Node authorizer (:mod:`node`) for kubelets, then the RBAC authorizer (:mod:`rbac`) over the stored Roles,
  ClusterRoles and bindings, which start as the bootstrap policy (:mod:`bootstrap`); denials are 403 Statuses in
  the real wording. A node's writes then pass NodeRestriction (:mod:`noderestriction`, called by the HTTP
  layer). There is no client-certificate authentication: a kubelet's identity is reached by impersonation.
- The review kinds and TokenRequest are answered by :mod:`reviews`; the issuer's OIDC discovery document and
  key set at ``/.well-known/openid-configuration`` and ``/openid/v1/jwks``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from controller_manager.api.fields import parse_field_selector
from controller_manager.api.selectors import InvalidSelector
from controller_manager.sim.apiserver import errors
from controller_manager.sim.apiserver.auth import escalation, legacy_tokens, reviews, tokens
from controller_manager.sim.apiserver.auth.aggregation import Aggregator
from controller_manager.sim.apiserver.auth.rbac import Attributes, Authorizer, Decision, forbidden
from controller_manager.sim.apiserver.auth.users import (
    ADMIN,
    ANONYMOUS,
    AUTHENTICATED,
    UNAUTHENTICATED,
    VIEWER,
    User,
    service_account_groups,
    split_service_account_username,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from controller_manager.sim.apiserver.server import ApiServer

__all__ = ["ADMIN", "ANONYMOUS", "REVIEW_KINDS", "VIEWER", "Attributes", "Auth", "Decision", "User"]

Obj = dict[str, Any]
REVIEW_KINDS = frozenset({"TokenReview", "SubjectAccessReview", "SelfSubjectAccessReview", "LocalSubjectAccessReview",
                          "SelfSubjectRulesReview", "SelfSubjectReview"})
_IMPERSONATE_EXTRA = "impersonate-extra-"
OIDC_CONFIGURATION_PATH = "/.well-known/openid-configuration"
JWKS_PATH = "/openid/v1/jwks"


class Auth:
    """One API server's authenticator, authorizer, token signer and ClusterRole aggregator."""

    def __init__(self, api: ApiServer) -> None:
        self.api = api
        options = api.options
        self.enabled = options.admin_token is not None
        self._static: dict[str, User] = {}
        if options.admin_token:
            self._static[options.admin_token] = ADMIN
        if options.viewer_token:
            self._static[options.viewer_token] = VIEWER
        self.authorizer = Authorizer(api)
        self.signer = tokens.Signer(api)
        # kube-apiserver's --service-account-key-file: verifies legacy (Secret-based) ServiceAccount tokens
        self.legacy = legacy_tokens.LegacyAuthenticator(
            api, legacy_tokens.load_public_keys(options.service_account_key_files))
        self.aggregator = Aggregator(api)

    # --- authentication ---------------------------------------------------------------------------

    def use_service_account_key_files(self, paths: Sequence[str]) -> None:
        """``--service-account-key-file``: the public keys legacy tokens are verified with (OSError/ValueError
        for a file that cannot be read or holds no key)."""
        self.legacy.keys = legacy_tokens.load_public_keys(paths)
        self.api.options.service_account_key_files = tuple(paths)
    def add_static_tokens(self, users: Mapping[str, User]) -> None:
        """More bearer tokens and their users (``--token-auth-file``); turns authentication on."""
        self._static.update(users)
        self.enabled = self.enabled or bool(users)

    def user_for_token(self, token: str, audiences: tuple[str, ...] = tokens.API_AUDIENCES) -> User:
        """The token's user (with the audiences it matched); raises InvalidToken."""
        return self.authenticate_token(token, audiences)[0]

    def authenticate_token(self, token: str, audiences: tuple[str, ...] = tokens.API_AUDIENCES,
                           warnings: list[str] | None = None) -> tuple[User, list[str]]:
        """The token's user and the audiences it matched; a legacy token's warnings go to ``warnings``."""
        if self.legacy.handles(token):
            # Legacy tokens carry no audience: they are good for the API server's own (the implicit audiences).
            matched = [a for a in audiences if a in tokens.API_AUDIENCES]
            if not matched:
                raise tokens.InvalidToken("token audiences " + tokens.go_list(list(tokens.API_AUDIENCES))
                                          + " is invalid for the target audiences " + tokens.go_list(list(audiences)))
            outcome = self.legacy.authenticate(token)
            if warnings is not None:
                warnings.extend(outcome.warnings)
            return outcome.user, matched
        user = self._static.get(token)
        if user is not None:
            # Static tokens know no audience: they are good for the API server's own (WrapAudienceAgnosticToken).
            matched = [a for a in audiences if a in tokens.API_AUDIENCES]
            if not matched:
                raise tokens.InvalidToken("token audiences " + tokens.go_list(list(tokens.API_AUDIENCES))
                                          + " is invalid for the target audiences " + tokens.go_list(list(audiences)))
            return user, matched
        return self.signer.verify(token, audiences, self.api.clock.now())

    def authenticate(self, headers: Mapping[str, str], warnings: list[str] | None = None) -> User:
        """The request's user, impersonation applied; 401 for credentials nobody holds, 403 for an
        impersonation the requester may not do. Warnings the authenticator has for the client go to
        ``warnings`` (a legacy auto-generated token's)."""
        if not self.enabled:
            user = ADMIN
        else:
            authorization = headers.get("Authorization")
            if not authorization:
                user = ANONYMOUS
            else:
                scheme, _, token = authorization.partition(" ")
                if scheme.lower() != "bearer" or not token.strip():
                    raise errors.unauthorized()
                try:
                    user = self.authenticate_token(token.strip(), warnings=warnings)[0]
                except tokens.InvalidToken:
                    raise errors.unauthorized() from None
        return self._impersonate(user, headers)

    def _impersonate(self, requester: User, headers: Mapping[str, str]) -> User:
        name = headers.get("Impersonate-User")
        groups = [v for k, v in headers.items() if k.lower() == "impersonate-group"]
        uid = headers.get("Impersonate-Uid")
        extra: dict[str, tuple[str, ...]] = {}
        for k, v in headers.items():
            if k.lower().startswith(_IMPERSONATE_EXTRA):
                key = k[len(_IMPERSONATE_EXTRA):].lower()
                extra[key] = (*extra.get(key, ()), v)
        if name is None:
            if groups or uid or extra:
                raise errors.bad_request(f"requested {_requested(groups, uid, extra)} without impersonating a user")
            return requester
        checks: list[Attributes] = []
        sa = split_service_account_username(name)
        out_groups: list[str] = []
        if sa is not None:
            checks.append(Attributes(requester, "impersonate", True, resource="serviceaccounts", namespace=sa[0],
                                     name=sa[1]))
            out_groups.extend(service_account_groups(sa[0])[:2])
        else:
            checks.append(Attributes(requester, "impersonate", True, resource="users", name=name))
        for group in groups:
            checks.append(Attributes(requester, "impersonate", True, resource="groups", name=group))
            if group not in out_groups:
                out_groups.append(group)
        for key, values in extra.items():
            for value in values:
                checks.append(Attributes(requester, "impersonate", True, group="authentication.k8s.io",
                                         resource="userextras", subresource=key, name=value))
        if uid:
            checks.append(Attributes(requester, "impersonate", True, group="authentication.k8s.io",
                                     resource="uids", name=uid))
        for attrs in checks:
            decision = self.authorizer.authorize(attrs)
            if not decision.allowed:
                raise forbidden(attrs, decision.reason)
        if name == ANONYMOUS.name:
            if UNAUTHENTICATED not in out_groups:
                out_groups.append(UNAUTHENTICATED)
        elif AUTHENTICATED not in out_groups:
            out_groups.append(AUTHENTICATED)
        return User(name, uid or "", tuple(out_groups), extra)

    # --- authorization ----------------------------------------------------------------------------

    def check_path(self, user: User, verb: str, path: str) -> None:
        attrs = Attributes(user, verb, False, path=path)
        decision = self.authorizer.authorize(attrs)
        if not decision.allowed:
            raise forbidden(attrs, decision.reason)

    def check_resource(self, user: User, verb: str, group: str, resource: str, subresource: str, namespace: str,
                       name: str, field_selector: str = "") -> None:
        attrs = Attributes(user, verb, True, group=group, resource=resource, subresource=subresource,
                           namespace=namespace, name=name, fields=_exact_fields(field_selector))
        decision = self.authorizer.authorize(attrs)
        if not decision.allowed:
            raise forbidden(attrs, decision.reason)

    def check_escalation(self, user: User, kind: str, group: str, namespace: str, obj: Any) -> None:
        """403 for a Role, ClusterRole or binding write that grants more than ``user`` holds (see escalation)."""
        if group == escalation.RBAC_GROUP and isinstance(obj, dict):
            escalation.check(self.authorizer, user, kind, namespace, obj)

    # --- the review kinds and TokenRequest ----------------------------------------------------------

    def review(self, kind: str, body: Any, user: User, namespace: str) -> Obj:
        if not isinstance(body, dict):
            raise errors.bad_request("the object provided is not a JSON object")
        if kind == "TokenReview":
            return self._token_review(body)
        if kind == "SubjectAccessReview":
            return reviews.subject_access_review(self.authorizer, body)
        if kind == "LocalSubjectAccessReview":
            return reviews.local_subject_access_review(self.authorizer, body, namespace)
        if kind == "SelfSubjectAccessReview":
            return reviews.self_subject_access_review(self.authorizer, body, user)
        if kind == "SelfSubjectRulesReview":
            return reviews.self_subject_rules_review(self.authorizer, body, user)
        return reviews.self_subject_review(body, user, self.api.clock.now())

    def _token_review(self, body: Obj) -> Obj:
        spec = body.get("spec") or {}
        wanted = tuple(str(a) for a in spec.get("audiences") or ()) or tokens.API_AUDIENCES
        try:
            user, audiences = self.authenticate_token(str(spec.get("token") or ""), wanted)
        except tokens.InvalidToken as e:
            return reviews.token_review(body, None, [], f"[invalid bearer token, {e}]"
                                        if str(e) != "invalid bearer token" else str(e))
        return reviews.token_review(body, user, audiences, "")

    def token_request(self, namespace: str, name: str, body: Any) -> Obj:
        if not isinstance(body, dict):
            raise errors.bad_request("the object provided is not a JSON object")
        return reviews.token_request(self.api, self.signer, namespace, name, body)

    # --- service account issuer discovery -----------------------------------------------------------

    def oidc(self, path: str, host: str) -> tuple[bytes, str] | None:
        """The OIDC discovery documents (body, content type) at ``path``, or None for another path."""
        if path == OIDC_CONFIGURATION_PATH:
            doc = {"issuer": tokens.ISSUER, "jwks_uri": f"https://{host}{JWKS_PATH}",
                   "response_types_supported": ["id_token"], "subject_types_supported": ["public"],
                   "id_token_signing_alg_values_supported": sorted(
                       {"ES256", *(legacy_tokens.algorithm(k) for k in self.legacy.keys)})}
            return orjson.dumps(doc), "application/json"
        if path == JWKS_PATH:
            keys = [*self.signer.jwks()["keys"], *(legacy_tokens.jwk(k) for k in self.legacy.keys)]
            return orjson.dumps({"keys": keys}), "application/jwk-set+json"
        return None

def _exact_fields(selector: str) -> dict[str, str]:
    """A field selector's exact-match requirements (a selector that does not parse requires none here; the
    list itself refuses it)."""
    if not selector:
        return {}
    try:
        parsed = parse_field_selector(selector)
    except InvalidSelector:
        return {}
    return {f: v for f, op, v in parsed.requirements if op != "!="}


def _requested(groups: list[str], uid: str | None, extra: dict[str, tuple[str, ...]]) -> str:
    parts = [f"Impersonate-Group: {g}" for g in groups]
    if uid:
        parts.append(f"Impersonate-Uid: {uid}")
    parts.extend(f"Impersonate-Extra-{k}: {v}" for k, vs in extra.items() for v in vs)
    return "[" + " ".join(parts) + "]"
