"""Pure helpers every workload controller shares (the pure half of ``pkg/controller/controller_utils.go``).

Guarantees:
- :func:`sort_active_pods_with_ranks` orders pods exactly as upstream's ``ActivePodsWithRanks.Less``
  with today's default feature gates (PodDeletionCost and LogarithmicScaleDown on): the pod to delete
  first comes first. :func:`sort_active_pods` is ``ActivePods`` (the same rules without deletion cost,
  ranks or logarithmic bucketing). Neither mutates its input.
- :func:`slow_start_batch` calls an async function ``count`` times in batches of 1, 2, 4, ... (all of
  a batch concurrently); after a batch with a failure it stops, and returns how many calls succeeded
  plus the first error, as upstream's ``slowStartBatch``.
- :func:`compute_hash` is a stable, deterministic pod-template-hash (FNV-1a 32 over canonical JSON plus
  the collision count, in ``rand.SafeEncodeString``'s alphabet). It does not equal upstream's value and
  need not: controllers find their ReplicaSets by template equality, never by recomputing hashes.
- Objects are the API's JSON (plain dicts) and are only read.
"""

from __future__ import annotations

import asyncio
import functools
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from controller_manager.api.meta import meta, parse_time
from controller_manager.api.pods import (
    POD_PENDING,
    POD_RUNNING,
    POD_UNKNOWN,
    count_terminating_pods,
    filter_active_pods,
    filter_terminating_pods,
    get_pod_ready_condition,
    is_pod_active,
    is_pod_ready,
    pod_key,
    pod_phase,
    pod_ready_since,
)

__all__ = [
    "POD_DELETION_COST_ANNOTATION",
    "SLOW_START_INITIAL_BATCH_SIZE",
    "active_pods_less",
    "compute_hash",
    "count_terminating_pods",
    "filter_active_pods",
    "filter_active_replica_sets",
    "filter_terminating_pods",
    "find_min_next_pod_availability_check",
    "get_deletion_cost_from_pod_annotations",
    "next_pod_availability_check",
    "pod_key",
    "pod_keys",
    "pods_with_ranks_less",
    "ranks_by_colocated_pods",
    "replica_sets_by_creation_timestamp",
    "replica_sets_by_size_newer",
    "replica_sets_by_size_older",
    "safe_encode_string",
    "slow_start_batch",
    "sort_active_pods",
    "sort_active_pods_with_ranks",
]

Obj = Mapping[str, Any]

# Batches of creations start this small and double while they succeed (controller.SlowStartInitialBatchSize).
SLOW_START_INITIAL_BATCH_SIZE = 1

POD_DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"

# Phases not listed (none, Succeeded, Failed) rank with Pending, as a Go map miss reads 0.
_PHASE_ORDINAL = {POD_PENDING: 0, POD_UNKNOWN: 1, POD_RUNNING: 2}

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


def pod_keys(pods: Iterable[Obj]) -> list[str]:
    return [pod_key(p) for p in pods]


def get_deletion_cost_from_pod_annotations(annotations: Mapping[str, str] | None) -> int:
    """The pod-deletion-cost annotation as an int32; absent or invalid reads as 0.

    Upstream (``helper.GetDeletionCostFromPodAnnotations``) rejects a leading ``+`` and leading zeros
    ("+10", "008") as well as anything ``strconv.ParseInt(v, 10, 32)`` would.
    """
    if not annotations:
        return 0
    value = annotations.get(POD_DELETION_COST_ANNOTATION)
    if value is None or not isinstance(value, str) or not value:
        return 0
    first = value[0]
    if not (first == "-" or value == "0" or "1" <= first <= "9"):
        return 0
    digits = value[1:] if first == "-" else value
    if not digits or not digits.isascii() or not digits.isdigit():
        return 0
    number = int(value)
    return number if _INT32_MIN <= number <= _INT32_MAX else 0


# --- pod ranking -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Facts:
    """What the ranking reads of one pod, computed once per sort instead of once per comparison."""

    node: str
    phase: int
    ready: bool
    ready_time: float | None  # None is Go's zero time
    cost: int
    regular_restarts: int
    sidecar_restarts: int
    created: float | None
    uid: str
    rank: int


