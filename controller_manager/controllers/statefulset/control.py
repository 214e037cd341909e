"""One StatefulSet's sync: revisions, pods by ordinal, rolling update, status, history (``stateful_set_control.go``).

Guarantees (with today's default feature gates: MaxUnavailableStatefulSet, StatefulSetAutoDeletePVC and
PodIndexLabel on):
- Revisions: the update revision is the newest revision if it holds the set's template, else an older equal one
  renumbered to come last (a rollback), else a new one (bumping the collision count on a name clash). The current
  revision is ``status.currentRevision``'s, or the update revision when there is none.
- Pods in ``[start, start + replicas)`` are the replicas (missing ones built at the revision their ordinal
  should have, see :func:`.util.new_versioned_stateful_set_pod`); valid ordinals outside are condemned, and pods
  without an ordinal are ignored.
- OrderedReady ("monotonic"): replicas are visited in ascending ordinal order; a failed or succeeded pod is
  deleted (and recreated on a later sync); at most one pod is created per sync; the walk stops at a pod that is
  terminating, not Running and Ready, or not yet available for ``minReadySeconds``. Only then are condemned pods
  deleted, highest ordinal first, one per sync, never while a pod other than the first unhealthy one is
  unhealthy. Parallel: the same steps for every pod at once, in slow-start batches, without waiting.
- A set being deleted only gets its status recounted.
- RollingUpdate: once the replicas are settled, pods from the highest ordinal down to the partition whose
  revision is not the update revision are deleted, at most ``maxUnavailable`` (default 1) minus the number
  of unavailable replicas; they come back at the update revision. OnDelete never deletes for an update.
- Status: as :mod:`.status` counts it (a pod deleted for the update no longer counts as current), with
  observedGeneration, the revisions and the collision count; a finished rolling update makes the update
  revision current. Written even when the sync failed part-way, before the failure is raised.
- History: non-live revisions (neither current, update, nor any pod's) beyond ``revisionHistoryLimit`` are
  deleted oldest first, after every sync, failed or not.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller_manager.api.meta import is_being_deleted, meta
from controller_manager.api.selectors import Selector
from controller_manager.client.errors import NotFound
from controller_manager.clock import Clock
from controller_manager.controllerutil.controller_utils import slow_start_batch

from .history import (
    History,
    apply_revision,
    equal_revision,
    history_limit,
    new_revision,
    next_revision,
    revision_number,
    sort_revisions,
)
from .pod_control import AggregateError, StatefulPodControl, aggregate
from .status import StatefulSetStatus, StatusUpdater, complete_rolling_update, count_replicas, inconsistent_status
from .util import (
    ON_DELETE,
    allows_burst,
    get_max_unavailable,
    get_ordinal,
    get_pod_revision,
    get_start_ordinal,
    identity_matches,
    is_created,
    is_failed,
    is_pending,
    is_running_and_available,
    is_running_and_ready,
    is_succeeded,
    min_ready_seconds,
    new_versioned_stateful_set_pod,
    pod_in_ordinal_range,
    replicas,
    sort_by_ordinal,
    storage_matches,
)

__all__ = ["StatefulSetControl"]

Obj = Mapping[str, Any]


@dataclass
class _Revisions:
    current: Obj | None = None
    update: Obj | None = None


def _name(obj: Obj | None) -> str:
    return str(meta(obj).get("name") or "") if obj is not None else ""


class StatefulSetControl:
    """``defaultStatefulSetControl``: the sync of one StatefulSet given its claimed pods."""

    def __init__(self, pod_control: StatefulPodControl, status_updater: StatusUpdater, history: History,
                 clock: Clock, log: Any) -> None:
        self.pod_control = pod_control
        self.status_updater = status_updater
        self.history = history
        self.clock = clock
        self.log = log

    async def update_stateful_set(self, sts: Obj, selector: Selector, pods: Sequence[Obj]) -> StatefulSetStatus:
        """``UpdateStatefulSet``: act on the pods, write status, trim history; returns the status written."""
        revisions = sort_revisions(self.history.list(sts, selector))
        found = _Revisions()
        try:
            status = await self._perform_update(sts, pods, revisions, found)
        except Exception as err:
            errors: list[BaseException] = list(err.errors) if isinstance(err, AggregateError) else [err]
            try:
                await self._truncate_history(sts, pods, revisions, found)
            except Exception as history_err:
                errors.append(history_err)
            failure = aggregate(errors)
            raise (failure if failure is not None else err) from None
        await self._truncate_history(sts, pods, revisions, found)
        return status

    async def _perform_update(self, sts: Obj, pods: Sequence[Obj], revisions: list[Obj],
                              found: _Revisions) -> StatefulSetStatus:
        current, update, collision_count = await self._get_revisions(sts, revisions)
        found.current, found.update = current, update
        status, err = await self._update_stateful_set(sts, current, update, collision_count, pods)
        try:
            await self._update_status(sts, status)
        except Exception as status_err:
            if err is None:
                raise
            self.log.error("could not update status", statefulset=_key(sts), error=str(status_err))
        if err is not None:
            raise err
        return status

    # --- revisions --------------------------------------------------------------------------------

    async def _get_revisions(self, sts: Obj, revisions: list[Obj]) -> tuple[Obj, Obj, int]:
        """``getStatefulSetRevisions``: (current, update, collision count)."""
        collision_count = (sts.get("status") or {}).get("collisionCount")
        collision_count = collision_count if isinstance(collision_count, int) else 0
        update: Obj = new_revision(sts, next_revision(revisions), collision_count)
        equal = [r for r in revisions if equal_revision(r, update)]
        if equal and equal_revision(revisions[-1], equal[-1]):
            update = revisions[-1]  # the template did not change
        elif equal:
            # An older template came back (a rollback): its revision becomes the newest.
            update = await self.history.update_number(equal[-1], revision_number(update))
        else:
            update, collision_count = await self.history.create(sts, update, collision_count)
        wanted = (sts.get("status") or {}).get("currentRevision")
        current = next((r for r in revisions if meta(r).get("name") == wanted), None)
        return current if current is not None else update, update, collision_count

    async def _truncate_history(self, sts: Obj, pods: Sequence[Obj], revisions: Sequence[Obj],
                                found: _Revisions) -> None:
        live = {_name(found.current), _name(found.update)} | {get_pod_revision(p) for p in pods}
        old = [r for r in revisions if _name(r) not in live]
        limit = history_limit(sts)
        if limit < 0 or len(old) <= limit:
            return
        for revision in old[:len(old) - limit]:
            try:
                await self.history.delete(revision)
            except NotFound:
                pass  # gone already

    # --- pods -------------------------------------------------------------------------------------

    def _terminating(self, pod: Obj) -> bool:
        return self.pod_control.is_deleting(pod)

    def _unavailable(self, pod: Obj, min_ready: int, now: float) -> bool:
        return not is_running_and_available(pod, min_ready, now) or self._terminating(pod)

    def _storage_ok(self, sts: Obj, pod: Obj) -> bool:
        if "volumes" in (pod.get("spec") or {}):
            return storage_matches(sts, pod)
        # A cached pod: the informer dropped its volumes; its claims existing is what can still be checked.
        return self.pod_control.claims_exist(sts, pod)

    async def _update_stateful_set(self, sts: Obj, current: Obj, update: Obj, collision_count: int,
                                   pods: Sequence[Obj]) -> tuple[StatefulSetStatus, Exception | None]:
        """``updateStatefulSet``: the status to write and the failure to raise after writing it, if any."""
        current_set = apply_revision(sts, current)
        update_set = apply_revision(sts, update)
        now = self.clock.now()
        min_ready = min_ready_seconds(sts)
        generation = meta(sts).get("generation")
        status = StatefulSetStatus(observed_generation=generation if isinstance(generation, int) else 0,
                                   current_revision=_name(current), update_revision=_name(update),
                                   collision_count=collision_count)
        count_replicas(status, min_ready, now, _name(current), _name(update), pods)

        start = get_start_ordinal(sts)
        slots: list[Obj | None] = [None] * max(0, replicas(sts))
        condemned: list[Obj] = []
        for pod in pods:
            if pod_in_ordinal_range(pod, sts):
                slots[get_ordinal(pod) - start] = pod
            elif get_ordinal(pod) >= 0:
                condemned.append(pod)
        members: list[Obj] = [
            pod if pod is not None else new_versioned_stateful_set_pod(current_set, update_set, _name(current),
                                                                        _name(update), start + index)
            for index, pod in enumerate(slots)]
        condemned = sort_by_ordinal(condemned, descending=True)

        first_unavailable: Obj | None = None
        for pod in [*members, *reversed(condemned)]:
            if self._unavailable(pod, min_ready, now) and first_unavailable is None:
                first_unavailable = pod

        if is_being_deleted(sts):
            return status, None

        monotonic = not allows_burst(sts)

        def recount() -> None:
            count_replicas(status, min_ready, now, _name(current), _name(update), members, condemned)

        async def process_replica(i: int) -> bool:
            return await self._process_replica(sts, update_set, monotonic, members[i], min_ready, now)

        async def fix_claim(i: int) -> bool:
            if not self.pod_control.claims_match_retention_policy(update_set, condemned[i]):
                await self.pod_control.update_pod_claim_for_retention_policy(update_set, condemned[i])
            return False

        async def process_condemned(i: int) -> bool:
            return await self._process_condemned(sts, first_unavailable, monotonic, condemned[i], min_ready, now)

        for pods_, step in ((members, process_replica), (condemned, fix_claim), (condemned, process_condemned)):
            try:
                should_exit = await _run_for_all(pods_, step, monotonic)
            except Exception as err:
                recount()
                return status, err
            if should_exit:
                recount()
                return status, None
        recount()

        strategy = ((sts.get("spec") or {}).get("updateStrategy") or {}).get("type")
        if strategy == ON_DELETE:
            return status, None
        return status, await self._rolling_update(sts, members, update, status, min_ready, now)

    async def _process_replica(self, sts: Obj, update_set: Obj, monotonic: bool, pod: Obj, min_ready: int,
                               now: float) -> bool:
        """``processReplica``: True stops an OrderedReady walk here."""
        if is_failed(pod) or is_succeeded(pod):
            # Evicted or node-rebooted pods end Succeeded as often as Failed: either way it must come back.
            if not self._terminating(pod):
                await self.pod_control.delete_stateful_pod(sts, pod)
            return True
        if not is_created(pod):
            if self.pod_control.pod_claim_is_stale(sts, pod):
                return True  # the scaled-down pod's claim is still being deleted
            await self.pod_control.create_stateful_pod(sts, pod)
            if monotonic:
                return True
        if is_pending(pod):
            await self.pod_control.create_missing_persistent_volume_claims(sts, pod)
        if monotonic and (self._terminating(pod) or not is_running_and_ready(pod)
                          or not is_running_and_available(pod, min_ready, now)):
            return True
        try:
            retention_match = self.pod_control.claims_match_retention_policy(update_set, pod)
        except Exception:
            retention_match = True  # expected while the pod is being updated
        if identity_matches(sts, pod) and self._storage_ok(sts, pod) and retention_match:
            return False
        await self.pod_control.update_stateful_pod(update_set, pod)
        return False

    async def _process_condemned(self, sts: Obj, first_unavailable: Obj | None, monotonic: bool, pod: Obj,
                                 min_ready: int, now: float) -> bool:
        """``processCondemned``: delete one pod beyond the range, in OrderedReady only when it is safe."""
        if self._terminating(pod):
            return monotonic  # OrderedReady waits for it to go
        if monotonic and pod is not first_unavailable and (
                not is_running_and_ready(pod) or not is_running_and_available(pod, min_ready, now)):
            return True
        self.log.info("pod of StatefulSet is terminating for scale down", statefulset=_key(sts),
                      pod=meta(pod).get("name"))
        await self.pod_control.delete_stateful_pod(sts, pod)
        return True

    async def _rolling_update(self, sts: Obj, members: list[Obj], update: Obj, status: StatefulSetStatus,
                              min_ready: int, now: float) -> Exception | None:
        """``updateStatefulSetAfterInvariantEstablished``: delete old-revision pods, highest ordinal first."""
        update_min = 0
        max_unavailable = 1
        rolling = ((sts.get("spec") or {}).get("updateStrategy") or {}).get("rollingUpdate")
        if isinstance(rolling, Mapping):
            partition = rolling.get("partition")
            update_min = partition if isinstance(partition, int) else 0
            try:
                max_unavailable = get_max_unavailable(sts, len(members))
            except ValueError as err:
                return err
        unavailable = sum(1 for pod in members if self._unavailable(pod, min_ready, now))
        if unavailable > max_unavailable:
            return None
        to_delete = max_unavailable - unavailable
        deleted = 0
        for target in range(len(members) - 1, update_min - 1, -1):
            if deleted >= to_delete:
                break
            pod = members[target]
            if get_pod_revision(pod) != _name(update) and not self._terminating(pod):
                self.log.info("StatefulSet terminating Pod for update", statefulset=_key(sts),
                              pod=meta(pod).get("name"))
                try:
                    await self.pod_control.delete_stateful_pod(sts, pod)
                except NotFound:
                    pass
                except Exception as err:
                    return err
                deleted += 1
                status.current_replicas -= 1
        return None

    # --- status -----------------------------------------------------------------------------------

    async def _update_status(self, sts: Obj, status: StatefulSetStatus) -> None:
        complete_rolling_update(sts, status)
        if inconsistent_status(sts, status):
            await self.status_updater.update(sts, status)


async def _run_for_all(pods: Sequence[Obj], fn: Callable[[int], Awaitable[bool]], monotonic: bool) -> bool:
    """``runForAll``: in order, stopping at the first True (OrderedReady), or all in slow-start batches."""
    if monotonic:
        for i in range(len(pods)):
            if await fn(i):
                return True
        return False
    _, err = await slow_start_batch(len(pods), 1, fn)
    if err is not None:
        raise err
    return False


def _key(sts: Obj) -> str:
    return f"{meta(sts).get('namespace', '')}/{meta(sts).get('name', '')}"
