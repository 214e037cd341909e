"""The sharder: runs on the leader, assigns every root object to a live shard member and moves it safely.

Not one of kube-controller-manager's controllers (``--controllers`` does not list it): the manager starts it
with the leader's controllers when ``--sharding=true``. Its queue holds ``ring`` (re-judge membership) and
``<plural>|<namespace>/<name>`` of root objects (``runtime.sharding.kinds``); its informers are the shard Leases
and metadata-only informers of the root kinds.

Guarantees:
- Membership: the live members are the ring's Leases judged by ``MembershipTracker`` on this process's
  clock. An expired member is fenced first: the sharder writes its own identity into that member's Lease
  (an update carrying the resourceVersion it judged, so a renewal that raced it wins and the member stays),
  after which the member can never renew it (it exits) and has been refusing writes since its renew deadline.
  Only then, or for a Lease released on a clean stop, is the member dead and are its objects moved.
- Assignment: a root's shard is ``HashRing(live).owner("<namespace>/<name>")``, the leader's own member weighted
  by ``--sharding-leader-share`` while another member is live (it also runs every cluster-wide controller).
  A root without a shard, or whose shard is dead, is assigned at once. A root whose shard is live but no
  longer its owner in the ring is marked with the drain label; its member acknowledges by removing both labels
  (after its syncs of the root stopped and its expectations were forgotten); the root is then unassigned and
  assigned like a new one.
- Assigning relabels the root's dependents first, deepest first, then the root, with the hand-over annotation
  naming the last dependent resourceVersion per kind: the new member syncs nothing of the root before its
  informers have caught up to them. A root that had a member (dead, or it acknowledged a drain and named
  itself in :data:`PREVIOUS_ANNOTATION`) has its dependents read fresh from the API server by that member's
  label, so nothing it created just before is missed; a root that never had one (new, or from before
  sharding) has no member creating dependents, and they are found in this process's caches.
- A dead member's Lease is deleted once it has been dead for :attr:`Sharder.dead_lease_ttl` seconds (members never
  create their Lease again, and a member name is never reused), so restarts leave no Leases behind.
- Metrics: ``sharding_members{ring}``, ``sharding_objects{ring,shard}`` (roots labelled per member),
  ``sharding_handovers_total{ring,reason}`` (``assign``: a new or unassigned root; ``drain``: a drain started;
  ``dead``: moved from a dead member).
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from prometheus_client import Counter, Gauge

from controller_manager.api.meta import controller_ref, key_of, meta, split_key
from controller_manager.api.resources import LEASES, Resource
from controller_manager.client import ApiError, Conflict, NotFound
from controller_manager.runtime.controller import Controller, ControllerContext, Result
from controller_manager.runtime.informers import CONTROLLER_UID_INDEX, Deleted, Event, Updated
from controller_manager.runtime.sharding.kinds import (
    DEPENDENT_KINDS,
    ROOT_KINDS,
    format_handover,
    hash_key,
    is_root,
)
from controller_manager.runtime.sharding.membership import (
    HANDOVER_ANNOTATION,
    MOVING_ANNOTATION,
    PREVIOUS_ANNOTATION,
    RING_LABEL,
    SHARDER_IDENTITY,
    MembershipTracker,
    MemberState,
    drain_label,
    shard_label,
)
from controller_manager.runtime.sharding.ring import HashRing

Obj = Mapping[str, Any]
RING_KEY = "ring"
DEAD_LEASE_TTL = 60.0  # seconds a dead member's Lease is kept before the sharder deletes it
COUNT_PERIOD = 5.0  # seconds between counts of the roots per shard (renewals trigger a ring sync each)
MAX_DEPTH = 4

MEMBERS = Gauge("sharding_members", "Live shard members in the ring, as the sharder sees them.", ["ring"])
OBJECTS = Gauge("sharding_objects", "Root objects labelled with each shard member.", ["ring", "shard"])
HANDOVERS = Counter("sharding_handovers_total",
                    "Roots assigned to a member: reason assign (new or unassigned), drain (a drain started), "
                    "dead (moved from a dead member).", ["ring", "reason"])


class Sharder(Controller):
    name: ClassVar[str] = "sharder"
    alias: ClassVar[str] = "sharder"
    default_workers: ClassVar[int] = 5
    workers_option: ClassVar[str | None] = "sharding-sharder-workers"
    dead_lease_ttl: float = DEAD_LEASE_TTL

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        options = ctx.options
        self.ring_name = str(options.get("sharding_ring_name") or "")
        self.namespace = str(options.get("leader_elect_resource_namespace") or "kube-system")
        self.label = shard_label(self.ring_name)
        self.drain = drain_label(self.ring_name)
        self.tracker = MembershipTracker(self.ring_name)
        self.ring = HashRing(())
        self.member = str(options.get("sharding_member") or "")  # this replica's own shard (the leader's)
        self.leader_share = float(options.get("sharding_leader_share", 1.0))
        self.leases = ctx.informers.informer(LEASES)
        self.leases.add_handler(self._on_lease)
        self.roots = {res.plural: ctx.informers.informer(res, metadata_only=True) for res in ROOT_KINDS}
        # Dependents of never-assigned roots are looked up here: a full informer another controller of the leader
        # runs (pods: podgc, the endpoint controllers) is shared, as the garbage collector shares them.
        self.dependents = {res.plural: ctx.informers.existing(res) or ctx.informers.informer(res, metadata_only=True)
                           for res in DEPENDENT_KINDS}
        self._counted_at = float("-inf")
        self._kinds = {res.plural: res for res in ROOT_KINDS}
        for plural, informer in self.roots.items():
            informer.add_handler(self._root_handler(plural))
        self._known: dict[str, str] = {}  # shard label value -> gauge child made, to zero gone members
        MEMBERS.labels(self.ring_name).set(0)

    # -- handlers -----------------------------------------------------------------------------------------

    def _on_lease(self, event: Event) -> None:
        obj = event.new if isinstance(event, Updated) else event.obj
        if ((meta(obj).get("labels") or {}).get(RING_LABEL)) != self.ring_name:
            return
        if isinstance(event, Deleted):
            self.tracker.forget(str(meta(obj).get("name") or ""))
        else:
            self.tracker.observe(obj, self.ctx.clock.monotonic())
        self.queue.add(RING_KEY)

    def _root_handler(self, plural: str) -> Callable[[Event], None]:
        return lambda event: self._on_root(plural, event)

    def _on_root(self, plural: str, event: Event) -> None:
        if isinstance(event, Deleted):
            return
        obj = event.new if isinstance(event, Updated) else event.obj
        if (isinstance(event, Updated) and event.old is not event.new
                and (meta(event.old).get("labels") or {}) == (meta(obj).get("labels") or {})
                and meta(event.old).get("ownerReferences") == meta(obj).get("ownerReferences")):
            return  # a spec or status change: the assignment cannot have changed
        self.queue.add(f"{plural}|{key_of(obj)}")

    # -- sync -------------------------------------------------------------------------------------------------

    async def sync(self, key: str) -> Result | None:
        if key == RING_KEY:
            return await self._sync_ring()
        plural, _, obj_key = key.partition("|")
        return await self._sync_root(self._kinds[plural], obj_key)

    async def _sync_ring(self) -> Result | None:
        now = self.ctx.clock.monotonic()
        for member in self.tracker.expired(now):
            await self._fence(member)
        live = self.tracker.live(self.ctx.clock.monotonic())
        MEMBERS.labels(self.ring_name).set(len(live))
        if live != self.ring.members:
            self.log.info("shard ring changed", ring=self.ring_name, members=sorted(live),
                          joined=sorted(live - self.ring.members), left=sorted(self.ring.members - live))
            self.ring = HashRing(live, weights=self._weights(live))
            for plural, informer in self.roots.items():
                for obj_key in list(informer.store.keys()):
                    self.queue.add(f"{plural}|{obj_key}")
            self._count_objects()
        elif self.ctx.clock.monotonic() - self._counted_at >= COUNT_PERIOD:
            self._count_objects()
        waits = [w for w in (self.tracker.next_change(self.ctx.clock.monotonic()), await self._collect_dead())
                 if w is not None]
        return Result(requeue_after=min(waits) + 0.05) if waits else None

    def _weights(self, live: frozenset[str]) -> dict[str, float]:
        """The leader's member lighter by ``--sharding-leader-share``; alone, it must own everything."""
        if self.leader_share == 1.0 or self.member not in live or len(live) < 2:
            return {}
        return {self.member: self.leader_share}

    async def _collect_dead(self) -> float | None:
        """Delete the Leases of members dead for long enough; seconds until the next one is due, if any."""
        due: float | None = None
        for name in self.tracker.names():
            dead = self.tracker.dead_for(name, self.ctx.clock.monotonic())
            if dead is None:
                continue
            if dead < self.dead_lease_ttl:
                due = min(due, self.dead_lease_ttl - dead) if due is not None else self.dead_lease_ttl - dead
                continue
            lease = self.leases.store.get(f"{self.namespace}/{name}")
            if lease is None:
                continue
            try:
                await self.ctx.client.delete(LEASES, name, self.namespace,
                                             resource_version=meta(lease).get("resourceVersion"))
            except (NotFound, Conflict):
                continue  # gone already, or changed since: judged again on its event
            self.log.info("deleted the Lease of a dead shard member", member=name, dead_seconds=round(dead, 1))
        return due

    async def _fence(self, member: str) -> None:
        lease = self.leases.store.get(f"{self.namespace}/{member}")
        if lease is None:
            return
        spec = {**(lease.get("spec") or {}), "holderIdentity": SHARDER_IDENTITY}
        try:
            updated = await self.ctx.client.update(LEASES, {**lease, "spec": spec})
        except Conflict:
            return  # it renewed (or someone wrote) since we judged it: judged again on that event
        self.tracker.observe(updated, self.ctx.clock.monotonic())
        self.log.info("shard member expired: its Lease is now the sharder's, its objects move", member=member)

    def _count_objects(self) -> None:
        self._counted_at = self.ctx.clock.monotonic()
        counts: Tally[str] = Tally()
        for res in ROOT_KINDS:
            for obj in self.roots[res.plural].store.list():
                shard = (meta(obj).get("labels") or {}).get(self.label)
                if shard and is_root(res, obj):
                    counts[shard] += 1
        for shard in set(self._known) | set(counts):
            OBJECTS.labels(self.ring_name, shard).set(counts.get(shard, 0))
            self._known[shard] = shard

    async def _sync_root(self, res: Resource, key: str) -> Result | None:
        obj = self.roots[res.plural].store.get(key)
        if obj is None or not is_root(res, obj) or meta(obj).get("deletionTimestamp"):
            return None
        desired = self.ring.owner(hash_key(obj))
        if desired is None:
            return None  # no live member: nobody to give it to
        labels = meta(obj).get("labels") or {}
        current = labels.get(self.label) or None
        draining = self.drain in labels
        if current == desired and not draining:
            return None
        state = self.tracker.state(current, self.ctx.clock.monotonic()) if current else MemberState.DEAD
        if current is not None and state is MemberState.READY:
            if not draining:
                namespace, name = split_key(key)
                await self.ctx.client.patch(res, name, {"metadata": {"labels": {self.drain: "true"}}}, namespace)
                HANDOVERS.labels(self.ring_name, "drain").inc()
                self.log.info("draining root for its new shard", root=f"{res.plural}/{key}", shard=current,
                              to=desired)
            return None  # its member acknowledges by removing both labels; that event brings it back
        if current is not None and state is MemberState.EXPIRED:
            return Result(requeue_after=1.0)  # fenced by the ring sync first
        previous = current or (meta(obj).get("annotations") or {}).get(PREVIOUS_ANNOTATION) or None
        await self._assign(res, obj, desired, previous)
        HANDOVERS.labels(self.ring_name, "dead" if current is not None else "assign").inc()
        return None

    async def _assign(self, res: Resource, root: Obj, member: str, previous: str | None) -> None:
        namespace = str(meta(root).get("namespace") or "")
        name = str(meta(root).get("name"))
        # Members whose label the dependents may carry: the previous owner, and the target of an assignment a
        # sharder began and did not finish (it died between relabelling dependents and the root).
        annotations = meta(root).get("annotations") or {}
        sources = {m for m in (previous, annotations.get(MOVING_ANNOTATION)) if m}
        levels = await self._subtree(root, namespace, sources | {member} if sources else set(),
                                     cached=previous is None)
        pending = [(kind, obj) for level in reversed(levels) for kind, obj in level
                   if (meta(obj).get("labels") or {}).get(self.label) != member]
        version = meta(root).get("resourceVersion")  # nobody moved it meanwhile
        if pending:
            mark = {"metadata": {"resourceVersion": version, "annotations": {MOVING_ANNOTATION: member}}}
            version = meta(await self.ctx.client.patch(res, name, mark, namespace)).get("resourceVersion")
        handover: dict[str, int] = {}
        for level in levels:  # those already labelled (by an unfinished assignment) count too
            for kind, obj in level:
                _note(handover, kind, meta(obj).get("resourceVersion"))
        relabel = {"metadata": {"labels": {self.label: member, self.drain: None}}}
        for kind, obj in pending:
            try:
                written = await self.ctx.client.patch(kind, str(meta(obj).get("name")), relabel, namespace)
            except ApiError as err:
                if err.status == 404:
                    continue  # deleted meanwhile
                raise
            _note(handover, kind, meta(written).get("resourceVersion"))
        patch: dict[str, Any] = {"metadata": {
            "resourceVersion": version,
            "labels": {self.label: member, self.drain: None},
            "annotations": {HANDOVER_ANNOTATION: format_handover(handover) if handover else None,
                            PREVIOUS_ANNOTATION: None, MOVING_ANNOTATION: None},
        }}
        await self.ctx.client.patch(res, name, patch, namespace)
        self.log.info("assigned root to shard", root=f"{res.plural}/{key_of(root)}", shard=member, previous=previous,
                      dependents=sum(len(level) for level in levels), relabelled=len(pending))

    async def _subtree(self, root: Obj, namespace: str, labelled: set[str],
                       cached: bool) -> list[list[tuple[Resource, Obj]]]:
        """The root's dependents level by level: those carrying one of the ``labelled`` members' labels, read fresh
        from the API server, and (``cached``: the root never had a member) those in this process's caches."""
        children: dict[str, dict[str, tuple[Resource, Obj]]] = {}  # owner uid -> uid -> dependent

        def add(kind: Resource, item: Obj) -> None:
            ref = controller_ref(item)
            if ref is not None:
                children.setdefault(str(ref.get("uid") or ""), {})[str(meta(item).get("uid") or "")] = (kind, item)

        if labelled:
            selector = f"{self.label} in ({','.join(sorted(labelled))})"
            for kind in DEPENDENT_KINDS:
                items, _ = await self.ctx.client.list_all(kind, namespace, metadata_only=True, label_selector=selector)
                for item in items:
                    add(kind, item)
        levels: list[list[tuple[Resource, Obj]]] = []
        frontier = [str(meta(root).get("uid") or "")]
        for _ in range(MAX_DEPTH):
            level: dict[str, tuple[Resource, Obj]] = {}
            for uid in frontier:
                if cached:
                    for kind in DEPENDENT_KINDS:
                        for obj in self.dependents[kind.plural].store.by_index(CONTROLLER_UID_INDEX, uid):
                            if meta(obj).get("namespace") == namespace:
                                level.setdefault(str(meta(obj).get("uid") or ""), (kind, obj))
                level.update(children.get(uid, {}))  # fresher than the caches
            if not level:
                break
            levels.append(list(level.values()))
            frontier = list(level)
        return levels


def _note(handover: dict[str, int], kind: Resource, rv: object) -> None:
    if isinstance(rv, str) and rv.isdigit():
        handover[kind.plural] = max(handover.get(kind.plural, 0), int(rv))