def _max_restarts(pod: Obj) -> tuple[int, int]:
    """Highest restart count among regular containers, and among sidecars (restartable init containers)."""
    status = pod.get("status") or {}
    regular = max((int(c.get("restartCount") or 0) for c in status.get("containerStatuses") or ()), default=0)
    sidecars = {
        c.get("name")
        for c in (pod.get("spec") or {}).get("initContainers") or ()
        if c.get("restartPolicy") == "Always"
    }
    init_statuses = status.get("initContainerStatuses") or ()
    sidecar = max((int(c.get("restartCount") or 0) for c in init_statuses if c.get("name") in sidecars), default=0)
    return regular, sidecar


def _facts(pod: Obj, rank: int) -> _Facts:
    m = meta(pod)
    ready = is_pod_ready(pod)
    regular, sidecar = _max_restarts(pod)
    return _Facts(
        node=str((pod.get("spec") or {}).get("nodeName") or ""),
        phase=_PHASE_ORDINAL.get(pod_phase(pod), 0),
        ready=ready,
        ready_time=pod_ready_since(pod) if ready else None,
        cost=get_deletion_cost_from_pod_annotations(m.get("annotations")),
        regular_restarts=regular,
        sidecar_restarts=sidecar,
        created=parse_time(m.get("creationTimestamp")),
        uid=str(m.get("uid") or ""),
        rank=rank,
    )


def _after_or_zero(t1: float | None, t2: float | None) -> bool:
    """t1 is after t2, where a zero (unset) time counts as after every set one."""
    if t1 is None or t2 is None:
        return t1 is None
    return t1 > t2


def _log_rank(t: float, now: float) -> int:
    # Upstream takes log2 of the age in nanoseconds; ages of 0 or less share the lowest rank.
    age_ns = (now - t) * 1e9
    return int(math.log2(age_ns)) if age_ns > 0 else -1


def _time_cmp(t1: float | None, t2: float | None, uid1: str, uid2: str, now: float | None) -> int:
    """-1 when ``t1`` goes first, 1 when ``t2`` does (the times differ): the newer time first; with ``now``,
    times in the same power-of-two age bucket tie-break on UID."""
    if now is None or t1 is None or t2 is None:
        return -1 if _after_or_zero(t1, t2) else 1 if _after_or_zero(t2, t1) else 0
    diff = _log_rank(t1, now) - _log_rank(t2, now)
    if diff == 0:
        return -1 if uid1 < uid2 else 1 if uid2 < uid1 else 0
    return -1 if diff < 0 else 1


def _compare(a: _Facts, b: _Facts, now: float | None, *, ranked: bool) -> int:
    """The deletion order, once: -1 when ``a`` goes first, 1 when ``b`` does, 0 when neither.

    ``ranked`` is ``ActivePodsWithRanks`` (deletion cost and co-located rank count; with ``now``, ready and
    creation times compare by power-of-two age bucket, ties broken by UID); otherwise ``ActivePods``. Every
    step is decided by a symmetric condition, so ``less(a, b)`` is ``_compare(a, b) < 0``.
    """
    # 1. unassigned before assigned
    if a.node != b.node and (not a.node or not b.node):
        return -1 if not a.node else 1
    # 2. Pending < Unknown < Running
    if a.phase != b.phase:
        return -1 if a.phase < b.phase else 1
    # 3. not ready before ready
    if a.ready != b.ready:
        return -1 if not a.ready else 1
    if ranked:
        # 4. lower pod-deletion-cost first
        if a.cost != b.cost:
            return -1 if a.cost < b.cost else 1
        # 5. more co-located siblings (higher rank) first
        if a.rank != b.rank:
            return -1 if a.rank > b.rank else 1
    # 6. ready for less time first
    if a.ready and b.ready and a.ready_time != b.ready_time:
        return _time_cmp(a.ready_time, b.ready_time, a.uid, b.uid, now if ranked else None)
    # 7. more restarts first (regular containers, then sidecars)
    if a.regular_restarts != b.regular_restarts:
        return -1 if a.regular_restarts > b.regular_restarts else 1
    if a.sidecar_restarts != b.sidecar_restarts:
        return -1 if a.sidecar_restarts > b.sidecar_restarts else 1
    # 8. newer first
    if a.created != b.created:
        return _time_cmp(a.created, b.created, a.uid, b.uid, now if ranked else None)
    return 0


