"""Deleting everything in a namespace, then releasing it: upstream's ``deletion/namespaced_resources_deleter.go``.

:meth:`NamespacedResourcesDeleter.delete` is one pass over one namespace. It guarantees:
- It acts only on what a live read shows: a namespace that is gone or has no ``deletionTimestamp`` is
  left alone (one GET, nothing else). A namespace whose ``spec.finalizers`` is already empty needs
  nothing from us either.
- Before anything else the namespace's ``status.phase`` is ``Terminating`` (written through ``/status``
  when the server has not done it), retried on 409 against a fresh read, refusing to go on if the UID
  changed (the namespace was deleted and re-created meanwhile).
- Every namespaced resource that discovery (preferred versions) reports with the ``delete`` verb is
  emptied: ``deletecollection`` where the resource supports it (Background propagation), else a
  metadata-only list and one Background DELETE per item. Then a metadata-only list checks what remains.
  A resource failing with 404/405 is treated as not supporting the verb, not as a failure.
- A failure on one resource (or of discovery) does not stop the others; all are reported together.
- Remaining content is reported, not hidden: pods still within their grace period, or items held by
  finalizers, make the pass raise :class:`ResourcesRemainingError` with an estimate in seconds (the
  pods' longest grace period while the namespace's deletion is younger than it; 15 s when only
  finalizers hold items); leftovers with neither are an error.
- The five conditions of :mod:`.conditions` are written through ``/status`` whenever they change
  (a failure to write them is logged, never fatal), so ``kubectl describe ns`` says what blocks it.
- Only when nothing is left and no error occurred is the ``kubernetes`` finalizer removed, through a
  PUT to ``namespaces/<name>/finalize`` (other finalizers kept, sorted): the apiserver then deletes the
  namespace once no finalizer remains.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from controller_manager.api.meta import meta, parse_time
from controller_manager.api.resources import NAMESPACES, PODS, Resource
from controller_manager.client import ApiClient, ApiError, Conflict, MethodNotAllowed, NotFound
from controller_manager.clock import Clock
from controller_manager.controllers.namespace.conditions import (
    ContentTotals,
    GroupDiscoveryFailed,
    NamespaceConditionUpdater,
)

__all__ = [
    "FINALIZER_ESTIMATE_SECONDS",
    "FINALIZER_KUBERNETES",
    "AggregateError",
    "DiscoverFn",
    "NamespacedResourcesDeleter",
    "ResourcesRemainingError",
    "finalized",
    "preferred_namespaced",
    "server_preferred_namespaced_resources",
]

Obj = dict[str, Any]

FINALIZER_KUBERNETES = "kubernetes"
# Assumed time for finalizers to complete when items pending deletion carry some.
FINALIZER_ESTIMATE_SECONDS = 15

# What discovery found, and the error that kept it from finding everything (None when complete).
DiscoverFn = Callable[[], Awaitable[tuple[list[Resource], BaseException | None]]]

log = structlog.get_logger("controller_manager.controllers.namespace")


class ResourcesRemainingError(Exception):
    """Content remains that is expected to go by itself within ``estimate`` seconds."""

    def __init__(self, estimate: int) -> None:
        self.estimate = estimate
        super().__init__(f"some content remains in the namespace, estimate {estimate} seconds before it is removed")


class AggregateError(Exception):
    """Several errors as one, worded as apimachinery's ``utilerrors.NewAggregate`` words them."""

    def __init__(self, errors: Sequence[BaseException]) -> None:
        self.errors = list(errors)
        messages: list[str] = []
        for err in self.errors:
            if str(err) not in messages:
                messages.append(str(err))
        text = messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"
        super().__init__(text if self.errors else "")


class UnexpectedItemsError(Exception):
    """Items remain that nothing (grace period, finalizer) explains."""


@dataclass
class _ResourceResult:
    """Upstream's ``gvrDeletionMetadata``: how long to wait, and what is left of one resource."""

    estimate: int = 0  # zero means "no estimate", not "nothing left"
    remaining: int = 0
    finalizers: dict[str, int] = field(default_factory=dict)


def finalized(namespace: Mapping[str, Any]) -> bool:
    """No finalizer is left in ``spec.finalizers``."""
    return not (namespace.get("spec") or {}).get("finalizers")


def gvr_string(res: Resource) -> str:
    """``schema.GroupVersionResource.String()``: ``apps/v1, Resource=deployments``, ``/v1, Resource=pods``."""
    return f"{res.group}/{res.version}, Resource={res.plural}"


