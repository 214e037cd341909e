"""The graph builder: informer events in, graph changes and work for the delete/orphan workers out.

Guarantees (upstream ``graph_builder.go``):
- Every monitored resource has a shared informer: the full one if another controller already runs it, else a
  metadata-only one; its handler only queues a :class:`GraphEvent` on ``graph_changes`` (the
  ``garbage_collector_graph_changes`` queue). One processor applies the events in order
  (:meth:`GraphBuilder.process_graph_changes`), so it is the only writer of ``uid_to_node``; it applies up to
  ``GRAPH_CHANGES_PER_TURN`` of them between event-loop turns, so it keeps up with the informers under churn.
- An ownerReference to a uid not in the graph creates a *virtual* node (the owner's coordinates, in the
  dependent's namespace) and queues it on ``attempt_to_delete``, where the live API decides whether it exists.
- A dependent whose ownerReference disagrees with an observed owner (other namespace, other coordinates) is
  queued for a delete attempt; a namespace mismatch also records a Warning ``OwnerRefInvalidNamespace`` on
  the dependent.
- An object starting deletion with the ``orphan`` finalizer goes to ``attempt_to_orphan``; with
  ``foregroundDeletion`` it is marked deleting-dependents and it and its dependents go to ``attempt_to_delete``.
- A deleted owner's dependents are queued for a delete attempt and its identity is remembered as absent; an
  owner waiting for its dependents is re-queued when one goes or stops blocking it.
- :meth:`GraphBuilder.cached_view`: an object missing from its synced, active monitor's cache has had its delete
  event queued already (the store changes and the handlers run in one step).
- Monitors follow discovery: :meth:`sync_monitors` adds informers for new resources and drops removed ones
  (their events are ignored from then on); ignored resources (events) are never monitored.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from controller_manager.api.meta import meta
from controller_manager.api.resources import Resource
from controller_manager.runtime.controller import Result, TerminalError
from controller_manager.runtime.informers import Added, Deleted, SharedInformerFactory, Updated
from controller_manager.runtime.informers.events import Event
from controller_manager.runtime.informers.informer import SharedInformer
from controller_manager.runtime.workqueue import RateLimitingQueue

from .cache import gc_metadata
from .discovery import GVR
from .graph import (
    Node,
    ObjectReference,
    OwnerRef,
    alternate_owner_identity,
    is_blocking,
    owner_ref_matches,
    partition_dependents,
    references_diffs,
)
from .reference_cache import ReferenceCache

FOREGROUND = "foregroundDeletion"  # metav1.FinalizerDeleteDependents
ORPHAN = "orphan"  # metav1.FinalizerOrphanDependents
IGNORED_RESOURCES: frozenset[tuple[str, str]] = frozenset({("", "events"), ("events.k8s.io", "events")})
ABSENT_OWNER_CACHE_SIZE = 500
# Graph changes applied back to back before the processor gives the event loop a turn. Upstream's processor
# runs on its own goroutine; here a turn after every change would cap the graph at one change per loop turn
# (a few hundred a second in a busy process), and the graph would fall behind the informers under churn.
# 100 changes are a few milliseconds of work.
GRAPH_CHANGES_PER_TURN = 100

EventType = Literal["add", "update", "delete"]
CachedView = Literal["gone", "cached", "unknown"]


@dataclass(eq=False, slots=True)
class GraphEvent:
    """One change to apply to the graph; compared by identity, so the queue never merges two events."""

    type: EventType
    obj: Mapping[str, Any]
    api_version: str
    kind: str
    old: Mapping[str, Any] | None = None
    virtual: bool = False  # made by a worker that found the object gone, not seen by an informer

    def identity(self) -> ObjectReference:
        m = meta(self.obj)
        return ObjectReference(self.api_version, self.kind, str(m.get("name", "")), str(m.get("uid", "")),
                               str(m.get("namespace") or ""))


class Recorder(Protocol):
    def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str) -> None: ...


@dataclass
class Monitor:
    resource: Resource
    informer: SharedInformer
    active: bool = True


@dataclass
class GraphQueues:
    graph_changes: RateLimitingQueue[GraphEvent]
    attempt_to_delete: RateLimitingQueue[Node]
    attempt_to_orphan: RateLimitingQueue[Node]


def _finalizers(obj: Mapping[str, Any] | None) -> tuple[str, ...]:
    return tuple(meta(obj).get("finalizers") or ()) if obj is not None else ()


def being_deleted(obj: Mapping[str, Any]) -> bool:
    return meta(obj).get("deletionTimestamp") is not None


def has_finalizer(obj: Mapping[str, Any], finalizer: str) -> bool:
    return finalizer in _finalizers(obj)


def deletion_starts_with_finalizer(old: Mapping[str, Any] | None, new: Mapping[str, Any], finalizer: str) -> bool:
    """``new`` is being deleted with ``finalizer``, and ``old`` (if any) was not (both conditions)."""
    if not being_deleted(new) or not has_finalizer(new, finalizer):
        return False
    if old is None:
        return True
    return not being_deleted(old) or not has_finalizer(old, finalizer)


def owner_refs(obj: Mapping[str, Any]) -> tuple[OwnerRef, ...]:
    return tuple(meta(obj).get("ownerReferences") or ())


def _same_graph_facts(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """The update changes nothing the graph reads: same uid, ownerReferences, finalizers, deletionTimestamp.

    Upstream queues every update (graph_builder.go's UpdateFunc carries a note proposing to skip exactly these); a pod's
    status updates are most of a rollout's events, and each would cost a queue round trip here."""
    om, nm = meta(old), meta(new)
    return (om.get("uid") == nm.get("uid") and om.get("ownerReferences") == nm.get("ownerReferences")
            and om.get("finalizers") == nm.get("finalizers")
            and om.get("deletionTimestamp") == nm.get("deletionTimestamp"))


@dataclass
class GraphBuilder:
    queues: GraphQueues
    recorder: Recorder
    log: Any
    informers: SharedInformerFactory | None = None
    ignored_resources: frozenset[tuple[str, str]] = IGNORED_RESOURCES
    uid_to_node: dict[str, Node] = field(default_factory=dict)
    absent_owner_cache: ReferenceCache = field(default_factory=lambda: ReferenceCache(ABSENT_OWNER_CACHE_SIZE))
    monitors: dict[GVR, Monitor] = field(default_factory=dict)
    _applied_since_turn: int = field(default=0, init=False, repr=False)

    @property
    def graph_changes(self) -> RateLimitingQueue[GraphEvent]:
        return self.queues.graph_changes

    @property
    def attempt_to_delete(self) -> RateLimitingQueue[Node]:
        return self.queues.attempt_to_delete

    @property
    def attempt_to_orphan(self) -> RateLimitingQueue[Node]:
        return self.queues.attempt_to_orphan

    # --- monitors -----------------------------------------------------------------------------------

    def sync_monitors(self, resources: Mapping[GVR, Resource]) -> list[str]:
        """Monitor exactly ``resources`` (minus ignored ones); the errors of resources that could not be."""
        errors: list[str] = []
        current: dict[GVR, Monitor] = {}
        previous = dict(self.monitors)
        added = kept = 0
        for gvr, res in resources.items():
            if (res.group, res.plural) in self.ignored_resources:
                continue
            existing = previous.pop(gvr, None)
            if existing is not None:
                current[gvr] = existing
                kept += 1
                continue
            if not res.kind:
                errors.append(f"couldn't look up resource {'/'.join(gvr)}: no kind in discovery")
                continue
            try:
                current[gvr] = self._monitor_for(res)
            except Exception as err:  # a factory refusing the informer: keep going with the others
                errors.append(f"couldn't start monitor for resource {'/'.join(gvr)}: {err}")
                continue
            added += 1
        for monitor in previous.values():
            # The factory has no way to stop one informer; an inactive monitor's events are dropped instead.
            monitor.active = False
        self.monitors = current
        self.log.info("synced monitors", added=added, kept=kept, removed=len(previous))
        return errors

    def _monitor_for(self, res: Resource) -> Monitor:
        if self.informers is None:
            raise RuntimeError("no informer factory")
        # A full informer another controller runs (pods, ReplicaSets, Deployments, ...) is shared, as upstream's
        # ObjectOrMetadataInformerFactory hands the collector the typed informer: a second, metadata-only watch
        # of the same objects would double the API server's watch traffic and this process's decoding.
        informer = self.informers.existing(res)
        if informer is None:
            try:
                informer = self.informers.informer(res, metadata_only=True, transform=gc_metadata)
            except ValueError:
                # Another controller made this metadata informer with its own transform: share it as it is.
                informer = self.informers.informer(res, metadata_only=True)
        monitor = Monitor(res, informer)
        api_version, kind = res.api_version, res.kind
        changes = self.graph_changes

        def on_event(event: Event) -> None:
            if not monitor.active:
                return
            if isinstance(event, Added):
                changes.add(GraphEvent("add", event.obj, api_version, kind))
            elif isinstance(event, Updated):
                if event.old is event.new:
                    return  # a periodic resync: upstream registers the collector's handler without one
                if _same_graph_facts(event.old, event.new):
                    return  # as upstream's UpdateFunc note proposes: nothing the graph keeps changed
                changes.add(GraphEvent("update", event.new, api_version, kind, old=event.old))
            elif isinstance(event, Deleted):
                changes.add(GraphEvent("delete", event.obj, api_version, kind))

        informer.add_handler(on_event)
        return monitor

    def is_synced(self) -> bool:
        """True if there are monitors and every one has listed once."""
        return bool(self.monitors) and all(m.informer.has_synced for m in self.monitors.values())

    def is_resource_synced(self, gvr: GVR) -> bool:
        monitor = self.monitors.get(gvr)
        return monitor is not None and monitor.informer.has_synced

    def cached_view(self, res: Resource, identity: ObjectReference) -> CachedView:
        """What the monitor of ``res`` holds for ``identity``'s object.

        ``"gone"``: not cached. An informer updates its store and calls its handlers in one step, so an object
        missing from a synced, active monitor's cache has had its delete event queued on ``graph_changes``.
        ``"cached"``: cached with the same uid (it existed when the informer last heard). ``"unknown"``: no such
        monitor, not synced, or another object under the name (a re-list may report that as an update)."""
        monitor = self.monitors.get((res.group, res.version, res.plural))
        if monitor is None or not monitor.active or not monitor.informer.has_synced:
            return "unknown"
        key = f"{identity.namespace}/{identity.name}" if identity.namespace else identity.name
        cached = monitor.informer.store.get(key)
        if cached is None:
            return "gone"
        return "cached" if meta(cached).get("uid") == identity.uid else "unknown"

    def cached_metadata(self, res: Resource, namespace: str, name: str) -> Mapping[str, Any] | None:
        monitor = self.monitors.get((res.group, res.version, res.plural))
        if monitor is None:
            return None
        return monitor.informer.store.get(f"{namespace}/{name}" if namespace else name)

    # --- the processor ------------------------------------------------------------------------------

    async def apply(self, event: GraphEvent) -> Result | None:
        """The processor's sync (run on the shared runner): apply one event; a failure is logged, never retried.

        Every ``GRAPH_CHANGES_PER_TURN`` events it gives the event loop a turn, so a burst of thousands does not
        starve the workers and informers."""
        try:
            self.process_graph_changes(event)
        except Exception as err:
            raise TerminalError(f"graph change failed for uid {meta(event.obj).get('uid', '')}") from err
        self._applied_since_turn += 1
        if self._applied_since_turn >= GRAPH_CHANGES_PER_TURN:
            self._applied_since_turn = 0
            await asyncio.sleep(0)
        return None

    def enqueue_virtual_delete_event(self, ref: ObjectReference) -> None:
        self.graph_changes.add(GraphEvent("delete", ref.as_object(), ref.api_version, ref.kind, virtual=True))

    def process_graph_changes(self, event: GraphEvent) -> None:
        """Apply one event to the graph (synchronously: nothing else runs meanwhile)."""
        obj = event.obj
        uid = str(meta(obj).get("uid", ""))
        existing = self.uid_to_node.get(uid)
        if existing is not None and not event.virtual and not existing.is_observed():
            existing = self._observe_virtual(existing, event)
        if event.type in ("add", "update") and existing is None:
            node = Node(event.identity(), owner_refs(obj), being_deleted=being_deleted(obj),
                        deleting_dependents=being_deleted(obj) and has_finalizer(obj, FOREGROUND))
            self._insert_node(node)
            # An add may already carry the deletion (created and deleted while the watch was down).
            self._process_transitions(event.old, obj, node)
        elif event.type in ("add", "update") and existing is not None:
            self._update_node(existing, event)
        elif event.type == "delete":
            if existing is None:
                self.log.debug("item doesn't exist in the graph, this shouldn't happen", uid=uid)
                return
            self._delete_node(existing, event)

    def _observe_virtual(self, existing: Node, event: GraphEvent) -> Node:
        """An informer saw an object the graph only knew as a virtual owner: fix its identity."""
        observed = event.identity()
        if observed != existing.identity:
            # Dependents that named this owner with other coordinates may be invalid: let the workers check.
            _, suspicious = partition_dependents(existing.get_dependents(), observed)
            for dep in suspicious:
                if observed.namespace and dep.identity.namespace != observed.namespace:
                    self.log.info("item references an owner but does not match namespaces",
                                  item=str(dep.identity), owner=str(observed))
                    self.report_invalid_namespace_owner_ref(dep, observed.uid)
                self.attempt_to_delete.add(dep)
            self.log.info("replacing virtual item with observed item", virtual=str(existing.identity),
                          observed=str(observed))
            existing = existing.clone()
            existing.identity = observed
            self.uid_to_node[observed.uid] = existing
        existing.mark_observed()
        return existing

    def _update_node(self, existing: Node, event: GraphEvent) -> None:
        obj = event.obj
        if not event.virtual and (existing.identity.api_version != event.api_version
                                  or existing.identity.kind != event.kind):
            old_node = existing
            existing = existing.clone()
            i = existing.identity
            existing.identity = ObjectReference(event.api_version, event.kind, i.name, i.uid, i.namespace)
            self.uid_to_node[i.uid] = existing
            for owner in existing.owners:
                owner_node = self.uid_to_node.get(str(owner.get("uid", "")))
                if owner_node is not None:
                    owner_node.replace_dependent_if_exists(old_node, existing)
        new_owners = owner_refs(obj)
        added, removed, changed = references_diffs(existing.owners, new_owners)
        if added or removed or changed:
            self._add_unblocked_owners_to_delete_queue(removed, changed)
            existing.set_owners(new_owners)
            self._add_dependent_to_owners(existing, added)
            self._remove_dependent_from_owners(existing, removed)
        if being_deleted(obj):
            existing.mark_being_deleted()
        self._process_transitions(event.old, obj, existing)

    def _delete_node(self, existing: Node, event: GraphEvent) -> None:
        remove = True
        if event.virtual:
            deleted = event.identity()
            if existing.virtual:
                matching, nonmatching = partition_dependents(existing.get_dependents(), deleted)
                if nonmatching:
                    # Some dependents name this uid differently: the node stays for them.
                    remove = False
                    if matching:
                        self.absent_owner_cache.add(deleted)
                        for dep in matching:
                            self.attempt_to_delete.add(dep)
                    if existing.identity == deleted:
                        replacement = alternate_owner_identity(nonmatching, deleted)
                        if replacement is not None:
                            node = existing.clone()
                            node.identity = replacement
                            self.uid_to_node[replacement.uid] = node
                            self.attempt_to_delete.add_rate_limited(node)
            elif existing.identity != deleted:
                # An observed object is not removed on a virtual delete of other coordinates.
                remove = False
                matching, _ = partition_dependents(existing.get_dependents(), deleted)
                if matching:
                    self.absent_owner_cache.add(deleted)
                    for dep in matching:
                        self.attempt_to_delete.add(dep)
        if not remove:
            return
        self._remove_node(existing)
        dependents = existing.get_dependents()
        if dependents:
            self.absent_owner_cache.add(event.identity())
        for dep in dependents:
            self.attempt_to_delete.add(dep)
        for owner in existing.owners:
            owner_node = self.uid_to_node.get(str(owner.get("uid", "")))
            if owner_node is not None and owner_node.deleting_dependents:
                # Let the owner check whether this was its last blocking dependent.
                self.attempt_to_delete.add(owner_node)

    # --- graph edits --------------------------------------------------------------------------------

    def _insert_node(self, node: Node) -> None:
        self.uid_to_node[node.identity.uid] = node
        self._add_dependent_to_owners(node, node.owners)

    def _remove_node(self, node: Node) -> None:
        self.uid_to_node.pop(node.identity.uid, None)
        self._remove_dependent_from_owners(node, node.owners)

    def _add_dependent_to_owners(self, node: Node, owners: Iterable[OwnerRef]) -> None:
        potentially_invalid = False
        for owner in owners:
            uid = str(owner.get("uid", ""))
            owner_node = self.uid_to_node.get(uid)
            if owner_node is None:
                owner_node = Node(ObjectReference.from_owner_ref(owner, node.identity.namespace), virtual=True)
                self.log.debug("add virtual item", identity=str(owner_node.identity))
                self.uid_to_node[uid] = owner_node
                owner_node.add_dependent(node)
                # The workers ask the API whether this owner exists; a virtual delete removes it if not.
                self.attempt_to_delete.add(owner_node)
                continue
            owner_node.add_dependent(node)
            if potentially_invalid:
                continue
            owner_ns = owner_node.identity.namespace
            if owner_ns and owner_ns != node.identity.namespace:
                if owner_node.is_observed():
                    self.log.info("item references an owner but does not match namespaces",
                                  item=str(node.identity), owner=str(owner_node.identity))
                    self.report_invalid_namespace_owner_ref(node, uid)
                potentially_invalid = True
            elif not owner_ref_matches(owner, owner_node.identity):
                if owner_node.is_observed():
                    self.log.info("item references an owner with coordinates that do not match the observed "
                                  "identity", item=str(node.identity), owner=str(owner_node.identity))
                potentially_invalid = True
            elif not owner_ns and owner_ns != node.identity.namespace and not owner_node.is_observed():
                # A virtual cluster-scoped owner named from a namespace may really be a namespaced kind
                # referenced by a cluster-scoped child (kubernetes#98040): verify the child.
                potentially_invalid = True
        if potentially_invalid:
            self.attempt_to_delete.add(node)

    def _remove_dependent_from_owners(self, node: Node, owners: Iterable[OwnerRef]) -> None:
        for owner in owners:
            owner_node = self.uid_to_node.get(str(owner.get("uid", "")))
            if owner_node is not None:
                owner_node.delete_dependent(node)

    def _add_unblocked_owners_to_delete_queue(self, removed: Iterable[OwnerRef],
                                              changed: Iterable[tuple[OwnerRef, OwnerRef]]) -> None:
        """An owner waiting on this dependent is re-checked when the reference goes or stops blocking."""
        for ref in removed:
            if is_blocking(ref):
                node = self.uid_to_node.get(str(ref.get("uid", "")))
                if node is not None:
                    self.attempt_to_delete.add(node)
        for old, new in changed:
            if is_blocking(old) and not is_blocking(new):
                node = self.uid_to_node.get(str(new.get("uid", "")))
                if node is not None:
                    self.attempt_to_delete.add(node)

    def _process_transitions(self, old: Mapping[str, Any] | None, new: Mapping[str, Any], node: Node) -> None:
        if deletion_starts_with_finalizer(old, new, ORPHAN):
            self.log.debug("add item to attemptToOrphan", item=str(node.identity))
            self.attempt_to_orphan.add(node)
            return
        if deletion_starts_with_finalizer(old, new, FOREGROUND):
            self.log.info("add item to attemptToDelete, because it's waiting for its dependents to be deleted",
                          item=str(node.identity))
            # A node first made virtual never had the flag set: always set it here.
            node.mark_deleting_dependents()
            for dep in node.get_dependents():
                self.attempt_to_delete.add(dep)
            self.attempt_to_delete.add(node)

    def report_invalid_namespace_owner_ref(self, node: Node, invalid_uid: str) -> None:
        ref = next((r for r in node.owners if str(r.get("uid", "")) == invalid_uid), None)
        if ref is None:
            return
        invalid = ObjectReference.from_owner_ref(ref, node.identity.namespace)
        self.recorder.event(node.identity.as_object(), "Warning", "OwnerRefInvalidNamespace",
                            f'ownerRef {invalid} does not exist in namespace "{node.identity.namespace}"')

    def virtual_count(self) -> int:
        return sum(1 for n in self.uid_to_node.values() if n.virtual)
