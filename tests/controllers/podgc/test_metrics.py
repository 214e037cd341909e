"""The pod garbage collector's ``pod_gc_collector_*`` metrics, read from the default registry. Each case works in a
namespace of its own (a metric label), so the process-wide registry needs no resetting."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.client.errors import ServerError
from tests.controllers.nodelifecycle.fakes import T0, cache, node, pod
from tests.prometheus import sample_value

from .test_gc_controller import make

OUT_OF_SERVICE = [{"key": "node.kubernetes.io/out-of-service", "effect": "NoExecute"}]


def counts(namespace: str, reason: str) -> tuple[float | None, float | None]:
    labels = {"namespace": namespace, "reason": reason}
    return (sample_value("pod_gc_collector_force_delete_pods_total", labels),
            sample_value("pod_gc_collector_force_delete_pod_errors_total", labels))


def done(name: str, ns: str, age: float) -> dict[str, Any]:
    return pod(name, "node", namespace=ns, phase="Failed", created=T0 - 1000 + age)


@pytest.mark.parametrize(("threshold", "nodes", "pods", "reason", "want"), [
    pytest.param(1, [node("node")], [done("a", "gc-m-terminated", 1), done("b", "gc-m-terminated", 2),
                                     done("c", "gc-m-terminated", 3)],
                 "terminated", 2, id="terminated over the threshold"),
    pytest.param(12500, [node("node", ready="False", taints=OUT_OF_SERVICE)],
                 [pod("a", "node", namespace="gc-m-oos", deleting=True), pod("b", "node", namespace="gc-m-oos")],
                 "out-of-service", 1, id="terminating on an out-of-service node"),
    pytest.param(12500, [node("node")], [pod("a", "", namespace="gc-m-unscheduled", deleting=True,
                                             phase="Pending")],
                 "unscheduled", 1, id="terminating, never scheduled"),
])
async def test_forced_deletions_are_counted_by_reason(threshold: int, nodes: list[dict[str, Any]],
                                                      pods: list[dict[str, Any]], reason: str, want: int) -> None:
    namespace = pods[0]["metadata"]["namespace"]
    total, errors = counts(namespace, reason)
    ctrl, _client, _ = make(threshold, nodes, pods)
    await ctrl.gc()
    assert counts(namespace, reason) == ((total or 0) + want, errors)


async def test_orphaned_pods_are_counted_after_quarantine() -> None:
    ctrl, _client, clock = make(12500, [], [pod("a", "gone", namespace="gc-m-orphaned")])
    await ctrl.gc()
    assert counts("gc-m-orphaned", "orphaned") == (None, None)
    clock.advance(40)
    await ctrl.gc()
    assert counts("gc-m-orphaned", "orphaned") == (1, None)


async def test_failures_count_as_errors_and_attempts() -> None:
    ns = "gc-m-errors"
    ctrl, client, _ = make(1, [node("node")], [done("a", ns, 1), done("b", ns, 2)])
    client.fail[("delete", "pods")] = ServerError(500, "InternalError", "boom")
    await ctrl.gc()
    assert counts(ns, "terminated") == (1, 1)
    del client.fail[("delete", "pods")]
    await ctrl.gc()
    assert counts(ns, "terminated") == (2, 1)


async def test_a_pod_already_gone_counts_as_an_error_as_upstream() -> None:
    ns = "gc-m-gone"
    ctrl, client, _ = make(12500, [node("node")], [])
    cache(ctrl.pod_informer, pod("a", "", namespace=ns, deleting=True, phase="Pending"))  # not on the server
    await ctrl.gc()
    assert counts(ns, "unscheduled") == (1, 1)
    assert client.verbs("pods") == [("patch/status", f"{ns}/a")]  # the status patch met the NotFound
