"""The owner-aware event handler: events on owned objects (pods, ReplicaSets, revisions) wake their controllers.

What upstream's workload controllers each write as ``addPod``/``updatePod``/``deletePod`` (and controller-runtime
calls ``EnqueueRequestForOwner``), written once. Build one per owned kind and register :meth:`OwnerHandler.on_event`
on that kind's informer::

    self.pods = OwnerHandler(self.rs_informer.store, REPLICASETS, self.queue, log=self.log,
                             created=lambda rs, pod: self.expectations.creation_observed(key_of(rs)))
    self.pod_informer.add_handler(self.pods.on_event)

Guarantees (``owner`` below is the cached object of ``owner_resource`` that the object's controller reference
names, found only while it still has that UID; an object without a controller reference is an orphan):
- Added: an object already being deleted is handled as deleted (not final): after a restart it is no creation
  anyone waits for. An owned one calls ``created(owner, obj)`` then wakes its owner (unless
  ``wake_on_owned_add`` is False); with an owner not in the cache, nothing happens. An orphan calls
  ``orphan(obj)`` then wakes every owner of its namespace whose selector matches its labels (an empty or invalid
  selector matches nothing; more than one is logged as the user error it is).
- Updated: a periodic resync (same resourceVersion) does nothing. ``deletion_start`` says what an update that
  brings a deletionTimestamp means: ``"deleted"``: handled as deleted (not final), and nothing more;
  ``"deleted_old_too"``: the same, and the old object as deleted too when its labels changed (its old owner may
  differ); ``"ignore"``: an update like any other. Otherwise, when the controller reference changed, the old
  owner is told (``updated(previous, old, cur)``) and woken; the current owner, if any, is told and woken and,
  when ``ready_requeue_skew`` is set and the object just became ready, woken again after its owner's
  ``spec.minReadySeconds`` plus that skew (nothing else happens when a pod turns available). An orphan calls
  ``orphan(cur)`` and, when its labels or controller reference changed, wakes every matching owner.
- Deleted (``final=True``; tombstones included, whose object is the last state the cache knew): with an owner,
  ``deleted(owner, obj, final)`` then the owner is woken unless the hook returned False; without one,
  ``deleted(None, obj, final)`` only (nobody waits for an orphan to go). A tombstone's object may be stale:
  if its labels changed meanwhile, a new owner waits for its next resync, as upstream.
- Keys go to ``enqueue`` (default: the queue's ``add``); handlers are synchronous and never raise on odd objects.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, Protocol

from controller_manager.api.meta import controller_ref, is_being_deleted, key_of, meta
from controller_manager.api.pods import is_pod_ready
from controller_manager.api.resources import Resource
from controller_manager.api.selectors import InvalidSelector, Selector, from_label_selector
from controller_manager.controllerutil.controller_ref import resolve_controller_ref
from controller_manager.controllerutil.selector_cache import SelectorCache
from controller_manager.runtime.informers import NAMESPACE_INDEX, Added, Deleted, Event, Updated
from controller_manager.runtime.workqueue import DelayingQueue

__all__ = ["DeletionStart", "OwnerHandler", "OwnerStore"]

Obj = Mapping[str, Any]
DeletionStart = Literal["deleted", "deleted_old_too", "ignore"]


class OwnerStore(Protocol):
    """What the handler reads of the owners' informer store."""

    def get(self, key: str) -> Obj | None: ...

    def by_index(self, index: str, value: str) -> list[Any]: ...


def _parse(owner: Obj) -> Selector | None:
    try:
        return from_label_selector((owner.get("spec") or {}).get("selector"))
    except (InvalidSelector, TypeError, ValueError, AttributeError):
        return None


def _labels(obj: Obj) -> Any:
    return meta(obj).get("labels") or {}


