"""Revisions, the new ReplicaSet, scaling, cleanup and status: upstream's ``pkg/controller/deployment/sync.go``.

Guarantees (with today's default feature gates: DeploymentReplicaSetTerminatingReplicas on,
DeploymentPodReplacementPolicy off):
- The new ReplicaSet is found by template equality ignoring ``pod-template-hash``, never by hash. When none
  exists and one is wanted it is created as ``<deployment>-<hash>`` (the name part cut to fit 253 characters)
  with the hash label on its labels, selector and template, the Deployment as controller, the Deployment's
  annotations plus revision / desired-replicas / max-replicas, and as many replicas as the surge allows.
- AlreadyExists on that create: our own ReplicaSet with an equal template is taken as the new one; anything
  else is a hash collision: ``status.collisionCount`` goes up (written through ``/status``) and the error is
  raised so the next sync hashes with the new count. Any other refusal reports ``ReplicaSetCreateError`` (a
  Warning event, and a Progressing=False condition when a progress deadline is set) and is raised.
- The existing new ReplicaSet gets the Deployment's annotations, the next revision (the old one moving to the
  revision history) and ``minReadySeconds``; the Deployment gets the revision annotation and, if it has a
  deadline and no Progressing condition yet, ``FoundNewReplicaSet``.
- Scaling a ReplicaSet is an update carrying its ``resourceVersion`` (a 409 is raised: the sync is retried)
  that also refreshes the desired/max-replicas annotations, and records ``ScalingReplicaSet`` "Scaled up|down
  replica set X from A to B" on the Deployment when the size changed.
- Proportional scaling (a resize in the middle of a rollout) and history cleanup follow upstream, including
  never deleting a ReplicaSet that still has pods, terminating pods, an unobserved generation, or a
  deletionTimestamp.
- Status is computed from the ReplicaSets, written through ``/status`` only when it differs, and shaped as the
  API serialises it (zero counts omitted, ``terminatingReplicas`` present once known).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from controller_manager.api.meta import controller_ref, deep_copy, meta
from controller_manager.api.resources import DEPLOYMENTS, REPLICASETS
from controller_manager.client.errors import (
    NAMESPACE_TERMINATING_CAUSE,
    AlreadyExists,
    ApiError,
    NotFound,
    has_status_cause,
)
from controller_manager.controllers.deployment.util_annotations import (
    MAX_REV_HISTORY_LENGTH_IN_CHARS,
    REVISION_ANNOTATION,
    get_desired_replicas_annotation,
    max_revision,
    replicas_annotations_need_update,
    set_deployment_revision,
    set_new_replica_set_annotations,
    set_replicas_annotations,
)
from controller_manager.controllers.deployment.util_conditions import (
    CONDITION_FALSE,
    CONDITION_TRUE,
    CONDITION_UNKNOWN,
    DEPLOYMENT_AVAILABLE,
    DEPLOYMENT_PROGRESSING,
    FAILED_RS_CREATE_REASON,
    FOUND_NEW_RS_REASON,
    MINIMUM_REPLICAS_AVAILABLE,
    MINIMUM_REPLICAS_AVAILABLE_MESSAGE,
    MINIMUM_REPLICAS_UNAVAILABLE,
    MINIMUM_REPLICAS_UNAVAILABLE_MESSAGE,
    NEW_REPLICA_SET_REASON,
    PAUSED_DEPLOY_MESSAGE,
    PAUSED_DEPLOY_REASON,
    RESUMED_DEPLOY_MESSAGE,
    RESUMED_DEPLOY_REASON,
    SCALING_REPLICA_SET_REASON,
    TIMED_OUT_REASON,
    created_new_replica_set_message,
    failed_create_replica_set_message,
    found_new_replica_set_message,
    get_deployment_condition,
    new_deployment_condition,
    scaled_replica_set_message,
    set_deployment_condition,
)
from controller_manager.controllers.deployment.util_replicasets import (
    DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY,
    clone_and_add_label,
    clone_selector_and_add_label,
    equal_ignore_hash,
    filter_active_replica_sets,
    find_active_or_latest,
    find_new_replica_set,
    find_old_replica_sets,
    replica_sets_by_revision,
)
from controller_manager.controllers.deployment.util_rollout import (
    get_actual_replica_count_for_replica_sets,
    get_available_replica_count_for_replica_sets,
    get_ready_replica_count_for_replica_sets,
    get_replica_count_for_replica_sets,
    get_terminating_replica_count_for_replica_sets,
    has_progress_deadline,
    has_revision_history_limit,
    is_saturated,
    new_rs_new_replicas,
    proportional_scale_sizes,
)
from controller_manager.controllers.deployment.util_strategy import (
    deployment_replicas,
    is_rolling_update,
    max_surge,
    max_unavailable,
    replica_set_replicas,
)
from controller_manager.controllerutil.controller_ref import new_controller_ref
from controller_manager.controllerutil.controller_utils import compute_hash
from controller_manager.controllerutil.sharding import inherit_shard_labels

from .control import DeploymentControl, Obj, status_of, with_status

__all__ = [
    "DNS1123_SUBDOMAIN_MAX_LENGTH",
    "calculate_status",
    "check_paused_conditions",
    "cleanup_deployment",
    "generate_replica_set_name",
    "get_all_replica_sets_and_sync_revision",
    "get_new_replica_set",
    "is_scaling_event",
    "normalized_status",
    "paused_condition",
    "scale",
    "scale_replica_set",
    "scale_replica_set_and_record_event",
    "sync",
    "sync_deployment_status",
    "sync_status_only",
]

DNS1123_SUBDOMAIN_MAX_LENGTH = 253

_COUNT_FIELDS = ("observedGeneration", "replicas", "updatedReplicas", "readyReplicas", "availableReplicas",
                 "unavailableReplicas")


# --- the two simple sync modes -------------------------------------------------------------------------


async def sync_status_only(dc: DeploymentControl, d: Obj, rs_list: Sequence[Obj]) -> Obj:
    """Only recompute and write the status (a Deployment being deleted); returns the Deployment as it now is."""
    new_rs, old_rss, d = await get_all_replica_sets_and_sync_revision(dc, d, rs_list, False)
    return await sync_deployment_status(dc, [*old_rss, new_rs], new_rs, d)


async def sync(dc: DeploymentControl, d: Obj, rs_list: Sequence[Obj]) -> Obj:
    """Reconcile a scaling event or a paused Deployment: resize, never roll. Returns the Deployment as it now is."""
    from .rollback import get_rollback_to  # rollback.py builds on this module

    new_rs, old_rss, d = await get_all_replica_sets_and_sync_revision(dc, d, rs_list, False)
    await scale(dc, d, new_rs, old_rss)
    # A paused Deployment with no rollback in flight still trims its history.
    if _spec(d).get("paused") and get_rollback_to(d) is None:
        await cleanup_deployment(dc, old_rss, d)
    return await sync_deployment_status(dc, [*old_rss, new_rs], new_rs, d)


def paused_condition(d: Obj, now: float) -> dict[str, Any] | None:
    """The Progressing condition that records pausing or resuming ``d``, or None when there is none to record."""
    if not has_progress_deadline(d):
        return None
    cond = get_deployment_condition(status_of(d), DEPLOYMENT_PROGRESSING)
    if cond is not None and cond.get("reason") == TIMED_OUT_REASON:
        return None  # a reported lack of progress stays reported
    paused_cond_exists = cond is not None and cond.get("reason") == PAUSED_DEPLOY_REASON
    paused = bool(_spec(d).get("paused"))
    if paused and not paused_cond_exists:
        return new_deployment_condition(DEPLOYMENT_PROGRESSING, CONDITION_UNKNOWN,
                                        PAUSED_DEPLOY_REASON, PAUSED_DEPLOY_MESSAGE, now)
    if not paused and paused_cond_exists:
        return new_deployment_condition(DEPLOYMENT_PROGRESSING, CONDITION_UNKNOWN,
                                        RESUMED_DEPLOY_REASON, RESUMED_DEPLOY_MESSAGE, now)
    return None


async def check_paused_conditions(dc: DeploymentControl, d: Obj) -> Obj:
    """Mark pausing/resuming on the Progressing condition, so a resumed Deployment does not time out at once.
    Returns the Deployment as it now is."""
    condition = paused_condition(d, dc.now())
    if condition is None:
        return d
    return await dc.update_deployment_status(with_status(d, set_deployment_condition(status_of(d), condition)))


# --- the new ReplicaSet and revisions -----------------------------------------------------------------


async def get_all_replica_sets_and_sync_revision(
    dc: DeploymentControl, d: Obj, rs_list: Sequence[Obj], create_if_not_existed: bool
) -> tuple[Obj | None, list[Obj], Obj]:
    """``(new_rs, all_old_rss, deployment)``: the new one created if asked, revisions brought up to date, and the
    Deployment as it now is."""
    _, all_old = find_old_replica_sets(d, rs_list)
    new_rs, d = await get_new_replica_set(dc, d, rs_list, all_old, create_if_not_existed)
    return new_rs, list(all_old), d


def generate_replica_set_name(deployment_name: str, template_hash: str) -> str:
    """``<deployment>-<hash>``, the Deployment part cut so the name stays a valid DNS subdomain."""
    room = DNS1123_SUBDOMAIN_MAX_LENGTH - len(template_hash) - 1
    if 0 < room < len(deployment_name):
        deployment_name = deployment_name[:room]
    return f"{deployment_name}-{template_hash}"


async def get_new_replica_set(
    dc: DeploymentControl, d: Obj, rs_list: Sequence[Obj], old_rss: Sequence[Obj], create_if_not_existed: bool,
) -> tuple[Obj | None, Obj]:
    """``(new_rs, deployment)``: the ReplicaSet running the Deployment's template (synced, or created when asked;
    None if there is none), and the Deployment as it now is."""
    existing = find_new_replica_set(d, rs_list)
    new_revision = str(max_revision(old_rss) + 1)
    if existing is not None:
        return await _sync_existing_new_replica_set(dc, d, existing, new_revision)
    if not create_if_not_existed:
        return None, d
    return await _create_new_replica_set(dc, d, old_rss, new_revision)


async def _sync_existing_new_replica_set(dc: DeploymentControl, d: Obj, existing: Obj,
                                         new_revision: str) -> tuple[Obj, Obj]:
    rs_copy, annotations_updated = set_new_replica_set_annotations(
        d, existing, new_revision, True, MAX_REV_HISTORY_LENGTH_IN_CHARS)
    min_ready = int(_spec(d).get("minReadySeconds") or 0)
    if annotations_updated or int(_spec(rs_copy).get("minReadySeconds") or 0) != min_ready:
        return await dc.update_replica_set({**rs_copy, "spec": {**_spec(rs_copy), "minReadySeconds": min_ready}}), d

    # The revision the ReplicaSet already wears is the Deployment's.
    rev = (meta(rs_copy).get("annotations") or {}).get(REVISION_ANNOTATION, "")
    updated: Obj
    updated, needs_update = set_deployment_revision(d, rev)
    # A Deployment that just got a deadline starts estimating progress from the first sight of its new RS.
    cond = get_deployment_condition(status_of(updated), DEPLOYMENT_PROGRESSING)
    if has_progress_deadline(updated) and cond is None:
        condition = new_deployment_condition(
            DEPLOYMENT_PROGRESSING, CONDITION_TRUE, FOUND_NEW_RS_REASON,
            found_new_replica_set_message(str(meta(rs_copy).get("name", ""))), dc.now())
        updated = with_status(updated, set_deployment_condition(status_of(updated), condition))
        needs_update = True
    if needs_update:
        return rs_copy, await dc.update_deployment_status(updated)
    return rs_copy, d


def _new_replica_set_object(d: Obj) -> dict[str, Any]:
    """The ReplicaSet a Deployment's current template becomes (replicas and annotations still unset)."""
    spec = _spec(d)
    template = deep_copy(dict(spec.get("template") or {}))
    collision_count = status_of(d).get("collisionCount")
    template_hash = compute_hash(template, collision_count if isinstance(collision_count, int) else None)
    template_meta = dict(template.get("metadata") or {})
    template_meta["labels"] = clone_and_add_label(
        template_meta.get("labels"), DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY, template_hash)
    template["metadata"] = template_meta
    selector = clone_selector_and_add_label(spec.get("selector"), DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY,
                                                 template_hash)
    m = meta(d)
    rs_spec: dict[str, Any] = {"replicas": 0, "selector": selector, "template": template}
    if spec.get("minReadySeconds"):
        rs_spec["minReadySeconds"] = spec["minReadySeconds"]
    return {
        "apiVersion": REPLICASETS.api_version,
        "kind": REPLICASETS.kind,
        "metadata": {
            "name": generate_replica_set_name(str(m.get("name", "")), template_hash),
            "namespace": m.get("namespace"),
            "ownerReferences": [new_controller_ref(d, DEPLOYMENTS)],
            "labels": inherit_shard_labels(d, template_meta["labels"]),
        },
        "spec": rs_spec,
    }


