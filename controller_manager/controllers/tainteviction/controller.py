"""The taint eviction controller: deletes pods from nodes with NoExecute taints they do not tolerate
(kube-controller-manager's ``taint-eviction-controller``, ``pkg/controller/tainteviction/taint_eviction.go``).

Guarantees:
- A pod bound to a node whose NoExecute taints it does not all tolerate is deleted at once. A pod that
  tolerates them all, some for ``tolerationSeconds``, is deleted when the shortest of those runs out; one that
  tolerates them all forever is left alone. When the taints go (or the pod's tolerations change to cover them,
  or the pod goes), a pending deletion is cancelled with the event ``TaintManagerEviction`` "Cancelling deletion
  of Pod ns/name".
- Deadlines survive restarts of this controller: the toleration countdown starts at the earliest
  ``timeAdded`` of the node's NoExecute taints (not when this process first saw them, which is what upstream
  does), or at the pod's creation if it came later; a deadline already past fires at once. Of two deadlines
  for one pod the earlier is kept.
- A deletion records ``Normal TaintManagerEviction`` "Marking for deletion Pod ns/name", sets the pod's
  ``DisruptionTarget`` condition (reason ``DeletionByTaintManager``, "Taint manager: deleting due to NoExecute
  taint") through a ``/status`` patch, then deletes it with a UID precondition. A failed attempt is retried
  with backoff, 5 attempts in all; a pod already gone counts as done.
- Prometheus (:mod:`.metrics`): each pod deleted here counts once, with the time from its deletion being due to
  the delete.
- Handlers only enqueue. Node and pod keys are handled without awaiting, so what the controller knows of a
  node's taints and the pods' timers never interleave half-updated.

Queue keys: a node name, ``namespace/name`` of a pod, and ``@evict/namespace/name`` for a fired deletion.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from controller_manager.api.meta import format_time, meta, parse_time, split_key
from controller_manager.api.resources import NODES, PODS
from controller_manager.api.taints import EFFECT_NO_EXECUTE, tolerates
from controller_manager.client.errors import ApiError, NotFound
from controller_manager.runtime.controller import Controller, ControllerContext, Result
from controller_manager.runtime.informers import NODE_NAME_INDEX, Event, Updated

from . import metrics
from .timed_workers import TimedWorkerQueue

__all__ = [
    "EVICT_PREFIX",
    "TaintEvictionController",
    "eviction_start",
    "get_matching_tolerations",
    "get_min_toleration_time",
    "no_execute_taints",
]

Obj = Mapping[str, Any]

EVICT_PREFIX = "@evict/"
DELETE_ATTEMPTS = 5
UPDATE_WORKER_SIZE = 8
REASON = "TaintManagerEviction"


# --- pure helpers -----------------------------------------------------------------------------------------

def no_execute_taints(node: Obj) -> list[Obj]:
    spec = node.get("spec")
    raw = spec.get("taints") if isinstance(spec, Mapping) else None
    if not isinstance(raw, list):
        return []
    return [t for t in raw if isinstance(t, Mapping) and t.get("effect") == EFFECT_NO_EXECUTE]


def get_matching_tolerations(taints: Sequence[Obj], tolerations: Sequence[Obj]) -> tuple[bool, list[Obj]]:
    """(every taint tolerated, the first toleration matching each taint) (``v1helper.GetMatchingTolerations``)."""
    if not taints:
        return True, []
    used: list[Obj] = []
    for taint in taints:
        match = next((t for t in tolerations if tolerates(t, taint)), None)
        if match is None:
            return False, []
        used.append(match)
    return True, used


def get_min_toleration_time(tolerations: Sequence[Obj]) -> float:
    """The shortest ``tolerationSeconds`` (<= 0 counts as 0), 0 for no tolerations, -1 for "forever"."""
    if not tolerations:
        return 0.0
    shortest: int | None = None
    for tol in tolerations:
        seconds = tol.get("tolerationSeconds")
        if isinstance(seconds, bool) or not isinstance(seconds, int):
            continue
        if seconds <= 0:
            return 0.0
        if shortest is None or seconds < shortest:
            shortest = seconds
    return -1.0 if shortest is None else float(shortest)


def eviction_start(taints: Sequence[Obj], pod: Obj, now: float) -> float:
    """When the toleration countdown started: the earliest NoExecute ``timeAdded`` (or the pod's creation if
    later), never after ``now``; ``now`` if no taint says when it was added."""
    added = [t for t in (parse_time(x.get("timeAdded")) if isinstance(x.get("timeAdded"), str) else None
                         for x in taints) if t is not None]
    if not added:
        return now
    start = min(added)
    created_raw = meta(pod).get("creationTimestamp")
    created = parse_time(created_raw) if isinstance(created_raw, str) else None
    if created is not None and created > start:
        start = created
    return min(start, now)


def _tolerations(pod: Obj) -> list[Obj]:
    spec = pod.get("spec")
    raw = spec.get("tolerations") if isinstance(spec, Mapping) else None
    return [t for t in raw if isinstance(t, Mapping)] if isinstance(raw, list) else []


def _node_name(pod: Obj) -> str:
    spec = pod.get("spec")
    value = spec.get("nodeName") if isinstance(spec, Mapping) else None
    return value if isinstance(value, str) else ""


class TaintEvictionController(Controller):
    name: ClassVar[str] = "taint-eviction-controller"
    alias: ClassVar[str] = "taint-eviction-controller"
    default_workers: ClassVar[int] = UPDATE_WORKER_SIZE

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.clock = ctx.clock
        self.client = ctx.client
        self.recorder = ctx.events.recorder(self.name)
        self.node_informer = ctx.informers.informer(NODES)
        self.pod_informer = ctx.informers.informer(PODS)
        # NoExecute taints of every tainted node, as last handled (a node without any is absent).
        self.tainted_nodes: dict[str, list[Obj]] = {}
        self.evictions = TimedWorkerQueue(ctx.clock, lambda key: self.queue.add(EVICT_PREFIX + key))
        self._attempts: dict[str, int] = {}
        self.node_informer.add_handler(self._on_node)
        self.pod_informer.add_handler(self._on_pod)

    # --- handlers -----------------------------------------------------------------------------------------

    def _on_node(self, event: Event) -> None:
        if isinstance(event, Updated) and no_execute_taints(event.old) == no_execute_taints(event.new):
            return
        obj = event.new if isinstance(event, Updated) else event.obj
        self.queue.add(str(meta(obj).get("name", "")))

    def _on_pod(self, event: Event) -> None:
        if isinstance(event, Updated):
            old_spec, new_spec = event.old.get("spec"), event.new.get("spec")
            # Cached pods share unchanged sub-trees, so an identical tolerations list is usually the same object.
            same_tolerations = (type(old_spec) is dict and type(new_spec) is dict
                                and old_spec.get("tolerations") is new_spec.get("tolerations"))
            if (same_tolerations or _tolerations(event.old) == _tolerations(event.new)) and (
                    _node_name(event.old) == _node_name(event.new)):
                return
        obj = event.new if isinstance(event, Updated) else event.obj
        self.queue.add(f"{meta(obj).get('namespace', '')}/{meta(obj).get('name', '')}")

    # --- sync -----------------------------------------------------------------------------------------------

    async def sync(self, key: str) -> Result | None:
        if key.startswith(EVICT_PREFIX):
            await self._evict(key.removeprefix(EVICT_PREFIX))
        elif "/" in key:
            self.handle_pod_update(key)
        else:
            self.handle_node_update(key)
        return None

    def handle_node_update(self, name: str) -> None:
        node = self.node_informer.store.get(name)
        if node is None:
            self.tainted_nodes.pop(name, None)
            return
        taints = no_execute_taints(node)
        if taints:
            self.tainted_nodes[name] = taints
        else:
            self.tainted_nodes.pop(name, None)
        pods = self.pod_informer.store.by_index(NODE_NAME_INDEX, name)
        if not taints:
            for pod in pods:
                self._cancel_with_event(f"{meta(pod).get('namespace', '')}/{meta(pod).get('name', '')}")
            return
        now = self.clock.now()
        for pod in pods:
            self.process_pod_on_node(pod, name, taints, now)

    def handle_pod_update(self, key: str) -> None:
        pod = self.pod_informer.store.get(key)
        if pod is None:
            self._cancel_with_event(key)
            return
        node_name = _node_name(pod)
        if not node_name:
            return
        taints = self.tainted_nodes.get(node_name)
        if taints is None:
            # Untainted node: a pending deletion (the pod moved, or its node was cleared) no longer applies.
            self._cancel_with_event(key)
            return
        self.process_pod_on_node(pod, node_name, taints, self.clock.now())

    def process_pod_on_node(self, pod: Obj, node_name: str, taints: Sequence[Obj], now: float) -> None:
        key = f"{meta(pod).get('namespace', '')}/{meta(pod).get('name', '')}"
        if not taints:
            self._cancel_with_event(key)
            return
        all_tolerated, used = get_matching_tolerations(taints, _tolerations(pod))
        if not all_tolerated:
            self.log.info("Not all taints are tolerated after update for pod on node", pod=key, node=node_name)
            existing = self.evictions.get_worker(key)
            if existing is not None and existing.fire_at <= now:
                return  # already due (or being deleted)
            self._cancel_with_event(key)
            self.evictions.add_work(key, now, now)
            return
        min_toleration = get_min_toleration_time(used)
        if min_toleration < 0:
            self.log.debug("Current tolerations for pod tolerate forever, cancelling any scheduled deletion", pod=key)
            self._cancel_with_event(key)
            return
        start = eviction_start(taints, pod, now)
        fire_at = start + min_toleration
        existing = self.evictions.get_worker(key)
        if existing is not None:
            if existing.fired or existing.fire_at <= fire_at:
                return
            self._cancel_with_event(key)
        self.log.debug("scheduling pod deletion", pod=key, node=node_name, at=format_time(fire_at))
        self.evictions.add_work(key, start, fire_at)

    def _cancel_with_event(self, key: str) -> None:
        if self.evictions.cancel_work(key):
            self._attempts.pop(key, None)
            self._record(key, f"Cancelling deletion of Pod {key}")

    def _record(self, key: str, message: str) -> None:
        namespace, name = split_key(key)
        ref = {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": namespace, "name": name}}
        self.recorder.event(ref, "Normal", REASON, message)

    # --- deletion -----------------------------------------------------------------------------------------

    async def _evict(self, key: str) -> None:
        worker = self.evictions.get_worker(key)
        if worker is None or not worker.fired:
            return  # cancelled after it fired
        attempt = self._attempts.get(key, 0) + 1
        self._attempts[key] = attempt
        if attempt == 1:
            self.log.info("Deleting pod", pod=key)
            self._record(key, f"Marking for deletion Pod {key}")
        try:
            if await self._add_condition_and_delete_pod(key):
                metrics.record_deletion(self.clock.now() - worker.fire_at)
        except NotFound:
            pass  # gone already: nothing was deleted here, so nothing is counted
        except ApiError as err:
            if attempt < DELETE_ATTEMPTS:
                raise
            self.log.error("TaintEvictionController: timed worker failed", pod=key, error=str(err))
        self._attempts.pop(key, None)
        self.evictions.finished(key)

    async def _add_condition_and_delete_pod(self, key: str) -> bool:
        """Mark and delete the pod; True once the delete went through (NotFound propagates)."""
        namespace, name = split_key(key)
        pod = await self.client.get(PODS, name, namespace)
        uid = meta(pod).get("uid")
        status = pod.get("status")
        raw = status.get("conditions") if isinstance(status, Mapping) else None
        conditions = [c for c in raw if isinstance(c, Mapping)] if isinstance(raw, list) else []
        current = next((c for c in conditions if c.get("type") == "DisruptionTarget"), None)
        wanted = {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager",
                  "message": "Taint manager: deleting due to NoExecute taint"}
        if current is None or any(current.get(k) != v for k, v in wanted.items()):
            since = current.get("lastTransitionTime") if current and current.get("status") == "True" else None
            condition = {**wanted, "lastTransitionTime": since or format_time(self.clock.now())}
            patch = {"metadata": {"uid": uid}, "status": {"conditions": [condition]}}
            await self.client.patch(PODS, name, patch, namespace, patch_type="strategic", subresource="status")
        await self.client.delete(PODS, name, namespace, uid=uid)
        return True
