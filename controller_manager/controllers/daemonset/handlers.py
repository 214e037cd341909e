"""The DaemonSet controller's informer handlers: which DaemonSet keys each event wakes, and what expectations it
counts off (``daemon_controller.go``'s add/update/delete handlers and ``syncNodeUpdate``).

Guarantees:
- Handlers are synchronous and only enqueue keys or count expectations; none raises on odd objects.
- A pod or revision with a controller reference wakes only that DaemonSet (if it is still the same one by UID);
  an orphan wakes every DaemonSet of its namespace whose non-empty selector matches its labels. A pod's creation
  is counted off when first seen (unless it is already being deleted), its deletion when it gets a
  deletionTimestamp or disappears. A pod turning ready wakes its DaemonSet again after ``minReadySeconds + 1``.
- A node changed in labels or taints wakes each DaemonSet whose answer to "should run / should continue running
  here" changed (``updateNode``). A node added or changed also wakes each DaemonSet that should run a pod there and
  has none, that has a pod there that should not continue, or that has a pod there while counting misscheduled
  pods (the newest upstream's ``syncNodeUpdate``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from controller_manager.api.meta import controller_ref, is_being_deleted, key_of, meta
from controller_manager.api.pods import is_pod_ready
from controller_manager.api.resources import DAEMONSETS
from controller_manager.api.selectors import InvalidSelector, from_label_selector
from controller_manager.controllerutil.controller_ref import resolve_controller_ref
from controller_manager.runtime.informers import NODE_NAME_INDEX, Added, Deleted, Event, Updated

from .placement import MalformedNode, node_should_run_daemon_pod, should_ignore_node_update

if TYPE_CHECKING:
    from .controller import DaemonSetController

Obj = Mapping[str, Any]


class Handlers:
    """Event handlers bound to one controller (kept apart so the controller module reads as the sync)."""

    def __init__(self, ctrl: DaemonSetController) -> None:
        self._ctrl = ctrl

    # --- lookups ----------------------------------------------------------------------------------

    def resolve(self, namespace: str | None, ref: Mapping[str, Any]) -> Obj | None:
        """The cached DaemonSet a controller reference points to, if it still has that UID."""
        return resolve_controller_ref(self._ctrl.ds_informer.store.get, DAEMONSETS, namespace, ref)

    def selecting(self, obj: Obj) -> list[Obj]:
        """DaemonSets of the object's namespace whose selector matches its labels (``GetPodDaemonSets``)."""
        labels = meta(obj).get("labels")
        if not labels or not isinstance(labels, Mapping):
            return []
        found: list[Obj] = []
        for ds in self._ctrl.ds_informer.store.by_index("namespace", str(meta(obj).get("namespace") or "")):
            try:
                selector = from_label_selector((ds.get("spec") or {}).get("selector"))
            except (InvalidSelector, TypeError, ValueError, AttributeError):
                continue
            # A nil or empty selector must match nothing here, not everything.
            if selector.is_empty() or not selector.matches(labels):
                continue
            found.append(ds)
        if len(found) > 1:
            self._ctrl.log.warning("user error: more than one DaemonSet selects the object's labels",
                                   object=key_of(obj), labels=dict(labels), daemonsets=[key_of(d) for d in found])
        return found

    def _enqueue(self, ds: Obj) -> None:
        self._ctrl.queue.add(key_of(ds))

    # --- DaemonSets -------------------------------------------------------------------------------

    def on_daemon_set(self, event: Event) -> None:
        if isinstance(event, Added):
            self._enqueue(event.obj)
        elif isinstance(event, Updated):
            if meta(event.old).get("uid") != meta(event.new).get("uid"):
                self._delete_daemon_set(event.old)  # deleted and recreated between two events
            self._enqueue(event.new)
        elif isinstance(event, Deleted):
            self._delete_daemon_set(event.obj)

    def _delete_daemon_set(self, ds: Obj) -> None:
        key = key_of(ds)
        # A new DaemonSet of the same name must start without the old one's expectations.
        self._ctrl.expectations.delete_expectations(key)
        self._ctrl.queue.add(key)

    # --- ControllerRevisions ----------------------------------------------------------------------

    def on_history(self, event: Event) -> None:
        if isinstance(event, Added):
            self._on_owned_or_orphan(event.obj, lambda ds: None, self._history_gone)
        elif isinstance(event, Updated):
            self._update_owned(event.old, event.new)
        elif isinstance(event, Deleted):
            self._history_gone(event.obj)

    def _history_gone(self, revision: Obj) -> None:
        ref = controller_ref(revision)
        ds = self.resolve(meta(revision).get("namespace"), ref) if ref is not None else None
        if ds is not None:
            self._enqueue(ds)

    def _on_owned_or_orphan(self, obj: Obj, seen: Callable[[Obj], None], gone: Callable[[Obj], None]) -> None:
        if is_being_deleted(obj):
            # After a restart an object may first show up already being deleted: not a creation.
            gone(obj)
            return
        ref = controller_ref(obj)
        if ref is not None:
            ds = self.resolve(meta(obj).get("namespace"), ref)
            if ds is not None:
                seen(ds)
            return
        for ds in self.selecting(obj):  # an orphan: whoever may adopt it looks
            self._enqueue(ds)

    def _update_owned(self, old: Obj, cur: Obj) -> Obj | None:
        """Shared pod/revision update logic; returns the owning DaemonSet if the object has one."""
        if meta(cur).get("resourceVersion") == meta(old).get("resourceVersion"):
            return None  # a resync
        cur_ref, old_ref = controller_ref(cur), controller_ref(old)
        if cur_ref != old_ref and old_ref is not None:
            previous = self.resolve(meta(old).get("namespace"), old_ref)
            if previous is not None:
                self._enqueue(previous)
        if cur_ref is not None:
            ds = self.resolve(meta(cur).get("namespace"), cur_ref)
            if ds is not None:
                self._enqueue(ds)
            return ds
        if (meta(cur).get("labels") or {}) != (meta(old).get("labels") or {}) or cur_ref != old_ref:
            for ds in self.selecting(cur):
                self._enqueue(ds)
        return None

    # --- pods -------------------------------------------------------------------------------------

    def on_pod(self, event: Event) -> None:
        if isinstance(event, Added):
            self._on_owned_or_orphan(event.obj, self._creation_observed, self._pod_gone)
        elif isinstance(event, Updated):
            self._update_pod(event.old, event.new)
        elif isinstance(event, Deleted):
            self._pod_gone(event.obj)

    def _creation_observed(self, ds: Obj) -> None:
        self._ctrl.expectations.creation_observed(key_of(ds))
        self._enqueue(ds)

    def _pod_gone(self, pod: Obj) -> None:
        ref = controller_ref(pod)
        ds = self.resolve(meta(pod).get("namespace"), ref) if ref is not None else None
        if ds is None:
            return
        self._ctrl.expectations.deletion_observed(key_of(ds))
        self._enqueue(ds)

    def _update_pod(self, old: Obj, cur: Obj) -> None:
        if meta(cur).get("resourceVersion") == meta(old).get("resourceVersion"):
            return
        if is_being_deleted(cur):
            # Graceful deletion started: count it now so a replacement need not wait for the grace period.
            self._pod_gone(cur)
            return
        ds = self._update_owned(old, cur)
        if ds is None:
            return
        mrs = (ds.get("spec") or {}).get("minReadySeconds") or 0
        if isinstance(mrs, int) and mrs > 0 and not is_pod_ready(old) and is_pod_ready(cur):
            # Nothing else happens when it turns available; a second more absorbs clock skew.
            self._ctrl.queue.add_after(key_of(ds), float(mrs) + 1.0)

    # --- nodes ------------------------------------------------------------------------------------

    def on_node(self, event: Event) -> None:
        if isinstance(event, Added):
            self._node_changed(event.obj, None)
        elif isinstance(event, Updated) and not should_ignore_node_update(event.old, event.new):
            self._node_changed(event.new, event.old)

    def _node_changed(self, node: Obj, old: Obj | None) -> None:
        node_name = str(meta(node).get("name") or "")
        placed: set[tuple[str, str]] = set()  # (namespace, DaemonSet name) with an active pod on this node
        for pod in self._ctrl.pod_informer.store.by_index(NODE_NAME_INDEX, node_name):
            ref = controller_ref(pod)
            if ref is not None and ref.get("kind") == DAEMONSETS.kind and not is_being_deleted(pod):
                placed.add((str(meta(pod).get("namespace") or ""), str(ref.get("name") or "")))
        for ds in self._ctrl.ds_informer.store.list():
            try:
                should_run, should_continue = node_should_run_daemon_pod(node, ds)
            except MalformedNode:
                self._enqueue(ds)  # the sync reports it
                continue
            if old is not None:
                try:
                    changed = node_should_run_daemon_pod(old, ds) != (should_run, should_continue)
                except MalformedNode:
                    changed = True
                if changed:
                    self._enqueue(ds)
                    continue
            scheduled = (str(meta(ds).get("namespace") or ""), str(meta(ds).get("name") or "")) in placed
            misscheduled = ((ds.get("status") or {}).get("numberMisscheduled") or 0) > 0
            if (should_run and not scheduled) or (not should_continue and scheduled) or (scheduled and misscheduled):
                self._enqueue(ds)