async def _create_new_replica_set(dc: DeploymentControl, d: Obj, old_rss: Sequence[Obj],
                                  new_revision: str) -> tuple[Obj, Obj]:
    new_rs = _new_replica_set_object(d)
    new_replicas = new_rs_new_replicas(d, [*old_rss, new_rs], new_rs)
    new_rs["spec"]["replicas"] = new_replicas
    new_rs, _ = set_new_replica_set_annotations(d, new_rs, new_revision, False,
                                                     MAX_REV_HISTORY_LENGTH_IN_CHARS)
    name = str(new_rs["metadata"]["name"])
    namespace = str(meta(d).get("namespace") or "")
    already_exists = False
    try:
        created: Obj = await dc.create_replica_set(d, new_rs, namespace)
    except AlreadyExists:
        # A slow cache or a fast resync: the ReplicaSet may be ours already, or a hash collision.
        already_exists = True
        found = dc.rs_lister(namespace, name)
        if found is None:
            raise NotFound(404, "NotFound", f'replicaset.apps "{name}" not found') from None
        ref = controller_ref(found)
        if (ref is not None and ref.get("uid") == meta(d).get("uid")
                and equal_ignore_hash(_spec(d).get("template"), _spec(found).get("template"))):
            created = found
        else:
            await _bump_collision_count(dc, d)
            raise
    except ApiError as err:
        if has_status_cause(err, NAMESPACE_TERMINATING_CAUSE):
            raise  # every create will fail until the namespace is gone
        await _report_create_failure(dc, d, name, err)
        raise

    created_name = str(meta(created).get("name", ""))
    if not already_exists and new_replicas > 0:
        dc.event(d, "Normal", SCALING_REPLICA_SET_REASON,
                 scaled_replica_set_message("up", created_name, 0, new_replicas))
    updated: Obj
    updated, needs_update = set_deployment_revision(d, new_revision)
    if not already_exists and has_progress_deadline(updated):
        condition = new_deployment_condition(
            DEPLOYMENT_PROGRESSING, CONDITION_TRUE, NEW_REPLICA_SET_REASON,
            created_new_replica_set_message(created_name), dc.now())
        updated = with_status(updated, set_deployment_condition(status_of(updated), condition))
        needs_update = True
    if needs_update:
        return created, await dc.update_deployment_status(updated)
    return created, d


