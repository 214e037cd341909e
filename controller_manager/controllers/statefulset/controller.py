"""The StatefulSet controller (kube-controller-manager's ``statefulset-controller``, ``stateful_set.go``).

Guarantees:
- Informers: StatefulSets, pods, ControllerRevisions and PersistentVolumeClaims (the last two read from the cache
  only, as upstream: no handlers). Queue ``statefulset``; ``--concurrent-statefulset-syncs`` workers (default 5).
- Handlers only enqueue: a set's add/update/delete enqueues it; a pod with a controller reference wakes that set
  (if it is still the same one by UID), on add, update and delete; an orphan pod wakes every set of its
  namespace whose selector matches it, when added or when its labels or controller reference changed; a pod
  turning ready wakes its set again after ``minReadySeconds + 1`` s. A pod seen terminating or gone is no longer
  remembered as deleted by us.
- A sync reads the set from the cache (gone: nothing to do); an unparsable selector is logged and not retried.
  Orphan revisions the selector matches are adopted after a live read shows the set is not being deleted; pods
  are claimed (ours or orphans of the namespace, members by name, matching the selector), adopting and releasing
  as the controller-ref manager does. Then :class:`.control.StatefulSetControl` acts and writes status; with
  ``minReadySeconds`` the set is synced again after that many seconds while not every replica is available.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from controller_manager.api.meta import controller_ref, is_being_deleted, key_of, meta
from controller_manager.api.pods import is_pod_ready
from controller_manager.api.resources import CONTROLLERREVISIONS, PERSISTENTVOLUMECLAIMS, PODS, STATEFULSETS
from controller_manager.api.selectors import InvalidSelector, Selector, from_label_selector
from controller_manager.controllerutil.controller_ref import (
    ControllerRefManager,
    live_owner_check,
    resolve_controller_ref,
)
from controller_manager.runtime.controller import Controller, ControllerContext, Result
from controller_manager.runtime.informers import CONTROLLER_UID_INDEX, Added, Deleted, Event, Updated

from .control import StatefulSetControl
from .history import History
from .pod_control import StatefulPodControl
from .status import StatusUpdater
from .utils import is_member_of, min_ready_seconds, replicas

__all__ = ["POD_ORPHAN_INDEX", "StatefulSetController"]

Obj = Mapping[str, Any]

# Pods without a controller reference, by namespace: with the set's own (controller-uid index), the only pods a
# StatefulSet may claim (upstream's FilterPodsByOwner).
POD_ORPHAN_INDEX = "statefulset-orphan-pods-by-namespace"


def orphan_index(pod: Obj) -> list[str]:
    if controller_ref(pod) is not None:
        return []
    namespace = meta(pod).get("namespace")
    return [namespace] if isinstance(namespace, str) and namespace else []


class StatefulSetController(Controller):
    """StatefulSets -> pods with stable identities and storage. Its queue holds StatefulSet keys."""

    name: ClassVar[str] = "statefulset-controller"
    alias: ClassVar[str] = "statefulset"
    queue_name: ClassVar[str | None] = "statefulset"
    workers_option: ClassVar[str | None] = "concurrent-statefulset-syncs"
    default_workers: ClassVar[int] = 5

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.set_informer = ctx.informers.informer(STATEFULSETS)
        self.pod_informer = ctx.informers.informer(PODS, indexers={POD_ORPHAN_INDEX: orphan_index})
        self.revision_informer = ctx.informers.informer(CONTROLLERREVISIONS)
        self.claim_informer = ctx.informers.informer(PERSISTENTVOLUMECLAIMS)
        self.recorder = ctx.events.recorder(self.name)
        claims = self.claim_informer.store
        self.pod_control = StatefulPodControl(ctx.client, self.recorder,
                                              lambda namespace, name: claims.get(f"{namespace}/{name}"))
        self.history = History(ctx.client, self.revision_informer)
        self.control = StatefulSetControl(self.pod_control, StatusUpdater(ctx.client), self.history, ctx.clock,
                                          self.log)
        self.set_informer.add_handler(self._on_set)
        self.pod_informer.add_handler(self._on_pod)

    # --- handlers ---------------------------------------------------------------------------------

    def _on_set(self, event: Event) -> None:
        if isinstance(event, Added):
            self.queue.add(key_of(event.obj))
        elif isinstance(event, Updated):
            self.queue.add(key_of(event.new))
        elif isinstance(event, Deleted):
            self.queue.add(key_of(event.obj))

    def _resolve(self, pod: Obj, ref: Mapping[str, Any] | None) -> Obj | None:
        if ref is None:
            return None
        return resolve_controller_ref(self.set_informer.store.get, STATEFULSETS, meta(pod).get("namespace"), ref)

    def _selecting(self, pod: Obj) -> list[Obj]:
        """Sets of the pod's namespace whose selector matches its labels (``GetPodStatefulSets``)."""
        labels = meta(pod).get("labels")
        if not isinstance(labels, Mapping) or not labels:
            return []
        found: list[Obj] = []
        for sts in self.set_informer.store.by_index("namespace", str(meta(pod).get("namespace") or "")):
            try:
                selector = from_label_selector((sts.get("spec") or {}).get("selector"))
            except (InvalidSelector, TypeError, ValueError, AttributeError):
                continue
            if not selector.is_empty() and selector.matches(labels):
                found.append(sts)
        if len(found) > 1:
            self.log.warning("user error: more than one StatefulSet is selecting pods with labels",
                             labels=dict(labels), sets=[meta(s).get("name") for s in found])
        return found

    def _on_pod(self, event: Event) -> None:
        if isinstance(event, Added):
            pod = event.obj
            if is_being_deleted(pod):
                self._pod_gone(pod)  # seen after a restart already terminating: not a creation
                return
            ref = controller_ref(pod)
            if ref is not None:
                sts = self._resolve(pod, ref)
                if sts is not None:
                    self.queue.add(key_of(sts))
                return
            for sts in self._selecting(pod):
                self.queue.add(key_of(sts))
        elif isinstance(event, Updated):
            self._update_pod(event.old, event.new)
        elif isinstance(event, Deleted):
            self._pod_gone(event.obj)

    def _update_pod(self, old: Obj, cur: Obj) -> None:
        if meta(cur).get("resourceVersion") == meta(old).get("resourceVersion"):
            return  # a resync
        if is_being_deleted(cur):
            self.pod_control.forget_deletion(cur)
        cur_ref, old_ref = controller_ref(cur), controller_ref(old)
        if cur_ref != old_ref and old_ref is not None:
            previous = self._resolve(old, old_ref)
            if previous is not None:
                self.queue.add(key_of(previous))
        if cur_ref is not None:
            sts = self._resolve(cur, cur_ref)
            if sts is None:
                return
            self.queue.add(key_of(sts))
            mrs = min_ready_seconds(sts)
            if mrs > 0 and not is_pod_ready(old) and is_pod_ready(cur):
                # Nothing else happens when it turns available; a second more absorbs clock skew.
                self.queue.add_after(key_of(sts), float(mrs) + 1.0)
            return
        if (meta(cur).get("labels") or {}) != (meta(old).get("labels") or {}) or cur_ref != old_ref:
            for sts in self._selecting(cur):
                self.queue.add(key_of(sts))

    def _pod_gone(self, pod: Obj) -> None:
        self.pod_control.forget_deletion(pod)
        sts = self._resolve(pod, controller_ref(pod))
        if sts is not None:
            self.queue.add(key_of(sts))

    # --- sync -------------------------------------------------------------------------------------

    async def sync(self, key: str) -> Result | None:
        sts = self.set_informer.store.get(key)
        if sts is None:
            self.log.info("StatefulSet has been deleted", key=key)
            return None
        try:
            selector = from_label_selector((sts.get("spec") or {}).get("selector"))
        except (InvalidSelector, TypeError, ValueError, AttributeError) as err:
            # Not transient: retrying cannot help until the set changes.
            self.log.error("error converting StatefulSet selector", key=key, error=str(err))
            return None
        can_adopt = live_owner_check(self.ctx.client, STATEFULSETS, sts)
        await self.history.adopt_orphans(sts, selector, self.history.list(sts, selector), can_adopt)
        pods = await self._claim_pods(sts, selector)
        status = await self.control.update_stateful_set(sts, selector, pods)
        mrs = min_ready_seconds(sts)
        if mrs > 0 and status.available_replicas != replicas(sts):
            return Result(requeue_after=float(mrs))
        return None

    async def _claim_pods(self, sts: Obj, selector: Selector) -> list[Obj]:
        """``getPodsForStatefulSet``: our pods and the namespace's orphans, members by name, claimed."""
        namespace = str(meta(sts).get("namespace") or "")
        store = self.pod_informer.store
        candidates = [p for p in store.by_index(CONTROLLER_UID_INDEX, str(meta(sts).get("uid") or ""))
                      if meta(p).get("namespace") == namespace]
        candidates += store.by_index(POD_ORPHAN_INDEX, namespace)
        manager = ControllerRefManager(self.ctx.client, sts, STATEFULSETS, selector, PODS,
                                       live_owner_check(self.ctx.client, STATEFULSETS, sts))
        return await manager.claim(candidates, [lambda pod: is_member_of(sts, pod)])
