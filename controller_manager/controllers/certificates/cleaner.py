"""The CSR cleaner (``certificatesigningrequest-cleaner-controller``, ``csrcleaner``;
``pkg/controller/certificates/cleaner/cleaner.go``).

Guarantees:
- Once an hour (first pass at start), every cached CSR is deleted when it is: Approved with a certificate and
  that condition's ``lastUpdateTime`` over 1 h old; Denied over 1 h; Failed over 1 h; without any condition and
  created over 24 h ago; or Approved with a certificate whose NotAfter has passed. Conditions without a
  ``lastUpdateTime`` never count as old.
- A failed delete is logged and the pass goes on; the next pass tries again (:mod:`.sweep`). No queue of its
  own, no events.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, ClassVar

from cryptography import x509

from controller_manager.api.meta import meta
from controller_manager.api.resources import CERTIFICATESIGNINGREQUESTS
from controller_manager.controllers.certificates.csr import decode_bytes
from controller_manager.controllers.certificates.sweep import SweepCleaner

__all__ = ["APPROVED_EXPIRATION", "DENIED_EXPIRATION", "PENDING_EXPIRATION", "POLLING_INTERVAL", "CSRCleanerController",
           "cleanup_reason"]

Obj = Mapping[str, Any]

POLLING_INTERVAL = 3600.0
APPROVED_EXPIRATION = 3600.0
DENIED_EXPIRATION = 3600.0
PENDING_EXPIRATION = 24 * 3600.0


def _time(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _older_than(value: Any, age: float, now: float) -> bool:
    t = _time(value)
    return t is not None and t - now < -age


def _not_after(csr: Obj) -> float | None:
    data = decode_bytes((csr.get("status") or {}).get("certificate"))
    if not data:
        return None
    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError:
        return None
    return certs[0].not_valid_after_utc.timestamp() if certs else None


def cleanup_reason(csr: Obj, now: float) -> str | None:
    """Upstream's log line for why ``csr`` is deleted now, or None to keep it."""
    status = csr.get("status") or {}
    conditions = [c for c in status.get("conditions") or () if isinstance(c, Mapping)]
    issued = bool(status.get("certificate"))
    for c in conditions:
        if c.get("type") == "Approved" and issued and _older_than(c.get("lastUpdateTime"), APPROVED_EXPIRATION, now):
            return "Cleaning CSR as it is more than approvedExpiration old and approved."
    for c in conditions:
        if c.get("type") == "Denied" and _older_than(c.get("lastUpdateTime"), DENIED_EXPIRATION, now):
            return "Cleaning CSR as it is more than deniedExpiration old and denied."
    for c in conditions:
        if c.get("type") == "Failed" and _older_than(c.get("lastUpdateTime"), DENIED_EXPIRATION, now):
            return "Cleaning CSR as it is more than deniedExpiration old and failed."
    if not conditions and _older_than(meta(csr).get("creationTimestamp"), PENDING_EXPIRATION, now):
        return "Cleaning CSR as it is more than pendingExpiration old and unhandled."
    if issued and any(c.get("type") == "Approved" for c in conditions):
        not_after = _not_after(csr)
        if not_after is not None and now > not_after:
            return "Cleaning CSR as the associated certificate is expired."
    return None


class CSRCleanerController(SweepCleaner):
    """Periodic deletion of old CSRs (one worker, no queue work)."""

    name: ClassVar[str] = "certificatesigningrequest-cleaner-controller"
    alias: ClassVar[str] = "csrcleaner"
    queue_name: ClassVar[str | None] = "csrcleaner"
    resource = CERTIFICATESIGNINGREQUESTS
    polling_interval = POLLING_INTERVAL
    what = "CSR"
    log_key = "csr"

    def cleanup_reason(self, obj: Obj, now: float) -> str | None:
        return cleanup_reason(obj, now)
