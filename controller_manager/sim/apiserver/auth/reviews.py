"""The review APIs and TokenRequest: answers computed from the authenticator and the RBAC authorizer.

Guarantees:
- SubjectAccessReview / LocalSubjectAccessReview ask about the user in ``spec`` (user, groups, uid, extra);
  SelfSubjectAccessReview and SelfSubjectRulesReview about the requesting user; SelfSubjectReview answers
  who that user is. Each answer echoes the request's metadata and spec and adds ``status``.
- Reviews are validated as upstream does (422 on the kind named ""): exactly one of resourceAttributes and
  nonResourceAttributes, a user or group for (Local)SubjectAccessReview, empty metadata (but the namespace of a
  LocalSubjectAccessReview, which its spec.resourceAttributes.namespace must match).
- TokenRequest (``serviceaccounts/<name>/token``) defaults ``spec.expirationSeconds`` to 3600 and
  ``spec.audiences`` to the API server's, refuses durations under 10 minutes or over 2^32 seconds (422), and
  answers the token with ``status.expirationTimestamp``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from controller_manager.api.meta import format_time
from controller_manager.api.resources import SERVICEACCOUNTS
from controller_manager.sim.apiserver import errors
from controller_manager.sim.apiserver.auth import tokens
from controller_manager.sim.apiserver.auth.node import node_identity
from controller_manager.sim.apiserver.auth.rbac import Attributes, Authorizer
from controller_manager.sim.apiserver.auth.users import ADMIN, VIEWER, User

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer

Obj = dict[str, Any]
_AUTHZ = "authorization.k8s.io/v1"
_AUTHN = "authentication.k8s.io/v1"
DEFAULT_EXPIRATION = 3600
MIN_EXPIRATION = 600
MAX_EXPIRATION = 1 << 32


def _answer(kind: str, api_version: str, review: Obj, status: Obj, spec: Obj | None = None) -> Obj:
    meta = review.get("metadata") or {}
    return {"kind": kind, "apiVersion": api_version, "metadata": {**meta, "creationTimestamp": None},
            "spec": review.get("spec") or {} if spec is None else spec, "status": status}


def _quoted(value: Any) -> str:
    """A field error's bad value as apimachinery prints it: strings quoted, nil as "null", objects as JSON."""
    if value is None:
        return '"null"'
    if isinstance(value, str):
        return f'"{value}"'
    return orjson.dumps(value).decode()


def _validate(kind: str, review: Obj, *, subject: bool, local_namespace: str | None = None) -> None:
    """ValidateSubjectAccessReviewSpec and the metadata checks of the (Self|Local)SubjectAccessReview kinds:
    all problems at once, a 422 on the kind named "" (the reviews have no names)."""
    spec = review.get("spec") or {}
    res, non = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    problems: list[tuple[str, Any, str]] = []
    if res is not None and non is not None:
        problems.append(("spec.nonResourceAttributes", non, "cannot be specified in combination with "
                                                            "resourceAttributes"))
    if res is None and non is None:
        problems.append(("spec.resourceAttributes", None, "exactly one of nonResourceAttributes or "
                                                          "resourceAttributes must be specified"))
    if subject and not spec.get("user") and not spec.get("groups"):
        problems.append(("spec.user", str(spec.get("user") or ""), "at least one of user or group must be "
                                                                   "specified"))
    meta = {k: v for k, v in (review.get("metadata") or {}).items()
            if v not in (None, "", {}, [], 0) and k != "managedFields"}  # zero values are Go's empty
    if local_namespace is None:
        if meta:
            problems.append(("metadata", meta, "must be empty"))
    else:
        meta.pop("namespace", None)
        if meta:
            problems.append(("metadata", meta, "must be empty except for namespace"))
        if res is not None and (res.get("namespace") or "") != local_namespace:
            problems.append(("spec.resourceAttributes.namespace", str(res.get("namespace") or ""),
                             "must match metadata.namespace"))
        if non is not None:
            problems.append(("spec.nonResourceAttributes", non, "disallowed on this kind of request"))
    if problems:
        raise errors.invalid("authorization.k8s.io", kind, "", [
            ("FieldValueInvalid", field, f"{field}: Invalid value: {_quoted(value)}: {why}")
            for field, value, why in problems])


def _attributes(user: User, spec: Obj) -> Attributes:
    res = spec.get("resourceAttributes")
    if res is not None:
        return Attributes(user, str(res.get("verb") or ""), True, group=str(res.get("group") or ""),
                          resource=str(res.get("resource") or ""), subresource=str(res.get("subresource") or ""),
                          namespace=str(res.get("namespace") or ""), name=str(res.get("name") or ""))
    non = spec.get("nonResourceAttributes") or {}
    return Attributes(user, str(non.get("verb") or ""), False, path=str(non.get("path") or ""))


def _access_status(authorizer: Authorizer, attrs: Attributes) -> Obj:
    decision = authorizer.authorize(attrs)
    status: Obj = {"allowed": decision.allowed}
    if decision.reason:
        status["reason"] = decision.reason
    return status


def _spec_user(spec: Obj) -> User:
    """The user a (Local)SubjectAccessReview asks about. kube-sim's own token users ("admin", "viewer") named
    without groups are taken with their groups, so a review about them answers as their requests are."""
    name = str(spec.get("user") or "")
    groups = tuple(str(g) for g in spec.get("groups") or ())
    extra = {str(k): tuple(str(x) for x in v or ()) for k, v in (spec.get("extra") or {}).items()}
    for known in (ADMIN, VIEWER):
        if name == known.name and not groups:
            return known
    return User(name, str(spec.get("uid") or ""), groups, extra)