async def _bump_collision_count(dc: DeploymentControl, d: Obj) -> None:
    """Record a hash collision: ``status.collisionCount`` + 1 (the next sync, seeing it, hashes anew)."""
    before = int(status_of(d).get("collisionCount") or 0)
    try:
        await dc.update_deployment_status(with_status(d, {**status_of(d), "collisionCount": before + 1}))
    except ApiError as err:
        dc.log.info("could not record hash collision", deployment=meta(d).get("name"), error=str(err))
        return
    dc.log.info("found a hash collision for deployment - bumping collisionCount to resolve it",
                deployment=f"{meta(d).get('namespace')}/{meta(d).get('name')}", old_collision_count=before,
                new_collision_count=before + 1)


async def _report_create_failure(dc: DeploymentControl, d: Obj, name: str, err: ApiError) -> None:
    message = failed_create_replica_set_message(name, str(err))
    if has_progress_deadline(d):
        condition = new_deployment_condition(DEPLOYMENT_PROGRESSING, CONDITION_FALSE,
                                                  FAILED_RS_CREATE_REASON, message, dc.now())
        try:
            await dc.update_deployment_status(with_status(d, set_deployment_condition(status_of(d), condition)))
        except ApiError:
            pass  # the create failure is the bigger issue to report
    dc.event(d, "Warning", FAILED_RS_CREATE_REASON, message)


