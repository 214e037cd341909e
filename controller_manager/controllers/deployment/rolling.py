"""The RollingUpdate strategy: upstream's ``pkg/controller/deployment/rolling.go``.

Guarantees (each sync takes one step, then writes the status):
- Scale up first: the new ReplicaSet grows to ``new_rs_new_replicas`` (never past ``spec.replicas`` and never
  taking the total past ``spec.replicas + maxSurge``), or shrinks to ``spec.replicas`` if above it.
- Otherwise scale down: at most ``all - (replicas - maxUnavailable) - unavailable pods of the new RS`` old
  pods go, unhealthy ones first (old ReplicaSets, oldest first, shrink by their unavailable pods), then
  available ones while more than ``replicas - maxUnavailable`` pods are available. So availability never
  drops below ``replicas - maxUnavailable`` through our doing, and the new ReplicaSet's broken pods never
  cost old healthy ones.
- Neither possible and the rollout complete: old ReplicaSets beyond ``revisionHistoryLimit`` are deleted.
- A write that fails raises (the sync is retried), except that scale-down failures end the step quietly, as
  upstream (the next sync recomputes).
"""

from __future__ import annotations

from collections.abc import Sequence

from controller_manager.api.meta import meta
from controller_manager.controllers.deployment import util_rollout, util_strategy
from controller_manager.controllers.deployment.util_replicasets import (
    filter_active_replica_sets,
    replica_sets_by_creation_timestamp,
)
from controller_manager.controllers.deployment.util_rollout import (
    deployment_complete,
    get_available_replica_count_for_replica_sets,
    get_replica_count_for_replica_sets,
)
from controller_manager.controllers.deployment.util_strategy import deployment_replicas, replica_set_replicas

from .control import DeploymentControl, Obj, status_of
from .progress import sync_rollout_status
from .sync import cleanup_deployment, get_all_replica_sets_and_sync_revision, scale_replica_set_and_record_event

__all__ = [
    "cleanup_unhealthy_replicas",
    "reconcile_new_replica_set",
    "reconcile_old_replica_sets",
    "rollout_rolling",
    "scale_down_old_replica_sets_for_rolling_update",
]


async def rollout_rolling(dc: DeploymentControl, d: Obj, rs_list: Sequence[Obj]) -> float | None:
    """One step of a rolling update; returns the progress-check delay from :func:`sync_rollout_status`."""
    new_rs, old_rss, d = await get_all_replica_sets_and_sync_revision(dc, d, rs_list, True)
    assert new_rs is not None  # created when missing
    all_rss: list[Obj | None] = [*old_rss, new_rs]

    scaled = await reconcile_new_replica_set(dc, all_rss, new_rs, d)
    if not scaled:
        scaled = await reconcile_old_replica_sets(dc, all_rss, filter_active_replica_sets(old_rss), new_rs, d)
    if not scaled and deployment_complete(d, status_of(d)):
        await cleanup_deployment(dc, old_rss, d)
    delay, _ = await sync_rollout_status(dc, all_rss, new_rs, d)
    return delay


async def reconcile_new_replica_set(dc: DeploymentControl, all_rss: Sequence[Obj | None], new_rs: Obj,
                                    d: Obj) -> bool:
    """Grow (within the surge) or shrink the new ReplicaSet; whether it was scaled."""
    desired = deployment_replicas(d)
    current = replica_set_replicas(new_rs)
    if current == desired:
        return False
    if current > desired:
        scaled, _ = await scale_replica_set_and_record_event(dc, new_rs, desired, d)
        return scaled
    new_replicas = util_rollout.new_rs_new_replicas(d, all_rss, new_rs)
    scaled, _ = await scale_replica_set_and_record_event(dc, new_rs, new_replicas, d)
    return scaled


