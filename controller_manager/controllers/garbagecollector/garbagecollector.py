"""The garbage collector (``garbage-collector-controller``): deletes what no live owner owns any more.

Guarantees (upstream ``garbagecollector.go``):
- Discovery every 30 s (the controller's own queue: one key, requeued): every preferred resource that can be
  listed, watched and deleted gets a metadata-only monitor (events excepted), so new kinds are covered.
- The graph builder turns informer events into the graph (see ``graph_builder``); ``--concurrent-gc-syncs``
  workers each serve the ``garbage_collector_attempt_to_delete`` and ``garbage_collector_attempt_to_orphan``
  queues, starting once every monitor has synced or after 30 s, whichever comes first.
- Nothing is deleted on the cache's word alone: before a delete, the object is re-read from the API (a 404 or
  another uid removes it from the graph instead) and every owner is looked up live by name, both as metadata
  only (``as=PartialObjectMetadata``, upstream's metadata client; concurrent look-ups of one owner share a
  request: ``Operations.read_owner``); an owner is absent only on 404 or a uid mismatch
  (then remembered in the absent-owner cache). The delete carries the object's uid and resourceVersion as
  preconditions. Two reads upstream makes are skipped, neither before a write: an observed object its
  monitor's cache no longer holds, whose delete event is already queued for the graph (upstream reads it, gets
  404 and queues a virtual delete event repeating that one; it is forgotten as after that 404); and an owner
  waiting for dependents that its cache still holds while some still block it (upstream reads it, then only
  re-queues them).
- Background: an object whose owners are all absent is deleted, honouring an orphan or foreground finalizer
  it already has, else in the background. Owners that exist but are being deleted in the foreground make it
  go in the foreground. With a live owner besides absent ones, only the dangling references are removed.
- Foreground: an owner with ``foregroundDeletion`` and a deletionTimestamp keeps its finalizer until no
  dependent blocks it (``blockOwnerDeletion``); its dependents are deleted meanwhile, then the finalizer is
  removed. Orphan: the owner's reference is removed from every dependent, then its ``orphan`` finalizer.
- A restart loses nothing: the graph is rebuilt from lists and every decision is re-verified live.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any, ClassVar

from controller_manager.api.meta import meta
from controller_manager.client.errors import NotFound
from controller_manager.controllerutil.controller_ref import delete_owner_ref_patch
from controller_manager.runtime.controller import RATE_LIMITED, Controller, ControllerContext, Result
from controller_manager.runtime.workqueue import RateLimitingQueue, default_controller_rate_limiter

from . import metrics
from .discovery import GVR, RestMapper, discover, get_deletable_resources, list_resources
from .errors import EnqueuedVirtualDeleteEvent, NamespacedOwnerOfClusterScopedObject, RestMappingError
from .graph import Node, ObjectReference, OwnerRef
from .graph_builder import (
    FOREGROUND,
    ORPHAN,
    CachedView,
    GraphBuilder,
    GraphEvent,
    GraphQueues,
    has_finalizer,
)
from .operations import Operations, unblock_owner_refs_strategic_patch

SYNC_PERIOD = 30.0  # kube-controller-manager's garbage collector sync period (and initial sync timeout)
SYNCED_POLL_PERIOD = 0.1  # client-go's WaitForCacheSync poll


class Action(Enum):
    FORGET = "forget"
    REQUEUE = "requeue"


def _result(action: Action) -> Result | None:
    """A worker's verdict as the runner's: forget, or requeue rate-limited (backoff growing, nothing logged)."""
    return None if action is Action.FORGET else RATE_LIMITED


def _describe_event(event: GraphEvent) -> str:
    return f"{event.type} {event.identity()}"


def _describe(node: Node) -> str:
    return str(node.identity)


class GarbageCollector(Controller):
    name: ClassVar[str] = "garbage-collector-controller"
    alias: ClassVar[str] = "garbagecollector"
    workers_option: ClassVar[str | None] = None  # --concurrent-gc-syncs sizes the delete/orphan workers instead
    default_workers: ClassVar[int] = 1

    RESYNC_KEY: ClassVar[str] = "resync-monitors"

    def __init__(self, ctx: ControllerContext, *, sync_period: float = SYNC_PERIOD) -> None:
        super().__init__(ctx)
        opts = ctx.options
        self.enabled = bool(opts.get("enable_garbage_collector", True))
        self.gc_workers = int(opts.get("concurrent_gc_syncs", 20))
        self.sync_period = sync_period
        clock = ctx.clock

        def queue(name: str) -> RateLimitingQueue[Any]:
            return RateLimitingQueue(name, rate_limiter=default_controller_rate_limiter(clock), clock=clock)

        self.recorder = ctx.events.recorder(self.name)
        self.builder = GraphBuilder(
            GraphQueues(queue("garbage_collector_graph_changes"), queue("garbage_collector_attempt_to_delete"),
                        queue("garbage_collector_attempt_to_orphan")),
            self.recorder, self.log, ctx.informers)
        self.mapper = RestMapper()
        self.ops = Operations(ctx.client, self.mapper, self.builder, clock, self.log)
        self._monitored: dict[GVR, Any] = {}  # the resources of the last successful monitor resync
        self._workers_started = False
        graph = self.builder.uid_to_node
        metrics.track_graph(lambda: float(len(graph)), lambda: float(self.builder.virtual_count()))
        if self.enabled:
            self.queue.add(self.RESYNC_KEY)

    def workers(self) -> int:
        return 1 if self.enabled and self.gc_workers > 0 else 0

    def is_synced(self) -> bool:
        """Every monitor has listed once (and there is at least one)."""
        return self.builder.is_synced()

    @property
    def workers_started(self) -> bool:
        return self._workers_started

    # --- discovery: the controller's own queue ------------------------------------------------------

    async def sync(self, key: str) -> Result | None:
        await self.resync_monitors()
        return Result(requeue_after=self.sync_period)

    async def resync_monitors(self) -> None:
        """One pass of upstream's ``Sync``: discover, and re-monitor if the deletable resources changed."""
        found = await discover(self.ctx.client)
        new = get_deletable_resources(found.resource_lists)
        if not new:
            self.log.info("no resources reported by discovery, skipping garbage collector sync",
                          error=str(found.error) if found.error else None)
            metrics.RESOURCES_SYNC_ERROR.inc()
            return
        if found.failed:
            self.log.info("failed to discover some groups", groups=sorted("/".join(gv) for gv in found.failed))
            # Keep watching what a failed group served, as long as its monitor had synced.
            for gvr, res in self._monitored.items():
                if (gvr[0], gvr[1]) in found.failed and self.builder.is_resource_synced(gvr):
                    new[gvr] = res
        served = list_resources(found.resource_lists)
        served += [r for r in self._monitored.values() if (r.group, r.version) in found.failed]
        self.mapper.reset(served)
        if new.keys() == self._monitored.keys():
            return
        added = sorted("/".join(g) for g in new.keys() - self._monitored.keys())
        removed = sorted("/".join(g) for g in self._monitored.keys() - new.keys())
        self.log.info("syncing garbage collector with updated resources from discovery", added=added,
                      removed=removed)
        errors = self.builder.sync_monitors(new)
        if errors:
            self.log.error("failed to sync resource monitors", errors=errors)
            metrics.RESOURCES_SYNC_ERROR.inc()
            return
        if await self._wait_synced(self.sync_period):
            self.log.info("synced garbage collector")
        elif self.queue.shutting_down:
            self.log.info("stopping before the dependency graph builder synced")
        else:
            self.log.error("timed out waiting for dependency graph builder sync during GC sync")
            metrics.RESOURCES_SYNC_ERROR.inc()
        self._monitored = new

    async def _wait_synced(self, timeout: float) -> bool:
        clock = self.ctx.clock
        deadline = clock.monotonic() + timeout
        while not self.builder.is_synced():
            # Give up at once when the manager is stopping (our queue shut down), as upstream's wait ends
            # with its context: a shutdown must not sit out a whole sync period here.
            if clock.monotonic() >= deadline or self.queue.shutting_down:
                return False
            await clock.sleep(SYNCED_POLL_PERIOD)
        return True

    # --- the graph builder and the workers ----------------------------------------------------------

    async def run_background(self) -> None:
        if not self.enabled:
            return
        queues = self.builder.queues
        try:
            async with asyncio.TaskGroup() as tg:
                # One processor applies graph changes in order, in runs of up to GRAPH_CHANGES_PER_TURN between
                # loop turns (GraphBuilder.apply), so a burst of thousands does not starve the workers and
                # informers, and the graph keeps up with them under churn.
                tg.create_task(self.run_queue(queues.graph_changes, self.builder.apply, timed=False,
                                              describe=_describe_event),
                               name=f"{self.name}/graph-builder")
                if await self._wait_synced(self.sync_period):
                    self.log.info("Garbage collector: all resource monitors have synced")
                else:
                    self.log.info("Garbage collector: not all resource monitors could be synced, proceeding anyways")
                self.log.info("Proceeding to collect garbage", workers=self.gc_workers)
                tg.create_task(self.run_queue(queues.attempt_to_delete, self._attempt_to_delete,
                                              workers=self.gc_workers, describe=_describe),
                               name=f"{self.name}/attempt-to-delete")
                tg.create_task(self.run_queue(queues.attempt_to_orphan, self._attempt_to_orphan,
                                              workers=self.gc_workers, describe=_describe),
                               name=f"{self.name}/attempt-to-orphan")
                self._workers_started = True
        finally:
            self._workers_started = False
            queues.graph_changes.shut_down()
            queues.attempt_to_delete.shut_down()
            queues.attempt_to_orphan.shut_down()

    async def process_attempt_to_delete_worker(self) -> bool:
        """Take one node off ``attempt_to_delete`` and handle it; False once the queue is shut down."""
        return await self.process_next(self.builder.attempt_to_delete, self._attempt_to_delete, describe=_describe)

    async def process_attempt_to_orphan_worker(self) -> bool:
        """Take one owner off ``attempt_to_orphan`` and orphan its dependents; False once shut down."""
        return await self.process_next(self.builder.attempt_to_orphan, self._attempt_to_orphan, describe=_describe)

    async def _attempt_to_delete(self, n: Node) -> Result | None:
        return _result(await self.attempt_to_delete_worker(n))

    async def _attempt_to_orphan(self, owner: Node) -> Result | None:
        return _result(await self.attempt_to_orphan_worker(owner))

    async def attempt_to_delete_worker(self, n: Node) -> Action:
        graph = self.builder.uid_to_node
        if not n.is_observed():
            current = graph.get(n.identity.uid)
            if current is None:
                self.log.debug("item no longer in the graph, skipping attemptToDeleteItem", item=str(n.identity))
                return Action.FORGET
            if current.is_observed():
                self.log.debug("item no longer virtual in the graph, skipping attemptToDeleteItem on virtual node",
                               item=str(n.identity))
                return Action.FORGET
        current = graph.get(n.identity.uid)
        if current is not None and (n.identity.api_version, n.identity.kind) != (
                current.identity.api_version, current.identity.kind):
            # The queued node is outdated: use the kind the graph knows now.
            i = n.identity
            n = n.clone()
            n.identity = ObjectReference(current.identity.api_version, current.identity.kind, i.name, i.uid,
                                         i.namespace)
        try:
            await self.attempt_to_delete_item(n)
        except (EnqueuedVirtualDeleteEvent, NamespacedOwnerOfClusterScopedObject):
            return Action.FORGET
        except RestMappingError as err:
            self.log.error("error syncing item", item=str(n.identity), error=err.message())
            return Action.REQUEUE
        except Exception as err:
            self.log.error("error syncing item", item=str(n.identity), error=str(err) or type(err).__name__)
            return Action.REQUEUE
        if not n.is_observed():
            # Keep polling until an informer sees it, or a virtual node for an object created and deleted
            # while the watch was down would stay in the graph forever (kubernetes#56121).
            self.log.debug("item hasn't been observed via informer yet", item=str(n.identity))
            return Action.REQUEUE
        return Action.FORGET

    async def attempt_to_delete_item(self, item: Node) -> None:
        """Delete ``item`` if the API shows it is still that object and none of its owners exists."""
        self.log.debug("Processing item", item=str(item.identity), virtual=not item.is_observed())
        if item.being_deleted and not item.deleting_dependents:
            # A one-way trip: wait for the final delete, then its dependents get processed.
            return
        view = self._cached_view(item)
        if view == "gone":
            # Gone, and its delete event is already queued for the graph (which then re-queues its owners and
            # dependents). Upstream reads it live here, gets a 404 and queues a virtual delete event that
            # repeats the one queued; with Jobs' pods deleted in bursts those reads were most of the collector's
            # requests, and the repeated events most of the graph's backlog.
            self.log.debug("item deletion already observed, waiting for the graph to remove it",
                           item=str(item.identity))
            return
        if view == "cached" and item.deleting_dependents and item.blocking_dependents():
            # An owner still waiting for dependents (re-queued as each one goes): all upstream does after its
            # live read is re-queue them, so the read is skipped. Once none blocks, it is read live as upstream
            # does before removing the finalizer; had it gone meanwhile, its dependents find that out live.
            await self.process_deleting_dependents_item(item)
            return
        try:
            latest = await self.ops.get_object(item.identity)
        except NotFound:
            self.builder.enqueue_virtual_delete_event(item.identity)
            raise EnqueuedVirtualDeleteEvent() from None
        m = meta(latest)
        if m.get("uid") != item.identity.uid:
            self.log.debug("UID doesn't match, item not found, generating a virtual delete event",
                           item=str(item.identity))
            self.builder.enqueue_virtual_delete_event(item.identity)
            raise EnqueuedVirtualDeleteEvent()
        if item.deleting_dependents:
            await self.process_deleting_dependents_item(item)
            return
        owners: list[OwnerRef] = list(m.get("ownerReferences") or ())
        if not owners:
            self.log.debug("item doesn't have an owner, continue on next item", item=str(item.identity))
            return
        solid, dangling, waiting = await self.classify_references(item, owners)
        rv = str(m.get("resourceVersion") or "")
        if solid:
            if not dangling and not waiting:
                return
            # References to owners waiting for their dependents must go too, or they would wait forever.
            uids = [str(r.get("uid", "")) for r in (*dangling, *waiting)]
            self.log.info("remove dangling references and waiting references for item", item=str(item.identity),
                          references=uids)
            await self.ops.patch(item, delete_owner_ref_patch(item.identity.uid, uids),
                                 lambda n: self.ops.delete_owner_ref_merge_patch(n, uids))
            return
        if waiting and item.dependents_length():
            for dep in item.get_dependents():
                if dep.deleting_dependents:
                    # Owner and dependent both wait on each other: stop blocking, to break a possible cycle.
                    self.log.info("processing item, some of its owners and its dependent have "
                                  "FinalizerDeletingDependents, to prevent potential cycle, its ownerReferences "
                                  "are going to be modified to be non-blocking, then the item is going to be "
                                  "deleted with Foreground", item=str(item.identity), dependent=str(dep.identity))
                    await self.ops.patch(item, unblock_owner_refs_strategic_patch(item),
                                         self.ops.unblock_owner_refs_merge_patch)
                    break
            await self._delete(item, rv, owners, "Foreground")
            return
        if has_finalizer(latest, ORPHAN):
            policy = "Orphan"
        elif has_finalizer(latest, FOREGROUND):
            policy = "Foreground"
        else:
            policy = "Background"
        await self._delete(item, rv, owners, policy)

    def _cached_view(self, item: Node) -> CachedView:
        """What the informer of an observed item's kind holds for it ("unknown" for a virtual item)."""
        if not item.is_observed():
            return "unknown"
        res = self.mapper.resource_for(item.identity.api_version, item.identity.kind)
        return "unknown" if res is None else self.builder.cached_view(res, item.identity)

    async def _delete(self, item: Node, resource_version: str, owners: Sequence[OwnerRef], policy: str) -> None:
        self.log.info("Deleting item", item=str(item.identity), propagation_policy=policy)
        try:
            await self.ops.delete_object(item.identity, resource_version, owners, policy)
        except NotFound:
            self.builder.enqueue_virtual_delete_event(item.identity)
            raise EnqueuedVirtualDeleteEvent() from None

    async def classify_references(self, item: Node, refs: Sequence[OwnerRef]
                                  ) -> tuple[list[OwnerRef], list[OwnerRef], list[OwnerRef]]:
        """(solid, dangling, waiting for dependents' deletion), each owner looked up live."""
        solid: list[OwnerRef] = []
        dangling: list[OwnerRef] = []
        waiting: list[OwnerRef] = []
        for ref in refs:
            is_dangling, owner = await self.is_dangling(ref, item)
            if is_dangling:
                dangling.append(ref)
            elif owner is not None and meta(owner).get("deletionTimestamp") is not None \
                    and has_finalizer(owner, FOREGROUND):
                waiting.append(ref)
            else:
                solid.append(ref)
        return solid, dangling, waiting

    async def is_dangling(self, ref: OwnerRef, item: Node) -> tuple[bool, Mapping[str, Any] | None]:
        """Whether ``ref`` names no existing object (the owner as read live when it does exist)."""
        key = ObjectReference.from_owner_ref(ref)
        if self.builder.absent_owner_cache.has(key):
            return True, None
        key = key.with_namespace(item.identity.namespace)
        if self.builder.absent_owner_cache.has(key):
            return True, None
        res = self.ops.api_resource(key.api_version, key.kind)
        if not res.namespaced:
            key = key.with_namespace("")
        if not item.identity.namespace and res.namespaced:
            # A cluster-scoped object cannot be owned by a namespaced one; retrying would not change that.
            self.log.info("item is cluster-scoped, but refers to a namespaced owner", item=str(item.identity),
                          owner=str(key))
            raise NamespacedOwnerOfClusterScopedObject()
        try:
            owner = await self.ops.read_owner(res, key.name, item.identity.namespace if res.namespaced else None)
        except NotFound:
            self.builder.absent_owner_cache.add(key)
            return True, None
        if meta(owner).get("uid") != key.uid:
            self.builder.absent_owner_cache.add(key)
            return True, None
        return False, owner

    async def process_deleting_dependents_item(self, item: Node) -> None:
        blocking = item.blocking_dependents()
        if not blocking:
            self.log.info("remove DeleteDependents finalizer for item", item=str(item.identity))
            await self.ops.remove_finalizer(item, FOREGROUND)
            return
        for dep in blocking:
            if not dep.deleting_dependents:
                self.builder.attempt_to_delete.add(dep)

    async def orphan_dependents(self, owner: ObjectReference, dependents: Sequence[Node]) -> None:
        """Remove ``owner``'s reference from every dependent (concurrently); one error naming every failure."""

        async def orphan(dep: Node) -> str | None:
            try:
                await self.ops.patch(dep, delete_owner_ref_patch(dep.identity.uid, [owner.uid]),
                                     lambda n: self.ops.delete_owner_ref_merge_patch(n, [owner.uid]))
            except NotFound:
                return None  # gone: nothing left to orphan
            except Exception as err:
                return f"orphaning {dep.identity} failed, {err}"
            return None

        results = await asyncio.gather(*(orphan(dep) for dep in dependents))
        failures = [r for r in results if r is not None]
        if failures:
            joined = failures[0] if len(failures) == 1 else "[" + ", ".join(failures) + "]"
            raise RuntimeError(f"failed to orphan dependents of owner {owner}, got errors: {joined}")
        self.log.debug("successfully updated all dependents", owner=str(owner))

    async def attempt_to_orphan_worker(self, owner: Node) -> Action:
        try:
            await self.orphan_dependents(owner.identity, owner.get_dependents())
        except Exception as err:
            self.log.error("orphanDependents failed", owner=str(owner.identity), error=str(err))
            return Action.REQUEUE
        try:
            await self.ops.remove_finalizer(owner, ORPHAN)
        except Exception as err:
            self.log.error("removeOrphanFinalizer failed", owner=str(owner.identity), error=str(err))
            return Action.REQUEUE
        return Action.FORGET

    def graph_has_uid(self, uid: str) -> bool:
        return uid in self.builder.uid_to_node
