"""The DaemonSet controller: one daemon pod on every node that should run it (kube-controller-manager's
``daemonset-controller``, ``pkg/controller/daemon/daemon_controller.go`` and ``update.go``).

Guarantees:
- Placement is upstream's (see :mod:`.placement`); a daemon pod is created from the template plus the daemon
  tolerations, the ``controller-revision-hash`` (and ``pod-template-generation``) labels, and required node
  affinity ``matchFields metadata.name In [node]``, and is placed by the scheduler.
- Never acts twice for one need: creations and deletions are recorded as expectations before the API calls and
  counted off by the pod handlers; while they are pending a sync only recounts status (observedGeneration
  untouched). At most 250 creations and 250 deletions per sync; creations go in slow-start batches (1, 2, 4...),
  and a failed batch stops the rest.
- Per node: no pod but should run -> create; pods and should continue -> failed pods deleted (with a per-node
  exponential backoff from 1 s to 15 min and a ``FailedDaemonPod`` Warning), succeeded ones deleted
  (``SucceededDaemonPod``), duplicates pruned keeping the oldest (with surge: the oldest new and oldest old pod
  until the new one is available); should not continue -> every pod there deleted. Pods waiting for a node that no
  longer exists are deleted.
- Updates: RollingUpdate as :mod:`.rolling` plans it, only when expectations are met; OnDelete leaves old pods
  alone (new pods get the new template). History as :mod:`.history` keeps it.
- Status (desired/current/misscheduled/ready/updated/available/unavailable and observedGeneration) goes through
  ``/status`` only when it changed, with one retry after a fresh GET; with ``minReadySeconds`` the DaemonSet is
  synced again when pods may have become available.
- Bad input never crashes a worker: an empty selector gets a ``SelectingAll`` Warning and is skipped; a missing
  or unparsable selector, or one not matching the template's labels, a Warning ``InvalidSelector`` and is skipped
  (it would create pods it cannot own); a node whose labels or taints are malformed gets a ``FailedPlacement``
  Warning on the DaemonSet and keeps whatever daemon pod it has. A DaemonSet being deleted is left alone.
- Read-your-own-writes, as upstream's StaleControllerConsistencyDaemonSet (beta, on by default since 1.36): the
  resourceVersions of the DaemonSet's status writes and of the pods created for it are recorded; its next sync is
  skipped and requeued through the rate limiter until the DaemonSet and pod informers have applied events at
  least that new (:mod:`controllerutil.consistency`). The record goes with the DaemonSet (deleted, or found gone).
- Events come from component ``daemonset-controller`` (SuccessfulCreate/FailedCreate/SuccessfulDelete/
  FailedDelete from the PodControl).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from controller_manager.api.meta import is_being_deleted, key_of, meta
from controller_manager.api.pods import POD_FAILED, POD_SUCCEEDED, is_pod_available, is_pod_ready, is_pod_terminal
from controller_manager.api.resources import CONTROLLERREVISIONS, DAEMONSETS, NODES, PODS
from controller_manager.api.selectors import InvalidSelector, Selector, from_label_selector
from controller_manager.client.errors import NAMESPACE_TERMINATING_CAUSE, ApiError, NotFound, has_status_cause
from controller_manager.controllerutil.consistency import ConsistencyStore, StaleCache
from controller_manager.controllerutil.controller_ref import ControllerRefManager, live_owner_check, new_controller_ref
from controller_manager.controllerutil.controller_utils import SLOW_START_INITIAL_BATCH_SIZE, slow_start_batch
from controller_manager.controllerutil.expectations import ControllerExpectations
from controller_manager.controllerutil.owned import ORPHANS_BY_NAMESPACE, orphans_by_namespace, owned_or_orphaned
from controller_manager.controllerutil.pod_control import PodControl
from controller_manager.runtime.controller import Controller, ControllerContext, Result

from .backoff import Backoff
from .handlers import Handlers
from .history import History
from .placement import MalformedNode, node_should_run_daemon_pod, pod_creation_order_key
from .rolling import daemon_set_status, plan_rolling_update
from .util import (
    CONTROLLER_REVISION_HASH_LABEL,
    ON_DELETE,
    ROLLING_UPDATE,
    TargetNodeError,
    allows_surge,
    create_pod_template,
    get_target_node_name,
    get_template_generation,
    replace_node_name_affinity,
)

__all__ = [
    "BURST_REPLICAS",
    "FAILED_DAEMON_POD_REASON",
    "FAILED_PLACEMENT_REASON",
    "INVALID_SELECTOR_REASON",
    "SELECTING_ALL_REASON",
    "SUCCEEDED_DAEMON_POD_REASON",
    "DaemonSetController",
]

Obj = Mapping[str, Any]
NodePods = dict[str, list[Obj]]

# Creations or deletions one sync may start (too many at once can overwhelm the registry).
BURST_REPLICAS = 250
STATUS_UPDATE_RETRIES = 1

SELECTING_ALL_REASON = "SelectingAll"
FAILED_PLACEMENT_REASON = "FailedPlacement"
FAILED_DAEMON_POD_REASON = "FailedDaemonPod"
SUCCEEDED_DAEMON_POD_REASON = "SucceededDaemonPod"
INVALID_SELECTOR_REASON = "InvalidSelector"  # ours: upstream relies on API validation here


class SyncErrors(Exception):
    """Several pod writes of one sync failed (upstream's aggregate error)."""

    def __init__(self, errors: Sequence[BaseException]) -> None:
        self.errors = list(errors)
        super().__init__(str(errors[0]) if len(errors) == 1 else "[" + ", ".join(map(str, errors)) + "]")


class DaemonSetController(Controller):
    """DaemonSets -> one pod per eligible node. Its queue holds DaemonSet keys."""

    name: ClassVar[str] = "daemonset-controller"
    alias: ClassVar[str] = "daemonset"
    queue_name: ClassVar[str | None] = "daemonset"
    workers_option: ClassVar[str | None] = "concurrent-daemonset-syncs"
    default_workers: ClassVar[int] = 2

    def __init__(self, ctx: ControllerContext, *, burst_replicas: int = BURST_REPLICAS) -> None:
        super().__init__(ctx)
        self.burst_replicas = burst_replicas
        self.expectations = ControllerExpectations(ctx.clock)
        self.recorder = ctx.events.recorder(self.name)
        self.pod_control = PodControl(ctx.client, self.recorder, DAEMONSETS)
        # Failed daemon pods are deleted again on the same node only after a growing delay.
        self.failed_pods_backoff = Backoff()
        self.ds_informer = ctx.informers.informer(DAEMONSETS)
        self.history_informer = ctx.informers.informer(CONTROLLERREVISIONS)
        # A sync looks at its own pods and its namespace's orphans only (upstream's FilterPodsByOwner): not at the
        # other DaemonSets' pods of kube-system, one per node each.
        self.pod_informer = ctx.informers.informer(PODS, indexers={ORPHANS_BY_NAMESPACE: orphans_by_namespace})
        self.node_informer = ctx.informers.informer(NODES)
        self.history = History(ctx.client, self.history_informer)
        # Read-your-own-writes (upstream's StaleControllerConsistencyDaemonSet, on by default): a sync waits until
        # the informers show this controller's last status write and pod creations for that DaemonSet.
        ds_informer, pod_informer = self.ds_informer, self.pod_informer
        self.consistency = ConsistencyStore({DAEMONSETS.plural: lambda: ds_informer.last_sync_resource_version,
                                             PODS.plural: lambda: pod_informer.last_sync_resource_version})
        self.handlers = Handlers(self)
        self.ds_informer.add_handler(self.handlers.on_daemon_set)
        self.history_informer.add_handler(self.handlers.on_history)
        self.pod_informer.add_handler(self.handlers.on_pod)
        self.node_informer.add_handler(self.handlers.on_node)

    def _event(self, ds: Obj, type_: str, reason: str, message: str) -> None:
        self.recorder.event(ds, type_, reason, message, resource=DAEMONSETS)

    # --- sync -------------------------------------------------------------------------------------

    async def sync(self, key: str) -> Result | None:
        try:
            self.consistency.ensure_ready(key)
        except StaleCache as stale:
            # Our own last writes are not in the caches yet: acting now could create a second daemon pod on a node
            # (and the status write would conflict). Retry through the rate limiter, as upstream's error return.
            self.log.debug("skipping sync of a stale daemon set", key=key, reason=str(stale))
            return Result(rate_limited=True)
        ds = self.ds_informer.store.get(key)
        if ds is None:
            self.log.debug("daemon set has been deleted", key=key)
            self.expectations.delete_expectations(key)
            self.consistency.clear(key)
            return None
        selector = self._selector(ds)
        if selector is None or is_being_deleted(ds):
            # Being deleted: its revisions may be gone already, so neither status nor pods can be trusted.
            return None
        nodes = self.node_informer.store.list()
        placement = self._placement(ds, nodes)

        claimed = await self._claim_pods(ds, selector)
        cur, old = await self.history.construct(ds, selector, claimed)
        hash_ = str((meta(cur).get("labels") or {}).get(CONTROLLER_REVISION_HASH_LABEL) or "")

        if not self.expectations.satisfied(key):
            # Only recount: observedGeneration stays, this generation was not acted on.
            await self._update_status(ds, selector, placement, hash_, update_observed_generation=False)
            return None

        error: Exception | None = None
        try:
            await self._update_daemon_set(key, ds, selector, placement, hash_, old)
        except Exception as err:
            error = err
        try:
            await self._update_status(ds, selector, placement, hash_, update_observed_generation=True)
        except Exception as status_err:
            if error is None:
                raise
            self.log.error("failed to update status", key=key, error=str(status_err))
        if error is not None:
            raise error
        return None

    def _selector(self, ds: Obj) -> Selector | None:
        """The DaemonSet's pod selector, or None (reported) when acting on it would be wrong."""
        raw = (ds.get("spec") or {}).get("selector")
        try:
            selector = from_label_selector(raw)
        except (InvalidSelector, TypeError, ValueError, AttributeError) as err:
            self.log.error("invalid pod selector", key=key_of(ds), selector=raw, error=str(err))
            self._event(ds, "Warning", INVALID_SELECTOR_REASON, f"Invalid selector: {err}")
            return None
        if raw is not None and selector.is_empty():
            self._event(ds, "Warning", SELECTING_ALL_REASON,
                        "This daemon set is selecting all pods. A non-empty selector is required.")
            return None
        template_labels = meta((ds.get("spec") or {}).get("template") or {}).get("labels") or {}
        if not selector.matches(template_labels):
            self.log.error("selector does not match the template's labels", key=key_of(ds), selector=raw)
            self._event(ds, "Warning", INVALID_SELECTOR_REASON,
                        "The selector does not match the template's labels: no pod it creates would be its own.")
            return None
        return selector

    def _placement(self, ds: Obj, nodes: Sequence[Obj]) -> dict[str, tuple[bool, bool]]:
        """(should_run, should_continue_running) per node; a malformed node keeps its pod and gets none."""
        placement: dict[str, tuple[bool, bool]] = {}
        for node in nodes:
            name = str(meta(node).get("name") or "")
            try:
                placement[name] = node_should_run_daemon_pod(node, ds)
            except MalformedNode as err:
                self.log.warning("cannot judge node", key=key_of(ds), node=name, error=str(err))
                self._event(ds, "Warning", FAILED_PLACEMENT_REASON, f"failed to place pod on {name!r}: {err}")
                placement[name] = (False, True)
        return placement

    async def _claim_pods(self, ds: Obj, selector: Selector) -> list[Obj]:
        """The DaemonSet's pods, adopting matching orphans and releasing non-matching ones (``getDaemonPods``)."""
        candidates = owned_or_orphaned(self.pod_informer.store, ds)
        manager = ControllerRefManager(self.ctx.client, ds, DAEMONSETS, selector, PODS,
                                       live_owner_check(self.ctx.client, DAEMONSETS, ds))
        return await manager.claim(candidates)

    async def _node_pods(self, ds: Obj, selector: Selector, include_deleted_terminal: bool = False) -> NodePods:
        """``getNodesToDaemonPods``: claimed pods grouped by the node they are for."""
        grouped: NodePods = {}
        for pod in await self._claim_pods(ds, selector):
            if not include_deleted_terminal and is_pod_terminal(pod) and is_being_deleted(pod):
                continue  # only a finalizer or the pod GC keeps it; nothing left for us to do
            try:
                node = get_target_node_name(pod)
            except TargetNodeError as err:
                self.log.debug("failed to get target node of daemon pod", key=key_of(ds), error=str(err))
                continue
            grouped.setdefault(node, []).append(pod)
        return grouped

    def _generation(self, ds: Obj) -> int | None:
        try:
            return get_template_generation(ds)
        except ValueError:
            return None  # unparsable: the hash alone tells updated pods

    async def _update_daemon_set(self, key: str, ds: Obj, selector: Selector, placement: dict[str, tuple[bool, bool]],
                                 hash_: str, old: Sequence[Obj]) -> None:
        await self._manage(key, ds, selector, placement, hash_)
        if self.expectations.satisfied(key):
            strategy = ((ds.get("spec") or {}).get("updateStrategy") or {}).get("type")
            if strategy == ROLLING_UPDATE:
                node_pods = await self._node_pods(ds, selector)
                to_delete, to_create = plan_rolling_update(ds, node_pods, placement, hash_, self._generation(ds),
                                                           self.ctx.clock.now())
                pods = {meta(p).get("name"): p for pods in node_pods.values() for p in pods}
                await self._sync_nodes(key, ds, [pods[n] for n in to_delete if n in pods], to_create, hash_)
            elif strategy != ON_DELETE:
                self.log.debug("unknown update strategy, pods are not updated", key=key, strategy=strategy)
        try:
            everything = await self._node_pods(ds, selector, include_deleted_terminal=True)
            await self.history.cleanup(ds, old, [p for pods in everything.values() for p in pods])
        except Exception as err:
            raise RuntimeError(f"failed to clean up revisions of DaemonSet: {err}") from err

    # --- manage: pods per node --------------------------------------------------------------------

    async def _manage(self, key: str, ds: Obj, selector: Selector, placement: dict[str, tuple[bool, bool]],
                      hash_: str) -> None:
        node_pods = await self._node_pods(ds, selector)
        to_create: list[str] = []
        to_delete: list[Obj] = []
        for node, (should_run, should_continue) in placement.items():
            create, delete = self._pods_should_be_on_node(key, ds, node, should_run, should_continue,
                                                          node_pods.get(node), hash_)
            to_create.extend(create)
            to_delete.extend(delete)
        # Pods for nodes that are gone never get scheduled, and the pod GC does not see unscheduled pods.
        for node, pods in node_pods.items():
            if node not in placement:
                to_delete.extend(p for p in pods if not (p.get("spec") or {}).get("nodeName"))
        await self._sync_nodes(key, ds, to_delete, to_create, hash_)

    def _pods_should_be_on_node(self, key: str, ds: Obj, node: str, should_run: bool, should_continue: bool,
                                pods: Sequence[Obj] | None, hash_: str) -> tuple[list[str], list[Obj]]:
        """``podsShouldBeOnNode``: (nodes needing a pod, pods to delete) for one node."""
        if should_run and pods is None:
            return [node], []
        if not should_continue:
            return [], [p for p in pods or () if not is_being_deleted(p)]
        to_delete: list[Obj] = []
        running: list[Obj] = []
        for pod in pods or ():
            if is_being_deleted(pod):
                continue
            phase = (pod.get("status") or {}).get("phase")
            name = f"{meta(pod).get('namespace')}/{meta(pod).get('name')}"
            if phase == POD_FAILED:
                # Often a kubelet rejecting the pod: deleting and recreating it at once would hot-loop.
                backoff_key = (f"{meta(ds).get('uid')}/{(ds.get('status') or {}).get('observedGeneration') or 0}/"
                               f"{node}")
                now = self.ctx.clock.now()
                if self.failed_pods_backoff.in_backoff_since_update(backoff_key, now):
                    delay = self.failed_pods_backoff.get(backoff_key)
                    self.log.debug("deleting failed pod limited by backoff", key=key, pod=name, delay=delay)
                    self.queue.add_after(key, delay)
                    continue
                self.failed_pods_backoff.next(backoff_key, now)
                self.log.info("found failed daemon pod on node, will try to kill it", key=key, pod=name, node=node)
                self._event(ds, "Warning", FAILED_DAEMON_POD_REASON,
                            f"Found failed daemon pod {name} on node {node}, will try to kill it")
                to_delete.append(pod)
            elif phase == POD_SUCCEEDED:
                self.log.info("found succeeded daemon pod on node, will try to delete it", key=key, pod=name,
                              node=node)
                self._event(ds, "Normal", SUCCEEDED_DAEMON_POD_REASON,
                            f"Found succeeded daemon pod {name} on node {node}, will try to delete it")
                to_delete.append(pod)
            else:
                running.append(pod)
        running.sort(key=pod_creation_order_key)
        if not allows_surge(ds):
            return [], to_delete + running[1:]  # duplicates: the oldest stays
        if len(running) <= 1:
            return ([node] if not running and should_run else []), to_delete
        # Surging: keep the oldest new pod and the oldest old pod, the latter only while it is ready and the new
        # one not yet available.
        oldest_new: Obj | None = None
        oldest_old: Obj | None = None
        for pod in running:
            is_new = (meta(pod).get("labels") or {}).get(CONTROLLER_REVISION_HASH_LABEL) == hash_
            if is_new and oldest_new is None:
                oldest_new = pod
            elif not is_new and oldest_old is None:
                oldest_old = pod
            else:
                to_delete.append(pod)
        if oldest_new is not None and oldest_old is not None:
            mrs = (ds.get("spec") or {}).get("minReadySeconds") or 0
            if not is_pod_ready(oldest_old) or is_pod_available(oldest_new, int(mrs), self.ctx.clock.now()):
                to_delete.append(oldest_old)
        return [], to_delete

    async def _sync_nodes(self, key: str, ds: Obj, to_delete: Sequence[Obj], to_create: Sequence[str],
                          hash_: str) -> None:
        """``syncNodes``: delete these pods and create one on each of these nodes, with expectations first."""
        creates = min(len(to_create), self.burst_replicas)
        deletes = min(len(to_delete), self.burst_replicas)
        # Before any call: the informer may show a pod before the call returns.
        self.expectations.set_expectations(key, creates, deletes)
        namespace = str(meta(ds).get("namespace") or "")
        errors: list[BaseException] = []
        if creates:
            self.log.info("creating daemon pods", key=key, nodes=list(to_create[:creates]))
            template = create_pod_template((ds.get("spec") or {}).get("template") or {}, self._generation(ds), hash_)
            ref = new_controller_ref(ds, DAEMONSETS)

            async def create(index: int) -> None:
                spec = dict(template.get("spec") or {})
                spec["affinity"] = replace_node_name_affinity(spec.get("affinity"), to_create[index])
                try:
                    pod = await self.pod_control.create_pods(namespace, {**template, "spec": spec}, ds, ref)
                    self.consistency.record(ds, PODS.plural, pod)
                except ApiError as err:
                    if has_status_cause(err, NAMESPACE_TERMINATING_CAUSE):
                        return  # every create fails until the namespace is gone
                    self.expectations.creation_observed(key)
                    errors.append(err)
                    raise

            successes, _ = await slow_start_batch(creates, SLOW_START_INITIAL_BATCH_SIZE, create)
            attempted = successes + len(errors)
            if attempted < creates:
                # Never attempted: the informer will never show them.
                self.log.info("slow-start failure, skipping creation of pods", key=key, skipped=creates - attempted)
                self.expectations.lower_expectations(key, creates - attempted, 0)
        if deletes:
            self.log.info("deleting daemon pods", key=key, pods=[meta(p).get("name") for p in to_delete[:deletes]])
            results = await asyncio.gather(*(self._delete(key, ds, pod) for pod in to_delete[:deletes]))
            errors.extend(err for err in results if err is not None)
        if errors:
            raise SyncErrors(errors)

    async def _delete(self, key: str, ds: Obj, pod: Obj) -> Exception | None:
        m = meta(pod)
        try:
            await self.pod_control.delete_pod(str(m.get("namespace") or ""), str(m.get("name") or ""), ds,
                                              uid=m.get("uid"))
        except Exception as err:
            self.expectations.deletion_observed(key)  # the informer will not show it
            if isinstance(err, NotFound):
                return None
            self.log.info("failed deletion, decremented expectations", key=key, pod=m.get("name"), error=str(err))
            return err
        return None

    # --- status -----------------------------------------------------------------------------------

    async def _update_status(self, ds: Obj, selector: Selector, placement: dict[str, tuple[bool, bool]], hash_: str,
                             *, update_observed_generation: bool) -> None:
        node_pods = await self._node_pods(ds, selector)
        now = self.ctx.clock.now()
        counts = daemon_set_status(ds, node_pods, placement, hash_, self._generation(ds), now).as_status()
        status = ds.get("status") or {}
        generation = meta(ds).get("generation") or 0
        if (all((status.get(k) or 0) == v for k, v in counts.items())
                and (status.get("observedGeneration") or 0) >= generation):
            self._requeue_for_availability(ds, counts)
            return
        current: Obj = ds
        for attempt in range(STATUS_UPDATE_RETRIES + 1):
            new_status = {**(current.get("status") or {}), **counts}
            if update_observed_generation:
                new_status["observedGeneration"] = generation
            try:
                written = await self.ctx.client.update_status(DAEMONSETS, {**current, "status": new_status})
                self.consistency.record(ds, DAEMONSETS.plural, written)
                break
            except ApiError:
                if attempt >= STATUS_UPDATE_RETRIES:
                    raise
                # Another write won the race: retry once on the latest version.
                current = await self.ctx.client.get(DAEMONSETS, str(meta(ds).get("name")), meta(ds).get("namespace"))
        self._requeue_for_availability(ds, counts)

    def _requeue_for_availability(self, ds: Obj, counts: Mapping[str, int]) -> None:
        mrs = (ds.get("spec") or {}).get("minReadySeconds") or 0
        if isinstance(mrs, int) and mrs > 0 and counts["numberReady"] != counts["numberAvailable"]:
            # A last line of defence: pods turning available cause no event.
            self.queue.add_after(key_of(ds), float(mrs))
