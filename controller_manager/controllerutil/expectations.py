"""Expectations: don't act again on a controller key until the cache shows the last action.

A controller records how many creations/deletions it is about to make *before* the API calls
(``expect_creations``), the informer handlers count them off as the watch delivers them
(``creation_observed``), and the sync does nothing new while ``satisfied(key)`` is False. Without
this a second sync that runs before the cache catches up would create the same pods again.

Guarantees (as upstream's ``ControllerExpectations`` / ``UIDTrackingControllerExpectations``):
- ``satisfied(key)`` is True when no expectations were ever set for ``key`` (or they were deleted),
  when both counters are at or below zero, or when they were set more than ``ttl`` seconds ago
  (5 minutes, ``ExpectationsTimeout``) so a lost watch event cannot put a controller to sleep forever.
  The expiry reads the injected clock's monotonic time. (Upstream issue kubernetes#129795: an expiry
  while the informer lags can still duplicate pods; we keep upstream's behaviour.)
- Setting expectations replaces the old ones and restarts the TTL; raise/lower only adjust counters
  of existing expectations and are no-ops otherwise.
- The UID-tracking variant remembers *which* pods (``namespace/name`` keys) it expects to be deleted,
  so a pod seen both as "deletionTimestamp set" and later as "deleted" is counted once.
- Single-threaded asyncio: no locks; every method is synchronous and safe to call from handlers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import structlog

from controller_manager.clock import Clock

__all__ = ["EXPECTATIONS_TIMEOUT", "ControlleeExpectations", "ControllerExpectations",
           "UIDTrackingControllerExpectations"]

# controller.ExpectationsTimeout: long enough for a watch to deliver a burst of creations at scale.
EXPECTATIONS_TIMEOUT = 5 * 60.0

_log = structlog.get_logger("controller_manager.expectations")


@dataclass(slots=True)
class ControlleeExpectations:
    """Outstanding creations and deletions one controller key waits for, and when they were set."""

    key: str
    add: int
    delete: int
    timestamp: float  # clock.monotonic() when set

    def fulfilled(self) -> bool:
        return self.add <= 0 and self.delete <= 0

    def get_expectations(self) -> tuple[int, int]:
        return self.add, self.delete


class ControllerExpectations:
    """Per controller key, the creations/deletions it still expects to observe."""

    def __init__(self, clock: Clock, ttl: float = EXPECTATIONS_TIMEOUT) -> None:
        self._clock = clock
        self._ttl = ttl
        self._store: dict[str, ControlleeExpectations] = {}

    def __len__(self) -> int:
        return len(self._store)

    def get_expectations(self, key: str) -> ControlleeExpectations | None:
        return self._store.get(key)

    def _expired(self, exp: ControlleeExpectations) -> bool:
        return self._clock.monotonic() - exp.timestamp > self._ttl

    def satisfied(self, key: str) -> bool:
        """True if the controller may act: expectations met, expired, or never set."""
        exp = self._store.get(key)
        if exp is None:
            return True
        if exp.fulfilled():
            return True
        if self._expired(exp):
            _log.debug("controller expectations expired", key=key, add=exp.add, delete=exp.delete)
            return True
        return False

    def delete_expectations(self, key: str) -> None:
        self._store.pop(key, None)

    def set_expectations(self, key: str, add: int, delete: int) -> None:
        """Forget what ``key`` expected before; now expect ``add`` creations and ``delete`` deletions."""
        self._store[key] = ControlleeExpectations(key, add, delete, self._clock.monotonic())

    def expect_creations(self, key: str, adds: int) -> None:
        self.set_expectations(key, adds, 0)

    def expect_deletions(self, key: str, dels: int) -> None:
        self.set_expectations(key, 0, dels)

    def lower_expectations(self, key: str, add: int, delete: int) -> None:
        exp = self._store.get(key)
        if exp is not None:
            exp.add -= add
            exp.delete -= delete

    def raise_expectations(self, key: str, add: int, delete: int) -> None:
        exp = self._store.get(key)
        if exp is not None:
            exp.add += add
            exp.delete += delete

    def creation_observed(self, key: str) -> None:
        self.lower_expectations(key, 1, 0)

    def deletion_observed(self, key: str) -> None:
        self.lower_expectations(key, 0, 1)


class UIDTrackingControllerExpectations:
    """Expectations that also remember which pod keys each controller expects to see deleted.

    Graceful deletion shows a pod twice (deletionTimestamp set, then gone); counting by key makes
    both observations lower the expectation once. Creations are tracked by count only, as upstream.
    """

    def __init__(self, expectations: ControllerExpectations) -> None:
        self._exp = expectations
        self._uids: dict[str, set[str]] = {}

    # The counting half, delegated.
    def get_expectations(self, key: str) -> ControlleeExpectations | None:
        return self._exp.get_expectations(key)

    def satisfied(self, key: str) -> bool:
        return self._exp.satisfied(key)

    def set_expectations(self, key: str, add: int, delete: int) -> None:
        self._exp.set_expectations(key, add, delete)

    def expect_creations(self, key: str, adds: int) -> None:
        self._exp.expect_creations(key, adds)

    def creation_observed(self, key: str) -> None:
        self._exp.creation_observed(key)

    def lower_expectations(self, key: str, add: int, delete: int) -> None:
        self._exp.lower_expectations(key, add, delete)

    def raise_expectations(self, key: str, add: int, delete: int) -> None:
        self._exp.raise_expectations(key, add, delete)

    # The UID-tracking half.
    def get_uids(self, key: str) -> set[str] | None:
        """The pod keys ``key`` still waits to see deleted (None if it never set any)."""
        return self._uids.get(key)

    def expect_deletions(self, key: str, deleted_keys: Iterable[str]) -> None:
        """Expect exactly these pod keys (``namespace/name``) to be deleted, replacing older expectations."""
        existing = self._uids.get(key)
        if existing:
            _log.error("clobbering existing delete keys", key=key, existing=sorted(existing))
        expected = set(deleted_keys)
        self._uids[key] = expected
        self._exp.expect_deletions(key, len(expected))

    def deletion_observed(self, key: str, deleted_key: str) -> None:
        """Count ``deleted_key`` off ``key``'s deletions, once, if it was one of them."""
        uids = self._uids.get(key)
        if uids is not None and deleted_key in uids:
            self._exp.deletion_observed(key)
            uids.discard(deleted_key)

    def delete_expectations(self, key: str) -> None:
        self._exp.delete_expectations(key)
        self._uids.pop(key, None)
