"""certificates.k8s.io/v1 PodCertificateRequests (GA in 1.37, so served by default): the identity checks of
``pkg/apis/certificates/validation`` and the status rules that make a request terminal.

Guarantees:
- Create: ``spec.signerName`` is a fully qualified signer name; ``podName``, ``serviceAccountName`` and
  ``nodeName`` are DNS subdomains; the three UIDs are non-empty (``must not be empty``) and at most 128 bytes;
  ``maxExpirationSeconds`` is set (``must be set``) and within [3600, 86400] for ``kubernetes.io/`` signers,
  [3600, 7862400] for others. Upstream's messages throughout.
- Update: the whole spec is immutable (``field is immutable``); the status is written through ``/status`` only.
- ``/status``: at most one of the conditions ``Issued``, ``Denied``, ``Failed``, each with status ``True``, no
  other condition type; once a request is issued, denied or failed its status never changes again; a denial or
  failure carries nothing but conditions.
- Not simulated: the checks of ``spec.stubPKCS10Request`` (the CSR's signature and key type), of an issued
  certificate chain against the request and of its times, and the admission plugin tying a request to its
  node's pod.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from controller_manager.api.selectors import is_dns1123_subdomain
from controller_manager.sim.apiserver.certificates import signer_name_errors
from controller_manager.sim.apiserver.validation_errors import FieldError, invalid, not_supported, required

MIN_MAX_EXPIRATION_SECONDS = 3600
KUBERNETES_MAX_MAX_EXPIRATION_SECONDS = 86400
MAX_MAX_EXPIRATION_SECONDS = 91 * 86400
MAX_UID_LENGTH = 128
TERMINAL = ("Issued", "Denied", "Failed")


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _too_long(path: str, limit: int) -> FieldError:
    return FieldError("FieldValueTooLong", path, f"must have at most {limit} bytes", "<value omitted>")


def create_errors(obj: Mapping[str, Any]) -> list[FieldError]:
    spec = _dict(obj.get("spec"))
    errs = list(signer_name_errors(spec.get("signerName")))
    for field in ("podName", "serviceAccountName", "nodeName"):
        value = str(spec.get(field) or "")
        errs.extend(invalid(f"spec.{field}", value, msg) for msg in is_dns1123_subdomain(value))
    for field in ("podUID", "serviceAccountUID", "nodeUID"):
        value = str(spec.get(field) or "")
        if not value:
            errs.append(invalid(f"spec.{field}", value, "must not be empty"))
        elif len(value.encode()) > MAX_UID_LENGTH:
            errs.append(_too_long(f"spec.{field}", MAX_UID_LENGTH))
    seconds = spec.get("maxExpirationSeconds")
    if seconds is None:
        errs.append(required("spec.maxExpirationSeconds", "must be set"))
        return errs
    kubernetes_signer = str(spec.get("signerName") or "").startswith("kubernetes.io/")
    high = KUBERNETES_MAX_MAX_EXPIRATION_SECONDS if kubernetes_signer else MAX_MAX_EXPIRATION_SECONDS
    if not isinstance(seconds, int) or not MIN_MAX_EXPIRATION_SECONDS <= seconds <= high:
        errs.append(invalid("spec.maxExpirationSeconds", seconds,
                            f"must be in the range [{MIN_MAX_EXPIRATION_SECONDS}, {high}]"))
    return errs


def validate(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    if old is None:
        return create_errors(obj)
    spec, before = _dict(obj.get("spec")), _dict(old.get("spec"))
    if spec != before:
        return [invalid("spec", json.dumps(spec, sort_keys=True), "field is immutable")]
    return []


def _conditions(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    conditions = _dict(obj.get("status")).get("conditions")
    return [c for c in conditions if isinstance(c, Mapping)] if isinstance(conditions, list) else []


def _terminal(obj: Mapping[str, Any]) -> bool:
    return any(c.get("type") in TERMINAL and c.get("status") == "True" for c in _conditions(obj))


def status_errors(obj: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    errs: list[FieldError] = []
    known = 0
    for i, condition in enumerate(_conditions(obj)):
        kind = condition.get("type")
        if kind in TERMINAL:
            known += 1
            if known > 1:
                errs.append(invalid(f"status.conditions[{i}].type", kind,
                                    'There may be at most one condition with type "Issued", "Denied", or "Failed"'))
            if condition.get("status") != "True":
                errs.append(not_supported(f"status.conditions[{i}].status", condition.get("status"), ["True"]))
        else:
            errs.append(not_supported(f"status.conditions[{i}].type", kind, list(TERMINAL)))
    if errs:
        return errs
    status, old_status = dict(_dict(obj.get("status"))), dict(_dict(old.get("status")))
    if _terminal(old):
        if status != old_status:
            errs.append(invalid("status", "<value omitted>",
                                "immutable after PodCertificateRequest is issued, denied, or failed"))
        return errs
    denied_or_failed = any(c.get("type") in ("Denied", "Failed") for c in _conditions(obj))
    if denied_or_failed and set(status) - {"conditions"}:
        errs.append(invalid("status", "<value omitted>",
                            "non-condition status fields must be empty when denying or failing the "
                            "PodCertificateRequest"))
    return errs
