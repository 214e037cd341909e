"""Typed errors for everything that can go wrong talking to the API server.

The tree (one place, as the API's ``metav1.Status`` reasons map onto it)::

    Exception
     ├── ConfigError                 no usable kubeconfig / in-cluster config (one-line message)
     └── ApiError                    any failed request: .status .reason .message .details .body
          ├── BadRequest             400  reason BadRequest
          ├── Unauthorized           401  reason Unauthorized
          ├── Forbidden              403  reason Forbidden
          ├── NotFound               404  reason NotFound
          ├── MethodNotAllowed       405  reason MethodNotAllowed
          ├── Conflict               409  reason Conflict (stale resourceVersion, failed precondition)
          ├── AlreadyExists          409  reason AlreadyExists (a create of a name that exists)
          ├── Gone                   410  reason Gone or Expired (watch/list resourceVersion too old)
          ├── UnsupportedMediaType   415  reason UnsupportedMediaType
          ├── Invalid                422  reason Invalid (details.causes name the bad fields)
          ├── TooManyRequests        429  reason TooManyRequests
          ├── ServerError            5xx  reasons InternalError, ServiceUnavailable, Timeout, ServerTimeout
          └── ApiConnectionError     status 0: no HTTP answer (refused, reset, timed out, TLS failure)

Guarantees:
- The class follows apimachinery's ``errors.IsX`` rules: a known ``reason`` decides the class; an
  unknown or missing reason falls back to the HTTP code. So ``Conflict`` and ``AlreadyExists`` are
  siblings (``except Conflict`` never swallows an AlreadyExists), as ``IsConflict`` is false for one.
- A response whose body is not a ``Status`` (a proxy's HTML, an empty 503) still becomes the right
  class, with client-go's generic message for that code.
- ``str(error)`` is the one-line message; ``retry_after`` is the server's suggested delay, if any.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson


class ConfigError(Exception):
    """No usable client configuration; the message is one line saying what was wrong where."""


class ApiError(Exception):
    """A request the API server (or the way to it) refused. Subclasses say which way."""

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        details: Mapping[str, Any] | None = None,
        body: Any = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message
        self.details: Mapping[str, Any] = details or {}
        self.body = body
        # Retry-After header wins over details.retryAfterSeconds, as client-go reads the header.
        if retry_after is None:
            seconds = self.details.get("retryAfterSeconds")
            if isinstance(seconds, int | float) and seconds > 0:
                retry_after = float(seconds)
        self.retry_after = retry_after

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status}, reason={self.reason!r}, message={self.message!r})"


class BadRequest(ApiError):
    pass


class Unauthorized(ApiError):
    pass


class Forbidden(ApiError):
    pass


class NotFound(ApiError):
    pass


class MethodNotAllowed(ApiError):
    pass


class Conflict(ApiError):
    pass


class AlreadyExists(ApiError):
    pass


class Gone(ApiError):
    pass


class UnsupportedMediaType(ApiError):
    pass


class Invalid(ApiError):
    pass


class TooManyRequests(ApiError):
    pass


class ServerError(ApiError):
    pass


class ApiConnectionError(ApiError):
    """No HTTP response at all. ``status`` is 0; ``__cause__`` is the transport's exception."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "ConnectionError", message)


