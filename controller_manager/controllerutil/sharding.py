"""A shard member's side of sharding: which keys its controllers may sync, and draining roots that move away.

Each replica with ``--sharding=true`` runs the sharded controllers (deployment, replicaset, statefulset,
daemonset, job, cronjob) on informers that select ``shard.controller-manager.io/<ring>=<member>`` for the
sharded kinds (``runtime.sharding.kinds``). Labels alone do not make a hand-over safe: the informers of one
member see a moving subtree's objects arrive and leave one kind at a time. :class:`ShardGate` closes that gap.

Guarantees:
- A key is synced (``admit`` is True) only if its object's root is in this member's cache, labelled with this
  member, not marked to drain, and every informer named in its hand-over annotation has reached the
  resourceVersion recorded there (so the dependents the sharder relabelled before the root are all cached).
  An object already gone from the cache is admitted (its sync only cleans up).
- A key not admitted is parked and added back to its queue as soon as it would be admitted. One whose sharded
  owner is missing from the cache is admitted after ``owner_grace`` seconds if the owner is not one this member
  handed away (its owner was deleted: cleanups such as the job controller's orphan finalizer removal still
  happen, later); a dependent of a root handed away is never synced here again while it stays cached.
- Drain: when a root of this member is marked to drain, no new sync of its subtree starts; once every sync of
  it in flight has finished, the expectations the controllers hold for its subtree are forgotten and the root's
  shard and drain labels are removed, and it is annotated with this member's name (the acknowledgement the
  sharder waits for; it finds the dependents to relabel by that name). The duration is observed.
- What controllers create inherits the owner's shard label: :func:`inherit_shard_labels`, called by the
  template-to-object helpers (``pod_from_template``, and where ReplicaSets, Jobs and ControllerRevisions are
  built), so no second write is ever needed for them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from prometheus_client import Gauge, Histogram

from controller_manager.api.meta import key_of, meta
from controller_manager.api.resources import Resource
from controller_manager.client import ApiClient, ApiError
from controller_manager.clock import Clock
from controller_manager.runtime.informers import (
    CONTROLLER_UID_INDEX,
    Added,
    Event,
    SharedInformer,
    SharedInformerFactory,
    Updated,
)
from controller_manager.runtime.sharding.kinds import (
    DEPENDENT_KINDS,
    ROOT_KINDS,
    is_root,
    parse_handover,
    sharded_owner,
)
from controller_manager.runtime.sharding.membership import (
    HANDOVER_ANNOTATION,
    PREVIOUS_ANNOTATION,
    SHARD_LABEL_PREFIX,
    drain_label,
    shard_label,
)
from controller_manager.runtime.workqueue import WorkQueue

Obj = Mapping[str, Any]

RECHECK_PERIOD = 0.1  # seconds between looks at parked keys
COUNT_PERIOD = 5.0  # seconds between counts of the roots cached (a walk over the root caches)
OWNER_GRACE = 30.0
RELEASED_MEMORY = 600.0  # seconds a handed-away root's uid is remembered
MAX_OWNER_DEPTH = 4  # Pod -> ReplicaSet -> Deployment, Pod -> Job -> CronJob: never deeper

DRAIN_DURATION = Histogram(
    "sharding_drain_duration_seconds",
    "Time from a root's drain mark reaching this member to its acknowledgement (in-flight syncs finished, "
    "expectations forgotten, labels removed).",
    ["ring", "shard"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
MEMBER_ROOTS = Gauge(
    "sharding_member_roots",
    "Root objects (Deployments, StatefulSets, DaemonSets, CronJobs, Jobs and ReplicaSets without a sharded owner) "
    "this member's informers hold.",
    ["ring", "shard"],
)


def inherit_shard_labels(owner: Obj, labels: Mapping[str, str] | None) -> dict[str, str] | None:
    """``labels`` plus every shard label ``owner`` carries (None stays None when the owner has none)."""
    owned = meta(owner).get("labels") or {}
    shard = {k: v for k, v in owned.items() if k.startswith(SHARD_LABEL_PREFIX)}
    if not shard:
        return None if labels is None else dict(labels)
    return {**(labels or {}), **shard}


class Verdict(Enum):
    ALLOW = "allow"
    WAIT = "wait"  # not this member's now (draining, not yet caught up, handed away)
    OWNER_MISSING = "owner-missing"  # a sharded owner is not cached (still arriving, or deleted)


@dataclass(frozen=True, slots=True)
class _Parked:
    queue: WorkQueue[str]
    res: Resource
    obj_key: str  # the object's key (a queue key may carry a prefix naming its kind)
    since: float


class ShardGate:
    def __init__(self, *, ring: str, member: str, informers: SharedInformerFactory, client: ApiClient, clock: Clock,
                 log: Any, owner_grace: float = OWNER_GRACE) -> None:
        self.ring = ring
        self.member = member
        self.label = shard_label(ring)
        self.drain = drain_label(ring)
        self._factory = informers
        self._client = client
        self._clock = clock
        self._log = log
        self._owner_grace = owner_grace
        self._stores: dict[tuple[str, str], SharedInformer] = {}
        for res in (*ROOT_KINDS, *DEPENDENT_KINDS):
            self._stores[(res.group, res.plural)] = informers.informer(res)
        for res in ROOT_KINDS:
            self._stores[(res.group, res.plural)].add_handler(self._on_root)
        self._in_flight: dict[tuple[Resource, str], int] = {}
        self._parked: dict[tuple[int, str], _Parked] = {}
        self._controllers: list[tuple[Resource, object]] = []
        self._draining: set[str] = set()
        self._to_drain: asyncio.Queue[tuple[Resource, str]] = asyncio.Queue()
        self._released: dict[str, float] = {}
        self._drain_seconds = DRAIN_DURATION.labels(ring, member)
        self._roots_gauge = MEMBER_ROOTS.labels(ring, member)
        self._counted_at = float("-inf")

    # -- what the runner asks ---------------------------------------------------------------------------------

    def admission(self, controller: object, res: Resource, prefixed: Mapping[str, Resource] | None = None) -> Admission:
        """The admission for ``controller``'s own queue, whose keys name objects of ``res`` (or of the kind a key
        prefix says: the job controller's ``pod:<ns>/<name>`` orphans)."""
        self._controllers.append((res, controller))
        return Admission(self, res, dict(prefixed or {}))

    def verdict(self, res: Resource, key: str) -> Verdict:
        root, missing = self._walk(res, key)
        if missing is not None:
            return Verdict.WAIT if missing in self._released else Verdict.OWNER_MISSING
        if root is None:
            return Verdict.ALLOW  # gone from the cache: its sync only cleans up
        return Verdict.ALLOW if self._owns(root) else Verdict.WAIT

    def _admit(self, queue: WorkQueue[str], queue_key: str, res: Resource, key: str) -> bool:
        verdict = self.verdict(res, key)
        parked_key = (id(queue), queue_key)
        parked = self._parked.get(parked_key)
        if (verdict is Verdict.OWNER_MISSING and parked is not None
                and self._clock.monotonic() - parked.since >= self._owner_grace):
            verdict = Verdict.ALLOW
        if verdict is Verdict.ALLOW:
            self._parked.pop(parked_key, None)
            flight = (res, key)
            self._in_flight[flight] = self._in_flight.get(flight, 0) + 1
            return True
        if parked is None:
            self._parked[parked_key] = _Parked(queue, res, key, self._clock.monotonic())
        return False

    def _release(self, res: Resource, key: str) -> None:
        flight = (res, key)
        left = self._in_flight.get(flight, 0) - 1
        if left > 0:
            self._in_flight[flight] = left
        else:
            self._in_flight.pop(flight, None)

    # -- resolution -------------------------------------------------------------------------------------------

    def _store(self, res: Resource) -> SharedInformer | None:
        return self._stores.get((res.group, res.plural)) or self._factory.existing(res)

    def _walk(self, res: Resource, key: str) -> tuple[Obj | None, str | None]:
        """(root, None) for a cached object; (None, owner uid) when a sharded owner is not cached; (None, None)
        when the object itself is not cached."""
        store = self._store(res)
        obj = store.store.get(key) if store is not None else None
        if obj is None:
            return None, None
        for _ in range(MAX_OWNER_DEPTH):
            owner = sharded_owner(obj)
            if owner is None:
                return obj, None
            owner_res, ref = owner
            owner_store = self._store(owner_res)
            uid = str(ref.get("uid") or "")
            parent = None
            if owner_store is not None:
                parent = owner_store.store.get(f"{meta(obj).get('namespace') or ''}/{ref.get('name') or ''}")
            if parent is None or meta(parent).get("uid") != uid:
                return None, uid
            obj = parent
        return obj, None

    def _owns(self, root: Obj) -> bool:
        m = meta(root)
        labels = m.get("labels") or {}
        if labels.get(self.label) != self.member or self.drain in labels:
            return False
        for plural, rv in parse_handover((m.get("annotations") or {}).get(HANDOVER_ANNOTATION)).items():
            informer = next((s for (_, p), s in self._stores.items() if p == plural), None)
            if informer is None:
                continue
            seen = informer.last_sync_resource_version
            if not seen.isdigit() or int(seen) < rv:
                return False
        return True

    def _subtree(self, root: Obj) -> Iterable[tuple[Resource, Obj]]:
        """The root and every cached object it controls, transitively."""
        pending = [root]
        seen: set[str] = set()
        while pending:
            obj = pending.pop()
            uid = str(meta(obj).get("uid") or "")
            if uid in seen:
                continue
            seen.add(uid)
            for res in DEPENDENT_KINDS:
                store = self._store(res)
                if store is None:
                    continue
                for child in store.store.by_index(CONTROLLER_UID_INDEX, uid):
                    yield res, child
                    pending.append(child)

    # -- draining ---------------------------------------------------------------------------------------------

    def _on_root(self, event: Event) -> None:
        obj = event.new if isinstance(event, Updated) else event.obj
        if not isinstance(event, (Added, Updated)):
            return
        res = next((r for r in ROOT_KINDS if r.kind == obj.get("kind")), None)
        if res is None or not is_root(res, obj):
            return
        labels = meta(obj).get("labels") or {}
        uid = str(meta(obj).get("uid") or "")
        if labels.get(self.label) != self.member:
            return
        if self.drain not in labels:
            self._released.pop(uid, None)  # moved back to us
            return
        if uid not in self._draining:
            self._draining.add(uid)
            self._to_drain.put_nowait((res, key_of(obj)))

    async def _acknowledge(self, res: Resource, key: str) -> None:
        started = self._clock.monotonic()
        store = self._store(res)
        root = store.store.get(key) if store is not None else None
        if root is None:
            return
        uid = str(meta(root).get("uid") or "")
        try:
            # Syncs of the subtree that started before the mark reached us must finish; none starts after it.
            while any(self._root_uid(r, k) == uid for r, k in list(self._in_flight)):
                await self._clock.sleep(0.01)
            self._forget_expectations(root)
            self._released[uid] = self._clock.monotonic()
            namespace, name = str(meta(root).get("namespace") or ""), str(meta(root).get("name") or "")
            patch = {"metadata": {"labels": {self.label: None, self.drain: None},
                                  "annotations": {PREVIOUS_ANNOTATION: self.member}}}
            delay = 0.05
            while True:
                current = store.store.get(key) if store is not None else None
                if current is None or meta(current).get("uid") != uid or \
                        (meta(current).get("labels") or {}).get(self.label) != self.member:
                    return  # gone, or no longer ours: nothing to acknowledge
                try:
                    await self._client.patch(res, name, patch, namespace, patch_type="merge")
                    break
                except ApiError as err:
                    if err.status == 404:
                        return
                    self._log.info("drain acknowledgement failed, retrying", root=key, error=str(err))
                    await self._clock.sleep(delay)
                    delay = min(delay * 2, 2.0)
            elapsed = self._clock.monotonic() - started
            self._drain_seconds.observe(elapsed)
            self._log.info("drained root for its new shard", root=f"{res.plural}/{key}", seconds=round(elapsed, 4))
        finally:
            self._draining.discard(uid)

    def _root_uid(self, res: Resource, key: str) -> str | None:
        root, _ = self._walk(res, key)
        return None if root is None else str(meta(root).get("uid") or "")

    def _forget_expectations(self, root: Obj) -> None:
        keys_by_kind: dict[str, set[str]] = {str(root.get("kind") or ""): {key_of(root)}}
        for res, obj in self._subtree(root):
            keys_by_kind.setdefault(res.kind, set()).add(key_of(obj))
        for res, controller in self._controllers:
            for key in keys_by_kind.get(res.kind, ()):
                for attr in ("expectations", "finalizer_expectations"):
                    holder = getattr(controller, attr, None)
                    forget = getattr(holder, "delete_expectations", None)
                    if callable(forget):
                        forget(key)

    # -- the loop ---------------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Add parked keys back when they may sync, and acknowledge drains, until cancelled."""
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self._recheck_loop(), name="sharding:recheck")
            while True:
                res, key = await self._to_drain.get()
                tg.create_task(self._acknowledge(res, key), name=f"sharding:drain:{res.plural}/{key}")

    async def _recheck_loop(self) -> None:
        while True:
            await self._clock.sleep(RECHECK_PERIOD)
            now = self._clock.monotonic()
            for (_, queue_key), parked in list(self._parked.items()):
                verdict = self.verdict(parked.res, parked.obj_key)
                if verdict is Verdict.ALLOW or (
                        verdict is Verdict.OWNER_MISSING and now - parked.since >= self._owner_grace):
                    parked.queue.add(queue_key)  # its admission takes it off the parked list
            for uid, at in list(self._released.items()):
                if now - at > RELEASED_MEMORY:
                    del self._released[uid]
            if now - self._counted_at >= COUNT_PERIOD:
                self._counted_at = now
                self._roots_gauge.set(sum(
                    1 for res in ROOT_KINDS if (s := self._store(res)) is not None
                    for obj in s.store.list() if is_root(res, obj)))

    def in_flight(self) -> int:
        return sum(self._in_flight.values())

    def parked(self) -> int:
        return len(self._parked)


class Admission:
    """One controller's :class:`controller_manager.runtime.controller.SyncAdmission`."""

    def __init__(self, gate: ShardGate, res: Resource, prefixed: dict[str, Resource]) -> None:
        self._gate = gate
        self._res = res
        self._prefixed = prefixed

    def _target(self, key: str) -> tuple[Resource, str]:
        for prefix, res in self._prefixed.items():
            if key.startswith(prefix):
                return res, key[len(prefix):]
        return self._res, key

    def admit(self, queue: WorkQueue[str], key: str) -> bool:
        res, obj_key = self._target(key)
        return self._gate._admit(queue, key, res, obj_key)

    def release(self, key: str) -> None:
        res, obj_key = self._target(key)
        self._gate._release(res, obj_key)


__all__ = ["Admission", "ShardGate", "Verdict", "inherit_shard_labels"]
