"""Indexed Jobs: completion indexes, interval strings, per-index failure counts
(``pkg/controller/job/indexed_job_utils.go``).

Guarantees:
- :class:`Intervals` is an immutable, ordered, non-overlapping, non-adjacent list of ``[first, last]`` ranges;
  ``str()`` writes upstream's compressed form (``"1,3-5,7,8"``: a pair of neighbours is written with a comma,
  three or more with a dash) and :func:`parse_indexes` reads it back, dropping corrupted parts and anything at
  or past ``completions`` (a range crossing the limit is cut), merging ranges that touch.
- A pod's completion index is the ``batch.kubernetes.io/job-completion-index`` annotation as a non-negative
  int; anything else is :data:`UNKNOWN_INDEX`.
- Per-index failure counts are read from the pods' annotations, out-of-range or unparsable values as 0.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from controller_manager.controllerutil.controller_utils import sort_active_pods

from .pod_failure_policy import ACTION_FAIL_INDEX, match_pod_failure_policy
from .util import (
    JOB_COMPLETION_INDEX_ANNOTATION,
    JOB_INDEX_FAILURE_COUNT_ANNOTATION,
    JOB_INDEX_IGNORED_FAILURE_COUNT_ANNOTATION,
    backoff_limit_per_index,
    completions_or_zero,
    has_job_tracking_finalizer,
    is_pod_failed,
    pod_annotations,
    pod_failure_policy,
    pod_phase,
)

Obj = Mapping[str, Any]

UNKNOWN_INDEX = -1
COMPLETION_INDEX_ENV_NAME = "JOB_COMPLETION_INDEX"
# names.MaxGeneratedNameLength: a name is at most 63 bytes and generateName adds 5 random ones.
MAX_GENERATED_NAME_LENGTH = 58
_MAX_INT32 = 2**31 - 1

_log = structlog.get_logger("controller_manager.job.indexed")


@dataclass(frozen=True, slots=True)
class Intervals:
    """Ordered, disjoint index ranges (upstream's ``orderedIntervals``)."""

    ranges: tuple[tuple[int, int], ...] = ()

    def __iter__(self) -> Any:
        return iter(self.ranges)

    def __len__(self) -> int:
        return len(self.ranges)

    def __bool__(self) -> bool:
        return bool(self.ranges)

    def total(self) -> int:
        return sum(last - first + 1 for first, last in self.ranges)

    def has(self, index: int) -> bool:
        pos = bisect.bisect_left([last for _, last in self.ranges], index)
        return pos < len(self.ranges) and self.ranges[pos][0] <= index

    def merge(self, other: Intervals) -> Intervals:
        """Both lists in one, touching ranges joined."""
        result: list[list[int]] = []
        for first, last in sorted((*self.ranges, *other.ranges)):
            if not result or first > result[-1][1] + 1:
                result.append([first, last])
            elif result[-1][1] < last:
                result[-1][1] = last
        return Intervals(tuple((a, b) for a, b in result))

    def with_ordered_indexes(self, indexes: Iterable[int]) -> Intervals:
        return self.merge(Intervals(tuple((i, i) for i in indexes)))

    def __str__(self) -> str:
        parts: list[str] = []
        for first, last in self.ranges:
            if last == first:
                parts.append(str(first))
            elif last == first + 1:
                parts.append(f"{first},{last}")
            else:
                parts.append(f"{first}-{last}")
        return ",".join(parts)


def parse_indexes(text: str | None, completions: int) -> Intervals:
    """Read an interval string (``status.completedIndexes``/``failedIndexes``), keeping indexes < completions."""
    if not text:
        return Intervals()
    result: list[list[int]] = []
    for part in text.split(","):
        limits = part.split("-")
        try:
            first = int(limits[0])
        except ValueError:
            _log.info("corrupted indexes interval, ignoring", interval=part)
            continue
        if first >= completions:
            break
        if len(limits) > 1:
            try:
                last = int(limits[1])
            except ValueError:
                _log.info("corrupted indexes interval, ignoring", interval=part)
                continue
            last = min(last, completions - 1)
        else:
            last = first
        if result and result[-1][1] == first - 1:
            result[-1][1] = last
        else:
            result.append([first, last])
    return Intervals(tuple((a, b) for a, b in result))


def get_completion_index(annotations: Mapping[str, Any] | None) -> int:
    if not annotations:
        return UNKNOWN_INDEX
    value = annotations.get(JOB_COMPLETION_INDEX_ANNOTATION)
    if not isinstance(value, str):
        return UNKNOWN_INDEX
    try:
        index = int(value, 10)
    except ValueError:
        return UNKNOWN_INDEX
    return index if index >= 0 else UNKNOWN_INDEX


def pod_index(pod: Obj) -> int:
    return get_completion_index(pod_annotations(pod))


def valid_index(pod: Obj, completions: int) -> int | None:
    ix = pod_index(pod)
    return ix if ix != UNKNOWN_INDEX and ix < completions else None


def get_indexes(pods: Iterable[Obj]) -> set[int]:
    return {ix for ix in (pod_index(p) for p in pods) if ix != UNKNOWN_INDEX}


def calculate_succeeded_indexes(job: Obj, pods: Iterable[Obj]) -> tuple[Intervals, Intervals]:
    """``(from status, status plus newly succeeded pods that still carry the finalizer)``."""
    total = completions_or_zero(job)
    prev = parse_indexes((job.get("status") or {}).get("completedIndexes"), total)
    new = {ix for p in pods if pod_phase(p) == "Succeeded" and has_job_tracking_finalizer(p)
           and (ix := valid_index(p, total)) is not None}
    return prev, prev.with_ordered_indexes(sorted(new))


def calculate_failed_indexes(job: Obj, pods: Iterable[Obj]) -> Intervals:
    """``status.failedIndexes`` plus indexes whose newly failed pod exhausted the index's backoff."""
    total = completions_or_zero(job)
    prev_text = (job.get("status") or {}).get("failedIndexes")
    prev = parse_indexes(prev_text, total) if isinstance(prev_text, str) else Intervals()
    new = {ix for p in pods if has_job_tracking_finalizer(p) and (ix := valid_index(p, total)) is not None
           and is_index_failed(job, p)}
    return prev.with_ordered_indexes(sorted(new))


def is_index_failed(job: Obj, pod: Obj) -> bool:
    counted = False
    if is_pod_failed(pod, job):
        policy = pod_failure_policy(job)
        if policy is not None:
            _, count_failed, action = match_pod_failure_policy(policy, pod)
            if action == ACTION_FAIL_INDEX:
                return True
            counted = count_failed
        else:
            counted = True
    return counted and index_failure_count(pod) >= (backoff_limit_per_index(job) or 0)


def _parse_int32(value: Any) -> int:
    try:
        number = int(str(value), 10)
    except ValueError:
        _log.error("failed to parse the value", value=value)
        return 0
    if number < 0 or number > _MAX_INT32:
        _log.info("the value is invalid", value=number)
        return 0
    return number


def index_failure_count(pod: Obj) -> int:
    value = pod_annotations(pod).get(JOB_INDEX_FAILURE_COUNT_ANNOTATION)
    return 0 if value is None else _parse_int32(value)


def index_ignored_failure_count(pod: Obj) -> int:
    value = pod_annotations(pod).get(JOB_INDEX_IGNORED_FAILURE_COUNT_ANNOTATION)
    return 0 if value is None else _parse_int32(value)


def index_absolute_failure_count(pod: Obj) -> int:
    return index_failure_count(pod) + index_ignored_failure_count(pod)


def new_index_failure_counts(job: Obj, replaced: Obj | None) -> tuple[int, int]:
    """The failure-count annotations of a pod replacing ``replaced`` in the same index."""
    if replaced is None:
        return 0, 0
    failures, ignored = index_failure_count(replaced), index_ignored_failure_count(replaced)
    policy = pod_failure_policy(job)
    if policy is not None:
        _, count_failed, _ = match_pod_failure_policy(policy, replaced)
        if count_failed:
            failures += 1
        else:
            ignored += 1
    else:
        failures += 1
    return failures, ignored


def first_pending_indexes(active_pods: Sequence[Obj], succeeded: Intervals, failed: Intervals | None,
                          terminating_pods: Sequence[Obj] | None, count: int, completions: int) -> list[int]:
    """The lowest ``count`` indexes below ``completions`` not active, succeeded, failed (or terminating, when
    only failed pods are replaced)."""
    if count == 0:
        return []
    non_pending = succeeded.with_ordered_indexes(sorted(get_indexes(active_pods)))
    if terminating_pods is not None:
        non_pending = non_pending.with_ordered_indexes(sorted(get_indexes(terminating_pods)))
    if failed is not None:
        non_pending = non_pending.merge(failed)
    result: list[int] = []
    candidate = 0
    for first, last in non_pending:
        while candidate < completions and len(result) < count and candidate < first:
            result.append(candidate)
            candidate += 1
        candidate = max(candidate, last + 1)
    while candidate < completions and len(result) < count:
        result.append(candidate)
        candidate += 1
    return result


def _sort_by_index(pods: Iterable[Obj]) -> list[Obj]:
    return sorted(pods, key=pod_index)  # stable, as upstream's sort.Sort on distinct keys


def _split_same_index(rm: list[Obj], left: list[Obj], group: Sequence[Obj], ix: int) -> None:
    if ix == UNKNOWN_INDEX:
        rm.extend(group)
    elif len(group) == 1:
        left.append(group[0])
    elif group:
        ranked = sort_active_pods(group)
        rm.extend(ranked[:-1])
        left.append(ranked[-1])


def append_duplicated_index_pods_for_removal(pods: Sequence[Obj], completions: int
                                             ) -> tuple[list[Obj], list[Obj]]:
    """``(to remove, to keep)``: pods without a valid index or beyond completions go; of pods sharing an index,
    all but the best one (last in ``ActivePods`` order) go. Same order as upstream's single pass."""
    ordered = _sort_by_index(pods)
    rm: list[Obj] = []
    left: list[Obj] = []
    last_index = UNKNOWN_INDEX
    first_repeat = 0
    looped = 0
    for i, pod in enumerate(ordered):
        ix = pod_index(pod)
        if ix >= completions:
            rm.extend(ordered[i:])
            break
        if ix != last_index:
            _split_same_index(rm, left, ordered[first_repeat:i], last_index)
            first_repeat = i
            last_index = ix
        looped += 1
    _split_same_index(rm, left, ordered[first_repeat:looped], last_index)
    return rm, left


def pod_generate_name_with_index(job_name: str, index: int) -> str:
    suffix = f"-{index}-"
    prefix = job_name + suffix
    if len(prefix) > MAX_GENERATED_NAME_LENGTH:
        prefix = prefix[:MAX_GENERATED_NAME_LENGTH - len(suffix)] + suffix
    return prefix
