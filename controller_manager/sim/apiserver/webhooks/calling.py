"""One call of an admission webhook: the AdmissionReview sent, the HTTPS request, the answer checked
(``k8s.io/apiserver/pkg/admission/plugin/webhook/request``, the dispatchers' ``callHook``, ``errors``).

Guarantees:
- The review is ``admission.k8s.io/v1`` unless the webhook's ``admissionReviewVersions`` lists ``v1beta1``
  first (the first version kube-sim knows is used, as upstream does); each call has its own request uid.
- ``clientConfig.url`` is called as given; ``clientConfig.service`` names ``https://<name>.<namespace>.svc:<port>
  <path>``, which kube-sim (it runs no pods to route to) dials through ``ApiServerOptions.webhook_service_addresses``
  (``"<name>.<namespace>.svc:<port>"`` -> ``"host:port"``), verifying the certificate for the service's DNS name.
  A service without such an entry cannot be reached: the call fails as for a service with no endpoints.
- ``caBundle`` (PEM, base64 in the object) is the only trust for a webhook that has one; the system's trust
  otherwise. The call lasts at most ``timeoutSeconds`` (default 10), told to the webhook as ``?timeout=<n>s``.
- Failures to call are :class:`CallError` with upstream's wording (``failed calling webhook "<name>": failed to
  call webhook: Post "<url>": ...``, ``received invalid webhook response: ...``); the failure policy decides
  what they do. A denial is :class:`~controller_manager.sim.apiserver.errors.StatusError` with the webhook's status,
  its message prefixed ``admission webhook "<name>" denied the request`` and its code made at least 400.
- ``warnings`` are returned for the answer's Warning headers; ``auditAnnotations`` are ignored (no audit log).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import ssl
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import orjson

from controller_manager.sim.apiserver import errors
from controller_manager.sim.apiserver.webhooks.matching import Webhook

Obj = dict[str, Any]

REVIEW_V1 = "admission.k8s.io/v1"
REVIEW_V1BETA1 = "admission.k8s.io/v1beta1"


class CallError(Exception):
    """Calling the webhook failed (transport, bad answer): ``failurePolicy`` decides whether the request fails."""

    def __init__(self, hook: str, reason: str) -> None:
        super().__init__(f'failed calling webhook "{hook}": {reason}')


class Denied(errors.StatusError):
    """The webhook refused the request; ``warnings`` are what it said beside the refusal."""

    def __init__(self, status: Obj, warnings: list[str]) -> None:
        super().__init__(status)
        self.warnings = warnings


@dataclass
class Review:
    """An AdmissionRequest's fields other than its uid (the objects already in the webhook's version)."""
    kind: Obj
    resource: Obj
    sub_resource: str
    request_kind: Obj
    request_resource: Obj
    request_sub_resource: str
    name: str
    namespace: str
    operation: str
    user_info: Obj
    obj: Obj | None
    old: Obj | None
    dry_run: bool
    options: Obj | None

    def body(self, api_version: str, uid: str) -> Obj:
        request: Obj = {"uid": uid, "kind": self.kind, "resource": self.resource}
        if self.sub_resource:
            request["subResource"] = self.sub_resource
        request["requestKind"] = self.request_kind
        request["requestResource"] = self.request_resource
        if self.request_sub_resource:
            request["requestSubResource"] = self.request_sub_resource
        if self.name:
            request["name"] = self.name
        if self.namespace:
            request["namespace"] = self.namespace
        request.update({"operation": self.operation, "userInfo": self.user_info, "object": self.obj,
                        "oldObject": self.old, "dryRun": self.dry_run, "options": self.options})
        return {"kind": "AdmissionReview", "apiVersion": api_version, "request": request}


@dataclass
class Answer:
    allowed: bool
    patch: bytes = b""
    warnings: list[str] = field(default_factory=list)


def denial(hook: str, result: Any, warnings: list[str] | None = None) -> Denied:
    """ToStatusErr: the webhook's status as the request's failure."""
    status: Obj = dict(result) if isinstance(result, Mapping) else {}
    status.update({"kind": "Status", "apiVersion": "v1"})
    status.setdefault("metadata", {})
    code = status.get("code")
    if not isinstance(code, int) or code < 400:
        status["code"] = 400
    if status.get("status") in (None, "", "Success"):
        status["status"] = "Failure"
    denied = f'admission webhook "{hook}" denied the request'
    if status.get("message"):
        status["message"] = f"{denied}: {status['message']}"
    elif status.get("reason"):
        status["message"] = f"{denied}: {status['reason']}"
    else:
        status["message"] = f"{denied} without explanation"
    return Denied(status, list(warnings or ()))


def _review_version(hook: Webhook) -> str:
    for version in hook.spec.get("admissionReviewVersions") or ():
        if version == "v1":
            return REVIEW_V1
        if version == "v1beta1":
            return REVIEW_V1BETA1
    raise CallError(hook.name, "could not create admission objects: webhook does not accept known "
                               "AdmissionReview versions (v1, v1beta1)")


def _ssl_context(hook: Webhook, bundle: Any) -> ssl.SSLContext:
    if not bundle:
        return ssl.create_default_context()
    try:
        pem = base64.b64decode(str(bundle), validate=True).decode()
        return ssl.create_default_context(cadata=pem)
    except (binascii.Error, UnicodeDecodeError, ssl.SSLError, ValueError):
        raise CallError(hook.name, "could not get REST client: unable to load root certificates: unable to parse "
                                   "bytes as PEM block") from None


@dataclass(frozen=True)
class _Target:
    url: str  # as upstream names it in errors
    dial: str  # what kube-sim connects to
    server_hostname: str | None


def _target(hook: Webhook, service_addresses: Mapping[str, str], timeout: int) -> _Target:
    config = hook.spec.get("clientConfig")
    config = config if isinstance(config, Mapping) else {}
    query = f"timeout={timeout}s"
    if config.get("url"):
        parts = urlsplit(str(config["url"]))
        url = urlunsplit(parts._replace(query=f"{parts.query}&{query}" if parts.query else query))
        return _Target(url, url, None)
    service = config.get("service")
    service = service if isinstance(service, Mapping) else {}
    host = f"{service.get('name')}.{service.get('namespace')}.svc"
    port = int(service.get("port") or 443)
    path = str(service.get("path") or "")
    url = f"https://{host}:{port}{path}?{query}"
    address = service_addresses.get(f"{host}:{port}")
    if address is None:
        raise CallError(hook.name, f'failed to call webhook: Post "{url}": no endpoints available for service '
                                   f'"{service.get("name")}"')
    return _Target(url, f"https://{address}{path}?{query}", host)


def _transport_reason(e: BaseException, target: _Target) -> str:
    if isinstance(e, TimeoutError | asyncio.TimeoutError | aiohttp.ServerTimeoutError):
        return "context deadline exceeded"
    if isinstance(e, aiohttp.ClientConnectorCertificateError):
        return "tls: failed to verify certificate: x509: certificate signed by unknown authority"
    if isinstance(e, aiohttp.ClientConnectorError):
        parts = urlsplit(target.dial)
        why = "connection refused" if isinstance(e.os_error, ConnectionRefusedError) else (
            e.os_error.strerror or str(e.os_error)).lower()
        return f"dial tcp {parts.hostname}:{parts.port or 443}: connect: {why}"
    return str(e) or type(e).__name__


def _http_failure(code: int, body: bytes) -> str:
    """client-go's error for a non-2xx answer: the Status it carries, else a generic sentence."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        doc = None
    if isinstance(doc, dict) and doc.get("kind") == "Status" and doc.get("message"):
        return str(doc["message"])
    if code >= 500:
        return f'an error on the server ("{body.decode(errors="replace").strip()}") has prevented the request ' \
               "from succeeding"
    return f"the server responded with the status code {code} but did not return more information"


