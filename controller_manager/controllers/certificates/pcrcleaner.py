"""The PodCertificateRequest cleaner (kube-controller-manager's ``podcertificaterequest-cleaner-controller``,
``pkg/controller/certificates/cleaner/pcrcleaner.go``).

Guarantees:
- Every 5 minutes (the first pass as soon as the cache is synced) every PodCertificateRequest created 15 minutes
  ago or more is deleted, whatever its state: all issuance flows are expected to end sooner. A request created
  less than 15 minutes ago is left alone, pending or terminal.
- Each delete carries the request's UID as a precondition, so a request recreated under the same name is never
  deleted for its predecessor; one already gone is fine. Other failures are logged and left to the next pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from controller_manager.api.meta import meta, parse_time
from controller_manager.api.resources import PODCERTIFICATEREQUESTS
from controller_manager.client.errors import NotFound
from controller_manager.controllers.certificates.sweep import SweepCleaner

__all__ = ["POLLING_INTERVAL", "THRESHOLD", "PCRCleanerController", "should_delete"]

THRESHOLD = 15 * 60.0  # seconds after creation a request is deleted
POLLING_INTERVAL = 5 * 60.0


def should_delete(pcr: Mapping[str, Any], now: float, threshold: float = THRESHOLD) -> bool:
    """``handle``'s test: not before ``creationTimestamp + threshold``."""
    created = parse_time(meta(pcr).get("creationTimestamp"))
    return not (created is not None and now < created + threshold)


class PCRCleanerController(SweepCleaner):
    """Periodic deletion of old PodCertificateRequests (no queue work)."""

    name: ClassVar[str] = "podcertificaterequest-cleaner-controller"
    alias: ClassVar[str] = "podcertificaterequest-cleaner-controller"
    queue_name: ClassVar[str | None] = "podcertificaterequestcleaner"
    resource = PODCERTIFICATEREQUESTS
    polling_interval = POLLING_INTERVAL
    what = "PodCertificateRequest"
    log_key = "pcr"

    def cleanup_reason(self, obj: Mapping[str, Any], now: float) -> str | None:
        return "" if should_delete(obj, now) else None

    async def delete(self, obj: Mapping[str, Any], name: str, namespace: str) -> None:
        try:
            await self.ctx.client.delete(PODCERTIFICATEREQUESTS, name, namespace, uid=str(meta(obj).get("uid") or ""))
        except NotFound:
            pass  # someone else deleted it already