# --- scaling ------------------------------------------------------------------------------------------


async def is_scaling_event(dc: DeploymentControl, d: Obj, rs_list: Sequence[Obj]) -> tuple[bool, Obj]:
    """Whether ``spec.replicas`` differs from what an active ReplicaSet was last sized for, and the Deployment
    as it now is (revisions are synced on the way)."""
    new_rs, old_rss, d = await get_all_replica_sets_and_sync_revision(dc, d, rs_list, False)
    desired = deployment_replicas(d)
    for rs in filter_active_replica_sets([*old_rss, new_rs]):
        value, ok = get_desired_replicas_annotation(rs)
        if ok and value != desired:
            return True, d
    return False, d


async def scale(dc: DeploymentControl, d: Obj, new_rs: Obj | None, old_rss: Sequence[Obj]) -> None:
    """Resize the ReplicaSets to ``spec.replicas``: the one active (or newest) one, or all proportionally."""
    desired = deployment_replicas(d)
    active_or_latest = find_active_or_latest(new_rs, old_rss)
    if active_or_latest is not None:
        if replica_set_replicas(active_or_latest) != desired:
            await scale_replica_set_and_record_event(dc, active_or_latest, desired, d)
        return

    # A saturated new ReplicaSet (e.g. one just adopted) means the old ones go to zero.
    if is_saturated(d, new_rs):
        for old in filter_active_replica_sets(old_rss):
            await scale_replica_set_and_record_event(dc, old, 0, d)
        return

    if is_rolling_update(d):
        active = filter_active_replica_sets([*old_rss, new_rs])
        sizes, _ = proportional_scale_sizes(d, active)
        for rs, size in sizes:
            # One failure stops the pass; the Deployment is requeued and recomputes from what was written.
            await scale_replica_set(dc, rs, size, d)