def preferred_namespaced(resources: Sequence[Resource]) -> list[Resource]:
    """The namespaced resources, each once, at its group's preferred version (``ServerPreferredNamespacedResources``).

    Discovery lists each group's versions in the server's preference order, so the first version that
    serves a resource is the one to use."""
    seen: set[tuple[str, str]] = set()
    out: list[Resource] = []
    for res in resources:
        if not res.namespaced or (res.group, res.plural) in seen:
            continue
        seen.add((res.group, res.plural))
        out.append(res)
    return out


def server_preferred_namespaced_resources(client: ApiClient) -> DiscoverFn:
    """The discovery kube-controller-manager gives the namespace controller, over ``client``."""

    async def discover() -> tuple[list[Resource], BaseException | None]:
        try:
            found, failed = await client.discover_partial()
        except ApiError as err:
            return [], err
        return preferred_namespaced(found), (GroupDiscoveryFailed(failed) if failed else None)

    return discover


class NamespacedResourcesDeleter:
    """Deletes all content of terminating namespaces and then removes ``finalizer_token`` from them."""

    def __init__(self, client: ApiClient, discover: DiscoverFn, clock: Clock, *,
                 finalizer_token: str = FINALIZER_KUBERNETES, logger: Any = None) -> None:
        self.client = client
        self.discover = discover
        self.clock = clock
        self.finalizer_token = finalizer_token
        self.log = logger if logger is not None else log

    async def delete(self, name: str) -> None:
        """One pass; raises :class:`ResourcesRemainingError` to be called again later, any other error to retry."""
        try:
            namespace = await self.client.get(NAMESPACES, name)
        except NotFound:
            return
        if not meta(namespace).get("deletionTimestamp"):
            return
        self.log.debug("syncing namespace", namespace=name, finalizer_token=self.finalizer_token)
        try:
            namespace = await self.retry_on_conflict(namespace, self.update_namespace_status)
        except NotFound:
            return
        # Someone may have cleared the deletion meanwhile (not possible today, but upstream guards it).
        if not meta(namespace).get("deletionTimestamp"):
            return
        if finalized(namespace):
            return
        estimate = await self.delete_all_content(namespace)
        if estimate > 0:
            raise ResourcesRemainingError(estimate)
        try:
            await self.retry_on_conflict(namespace, self.finalize_namespace)
        except NotFound:
            # Another deleter sharing our finalizer token finished the job first.
            return

    # --- writes to the namespace -------------------------------------------------------------------

    async def retry_on_conflict(self, namespace: Obj, fn: Callable[[Obj], Awaitable[Obj]]) -> Obj:
        """``fn(namespace)``, again on a fresh read after each 409, as long as the UID stays the same."""
        latest = namespace
        while True:
            try:
                return await fn(latest)
            except Conflict:
                pass
            previous = latest
            latest = await self.client.get(NAMESPACES, str(meta(latest).get("name", "")))
            if meta(previous).get("uid") != meta(latest).get("uid"):
                raise RuntimeError("namespace uid has changed across retries")

    async def update_namespace_status(self, namespace: Obj) -> Obj:
        """Make sure a deleting namespace reports phase Terminating."""
        status = namespace.get("status") or {}
        if not meta(namespace).get("deletionTimestamp") or status.get("phase") == "Terminating":
            return namespace
        return await self.client.update_status(NAMESPACES, {**namespace, "status": {**status, "phase": "Terminating"}})

    async def finalize_namespace(self, namespace: Obj) -> Obj:
        """Remove our token from ``spec.finalizers`` through the ``finalize`` subresource."""
        finalizers = sorted({f for f in (namespace.get("spec") or {}).get("finalizers") or ()
                             if f != self.finalizer_token})
        body: Obj = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": dict(meta(namespace)),
            "spec": {**(namespace.get("spec") or {}), "finalizers": finalizers},
        }
        name = str(meta(namespace).get("name", ""))
        try:
            result = await self.client.request("PUT", NAMESPACES.path(None, name, "finalize"), body=body)
        except NotFound:
            return namespace  # already gone: nothing left to finalize
        return result if isinstance(result, dict) else namespace

    # --- content --------------------------------------------------------------------------------------

    async def delete_all_content(self, namespace: Obj) -> int:
        """Delete every namespaced object in ``namespace``; the seconds to wait before checking again.

        Raises :class:`AggregateError` if discovery or any resource failed (after trying all of them)."""
        name = str(meta(namespace).get("name", ""))
        deleted_at = parse_time(meta(namespace).get("deletionTimestamp")) or self.clock.now()
        errors: list[BaseException] = []
        updater = NamespaceConditionUpdater(self.clock.now())
        estimate = 0
        resources, discovery_err = await self.discover()
        if discovery_err is not None:
            # Not fatal: delete what was found, and report the rest.
            errors.append(discovery_err)
            updater.process_discover_resources_err(discovery_err)
        deletable: dict[tuple[str, str, str], Resource] = {}
        for res in resources:
            if "delete" in res.verbs:
                deletable.setdefault((res.group, res.version, res.plural), res)
        totals = ContentTotals()
        for res in deletable.values():
            result, err = await self.delete_all_content_for_resource(res, name, deleted_at)
            if err is not None:
                errors.append(err)
                updater.process_delete_content_err(err)
            estimate = max(estimate, result.estimate)
            if result.remaining > 0:
                totals.remaining[(res.group, res.plural)] = result.remaining
                for finalizer, count in result.finalizers.items():
                    if count:
                        totals.finalizers[finalizer] = totals.finalizers.get(finalizer, 0) + count
        updater.process_content_totals(totals)
        # Always reconcile the conditions: a failure reported last pass must turn back to "ok" once fixed.
        conditions, changed = updater.update((namespace.get("status") or {}).get("conditions"))
        if changed:
            status = {**(namespace.get("status") or {}), "conditions": conditions}
            try:
                await self.client.update_status(NAMESPACES, {**namespace, "status": status})
            except ApiError as err:
                self.log.warning("couldn't update status condition for namespace", namespace=name, error=str(err))
        self.log.debug("deleted content", namespace=name, estimate=estimate, errors=len(errors))
        if errors:
            raise AggregateError(errors)
        return estimate

    async def delete_all_content_for_resource(self, res: Resource, namespace: str,
                                              deleted_at: float) -> tuple[_ResourceResult, BaseException | None]:
        """Empty one resource in ``namespace``: what remains, and the error that stopped it (if any)."""
        try:
            estimate = await self.estimate_graceful_termination(res, namespace, deleted_at)
        except ApiError as err:
            return _ResourceResult(), err
        try:
            if not await self.delete_collection(res, namespace):
                await self.delete_each_item(res, namespace)
            items = await self.list_collection(res, namespace)
        except ApiError as err:
            return _ResourceResult(estimate=estimate), err
        if items is None:
            return _ResourceResult(estimate=estimate), None
        if not items:
            return _ResourceResult(), None
        finalizers: dict[str, int] = {}
        for item in items:
            for finalizer in meta(item).get("finalizers") or ():
                finalizers[finalizer] = finalizers.get(finalizer, 0) + 1
        if estimate:
            return _ResourceResult(estimate, len(items), finalizers), None
        if finalizers:
            # Finalizers are a normal reason to wait (the GC, or their owners, will remove them).
            return _ResourceResult(FINALIZER_ESTIMATE_SECONDS, len(items), finalizers), None
        return _ResourceResult(estimate, len(items)), UnexpectedItemsError(
            f"unexpected items still remain in namespace: {namespace} for gvr: {gvr_string(res)}")

    async def delete_collection(self, res: Resource, namespace: str) -> bool:
        """DELETE the whole collection; False when the resource does not support that."""
        if "deletecollection" not in res.verbs:
            return False
        try:
            # Background: the GC must not add the orphan finalizer; we purge everything ourselves.
            await self.client.delete_collection(res, namespace, propagation_policy="Background")
        except (MethodNotAllowed, NotFound):
            # 404 too: some resources are listed by discovery yet serve no collection verbs (kubernetes#22413).
            return False
        return True

    async def list_collection(self, res: Resource, namespace: str) -> list[Obj] | None:
        """The items' metadata; None when the resource does not support listing."""
        if "list" not in res.verbs:
            return None
        try:
            items, _ = await self.client.list_all(res, namespace, metadata_only=True)
        except (MethodNotAllowed, NotFound):
            return None
        return items

    async def delete_each_item(self, res: Resource, namespace: str) -> None:
        items = await self.list_collection(res, namespace)
        for item in items or ():
            try:
                await self.client.delete(res, str(meta(item).get("name", "")), namespace,
                                         propagation_policy="Background")
            except (NotFound, MethodNotAllowed):
                continue

    # --- how long to wait ------------------------------------------------------------------------------

    async def estimate_graceful_termination(self, res: Resource, namespace: str, deleted_at: float) -> int:
        """Seconds the resource's objects may still need to go away gracefully (only pods have a grace period)."""
        estimate = 0
        if res.group == PODS.group and res.plural == PODS.plural:
            estimate = await self.estimate_graceful_termination_for_pods(namespace)
        # A grace period already over since the namespace was deleted is no reason to wait.
        if self.clock.now() - deleted_at >= estimate:
            return 0
        return estimate

    async def estimate_graceful_termination_for_pods(self, namespace: str) -> int:
        pods, _ = await self.client.list_all(PODS, namespace)
        estimate = 0
        for pod in pods:
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
            if isinstance(grace, int) and grace > estimate:
                estimate = grace
        return estimate