class OwnerHandler:
    """Maps events on one owned kind to the keys of their controllers (see the module docstring)."""

    def __init__(self, owners: OwnerStore, owner_resource: Resource, queue: DelayingQueue[str], *, log: Any,
                 enqueue: Callable[[str], None] | None = None,
                 selectors: SelectorCache | None = None,
                 deletion_start: DeletionStart = "deleted",
                 wake_on_owned_add: bool = True,
                 ready_requeue_skew: float | None = None,
                 created: Callable[[Obj, Obj], None] | None = None,
                 updated: Callable[[Obj, Obj, Obj], None] | None = None,
                 deleted: Callable[[Obj | None, Obj, bool], bool | None] | None = None,
                 orphan: Callable[[Obj], None] | None = None) -> None:
        self._owners = owners
        self._resource = owner_resource
        self._queue = queue
        self._enqueue = enqueue or queue.add
        self._log = log
        self._selector: Callable[[Obj], Selector | None] = selectors.get if selectors is not None else _parse
        self._deletion_start = deletion_start
        self._wake_on_owned_add = wake_on_owned_add
        self._ready_skew = ready_requeue_skew
        self._created = created
        self._updated = updated
        self._deleted = deleted
        self._orphan = orphan

    # --- lookups ------------------------------------------------------------------------------------------

    def resolve(self, obj: Obj, ref: Mapping[str, Any] | None = None) -> Obj | None:
        """The cached owner ``ref`` (default: ``obj``'s controller reference) names, if it still has that UID."""
        ref = controller_ref(obj) if ref is None else ref
        if ref is None:
            return None
        return resolve_controller_ref(self._owners.get, self._resource, meta(obj).get("namespace"), ref)

    def matching(self, obj: Obj) -> list[Obj]:
        """Owners of ``obj``'s namespace whose non-empty, valid selector matches its labels (``GetPod<Owner>s``)."""
        labels = meta(obj).get("labels")
        if not labels or not isinstance(labels, Mapping):
            return []
        found: list[Obj] = []
        for owner in self._owners.by_index(NAMESPACE_INDEX, str(meta(obj).get("namespace") or "")):
            selector = self._selector(owner)
            if selector is None or selector.nothing or selector.is_empty() or not selector.matches(labels):
                continue
            found.append(owner)
        if len(found) > 1:
            # Controller references keep this safe, but overlapping selectors are a user error.
            self._log.warning(f"user error: more than one {self._resource.kind} selects the object's labels",
                              object=key_of(obj), labels=dict(labels), owners=[key_of(o) for o in found])
        return found

    # --- events -------------------------------------------------------------------------------------------

    def on_event(self, event: Event) -> None:
        """The informer handler: dispatch to :meth:`added`, :meth:`updated` or :meth:`deleted`."""
        if isinstance(event, Added):
            self.added(event.obj)
        elif isinstance(event, Updated):
            self.updated(event.old, event.new)
        elif isinstance(event, Deleted):
            self.deleted(event.obj)

    def added(self, obj: Obj) -> None:
        if is_being_deleted(obj):
            self.deleted(obj, final=False)
            return
        ref = controller_ref(obj)
        if ref is not None:
            owner = self.resolve(obj, ref)
            if owner is None:
                return
            if self._created is not None:
                self._created(owner, obj)
            if self._wake_on_owned_add:
                self._enqueue(key_of(owner))
            return
        if self._orphan is not None:
            self._orphan(obj)
        for owner in self.matching(obj):
            self._enqueue(key_of(owner))

    def updated(self, old: Obj, cur: Obj) -> None:
        if meta(cur).get("resourceVersion") == meta(old).get("resourceVersion"):
            return  # a periodic resync, not a change
        if self._deletion_start != "ignore" and is_being_deleted(cur):
            # Graceful deletion starts: count it now, so a replacement need not wait for the grace period.
            self.deleted(cur, final=False)
            if self._deletion_start == "deleted_old_too" and _labels(cur) != _labels(old):
                self.deleted(old, final=False)
            return
        cur_ref, old_ref = controller_ref(cur), controller_ref(old)
        ref_changed = cur_ref != old_ref
        if ref_changed and old_ref is not None:
            previous = self.resolve(old, old_ref)
            if previous is not None:
                if self._updated is not None:
                    self._updated(previous, old, cur)
                self._enqueue(key_of(previous))
        if cur_ref is not None:
            owner = self.resolve(cur, cur_ref)
            if owner is None:
                return
            if self._updated is not None:
                self._updated(owner, old, cur)
            key = key_of(owner)
            self._enqueue(key)
            if self._ready_skew is not None:
                mrs = (owner.get("spec") or {}).get("minReadySeconds")
                if (isinstance(mrs, int) and not isinstance(mrs, bool) and mrs > 0
                        and not is_pod_ready(old) and is_pod_ready(cur)):
                    self._queue.add_after(key, float(mrs) + self._ready_skew)
            return
        if self._orphan is not None:
            self._orphan(cur)
        if ref_changed or _labels(cur) != _labels(old):
            for owner in self.matching(cur):
                self._enqueue(key_of(owner))

    def deleted(self, obj: Obj, *, final: bool = True) -> None:
        owner = self.resolve(obj)
        wake = self._deleted(owner, obj, final) if self._deleted is not None else None
        if owner is not None and wake is not False:
            self._enqueue(key_of(owner))