async def scale_replica_set_and_record_event(dc: DeploymentControl, rs: Obj, new_scale: int,
                                             d: Obj) -> tuple[bool, Obj]:
    """Scale ``rs`` to ``new_scale`` unless it is there already; ``(scaled, rs_now)``."""
    if replica_set_replicas(rs) == new_scale:
        return False, rs
    return await scale_replica_set(dc, rs, new_scale, d)


async def scale_replica_set(dc: DeploymentControl, rs: Obj, new_scale: int, d: Obj) -> tuple[bool, Obj]:
    """Write ``rs``'s size and replica annotations if either is stale; ``(size_changed, rs_now)``."""
    desired = deployment_replicas(d)
    max_replicas = desired + max_surge(d)
    old_scale = replica_set_replicas(rs)
    size_needs_update = old_scale != new_scale
    if not size_needs_update and not replicas_annotations_need_update(rs, desired, max_replicas):
        return False, rs
    rs_copy, _ = set_replicas_annotations(rs, desired, max_replicas)
    updated = await dc.update_replica_set({**rs_copy, "spec": {**_spec(rs_copy), "replicas": new_scale}})
    if size_needs_update:
        operation = "up" if old_scale < new_scale else "down"
        dc.event(d, "Normal", SCALING_REPLICA_SET_REASON,
                 scaled_replica_set_message(operation, str(meta(updated).get("name", "")), old_scale,
                                                 new_scale))
    return size_needs_update, updated


# --- history --------------------------------------------------------------------------------------------


def _cleanable(rs: Obj) -> bool:
    """A history ReplicaSet that is safe to delete: nothing wanted, nothing left, nothing unobserved."""
    status = status_of(rs)
    if int(status.get("replicas") or 0) != 0 or replica_set_replicas(rs) != 0:
        return False
    if int(meta(rs).get("generation") or 0) > int(status.get("observedGeneration") or 0):
        return False
    if meta(rs).get("deletionTimestamp") is not None:
        return False
    # Terminating pods still belong to it (terminatingReplicas is tracked with today's default gates); an RS
    # whose controller has synced it but reports no count is not known to be empty.
    terminating = status.get("terminatingReplicas")
    if terminating is None:
        return int(status.get("observedGeneration") or 0) == 0
    return int(terminating) == 0