async def call(hook: Webhook, review: Review, service_addresses: Mapping[str, str]) -> Answer:
    """POST the review to ``hook``; a denial raises StatusError, a failure to call CallError."""
    version = _review_version(hook)
    timeout = int(hook.spec.get("timeoutSeconds") or 10)
    target = _target(hook, service_addresses, timeout)
    config = hook.spec.get("clientConfig")
    context = _ssl_context(hook, (config if isinstance(config, Mapping) else {}).get("caBundle"))
    uid = str(uuid.uuid4())
    payload = orjson.dumps(review.body(version, uid))
    try:
        async with asyncio.timeout(timeout), aiohttp.ClientSession() as session, session.post(
                target.dial, data=payload, ssl=context, server_hostname=target.server_hostname,
                headers={"Content-Type": "application/json", "Accept": "application/json"}) as resp:
            body = await resp.read()
            code = resp.status
    except (aiohttp.ClientError, OSError, TimeoutError) as e:
        raise CallError(hook.name, f'failed to call webhook: Post "{target.url}": {_transport_reason(e, target)}') \
            from None
    if not 200 <= code < 300:
        raise CallError(hook.name, f"failed to call webhook: {_http_failure(code, body)}")
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise CallError(hook.name, f"failed to call webhook: {e}") from None
    return _verify(hook, version, uid, doc)


def _invalid(hook: Webhook, why: str) -> CallError:
    return CallError(hook.name, f"received invalid webhook response: {why}")


def _verify(hook: Webhook, version: str, uid: str, doc: Any) -> Answer:
    """VerifyAdmissionResponse, then the denial or the decoded patch."""
    response = doc.get("response") if isinstance(doc, dict) else None
    if not isinstance(response, dict):
        raise _invalid(hook, "webhook response was absent")
    if version == REVIEW_V1:
        if response.get("uid") != uid:
            raise _invalid(hook, f'expected response.uid="{uid}", got "{response.get("uid") or ""}"')
        got = (doc.get("apiVersion") or "", doc.get("kind") or "")
        if got != (REVIEW_V1, "AdmissionReview"):
            group, _, ver = str(got[0]).rpartition("/")
            raise _invalid(hook, f"expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got "
                                 f"{group + '/' if group else ''}{ver}, Kind={got[1]}")
    raw_patch = response.get("patch") or ""
    patch_type = response.get("patchType")
    if hook.mutating and version == REVIEW_V1:
        if raw_patch and patch_type is None:
            raise _invalid(hook, "webhook returned response.patch but not response.patchType")
        if not raw_patch and patch_type is not None:
            raise _invalid(hook, "webhook returned response.patchType but not response.patch")
        if patch_type is not None and not patch_type:
            raise _invalid(hook, f'webhook returned invalid response.patchType of "{patch_type}"')
    elif not hook.mutating and version == REVIEW_V1:
        if raw_patch:
            raise _invalid(hook, "validating webhook may not return response.patch")
        if patch_type is not None:
            raise _invalid(hook, "validating webhook may not return response.patchType")
    warnings = [str(w) for w in response.get("warnings") or () if isinstance(w, str)]
    if response.get("allowed") is not True:
        raise denial(hook.name, response.get("status"), warnings)
    patch = b""
    if hook.mutating and raw_patch:
        if version == REVIEW_V1 and patch_type != "JSONPatch":
            raise CallError(hook.name, f'unsupported patch type "{patch_type}"')
        try:
            patch = base64.b64decode(str(raw_patch), validate=True)
        except binascii.Error as e:
            raise CallError(hook.name, f"failed to call webhook: illegal base64 data: {e}") from None
    return Answer(True, patch, warnings)
