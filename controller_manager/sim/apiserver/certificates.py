"""certificates.k8s.io/v1 CertificateSigningRequests: validation and the registry's three write paths
(``pkg/apis/certificates/validation``, ``pkg/registry/certificates/certificates/strategy.go``).

Guarantees:
- Validation: a PEM ``CERTIFICATE REQUEST`` in ``spec.request``, a fully qualified ``spec.signerName``,
  ``expirationSeconds`` of at least 600; conditions of a known type, Approved/Denied with status True and
  mutually exclusive, each type once; an update may not remove or change an Approved, Denied or Failed
  condition, nor change an issued certificate.
- A create starts with an empty status; over HTTP ``spec.username``, ``uid`` and ``groups`` are the requester's
  (:func:`with_requester`; an in-process create keeps what it states). The main resource changes only metadata
  (spec and status kept); ``/status`` keeps the spec and the Approved/Denied conditions (those change only
  through ``/approval``); ``/approval`` keeps the spec and the certificate. Conditions get ``lastUpdateTime`` and
  ``lastTransitionTime`` when they lack them (the transition time of the same condition before, if its status
  did not change).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from controller_manager.sim.apiserver.validation_errors import (
    FieldError,
    GoRepr,
    duplicate,
    forbidden,
    invalid,
    not_supported,
    required,
)

Obj = dict[str, Any]

_CONDITION_TYPES = ("Approved", "Denied", "Failed")
_APPROVAL = ("Approved", "Denied")
_PEM_HEADER = "-----BEGIN CERTIFICATE REQUEST-----"


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _bytes_repr(raw: bytes) -> GoRepr:
    """A ``[]byte`` bad value: ``json.Marshal`` writes bytes as a base64 string."""
    return GoRepr('"' + base64.b64encode(raw).decode("ascii") + '"')


def _request_errors(request: Any) -> list[FieldError]:
    if not request:
        return [required("spec.request")]
    try:
        raw = base64.b64decode(str(request), validate=True)
    except (binascii.Error, ValueError):
        return [invalid("spec.request", str(request), "illegal base64 data")]
    if _PEM_HEADER not in raw.decode("latin-1"):
        return [invalid("spec.request", _bytes_repr(raw), "PEM block type must be CERTIFICATE REQUEST")]
    return []


def signer_name_errors(signer: Any) -> list[FieldError]:
    if not signer:
        return [required("spec.signerName")]
    domain, _, path = str(signer).partition("/")
    if not path or "." not in domain:
        return [invalid("spec.signerName", signer,
                        "must be a fully qualified domain and path of the form 'example.com/signer-name'")]
    return []


def _condition_errors(conditions: list[Mapping[str, Any]]) -> list[FieldError]:
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, condition in enumerate(conditions):
        kind = str(condition.get("type") or "")
        path = f"status.conditions[{i}]"
        if not kind:
            errs.append(required(f"{path}.type"))
        elif kind in seen and kind in _CONDITION_TYPES:
            errs.append(duplicate(f"{path}.type", kind))
        seen.add(kind)
        status = condition.get("status")
        if not status:
            errs.append(required(f"{path}.status"))
        elif kind in _CONDITION_TYPES and status != "True":
            errs.append(not_supported(f"{path}.status", status, ("True",)))
        elif status not in ("True", "False", "Unknown"):
            errs.append(not_supported(f"{path}.status", status, ("False", "True", "Unknown")))
    if "Approved" in seen and "Denied" in seen:
        index = next(i for i, c in enumerate(conditions) if c.get("type") in _APPROVAL and i > 0
                     and any(o.get("type") in _APPROVAL for o in conditions[:i]))
        errs.append(invalid(f"status.conditions[{index}].type", conditions[index].get("type"),
                            "Approved and Denied conditions are mutually exclusive"))
    return errs


def validate(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    spec = _dict(obj.get("spec"))
    status = _dict(obj.get("status"))
    conditions = [_dict(c) for c in status.get("conditions") or ()]
    errs = _request_errors(spec.get("request")) if old is None else []
    if old is None:
        errs.extend(signer_name_errors(spec.get("signerName")))
        seconds = spec.get("expirationSeconds")
        if isinstance(seconds, int) and seconds < 600:
            errs.append(invalid("spec.expirationSeconds", seconds,
                                "may not specify a duration less than 600 seconds (10 minutes)"))
    errs.extend(_condition_errors(conditions))
    if old is not None:
        old_status = _dict(old.get("status"))
        old_conditions = {str(_dict(c).get("type")): _dict(c) for c in old_status.get("conditions") or ()}
        new_conditions = {str(c.get("type")): c for c in conditions}
        for kind in _CONDITION_TYPES:
            if kind in old_conditions and kind not in new_conditions:
                errs.append(forbidden("status.conditions", f'updates may not remove a condition of type "{kind}"'))
            elif kind in old_conditions and new_conditions[kind].get("status") != old_conditions[kind].get("status"):
                errs.append(forbidden("status.conditions", f'updates may not modify a condition of type "{kind}"'))
        if old_status.get("certificate") and status.get("certificate") != old_status["certificate"]:
            errs.append(forbidden("status.certificate", "updates may not modify existing certificate content"))
    return errs


def with_requester(obj: Obj, user: Mapping[str, Any]) -> Obj:
    """The request as the registry records it over HTTP: whoever sent it, never what the body claims."""
    spec = {k: v for k, v in _dict(obj.get("spec")).items() if k not in ("username", "uid", "groups", "extra")}
    spec["username"] = user.get("username") or ""
    if user.get("uid"):
        spec["uid"] = user["uid"]
    if user.get("groups"):
        spec["groups"] = list(user["groups"])
    return {**obj, "spec": spec}


def _with_timestamps(conditions: list[Any], old_conditions: list[Any], now: str) -> list[Obj]:
    before = {str(_dict(c).get("type")): _dict(c) for c in old_conditions}
    out = []
    for condition in conditions:
        c = dict(_dict(condition))
        if not c.get("lastUpdateTime"):
            c["lastUpdateTime"] = now
        if not c.get("lastTransitionTime"):
            previous = before.get(str(c.get("type")))
            same = previous is not None and previous.get("status") == c.get("status")
            c["lastTransitionTime"] = previous.get("lastTransitionTime") if same and previous else now
            if not c["lastTransitionTime"]:
                c["lastTransitionTime"] = now
        out.append(c)
    return out


def prepare(new: Obj, old: Obj | None, subresource: str | None, now: str) -> Obj:
    """The object the registry stores for a create (``old`` None) or an update through ``subresource``."""
    if old is None:
        return {**new, "status": {}}
    old_status = _dict(old.get("status"))
    if subresource is None:
        return {**new, "spec": old.get("spec"), "status": old.get("status", {})}
    status = dict(_dict(new.get("status")))
    conditions = list(status.get("conditions") or ())
    if subresource == "status":
        conditions = [c for c in conditions if _dict(c).get("type") not in _APPROVAL]
        conditions += [c for c in old_status.get("conditions") or () if _dict(c).get("type") in _APPROVAL]
    elif subresource == "approval":
        if "certificate" in old_status:
            status["certificate"] = old_status["certificate"]
        else:
            status.pop("certificate", None)
    if conditions:
        status["conditions"] = _with_timestamps(conditions, list(old_status.get("conditions") or ()), now)
    else:
        status.pop("conditions", None)
    return {**new, "spec": old.get("spec"), "status": status}