async def cleanup_deployment(dc: DeploymentControl, old_rss: Sequence[Obj], d: Obj) -> None:
    """Delete the oldest empty ReplicaSets beyond ``revisionHistoryLimit``."""
    if not has_revision_history_limit(d):
        return
    alive = [rs for rs in old_rss if rs is not None and meta(rs).get("deletionTimestamp") is None]
    diff = len(alive) - int(_spec(d).get("revisionHistoryLimit") or 0)
    if diff <= 0:
        return
    ordered = replica_sets_by_revision(alive)
    dc.log.debug("looking to cleanup old replica sets for deployment", deployment=meta(d).get("name"))
    for rs in ordered[:diff]:
        if not _cleanable(rs):
            continue
        m = meta(rs)
        dc.log.debug("trying to cleanup replica set for deployment", replica_set=m.get("name"),
                     deployment=meta(d).get("name"))
        try:
            await dc.client.delete(REPLICASETS, str(m.get("name", "")), m.get("namespace"))
        except NotFound:
            continue
        # Any other error stops the pass (it may be the API server that is overloaded) and is retried.


# --- status ---------------------------------------------------------------------------------------------


def calculate_status(all_rss: Sequence[Obj | None], new_rs: Obj | None, d: Obj, now: float) -> dict[str, Any]:
    """The Deployment status the ReplicaSets imply, conditions carried over and Available brought up to date."""
    available = get_available_replica_count_for_replica_sets(all_rss)
    total = get_replica_count_for_replica_sets(all_rss)
    status: dict[str, Any] = {
        "observedGeneration": int(meta(d).get("generation") or 0),
        "replicas": get_actual_replica_count_for_replica_sets(all_rss),
        "updatedReplicas": get_actual_replica_count_for_replica_sets([new_rs]),
        "readyReplicas": get_ready_replica_count_for_replica_sets(all_rss),
        "availableReplicas": available,
        # More available than wanted (scaling down) is no unavailability.
        "unavailableReplicas": max(total - available, 0),
    }
    status = {k: v for k, v in status.items() if v}
    terminating = get_terminating_replica_count_for_replica_sets(all_rss)
    if terminating is not None:
        status["terminatingReplicas"] = terminating
    old = status_of(d)
    if old.get("collisionCount") is not None:
        status["collisionCount"] = old["collisionCount"]
    if old.get("conditions"):
        status["conditions"] = deep_copy(list(old["conditions"]))

    if available >= deployment_replicas(d) - max_unavailable(d):
        condition = new_deployment_condition(DEPLOYMENT_AVAILABLE, CONDITION_TRUE,
                                                  MINIMUM_REPLICAS_AVAILABLE,
                                                  MINIMUM_REPLICAS_AVAILABLE_MESSAGE, now)
    else:
        condition = new_deployment_condition(DEPLOYMENT_AVAILABLE, CONDITION_FALSE,
                                                  MINIMUM_REPLICAS_UNAVAILABLE,
                                                  MINIMUM_REPLICAS_UNAVAILABLE_MESSAGE, now)
    return set_deployment_condition(status, condition)


def normalized_status(status: Mapping[str, Any] | None) -> dict[str, Any]:
    """A status compared as Go compares the typed struct: absent, null and zero counts are the same."""
    out: dict[str, Any] = {}
    for key, value in (status or {}).items():
        if value is None or (key in _COUNT_FIELDS and value == 0) or (key == "conditions" and not value):
            continue
        out[key] = value
    return out


async def sync_deployment_status(dc: DeploymentControl, all_rss: Sequence[Obj | None], new_rs: Obj | None,
                                 d: Obj) -> Obj:
    """Write the computed status if it differs from the current one; returns the Deployment as it now is."""
    new_status = calculate_status(all_rss, new_rs, d, dc.now())
    if normalized_status(status_of(d)) == normalized_status(new_status):
        return d
    return await dc.update_deployment_status(with_status(d, new_status))


def _spec(obj: Obj | None) -> Mapping[str, Any]:
    spec = obj.get("spec") if obj is not None else None
    return spec if isinstance(spec, Mapping) else {}
