"""Objects written with a time to live, expired as etcd expires the leases kube-apiserver attaches to them.

kube-apiserver stores Events (core/v1 and events.k8s.io/v1: one storage) with ``--event-ttl`` (default 1h): the
registry's TTLFunc gives that TTL on every create and update, and the etcd3 store attaches a lease to the write,
so an Event lives that long after its last write. Leases are shared the way the etcd3 store's lease manager
shares them: a lease granted for ``ttl + reuse`` seconds (reuse: 5% of the TTL, at most 60 s) takes every write
made while it still has between ``ttl`` and ``ttl + reuse`` seconds left, up to 1,000 objects; so an object
expires between ``ttl`` and ``ttl + reuse`` seconds after its last write. A lease's expiry deletes its objects in
one etcd transaction: one new resourceVersion for all of them, a DELETED watch event for each.

Guarantees:
- :meth:`Leases.attach` on each stored write of a key, :meth:`Leases.detach` when it is deleted otherwise; an
  attach moves the key to the current lease, so only its last write's lease expires it.
- Cost: one timer per lease (not per object, and no periodic scan); a lease's expiry touches only its keys.
- A TTL under one second is none (kube-apiserver passes the TTL in whole seconds; 0 attaches no lease).
- The API server driven synchronously, with no event loop running (tests and tools building objects in
  process), has no timers: what it writes then does not expire. kube-sim itself always runs in a loop.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from controller_manager.clock import Clock, TimerHandle

# k8s.io/apiserver storage/etcd3 lease manager defaults
LEASE_REUSE_SECONDS = 60
LEASE_REUSE_PERCENT = 0.05
LEASE_MAX_OBJECTS = 1000


class Leases:
    """The leases of one store's keys. ``ttl()`` is the TTL in seconds (read at each write, so a flag set after
    start-up applies to later writes); ``expire(keys)`` deletes the keys of a lapsed lease that are still
    attached to it, in one write."""

    def __init__(self, clock: Clock, ttl: Callable[[], float], expire: Callable[[list[str]], None]) -> None:
        self._clock = clock
        self._ttl = ttl
        self._expire = expire
        self._ids = itertools.count(1)
        self._lease_of: dict[str, int] = {}
        self._keys: dict[int, set[str]] = {}
        self._timers: dict[int, TimerHandle] = {}
        self._current = 0
        self._current_expiry = float("-inf")
        self._attached = 0

    def __len__(self) -> int:
        """Keys attached to a lease."""
        return len(self._lease_of)

    @property
    def leases(self) -> int:
        """Leases not yet expired (each with its one timer)."""
        return len(self._timers)

    def attach(self, key: str) -> None:
        ttl = int(self._ttl())
        if ttl <= 0:
            self.detach(key)  # written without a lease: it no longer expires
            return
        lease = self._lease(ttl)
        old = self._lease_of.get(key)
        if old == lease:
            return
        if old is not None:
            self._keys[old].discard(key)
        self._lease_of[key] = lease
        self._keys[lease].add(key)

    def detach(self, key: str) -> None:
        lease = self._lease_of.pop(key, None)
        if lease is not None:
            self._keys[lease].discard(key)

    def _lease(self, ttl: int) -> int:
        now = self._clock.monotonic()
        reuse = min(LEASE_REUSE_SECONDS, int(LEASE_REUSE_PERCENT * ttl))
        self._attached += 1
        if now + ttl < self._current_expiry <= now + ttl + reuse and self._attached <= LEASE_MAX_OBJECTS:
            return self._current
        lease = next(self._ids)
        self._current = lease
        self._current_expiry = now + ttl + reuse
        self._attached = 1
        self._keys[lease] = set()
        try:
            self._timers[lease] = self._clock.call_later(ttl + reuse, lambda: self._lapse(lease))
        except RuntimeError:  # no running event loop: nothing could ever run the expiry (see Guarantees)
            pass
        return lease

    def _lapse(self, lease: int) -> None:
        self._timers.pop(lease, None)
        keys = sorted(self._keys.pop(lease, ()))
        for key in keys:
            del self._lease_of[key]
        if keys:
            self._expire(keys)