def pods_with_ranks_less(p1: Obj, rank1: int, p2: Obj, rank2: int, now: float | None) -> bool:
    """``ActivePodsWithRanks.Less``: True if ``p1`` should be deleted before ``p2``.

    ``now`` (epoch seconds) turns on logarithmic comparison of ready and creation times; None compares
    them exactly, as upstream does with a zero ``Now``.
    """
    return _compare(_facts(p1, rank1), _facts(p2, rank2), now, ranked=True) < 0


def active_pods_less(p1: Obj, p2: Obj) -> bool:
    """``ActivePods.Less``: True if ``p1`` should be deleted before ``p2``."""
    return _compare(_facts(p1, 0), _facts(p2, 0), None, ranked=False) < 0


def sort_active_pods_with_ranks(pods: Sequence[Obj], ranks: Sequence[int], now: float | None) -> list[Obj]:
    """The pods, those to delete first at the front (``sort.Sort(ActivePodsWithRanks{...})``)."""
    if len(pods) != len(ranks):
        raise ValueError("pods and ranks must have the same length")
    facts = [_facts(p, r) for p, r in zip(pods, ranks, strict=True)]
    return _sorted(pods, facts, now, ranked=True)


def sort_active_pods(pods: Sequence[Obj]) -> list[Obj]:
    """The pods, those to delete first at the front (``sort.Sort(ActivePods(...))``)."""
    return _sorted(pods, [_facts(p, 0) for p in pods], None, ranked=False)


def _sorted(pods: Sequence[Obj], facts: list[_Facts], now: float | None, *, ranked: bool) -> list[Obj]:
    # One three-way comparison per pair instead of two ``less`` calls: the hot part of a large scale-down.
    def cmp(i: int, j: int) -> int:
        return _compare(facts[i], facts[j], now, ranked=ranked)

    order = sorted(range(len(pods)), key=functools.cmp_to_key(cmp))
    return [pods[i] for i in order]


def ranks_by_colocated_pods(pods: Sequence[Obj], related_pods: Iterable[Obj]) -> list[int]:
    """Each pod's rank: how many active related pods share its node (``getPodsRankedByRelatedPodsOnSameNode``).

    ``related_pods`` is usually a superset of ``pods`` (every pod of the owner's siblings).
    """
    on_node: dict[str, int] = {}
    for pod in related_pods:
        if is_pod_active(pod):
            node = str((pod.get("spec") or {}).get("nodeName") or "")
            on_node[node] = on_node.get(node, 0) + 1
    return [on_node.get(str((p.get("spec") or {}).get("nodeName") or ""), 0) for p in pods]


# --- availability checks ---------------------------------------------------------------------------


def next_pod_availability_check(pod: Obj, min_ready_seconds: int, now: float) -> float | None:
    """Seconds from ``now`` until a ready pod becomes available (``nextPodAvailabilityCheck``).

    None when the pod is not ready, ``min_ready_seconds`` is 0, the Ready condition has no transition
    time, or the pod is already available.
    """
    if min_ready_seconds <= 0 or not is_pod_ready(pod):
        return None
    cond = get_pod_ready_condition(pod)
    since = parse_time(cond.get("lastTransitionTime")) if cond is not None else None
    if since is None:
        return None
    wait = since + min_ready_seconds - now
    return wait if wait > 0 else None


def find_min_next_pod_availability_check(pods: Iterable[Obj], min_ready_seconds: int, evaluated_at: float,
                                         now: float) -> float | None:
    """When the owner's status must be computed again for the next pod to turn available
    (``FindMinNextPodAvailabilityCheck``).

    The soonest pod is chosen as of ``evaluated_at`` (when the status was computed); its delay is then
    re-measured from ``now``, so the time spent writing the status is not waited twice. 0 means "at once"
    (the pod became available in between); None means no ready pod is waiting for availability.
    """
    soonest: float | None = None
    soonest_pod: Obj | None = None
    for pod in pods:
        wait = next_pod_availability_check(pod, min_ready_seconds, evaluated_at)
        if wait is not None and (soonest is None or wait < soonest):
            soonest, soonest_pod = wait, pod
    if soonest_pod is None:
        return None
    updated = next_pod_availability_check(soonest_pod, min_ready_seconds, now)
    return updated if updated is not None else 0.0


