"""The taint eviction controller's ``taint_eviction_controller_*`` metrics, read from the default registry as
deltas (the registry is process-wide) while pods are deleted on a FakeClock."""

from __future__ import annotations

from controller_manager.api.meta import format_time
from controller_manager.api.resources import NODES
from controller_manager.client.errors import ServerError
from controller_manager.controllers.tainteviction import metrics
from tests.controllers.nodelifecycle.fakes import cache, node, pod, seed
from tests.prometheus import sample_value

from .test_taint_eviction import NOEXEC, deleted, drain, make, tol

DURATION = "taint_eviction_controller_pod_deletion_duration_seconds"


def snapshot() -> dict[str, float]:
    values = {"total": sample_value("taint_eviction_controller_pod_deletions_total") or 0.0,
              "count": sample_value(f"{DURATION}_count") or 0.0,
              "sum": sample_value(f"{DURATION}_sum") or 0.0}
    for le in ("10.0", "30.0"):
        values[le] = sample_value(f"{DURATION}_bucket", {"le": le}) or 0.0
    return values


def moved(before: dict[str, float]) -> dict[str, float]:
    after = snapshot()
    return {k: after[k] - before[k] for k in after if after[k] != before[k]}


async def test_untolerated_pod_deleted_at_once() -> None:
    ctrl, client, _clock, _events = make([node("n", taints=[NOEXEC])], [pod("p", "n")])
    before = snapshot()
    ctrl.handle_node_update("n")
    await drain(ctrl)
    assert deleted(client) == ["default/p"]
    assert moved(before) == {"total": 1, "count": 1, "10.0": 1, "30.0": 1}  # no latency on a FakeClock


async def test_latency_counts_from_the_deadline_to_the_delete() -> None:
    ctrl, client, clock, _events = make([node("n")], [pod("p", "n", tolerations=[tol(seconds=100)])])
    seed(ctrl, client, NODES, node("n", taints=[{**NOEXEC, "timeAdded": format_time(clock.now())}]))
    ctrl.handle_node_update("n")
    before = snapshot()
    clock.advance(125)  # due at 100 s; the worker only gets to it 25 s later
    await drain(ctrl)
    assert deleted(client) == ["default/p"]
    assert moved(before) == {"total": 1, "count": 1, "sum": 25, "30.0": 1}


async def test_failed_or_needless_deletions_are_not_counted() -> None:
    ctrl, client, clock, _events = make([node("n", taints=[NOEXEC])], [pod("p", "n"), pod("q", "n")])
    client.fail[("delete", "pods")] = ServerError(500, "InternalError", "boom")
    del client.objects[("pods", "default/q")]  # gone from the server, still in the cache
    cache(ctrl.pod_informer, pod("q", "n"))
    before = snapshot()
    ctrl.handle_node_update("n")
    for _ in range(10):
        clock.advance(2)
        await drain(ctrl)
    assert ctrl.evictions.get_worker("default/p") is None
    assert ctrl.evictions.get_worker("default/q") is None
    assert moved(before) == {}


def test_buckets_are_upstreams() -> None:
    assert metrics.POD_DELETION_DURATION._upper_bounds == [  # type: ignore[attr-defined]
        0.005, 0.025, 0.1, 0.5, 1, 2.5, 10, 30, 60, 120, 180, 240, float("inf")]
