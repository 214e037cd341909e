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

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from controller_manager.api.meta import controller_ref, is_being_deleted, key_of, meta
from controller_manager.api.resources import DAEMONSETS
from controller_manager.controllerutil.owner_handler import OwnerHandler
from controller_manager.runtime.informers import NODE_NAME_INDEX, Added, Deleted, Event, Updated

from .placement import MalformedNode, node_should_run_daemon_pod, should_ignore_node_update

if TYPE_CHECKING:
    from .controller import DaemonSetController

Obj = Mapping[str, Any]


class Handlers:
    """Event handlers bound to one controller (kept apart so the controller module reads as the sync)."""

    def __init__(self, ctrl: DaemonSetController) -> None:
        self._ctrl = ctrl
        store, queue, log = ctrl.ds_informer.store, ctrl.queue, ctrl.log
        # Pods: creations and deletions counted off the owner's expectations; a pod turning ready wakes it again
        # after minReadySeconds (+1 s against clock skew).
        self.pods = OwnerHandler(store, DAEMONSETS, queue, log=log, ready_requeue_skew=1.0,
                                 created=lambda ds, pod: ctrl.expectations.creation_observed(key_of(ds)),
                                 deleted=self._pod_deleted)
        # ControllerRevisions: an owned one's arrival wakes nobody (upstream's addHistory only logs it).
        self.history = OwnerHandler(store, DAEMONSETS, queue, log=log, deletion_start="ignore",
                                    wake_on_owned_add=False)
        self.on_pod = self.pods.on_event
        self.on_history = self.history.on_event

    def _pod_deleted(self, ds: Obj | None, pod: Obj, final: bool) -> None:
        if ds is not None:
            self._ctrl.expectations.deletion_observed(key_of(ds))

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
        # A new DaemonSet of the same name must start without the old one's expectations or written versions.
        self._ctrl.expectations.delete_expectations(key)
        self._ctrl.consistency.clear(key, str(meta(ds).get("uid") or ""))
        self._ctrl.queue.add(key)

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
