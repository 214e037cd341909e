"""Per-key exponential backoff, as client-go's ``flowcontrol.Backoff`` (no jitter) that the DaemonSet controller
uses before deleting a failed daemon pod again on the same node.

Guarantees:
- ``next(key, now)`` starts a key at ``initial`` seconds and doubles it on each call, capped at ``cap``; a key
  untouched for more than ``2 * cap`` starts over from ``initial``.
- ``in_backoff_since_update(key, now)`` is True while less than the key's current delay has passed since its
  last ``next``; ``get(key)`` is that delay (0 for an unknown key).
- ``gc(now)`` forgets keys untouched for more than ``2 * cap``; ``next`` runs it now and then, so the table
  stays bounded without a background task.
- Time is whatever the caller passes (the injected clock's ``now()``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FAILED_POD_BACKOFF_INITIAL", "FAILED_POD_BACKOFF_MAX", "Backoff"]

# kube-controller-manager's startDaemonSetController: flowcontrol.NewBackOff(1*time.Second, 15*time.Minute).
FAILED_POD_BACKOFF_INITIAL = 1.0
FAILED_POD_BACKOFF_MAX = 15 * 60.0
# upstream runs GC every BackoffGCInterval (1 minute).
_GC_INTERVAL = 60.0


@dataclass(slots=True)
class _Entry:
    backoff: float
    last_update: float


class Backoff:
    def __init__(self, initial: float = FAILED_POD_BACKOFF_INITIAL, cap: float = FAILED_POD_BACKOFF_MAX) -> None:
        self.initial = initial
        self.cap = cap
        self._entries: dict[str, _Entry] = {}
        self._last_gc: float | None = None

    def __len__(self) -> int:
        return len(self._entries)

    def _expired(self, entry: _Entry, now: float) -> bool:
        return now - entry.last_update > 2 * self.cap

    def get(self, key: str) -> float:
        entry = self._entries.get(key)
        return entry.backoff if entry is not None else 0.0

    def next(self, key: str, now: float) -> None:
        """Record one more failure of ``key`` at ``now``: its delay starts or doubles."""
        self._maybe_gc(now)
        entry = self._entries.get(key)
        if entry is None or self._expired(entry, now):
            self._entries[key] = _Entry(self.initial, now)
            return
        entry.backoff = min(entry.backoff * 2, self.cap)
        entry.last_update = now

    def in_backoff_since_update(self, key: str, now: float) -> bool:
        entry = self._entries.get(key)
        if entry is None or self._expired(entry, now):
            return False
        return now - entry.last_update < entry.backoff

    def reset(self, key: str) -> None:
        self._entries.pop(key, None)

    def gc(self, now: float) -> None:
        for key in [k for k, e in self._entries.items() if self._expired(e, now)]:
            del self._entries[key]
        self._last_gc = now

    def _maybe_gc(self, now: float) -> None:
        if self._last_gc is None or now - self._last_gc >= _GC_INTERVAL:
            self.gc(now)