# --- replica sets ----------------------------------------------------------------------------------


def _replicas(rs: Obj) -> int:
    value = (rs.get("spec") or {}).get("replicas")
    return int(value) if isinstance(value, int) else 0


def _created_or_zero(obj: Obj) -> float:
    created = parse_time(meta(obj).get("creationTimestamp"))
    return created if created is not None else -math.inf


def filter_active_replica_sets(replica_sets: Iterable[Obj | None]) -> list[Obj]:
    """ReplicaSets with spec.replicas > 0 (``controller.FilterActiveReplicaSets``)."""
    return [rs for rs in replica_sets if rs is not None and _replicas(rs) > 0]


def replica_sets_by_creation_timestamp(replica_sets: Iterable[Obj]) -> list[Obj]:
    """Oldest first, ties broken by name (``controller.ReplicaSetsByCreationTimestamp``)."""
    return sorted(replica_sets, key=lambda rs: (_created_or_zero(rs), str(meta(rs).get("name", ""))))


def replica_sets_by_size_older(replica_sets: Iterable[Obj]) -> list[Obj]:
    """Largest first; equal sizes oldest first (``controller.ReplicaSetsBySizeOlder``)."""
    by_age = replica_sets_by_creation_timestamp(replica_sets)
    return sorted(by_age, key=lambda rs: -_replicas(rs))


def replica_sets_by_size_newer(replica_sets: Iterable[Obj]) -> list[Obj]:
    """Largest first; equal sizes newest first (``controller.ReplicaSetsBySizeNewer``)."""
    by_age = list(reversed(replica_sets_by_creation_timestamp(replica_sets)))
    return sorted(by_age, key=lambda rs: -_replicas(rs))


# --- slow start ------------------------------------------------------------------------------------


async def slow_start_batch(
    count: int, initial_batch_size: int, fn: Callable[[int], Awaitable[object]]
) -> tuple[int, Exception | None]:
    """Call ``fn`` ``count`` times in growing batches; stop after the first batch that has a failure.

    ``fn`` receives the call's index (0..count-1), handy when each call creates a different object
    (a daemon pod for a node, a Job pod for an index). Returns ``(successes, first_error)``; calls of a
    batch run concurrently and the whole batch finishes before the decision, as upstream's goroutines.
    Cancellation is never swallowed.
    """
    remaining = count
    successes = 0
    started = 0
    batch = min(remaining, initial_batch_size)
    while batch > 0:
        results = await asyncio.gather(*(fn(started + i) for i in range(batch)), return_exceptions=True)
        started += batch
        errors: list[Exception] = []
        for result in results:
            if isinstance(result, Exception):
                errors.append(result)
            elif isinstance(result, BaseException):
                raise result
        successes += batch - len(errors)
        if errors:
            return successes, errors[0]
        remaining -= batch
        batch = min(2 * batch, remaining)
    return successes, None


# --- pod-template-hash -----------------------------------------------------------------------------

# rand.SafeEncodeString's alphabet: no vowels (no words) and no look-alikes (0/o, 1/l, 3/e).
_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

_FNV32_OFFSET = 0x811C9DC5
_FNV32_PRIME = 0x01000193


def safe_encode_string(text: str) -> str:
    """Map each byte to the safe alphabet (``rand.SafeEncodeString``)."""
    return "".join(_SAFE_ALPHABET[b % len(_SAFE_ALPHABET)] for b in text.encode())


def _fnv1a32(data: bytes, h: int = _FNV32_OFFSET) -> int:
    for byte in data:
        h = ((h ^ byte) * _FNV32_PRIME) & 0xFFFFFFFF
    return h


def compute_hash(template: Mapping[str, Any] | None, collision_count: int | None) -> str:
    """A pod-template-hash for ``template`` (``controller.ComputeHash``'s shape, not its value).

    The template is hashed as canonical JSON (sorted keys, no blanks); a collision count, when set,
    adds 8 bytes (its uint32 little-endian, then 4 zero bytes) as upstream feeds it.
    """
    h = _fnv1a32(orjson.dumps(template or {}, option=orjson.OPT_SORT_KEYS))
    if collision_count is not None:
        h = _fnv1a32((collision_count & 0xFFFFFFFF).to_bytes(4, "little") + b"\x00" * 4, h)
    return safe_encode_string(str(h))
