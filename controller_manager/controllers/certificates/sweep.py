"""What the CSR and PodCertificateRequest cleaners share (``pkg/controller/certificates/cleaner``): no queue work,
only a periodic pass over one informer's cache that deletes what the cleaner says should go.

Guarantees:
- The first pass runs as soon as the cache is synced, then one every ``polling_interval`` seconds of the
  controller's clock.
- An object for which :meth:`SweepCleaner.cleanup_reason` gives a reason is deleted (a non-empty reason is logged
  first). A failed delete is logged as ``Error while attempting to clean <what>`` and the pass goes on; the next
  pass tries again.
"""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

from controller_manager.api.meta import meta
from controller_manager.api.resources import Resource
from controller_manager.runtime.controller import Controller, ControllerContext, Result

__all__ = ["SweepCleaner"]


class SweepCleaner(Controller):
    """A cleaner: one informer, one periodic pass, deletes."""

    resource: ClassVar[Resource]
    polling_interval: ClassVar[float]
    what: ClassVar[str]  # the kind as the cleaner's error log names it
    log_key: ClassVar[str]  # the log field carrying the object's key
    default_workers: ClassVar[int] = 1

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.informer = ctx.informers.informer(self.resource)

    async def sync(self, key: str) -> Result | None:
        return None  # nothing is ever queued: the work is the periodic pass

    async def run_background(self) -> None:
        if not self.informer.has_synced:
            await self.ctx.informers.wait_for_cache_sync()
        while True:
            await self.clean_once()
            await self.ctx.clock.sleep(self.polling_interval)

    async def clean_once(self) -> None:
        """One pass over the cache."""
        now = self.ctx.clock.now()
        for obj in self.informer.store.list():
            reason = self.cleanup_reason(obj, now)
            if reason is None:
                continue
            m = meta(obj)
            name, namespace = str(m.get("name") or ""), str(m.get("namespace") or "")
            key = f"{namespace}/{name}" if namespace else name
            if reason:
                self.log.info(reason, **{self.log_key: key})
            try:
                await self.delete(obj, name, namespace)
            except asyncio.CancelledError:
                raise
            except Exception as err:
                self.log.error(f"Error while attempting to clean {self.what}", **{self.log_key: key},
                               error=f"unable to delete {self.what} {key!r}: {err}")

    @abstractmethod
    def cleanup_reason(self, obj: Mapping[str, Any], now: float) -> str | None:
        """Why ``obj`` goes now ("" to delete it without a log line), or None to keep it."""

    async def delete(self, obj: Mapping[str, Any], name: str, namespace: str) -> None:
        """The delete itself (raise to have it logged)."""
        await self.ctx.client.delete(self.resource, name, namespace or None)