async def reconcile_old_replica_sets(dc: DeploymentControl, all_rss: Sequence[Obj | None], old_rss: Sequence[Obj],
                                     new_rs: Obj, d: Obj) -> bool:
    """Shrink old ReplicaSets as far as availability allows; whether any was scaled."""
    old_pods = get_replica_count_for_replica_sets(old_rss)
    if old_pods == 0:
        return False  # nothing left to scale down
    all_pods = get_replica_count_for_replica_sets(all_rss)
    max_unavailable = util_strategy.max_unavailable(d)
    # Budget: pods above the availability floor, minus the new ReplicaSet's unavailable ones (they would
    # otherwise let us remove healthy old pods while the new ones are broken; see upstream's examples).
    min_available = deployment_replicas(d) - max_unavailable
    new_rs_unavailable = replica_set_replicas(new_rs) - int(status_of(new_rs).get("availableReplicas") or 0)
    max_scaled_down = all_pods - min_available - new_rs_unavailable
    if max_scaled_down <= 0:
        return False

    # Unhealthy replicas first: they would otherwise block the rollout (kubernetes#16737).
    try:
        cleaned_rss, cleanup_count = await cleanup_unhealthy_replicas(dc, old_rss, d, max_scaled_down)
    except Exception as err:
        dc.log.info("cleaning up unhealthy replicas failed", deployment=meta(d).get("name"), error=str(err))
        return False
    dc.log.debug("cleaned up unhealthy replicas from old RSes", deployment=meta(d).get("name"), count=cleanup_count)

    try:
        scaled_down = await scale_down_old_replica_sets_for_rolling_update(dc, [*cleaned_rss, new_rs], cleaned_rss, d)
    except Exception as err:
        dc.log.info("scaling down old replica sets failed", deployment=meta(d).get("name"), error=str(err))
        return False
    dc.log.debug("scaled down old RSes", deployment=meta(d).get("name"), count=scaled_down)
    return cleanup_count + scaled_down > 0


async def cleanup_unhealthy_replicas(dc: DeploymentControl, old_rss: Sequence[Obj], d: Obj,
                                     max_cleanup_count: int) -> tuple[list[Obj], int]:
    """Remove up to ``max_cleanup_count`` unavailable old pods, oldest ReplicaSet first.

    The ReplicaSet controller deletes not-ready, unscheduled and pending pods before others, so shrinking
    an RS by its unavailable count removes exactly those. Returns the ReplicaSets as now written and the
    number of pods removed.
    """
    ordered = replica_sets_by_creation_timestamp(old_rss)
    total = 0
    for i, rs in enumerate(ordered):
        if total >= max_cleanup_count:
            break
        replicas = replica_set_replicas(rs)
        if replicas == 0:
            continue
        available = int(status_of(rs).get("availableReplicas") or 0)
        if replicas == available:
            continue  # no unhealthy replicas
        count = min(max_cleanup_count - total, replicas - available)
        new_count = replicas - count
        if new_count > replicas:
            raise ValueError(f"when cleaning up unhealthy replicas, got invalid request to scale down "
                             f"{meta(rs).get('namespace')}/{meta(rs).get('name')} {replicas} -> {new_count}")
        _, ordered[i] = await scale_replica_set_and_record_event(dc, rs, new_count, d)
        total += count
    return ordered, total


async def scale_down_old_replica_sets_for_rolling_update(dc: DeploymentControl, all_rss: Sequence[Obj | None],
                                                         old_rss: Sequence[Obj], d: Obj) -> int:
    """Remove available old pods while more than ``replicas - maxUnavailable`` are available; how many."""
    min_available = deployment_replicas(d) - util_strategy.max_unavailable(d)
    available = get_available_replica_count_for_replica_sets(all_rss)
    if available <= min_available:
        return 0
    dc.log.debug("found available pods in deployment, scaling down old RSes", deployment=meta(d).get("name"),
                 available_replicas=available)
    total = 0
    budget = available - min_available
    for rs in replica_sets_by_creation_timestamp(old_rss):
        if total >= budget:
            break
        replicas = replica_set_replicas(rs)
        if replicas == 0:
            continue
        count = min(replicas, budget - total)
        new_count = replicas - count
        if new_count > replicas:
            raise ValueError(f"when scaling down old RS, got invalid request to scale down "
                             f"{meta(rs).get('namespace')}/{meta(rs).get('name')} {replicas} -> {new_count}")
        await scale_replica_set_and_record_event(dc, rs, new_count, d)
        total += count
    return total
