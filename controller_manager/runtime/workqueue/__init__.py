"""Work queues with client-go's semantics and verbs (``add``, ``get``, ``done``, ``add_after``,
``add_rate_limited``, ``forget``, ``num_requeues``, ``shut_down``, ``shut_down_with_drain``).

Each module adds one capability: ``queue`` (dedup, exclusive processing, FIFO, shutdown), ``delaying``
(``add_after`` on the injected clock), ``rate_limiting`` (per-item backoff through a rate limiter),
``rate_limiters`` (the limiters) and ``metrics`` (client-go's Prometheus families).
"""

from controller_manager.runtime.workqueue.delaying import DelayingQueue
from controller_manager.runtime.workqueue.queue import WorkQueue
from controller_manager.runtime.workqueue.rate_limiters import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    WithMaxWaitRateLimiter,
    default_controller_rate_limiter,
)
from controller_manager.runtime.workqueue.rate_limiting import RateLimitingQueue

__all__ = [
    "BucketRateLimiter",
    "DelayingQueue",
    "ItemExponentialFailureRateLimiter",
    "ItemFastSlowRateLimiter",
    "MaxOfRateLimiter",
    "RateLimiter",
    "RateLimitingQueue",
    "WithMaxWaitRateLimiter",
    "WorkQueue",
    "default_controller_rate_limiter",
]
