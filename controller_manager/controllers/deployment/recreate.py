"""The Recreate strategy: upstream's ``pkg/controller/deployment/recreate.go``.

Guarantees:
- Old ReplicaSets are scaled to zero first; the new ReplicaSet is not even created while any old ReplicaSet
  reports pods or any pod of an old ReplicaSet is in a non-terminal phase (terminating ones included, and
  Unknown counted as running). So no new pod exists before every old pod is gone.
- Then the new ReplicaSet is created if needed and scaled to ``spec.replicas``; once the rollout is
  complete, history beyond ``revisionHistoryLimit`` is cleaned up. Every step ends in a status write.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from controller_manager.api.meta import meta
from controller_manager.api.pods import pod_phase
from controller_manager.controllers.deployment.util_replicasets import filter_active_replica_sets
from controller_manager.controllers.deployment.util_rollout import (
    deployment_complete,
    get_actual_replica_count_for_replica_sets,
)
from controller_manager.controllers.deployment.util_strategy import deployment_replicas, replica_set_replicas

from .control import DeploymentControl, Obj, status_of
from .progress import sync_rollout_status
from .sync import cleanup_deployment, get_all_replica_sets_and_sync_revision, scale_replica_set_and_record_event

__all__ = [
    "old_pods_running",
    "rollout_recreate",
    "scale_down_old_replica_sets_for_recreate",
    "scale_up_new_replica_set_for_recreate",
]

PodMap = Mapping[str, Sequence[Obj]]  # ReplicaSet UID -> the pods it controls


async def rollout_recreate(dc: DeploymentControl, d: Obj, rs_list: Sequence[Obj], pod_map: PodMap) -> float | None:
    """One step of a Recreate rollout; returns the progress-check delay from :func:`sync_rollout_status`."""
    # Do not create the new ReplicaSet yet: nothing may scale up before the old pods are gone.
    new_rs, old_rss, d = await get_all_replica_sets_and_sync_revision(dc, d, rs_list, False)
    all_rss: list[Obj | None] = [*old_rss, new_rs]

    if await scale_down_old_replica_sets_for_recreate(dc, filter_active_replica_sets(old_rss), d):
        delay, _ = await sync_rollout_status(dc, all_rss, new_rs, d)
        return delay

    if old_pods_running(new_rs, old_rss, pod_map):
        delay, _ = await sync_rollout_status(dc, all_rss, new_rs, d)
        return delay

    if new_rs is None:
        new_rs, old_rss, d = await get_all_replica_sets_and_sync_revision(dc, d, rs_list, True)
        all_rss = [*old_rss, new_rs]
    assert new_rs is not None

    await scale_up_new_replica_set_for_recreate(dc, new_rs, d)

    if deployment_complete(d, status_of(d)):
        await cleanup_deployment(dc, old_rss, d)
    delay, _ = await sync_rollout_status(dc, all_rss, new_rs, d)
    return delay


async def scale_down_old_replica_sets_for_recreate(dc: DeploymentControl, old_rss: Sequence[Obj], d: Obj) -> bool:
    """Scale every old ReplicaSet to zero; whether any was scaled."""
    scaled = False
    for rs in old_rss:
        if replica_set_replicas(rs) == 0:
            continue
        did, _ = await scale_replica_set_and_record_event(dc, rs, 0, d)
        scaled = scaled or did
    return scaled


def old_pods_running(new_rs: Obj | None, old_rss: Sequence[Obj], pod_map: PodMap) -> bool:
    """Whether an old ReplicaSet reports pods or any of its pods has not reached a terminal phase."""
    if get_actual_replica_count_for_replica_sets(old_rss) > 0:
        return True
    new_uid = meta(new_rs).get("uid") if new_rs is not None else None
    for rs_uid, pods in pod_map.items():
        if new_uid is not None and rs_uid == new_uid:
            continue
        for pod in pods:
            # Succeeded/Failed pods no longer run; Unknown may still run somewhere, so it counts.
            if pod_phase(pod) not in ("Succeeded", "Failed"):
                return True
    return False


async def scale_up_new_replica_set_for_recreate(dc: DeploymentControl, new_rs: Obj, d: Obj) -> bool:
    scaled, _ = await scale_replica_set_and_record_event(dc, new_rs, deployment_replicas(d), d)
    return scaled
