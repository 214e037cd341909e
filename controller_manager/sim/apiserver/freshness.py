"""Waiting for the store to reach a resourceVersion, as the watch cache's ``waitUntilFreshAndBlock`` does.

Guarantees:
- A read that asks for a resourceVersion newer than the store's current one waits until a write reaches
  it, at most ``timeout`` seconds (the watch cache's blockTimeout, 3 s), then fails with the 504 of
  ``storage.NewTooLargeResourceVersionError``: message ``Too large resource version: X, current: Y``,
  reason Timeout, retryAfterSeconds 1, one cause ``ResourceVersionTooLarge``.
- Waiters are futures released by the write that reaches their version (no polling); with nobody
  waiting, a write costs one truth test.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from controller_manager.sim.apiserver import errors

BLOCK_TIMEOUT = 3.0
RETRY_AFTER_SECONDS = 1


def too_large_resource_version(requested: int, current: int) -> errors.StatusError:
    return errors.timeout(f"Too large resource version: {requested}, current: {current}", RETRY_AFTER_SECONDS,
                          [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}])


class Freshness:
    """Readers waiting for ``current_rv()`` to reach their version; the store calls :meth:`advanced`."""

    def __init__(self, current_rv: Callable[[], int]) -> None:
        self._current_rv = current_rv
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def advanced(self, current: int) -> None:
        """The store's resourceVersion is now ``current``: release every waiter it satisfies."""
        if not self._waiters:
            return
        still: list[tuple[int, asyncio.Future[None]]] = []
        for target, fut in self._waiters:
            if target <= current:
                if not fut.done():
                    fut.set_result(None)
            elif not fut.done():
                still.append((target, fut))
        self._waiters = still

    async def wait_for(self, requested: int, timeout: float = BLOCK_TIMEOUT) -> None:
        """Return once the store reaches ``requested``; raise the 504 after ``timeout`` seconds."""
        if requested <= self._current_rv():
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (requested, fut)
        self._waiters.append(entry)
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout)
        except TimeoutError:
            raise too_large_resource_version(requested, self._current_rv()) from None
        finally:
            with contextlib.suppress(ValueError):
                self._waiters.remove(entry)
            fut.cancel()