class WriteFenced(ApiError):
    """A write this client refused to send: the process may have lost its leader Lease (see
    :meth:`ApiClient.fence_writes`). ``status`` is 0: nothing reached the API server."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "WriteFenced", message)


_BY_REASON: dict[str, type[ApiError]] = {
    "BadRequest": BadRequest,
    "Unauthorized": Unauthorized,
    "Forbidden": Forbidden,
    "NotFound": NotFound,
    "MethodNotAllowed": MethodNotAllowed,
    "Conflict": Conflict,
    "AlreadyExists": AlreadyExists,
    "Gone": Gone,
    "Expired": Gone,
    "UnsupportedMediaType": UnsupportedMediaType,
    "Invalid": Invalid,
    "TooManyRequests": TooManyRequests,
    "InternalError": ServerError,
    "ServiceUnavailable": ServerError,
    "Timeout": ServerError,
    "ServerTimeout": ServerError,
}

_BY_CODE: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    410: Gone,
    415: UnsupportedMediaType,
    422: Invalid,
    429: TooManyRequests,
}

# apimachinery NewGenericServerResponse: (reason, message) for bodies that are not a Status.
_GENERIC: dict[int, tuple[str, str]] = {
    400: ("BadRequest", "the server rejected our request for an unknown reason"),
    401: ("Unauthorized", "the server has asked for the client to provide credentials"),
    404: ("NotFound", "the server could not find the requested resource"),
    405: ("MethodNotAllowed", "the server does not allow this method on the requested resource"),
    409: ("Conflict", "the server reported a conflict"),
    422: ("Invalid", "the server rejected our request due to an error in our request"),
    429: ("TooManyRequests", "the server has received too many requests and has asked us to try again later"),
    503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
    504: ("Timeout", "the server was unable to return a response in the time allotted, "
                    "but may still be processing the request"),
}


# v1.NamespaceTerminatingCause: the cause NamespaceLifecycle admission gives when it refuses a create.
NAMESPACE_TERMINATING_CAUSE = "NamespaceTerminating"


def has_status_cause(err: BaseException, cause_type: str) -> bool:
    """``errors.HasStatusCause``: the API error's ``details.causes`` list one of type ``cause_type``.

    A StatusCause's type travels under the JSON key ``reason`` (the Go field is ``Type``, tagged ``reason``)."""
    if not isinstance(err, ApiError):
        return False
    causes = err.details.get("causes") or ()
    return any(isinstance(c, Mapping) and c.get("reason") == cause_type for c in causes)


def error_class(status: int, reason: str) -> type[ApiError]:
    """The exception class for a Status's code and reason (reason first, then code)."""
    cls = _BY_REASON.get(reason)
    if cls is not None:
        return cls
    cls = _BY_CODE.get(status)
    if cls is not None:
        return cls
    return ServerError if status >= 500 else ApiError


def error_from_status(status: Mapping[str, Any], retry_after: float | None = None) -> ApiError:
    """The typed error a ``kind: Status`` object describes (a failed response or a watch ERROR event)."""
    code = status.get("code")
    code = code if isinstance(code, int) else 500
    reason = status.get("reason") or ""
    message = status.get("message") or _GENERIC.get(code, ("", f"the server responded with the status code "
                                                               f"{code} but did not return more information"))[1]
    details = status.get("details")
    cls = error_class(code, str(reason))
    return cls(code, str(reason), str(message).replace("\n", " "), details if isinstance(details, Mapping) else None,
               status, retry_after)


def error_from_response(status: int, body: bytes, method: str, retry_after: float | None = None) -> ApiError:
    """The typed error for a failed HTTP response, whether or not its body is a Status."""
    parsed: Any = None
    if body:
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError:
            parsed = None
    if isinstance(parsed, Mapping) and parsed.get("kind") == "Status":
        if not isinstance(parsed.get("code"), int) or parsed.get("code") == 0:
            parsed = {**parsed, "code": status}
        return error_from_status(parsed, retry_after)
    text = body.decode("utf-8", "replace").strip().replace("\n", " ")[:512]
    if status == 409 and method == "POST":
        reason, message = "AlreadyExists", "the server reported a conflict"
    elif status in (403, 415):
        # The server's own text says who may do what / which types it takes: keep it.
        reason = "Forbidden" if status == 403 else "UnsupportedMediaType"
        message = text or f"the server responded with the status code {status} but did not return more information"
    elif status in _GENERIC:
        reason, message = _GENERIC[status]
    elif status >= 500:
        reason = "InternalError"
        message = f"an error on the server ({text!r}) has prevented the request from succeeding"
    else:
        reason = ""
        message = f"the server responded with the status code {status} but did not return more information"
    cls = error_class(status, reason)
    return cls(status, reason, message, None, parsed if parsed is not None else body, retry_after)
