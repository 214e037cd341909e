"""The API server's failure Statuses, shaped exactly as apimachinery's ``api/errors`` builds them.

Guarantees:
- :class:`StatusError` carries a complete ``metav1.Status`` dict (``kind: Status``, ``apiVersion: v1``,
  ``metadata: {}``, ``status: Failure``, ``message``, ``reason``, ``details``, ``code``), keys in the
  order Go serialises them; empty detail fields are omitted (``omitempty``) as upstream does.
- Messages are upstream's words: ``pods "x" not found``, ``deployments.apps "x" already exists``,
  ``Operation cannot be fulfilled on pods "x": ...``, ``too old resource version: 5 (9)``.
"""

from __future__ import annotations

from typing import Any

OPTIMISTIC_LOCK_MSG = "the object has been modified; please apply your changes to the latest version and try again"


class StatusError(Exception):
    """A request the API server refuses; ``status`` is the Status body, ``code`` its HTTP code."""

    def __init__(self, status: dict[str, Any]) -> None:
        super().__init__(status.get("message", ""))
        self.status = status

    @property
    def code(self) -> int:
        return int(self.status.get("code", 500))

    @property
    def reason(self) -> str:
        return str(self.status.get("reason", ""))


def qualified(group: str, resource: str) -> str:
    """schema.GroupResource.String(): ``pods``, ``deployments.apps``."""
    return f"{resource}.{group}" if group else resource


def details(name: str = "", group: str = "", kind: str = "", uid: str = "",
            causes: list[dict[str, Any]] | None = None, retry_after: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if name:
        out["name"] = name
    if group:
        out["group"] = group
    if kind:
        out["kind"] = kind
    if uid:
        out["uid"] = uid
    if causes:
        out["causes"] = causes
    if retry_after:
        out["retryAfterSeconds"] = retry_after
    return out


def status(code: int, reason: str, message: str, det: dict[str, Any] | None = None, *,
           failure: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                           "status": "Failure" if failure else "Success"}
    if message:
        out["message"] = message
    if reason:
        out["reason"] = reason
    if det is not None:
        out["details"] = det
    out["code"] = code
    return out


def success(code: int = 200, det: dict[str, Any] | None = None) -> dict[str, Any]:
    return status(code, "", "", det, failure=False)


def not_found(group: str, resource: str, name: str) -> StatusError:
    return StatusError(status(404, "NotFound", f'{qualified(group, resource)} "{name}" not found',
                              details(name=name, group=group, kind=resource)))


def already_exists(group: str, resource: str, name: str) -> StatusError:
    return StatusError(status(409, "AlreadyExists", f'{qualified(group, resource)} "{name}" already exists',
                              details(name=name, group=group, kind=resource)))


def conflict(group: str, resource: str, name: str, why: str = OPTIMISTIC_LOCK_MSG) -> StatusError:
    return StatusError(status(409, "Conflict",
                              f'Operation cannot be fulfilled on {qualified(group, resource)} "{name}": {why}',
                              details(name=name, group=group, kind=resource)))


def expired(message: str) -> StatusError:
    """NewResourceExpired: 410 with reason Expired and no details (a too-old watch or continue)."""
    return StatusError(status(410, "Expired", message))


def too_old_resource_version(requested: int, oldest: int) -> StatusError:
    return expired(f"too old resource version: {requested} ({oldest})")


def bad_request(message: str) -> StatusError:
    return StatusError(status(400, "BadRequest", message))


def forbidden(group: str, resource: str, name: str, why: str,
              causes: list[dict[str, Any]] | None = None) -> StatusError:
    if not resource and not group:
        message = f"forbidden: {why}"
    elif not name:
        message = f"{qualified(group, resource)} is forbidden: {why}"
    else:
        message = f'{qualified(group, resource)} "{name}" is forbidden: {why}'
    return StatusError(status(403, "Forbidden", message, details(name=name, group=group, kind=resource,
                                                                  causes=causes)))


def unauthorized() -> StatusError:
    return StatusError(status(401, "Unauthorized", "Unauthorized"))


def method_not_allowed() -> StatusError:
    """The generic 405 a route answers for a verb it does not serve."""
    message = "the server does not allow this method on the requested resource"
    return StatusError(status(405, "MethodNotAllowed", message, {}))


def method_not_supported(group: str, resource: str, action: str) -> StatusError:
    """NewMethodNotSupported: a verb the resource's storage does not implement."""
    return StatusError(status(405, "MethodNotAllowed",
                              f'{action} is not supported on resources of kind "{qualified(group, resource)}"',
                              details(group=group, kind=resource)))


def path_not_found() -> StatusError:
    return StatusError(status(404, "NotFound", "the server could not find the requested resource", {}))


def unsupported_media_type(accepted: tuple[str, ...]) -> StatusError:
    return StatusError(status(415, "UnsupportedMediaType",
                              "the body of the request was in an unknown format - accepted media types include: "
                              + ", ".join(accepted)))


def not_acceptable(accepted: tuple[str, ...]) -> StatusError:
    return StatusError(status(406, "NotAcceptable",
                              "only the following media types are accepted: " + ", ".join(accepted)))


def too_many_requests(message: str, retry_after: int = 0, causes: list[dict[str, Any]] | None = None
                      ) -> StatusError:
    return StatusError(status(429, "TooManyRequests", message, details(causes=causes, retry_after=retry_after)))


def internal_error(why: str) -> StatusError:
    return StatusError(status(500, "InternalError",
                              f"Internal error occurred: {why}", details(causes=[{"message": why}])))


def timeout(message: str, retry_after: int = 0, causes: list[dict[str, Any]] | None = None) -> StatusError:
    return StatusError(status(504, "Timeout", message, details(causes=causes, retry_after=retry_after)))


def invalid(group: str, kind: str, name: str, causes: list[tuple[str, str, str]]) -> StatusError:
    """NewInvalid from (type, field, message-with-field) triples, for the few checks done outside validation."""
    msgs = [m for _, _, m in causes]
    text = msgs[0] if len(msgs) == 1 else "[" + ", ".join(msgs) + "]"
    gk = f"{kind}.{group}" if group else kind
    return StatusError(status(422, "Invalid", f'{gk} "{name}" is invalid: {text}',
                              details(name=name, group=group, kind=kind,
                                      causes=[{"reason": t, "message": m.split(": ", 1)[-1], "field": f}
                                              for t, f, m in causes])))
