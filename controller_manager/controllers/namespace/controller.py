"""The namespace controller (``namespace-controller``): upstream's ``pkg/controller/namespace/namespace_controller.go``.

Guarantees:
- Only namespaces with a ``deletionTimestamp`` are queued, and each event is acted on 5 s later
  (``namespaceDeletionGracePeriod``): time for every apiserver to stop admitting creates into the
  namespace, so objects created at the last moment are seen and removed too.
- A sync is one pass of :class:`~.deleter.NamespacedResourcesDeleter` over the namespace, read live.
  Content still going away (:class:`~.deleter.ResourcesRemainingError`) requeues the namespace after
  ``estimate // 2 + 1`` seconds; any other failure requeues it with per-key exponential backoff capped at
  60 s (upstream's ``nsControllerRateLimiter``: namespace cleanup is retried at least every minute).
  (The shared runner forgets a key's backoff after a timed requeue; upstream keeps it. Only the next
  failure's delay differs.)
- Every ``--namespace-sync-period`` (5m) each cached namespace is looked at again, as upstream's
  resync of the namespace handler does, so a namespace still held by another finalizer gets its
  content re-deleted.
- Workers: ``--concurrent-namespace-syncs`` (10). The queue is named ``namespace`` as upstream names it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from controller_manager.api.meta import meta
from controller_manager.api.resources import NAMESPACES
from controller_manager.controllers.namespace.deleter import (
    FINALIZER_KUBERNETES,
    NamespacedResourcesDeleter,
    ResourcesRemainingError,
    server_preferred_namespaced_resources,
)
from controller_manager.runtime.controller import Controller, ControllerContext, Result
from controller_manager.runtime.informers import Added, Deleted, Event, Updated
from controller_manager.runtime.workqueue import RateLimitingQueue
from controller_manager.runtime.workqueue.rate_limiters import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
)

__all__ = ["NAMESPACE_DELETION_GRACE_PERIOD", "RESYNC_KEY", "NamespaceController", "ns_controller_rate_limiter",
           "requeue_delay"]

# Wait this long after a namespace event before acting: lifecycle admission on every apiserver (and every
# etcd member) must have seen the deletion, or a create racing it would survive the cleanup.
NAMESPACE_DELETION_GRACE_PERIOD = 5.0
DEFAULT_SYNC_PERIOD = 5 * 60.0
# Namespace names cannot start with "@", so this key never collides with one.
RESYNC_KEY = "@resync"


def ns_controller_rate_limiter(ctx: ControllerContext) -> MaxOfRateLimiter:
    """Faster than the default backoff (capped at 60 s, not 1000 s): deleting namespaces are few and
    their cleanup should finish reliably soon; the overall bucket is the usual 10 qps, burst 100."""
    return MaxOfRateLimiter(ItemExponentialFailureRateLimiter(0.005, 60.0),
                            BucketRateLimiter(10.0, 100, clock=ctx.clock))


def requeue_delay(estimate: int) -> float:
    """When to look again at a namespace whose content should be gone in ``estimate`` seconds."""
    return float(estimate // 2 + 1)


class NamespaceController(Controller):
    """Empties deleted namespaces, then removes their ``kubernetes`` finalizer so they go."""

    name: ClassVar[str] = "namespace-controller"
    alias: ClassVar[str] = "namespace"
    client_rate_scale: ClassVar[tuple[float, float] | None] = (20.0, 100.0)  # as upstream: QPS x20, burst x100
    workers_option: ClassVar[str | None] = "concurrent-namespace-syncs"
    default_workers: ClassVar[int] = 10
    deletion_grace_period: ClassVar[float] = NAMESPACE_DELETION_GRACE_PERIOD

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.queue = RateLimitingQueue("namespace", rate_limiter=ns_controller_rate_limiter(ctx), clock=ctx.clock)
        self.sync_period = _seconds(ctx.options, "namespace_sync_period", DEFAULT_SYNC_PERIOD)
        self.deleter = NamespacedResourcesDeleter(ctx.client, server_preferred_namespaced_resources(ctx.client),
                                                  ctx.clock, finalizer_token=FINALIZER_KUBERNETES, logger=self.log)
        self.informer = ctx.informers.informer(NAMESPACES)
        self.informer.add_handler(self._on_namespace)
        if self.sync_period > 0:
            self.queue.add_after(RESYNC_KEY, self.sync_period)

    # --- handlers ------------------------------------------------------------------------------------

    def _on_namespace(self, event: Event) -> None:
        if isinstance(event, Added):
            self.enqueue(event.obj)
        elif isinstance(event, Updated):
            self.enqueue(event.new)
        elif isinstance(event, Deleted):
            return  # a namespace that is gone needs nothing more

    def enqueue(self, namespace: Mapping[str, Any]) -> None:
        """Queue a deleting namespace, after the grace period that lets every apiserver see its deletion."""
        m = meta(namespace)
        if not m.get("deletionTimestamp"):
            return
        self.queue.add_after(str(m.get("name", "")), self.deletion_grace_period)

    # --- sync ------------------------------------------------------------------------------------------

    async def sync(self, key: str) -> Result | None:
        if key == RESYNC_KEY:
            for namespace in self.informer.store.list():
                self.enqueue(namespace)
            return Result(requeue_after=self.sync_period)
        if self.informer.store.get(key) is None:
            self.log.info("namespace has been deleted", key=key)
            return None
        try:
            await self.deleter.delete(key)
        except ResourcesRemainingError as remaining:
            delay = requeue_delay(remaining.estimate)
            self.log.info("content remaining in namespace", key=key, estimate=remaining.estimate,
                          wait_seconds=delay)
            return Result(requeue_after=delay)
        return None


def _seconds(options: Mapping[str, Any], name: str, default: float) -> float:
    value = options.get(name, options.get(name.replace("_", "-"), default))
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return default
