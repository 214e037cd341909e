"""Pod-recreation backoff after failures (``pkg/controller/job/backoff_utils.go``).

Guarantees:
- A :class:`BackoffRecord` per Job key remembers how many pods failed since the last success and when the
  last of them finished. :meth:`BackoffStore.new_backoff_record` folds in the pods newly found finished in this
  sync (ordered by finish time): no new pods keep the record; new failures only add up; any new success
  resets it, then counts only the failures that finished strictly after the last success.
- A pod's finish time is the latest container ``finishedAt`` when every container (init ones included) has
  terminated, else the Ready=False condition's transition time, else ``deletionTimestamp`` minus the grace
  period, else the creation time.
- The delay before creating a replacement is ``base * 2^(failures-1)`` capped at ``cap``, minus the time since
  the last failure (never negative). Upstream's base is 10 s and cap 10 min (``DefaultJobPodFailureBackOff``,
  ``MaxJobPodFailureBackOff``); both are parameters so tests can shorten them.
- The store is in memory: a restarted controller starts without records, as upstream's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller_manager.api.meta import meta, parse_time

from .indexed import index_absolute_failure_count

Obj = Mapping[str, Any]

DEFAULT_POD_FAILURE_BACKOFF = 10.0
MAX_POD_FAILURE_BACKOFF = 600.0


@dataclass(frozen=True, slots=True)
class BackoffRecord:
    key: str
    failures_after_last_success: int = 0
    last_failure_time: float | None = None

    def remaining_time(self, now: float, base: float, cap: float) -> float:
        return remaining_time_for_failures(now, base, cap, self.failures_after_last_success,
                                           self.last_failure_time)


class BackoffStore:
    """Backoff records by Job key."""

    def __init__(self) -> None:
        self._records: dict[str, BackoffRecord] = {}

    def get(self, key: str) -> BackoffRecord | None:
        return self._records.get(key)

    def update(self, record: BackoffRecord) -> None:
        self._records[record.key] = record

    def remove(self, key: str) -> None:
        self._records.pop(key, None)

    def new_backoff_record(self, key: str, new_succeeded: Sequence[Obj], new_failed: Sequence[Obj]
                           ) -> BackoffRecord:
        old = self._records.get(key) or BackoffRecord(key)
        succeeded = sorted(finished_time(p) for p in new_succeeded)
        failed = sorted(finished_time(p) for p in new_failed)
        if not succeeded:
            if not failed:
                return old
            return BackoffRecord(key, old.failures_after_last_success + len(failed), failed[-1])
        last_success = succeeded[-1]
        after = [t for t in failed if t > last_success]
        return BackoffRecord(key, len(after), after[-1] if after else None)


def _containers_finished_at(pod: Obj) -> float | None:
    status = pod.get("status") or {}
    latest: float | None = None
    statuses = [*(status.get("containerStatuses") or ()), *(status.get("initContainerStatuses") or ())]
    for cs in statuses:
        terminated = ((cs or {}).get("state") or {}).get("terminated") if isinstance(cs, Mapping) else None
        if not isinstance(terminated, Mapping):
            return None
        at = parse_time(terminated.get("finishedAt"))
        if at is None:
            return None
        latest = at if latest is None else max(latest, at)
    return latest


def _ready_false_since(pod: Obj) -> float | None:
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == "Ready":
            if cond.get("status") == "False":
                return parse_time(cond.get("lastTransitionTime"))
            return None
    return None


def finished_time(pod: Obj) -> float:
    """When the pod finished (``getFinishedTime``), as epoch seconds."""
    for probe in (_containers_finished_at, _ready_false_since):
        at = probe(pod)
        if at is not None:
            return at
    m = meta(pod)
    deleted = parse_time(m.get("deletionTimestamp"))
    if deleted is not None:
        grace = m.get("deletionGracePeriodSeconds")
        return deleted - (grace if isinstance(grace, int) else 0)
    return parse_time(m.get("creationTimestamp")) or 0.0


def remaining_time_for_failures(now: float, base: float, cap: float, failures: int,
                                last_failure_time: float | None) -> float:
    if failures <= 0 or last_failure_time is None:
        return 0.0
    delay = base
    for _ in range(1, failures):
        delay *= 2
        if delay >= cap:
            delay = cap
            break
    elapsed = now - last_failure_time
    return 0.0 if delay < elapsed else delay - elapsed


def remaining_time_per_index(now: float, base: float, cap: float, last_failed_pod: Obj | None) -> float:
    """Backoff left for an index whose last failed pod is ``last_failed_pod`` (its annotations count the
    index's earlier failures)."""
    if last_failed_pod is None:
        return 0.0
    failures = index_absolute_failure_count(last_failed_pod) + 1
    return remaining_time_for_failures(now, base, cap, failures, finished_time(last_failed_pod))
