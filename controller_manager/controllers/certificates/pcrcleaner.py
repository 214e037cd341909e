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

import asyncio
from collections.abc import Mapping
from typing import Any, ClassVar

from controller_manager.api.meta import meta, parse_time
from controller_manager.api.resources import PODCERTIFICATEREQUESTS
from controller_manager.client.errors import NotFound
from controller_manager.runtime.controller import Controller, ControllerContext, Result

__all__ = ["POLLING_INTERVAL", "THRESHOLD", "PCRCleanerController", "should_delete"]

THRESHOLD = 15 * 60.0  # seconds after creation a request is deleted
POLLING_INTERVAL = 5 * 60.0


def should_delete(pcr: Mapping[str, Any], now: float, threshold: float = THRESHOLD) -> bool:
    """``handle``'s test: not before ``creationTimestamp + threshold``."""
    created = parse_time(meta(pcr).get("creationTimestamp"))
    return not (created is not None and now < created + threshold)


class PCRCleanerController(Controller):
    """Periodic deletion of old PodCertificateRequests (no queue work)."""

    name: ClassVar[str] = "podcertificaterequest-cleaner-controller"
    alias: ClassVar[str] = "podcertificaterequest-cleaner-controller"
    queue_name: ClassVar[str | None] = "podcertificaterequestcleaner"
    default_workers: ClassVar[int] = 1

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.pcr_informer = ctx.informers.informer(PODCERTIFICATEREQUESTS)

    async def sync(self, key: str) -> Result | None:
        return None  # nothing is ever queued: the work is the periodic pass

    async def run_background(self) -> None:
        if not self.pcr_informer.has_synced:
            await self.ctx.informers.wait_for_cache_sync()
        while True:
            await self.clean_once()
            await self.ctx.clock.sleep(POLLING_INTERVAL)

    async def clean_once(self) -> None:
        """One pass over the cache (``worker``)."""
        now = self.ctx.clock.now()
        for pcr in self.pcr_informer.store.list():
            if not should_delete(pcr, now):
                continue
            m = meta(pcr)
            namespace, name = str(m.get("namespace") or ""), str(m.get("name") or "")
            try:
                await self.ctx.client.delete(PODCERTIFICATEREQUESTS, name, namespace, uid=str(m.get("uid") or ""))
            except NotFound:
                continue  # someone else deleted it already
            except asyncio.CancelledError:
                raise
            except Exception as err:
                self.log.error("Error while attempting to clean PodCertificateRequest", pcr=f"{namespace}/{name}",
                               error=f"unable to delete PodCertificateRequest {f'{namespace}/{name}'!r}: {err}")