def subject_access_review(authorizer: Authorizer, review: Obj) -> Obj:
    _validate("SubjectAccessReview", review, subject=True)
    spec = review.get("spec") or {}
    attrs = _attributes(_spec_user(spec), spec)
    return _answer("SubjectAccessReview", _AUTHZ, review, _access_status(authorizer, attrs))


def local_subject_access_review(authorizer: Authorizer, review: Obj, namespace: str) -> Obj:
    """The URL's namespace is the review's (metadata.namespace, set from it when absent)."""
    meta = review.get("metadata") or {}
    if meta.get("namespace") and meta["namespace"] != namespace:
        raise errors.bad_request("the namespace of the provided object does not match the namespace sent on "
                                 "the request")
    review = {**review, "metadata": {**meta, "namespace": namespace}}
    _validate("LocalSubjectAccessReview", review, subject=True, local_namespace=namespace)
    spec = review.get("spec") or {}
    attrs = _attributes(_spec_user(spec), spec)
    return _answer("LocalSubjectAccessReview", _AUTHZ, review, _access_status(authorizer, attrs))


def self_subject_access_review(authorizer: Authorizer, review: Obj, user: User) -> Obj:
    _validate("SelfSubjectAccessReview", review, subject=False)
    spec = review.get("spec") or {}
    attrs = _attributes(user, spec)
    return _answer("SelfSubjectAccessReview", _AUTHZ, review, _access_status(authorizer, attrs))


def self_subject_rules_review(authorizer: Authorizer, review: Obj, user: User) -> Obj:
    spec = review.get("spec") or {}
    namespace = str(spec.get("namespace") or "")
    if not namespace:
        raise errors.bad_request("no namespace on request")
    resource_rules, non_resource_rules, errs = authorizer.rules_for(user, namespace)
    if node_identity(user)[1]:  # the Node authorizer, first in the chain, cannot list a node's rules
        errs = ["node authorizer does not support user rule resolution", *errs]
    status: Obj = {"resourceRules": resource_rules, "nonResourceRules": non_resource_rules, "incomplete": bool(errs)}
    if errs:
        status["evaluationError"] = errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]"
    return _answer("SelfSubjectRulesReview", _AUTHZ, review, status)


def self_subject_review(review: Obj, user: User, now: float) -> Obj:
    """Who the requester is; unlike the other reviews it is stamped with the time it was made."""
    meta = review.get("metadata") or {}
    return {"kind": "SelfSubjectReview", "apiVersion": _AUTHN,
            "metadata": {**meta, "creationTimestamp": format_time(now)},
            "status": {"userInfo": user.as_user_info()}}


def token_review(review: Obj, user: User | None, audiences: list[str], error: str) -> Obj:
    if user is None:
        status: Obj = {"user": {}, "error": error or "invalid bearer token"}
    else:
        status = {"authenticated": True, "user": user.as_user_info()}
        if audiences:
            status["audiences"] = audiences
    return _answer("TokenReview", _AUTHN, review, status)


def _invalid_token_request(message: str) -> errors.StatusError:
    return errors.invalid("authentication.k8s.io", "TokenRequest", "",
                          [("FieldValueInvalid", "spec.expirationSeconds", f"spec.expirationSeconds: {message}")])


def token_request(api: ApiServer, signer: tokens.Signer, namespace: str, name: str, body: Obj) -> Obj:
    """POST serviceaccounts/<name>/token: a signed token for the ServiceAccount. The answer is the request
    (its metadata as sent, in the URL's namespace) with the defaulted spec and the status filled."""
    meta = dict(body.get("metadata") or {})
    if meta.get("namespace") and meta["namespace"] != namespace:
        raise errors.bad_request("the namespace of the provided object does not match the namespace sent on "
                                 "the request")
    spec = dict(body.get("spec") or {})
    seconds = spec.get("expirationSeconds")
    seconds = DEFAULT_EXPIRATION if seconds is None else int(seconds)
    if seconds < MIN_EXPIRATION:
        raise _invalid_token_request(f"Invalid value: {seconds}: may not specify a duration less than 10 minutes")
    if seconds > MAX_EXPIRATION:
        raise _invalid_token_request(f"Invalid value: {seconds}: may not specify a duration larger than 2^32 seconds")
    sa = api.stored_object(SERVICEACCOUNTS, namespace, name)
    if sa is None:
        raise errors.not_found("", "serviceaccounts", name)
    try:
        binding = tokens.resolve_binding(api, namespace, name, spec.get("boundObjectRef"))
    except tokens.BindingError as e:
        if e.code == 404:
            raise errors.not_found("", e.resource, e.name) from None
        if e.code == 409:
            raise errors.conflict("", e.resource, e.name, str(e)) from None
        raise errors.bad_request(str(e)) from None
    audiences = [str(a) for a in spec.get("audiences") or ()] or list(tokens.API_AUDIENCES)
    now = api.clock.now()
    token = signer.issue(sa, audiences, seconds, now, binding)
    return {"kind": "TokenRequest", "apiVersion": _AUTHN,
            "metadata": {**meta, "namespace": namespace, "creationTimestamp": None},
            "spec": {**spec, "audiences": audiences, "expirationSeconds": seconds},
            "status": {"token": token, "expirationTimestamp": format_time(int(now) + seconds)}}
