"""Upstream's resource_quota_controller_test.go tables: the status a sync writes (TestSyncResourceQuota), the queue a
quota event lands on (TestAddQuota), and replenishment and update filtering as the monitors see them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, cast

import pytest

from controller_manager.api.meta import format_time
from controller_manager.api.quota import replenish_on_update
from controller_manager.api.resources import CONFIGMAPS, PODS, SERVICES
from controller_manager.client import ApiClient
from controller_manager.clock import FakeClock
from controller_manager.controllers.resourcequota import ResourceQuotaController
from controller_manager.controllers.resourcequota.controller import UsageCalculationError
from controller_manager.controllers.resourcequota.evaluators import Evaluator, Registry, status_for
from controller_manager.runtime.controller import ControllerContext
from controller_manager.runtime.events import EventBroadcaster
from controller_manager.runtime.informers import Added, Deleted, SharedInformerFactory, Updated

Obj = dict[str, Any]
NOW = 1_700_000_000.0


def pod(name: str, phase: str, cpu: str = "", memory: str = "", priority_class: str = "") -> Obj:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    spec: Obj = {"containers": [{"name": "ctr", "image": "image", "resources": {"requests": requests}}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"metadata": {"name": name, "namespace": "testing"}, "spec": spec, "status": {"phase": phase}}


def running_pods() -> list[Obj]:
    return [pod("pod-running", "Running", "100m", "1Gi"), pod("pod-running-2", "Running", "100m", "1Gi"),
            pod("pod-failed", "Failed", "100m", "1Gi")]


def best_effort_pods() -> list[Obj]:
    return [pod("pod-running", "Running"), pod("pod-running-2", "Running"), pod("pod-failed", "Failed", "100m", "1Gi")]


def priority_class_pods() -> list[Obj]:
    return [pod("pod-running", "Running", "500m", "50Gi", "high"),
            pod("pod-running-2", "Running", "100m", "1Gi", "low"), pod("pod-failed", "Failed", "100m", "1Gi")]


HARD = {"cpu": "3", "memory": "100Gi", "pods": "5"}


def quota(hard: dict[str, str] | None = None, status: Obj | None = None, **spec: Any) -> Obj:
    return {"metadata": {"name": "quota", "namespace": "testing", "resourceVersion": "1"},
            "spec": {"hard": dict(HARD if hard is None else hard), **spec}, "status": status or {}}


def priority(operator: str, *values: str) -> Obj:
    expr: Obj = {"scopeName": "PriorityClass", "operator": operator}
    if values:
        expr["values"] = list(values)
    return {"matchExpressions": [expr]}


def used(cpu: str, memory: str, pods: str) -> dict[str, str]:
    return {"cpu": cpu, "memory": memory, "pods": pods}


def listing(items: Iterable[Obj]) -> Any:
    objects = list(items)
    return lambda namespace: [o for o in objects if o["metadata"].get("namespace") == namespace]


def failing(namespace: str) -> list[Obj]:
    raise RuntimeError("error listing")


SYNC_CASES = {
    "non-matching-best-effort-scoped-quota": (quota(scopes=["BestEffort"]), running_pods(), used("0", "0", "0")),
    "matching-best-effort-scoped-quota": (quota(scopes=["BestEffort"]), best_effort_pods(), used("0", "0", "2")),
    "non-matching-priorityclass-scoped-quota-OpExists": (quota(scopeSelector=priority("Exists")), running_pods(),
                                                         used("0", "0", "0")),
    "matching-priorityclass-scoped-quota-OpExists": (quota(scopeSelector=priority("Exists")), priority_class_pods(),
                                                     used("600m", "51Gi", "2")),
    "matching-priorityclass-scoped-quota-OpIn": (quota(scopeSelector=priority("In", "high", "low")),
                                                 priority_class_pods(), used("600m", "51Gi", "2")),
    "matching-priorityclass-scoped-quota-OpIn-high": (quota(scopeSelector=priority("In", "high")),
                                                      priority_class_pods(), used("500m", "50Gi", "1")),
    "matching-priorityclass-scoped-quota-OpIn-low": (quota(scopeSelector=priority("In", "low")),
                                                     priority_class_pods(), used("100m", "1Gi", "1")),
    "matching-priorityclass-scoped-quota-OpNotIn-low": (quota(scopeSelector=priority("NotIn", "high")),
                                                        priority_class_pods(), used("100m", "1Gi", "1")),
    "non-matching-priorityclass-scoped-quota-OpIn": (quota(scopeSelector=priority("In", "random")),
                                                     priority_class_pods(), used("0", "0", "0")),
    "non-matching-priorityclass-scoped-quota-OpNotIn": (quota(scopeSelector=priority("NotIn", "random")),
                                                        running_pods(), used("200m", "2Gi", "2")),
    "matching-priorityclass-scoped-quota-OpDoesNotExist": (quota(scopeSelector=priority("DoesNotExist")),
                                                           running_pods(), used("200m", "2Gi", "2")),
    "pods": (quota(), running_pods(), used("200m", "2Gi", "2")),
    "quota-spec-hard-updated": (quota({"cpu": "4"}, {"hard": {"cpu": "3"}, "used": {"cpu": "0"}}), [], {"cpu": "0"}),
    "quota-unchanged": (quota({"cpu": "4"}, {"hard": {"cpu": "0"}}), [], {"cpu": "0"}),
}


@pytest.mark.parametrize(("q", "pods", "want_used"), list(SYNC_CASES.values()), ids=list(SYNC_CASES))
def test_sync_resource_quota(q: Obj, pods: list[Obj], want_used: dict[str, str]) -> None:
    registry = Registry([Evaluator(PODS, listing(pods))])
    result = status_for(q, registry, NOW)
    assert result.errors == []
    assert result.dirty
    assert result.status == {"hard": q["spec"]["hard"], "used": want_used}


def test_sync_resource_quota_missing_status_with_calculation_error() -> None:
    q = quota({"pods": "1"})
    result = status_for(q, Registry([Evaluator(PODS, failing)]), NOW)
    assert [str(e) for e in result.errors] == ["error listing"]
    assert result.dirty
    assert result.status == {"hard": {"pods": "1"}, "used": {}}


def test_sync_resource_quota_missing_status_with_partial_calculation_error() -> None:
    q = quota({"pods": "1", "configmaps": "1"})
    result = status_for(q, Registry([Evaluator(PODS, failing), Evaluator(CONFIGMAPS, listing([]))]), NOW)
    assert [str(e) for e in result.errors] == ["error listing"]
    assert result.status == {"hard": {"pods": "1", "configmaps": "1"}, "used": {"configmaps": "0"}}


def test_sync_resource_quota_no_change_is_not_written() -> None:
    q = quota({"cpu": "4"}, {"hard": {"cpu": "4"}, "used": {"cpu": "0"}})
    assert not status_for(q, Registry([Evaluator(PODS, listing([]))]), NOW).dirty
    # Quantities compare by value, as apiequality.Semantic does.
    q = quota({"memory": "1Gi"}, {"hard": {"memory": "1073741824"}, "used": {"memory": "0"}})
    assert not status_for(q, Registry([Evaluator(PODS, listing([]))]), NOW).dirty


def test_usage_of_untracked_resources_is_kept_and_names_outside_hard_dropped() -> None:
    q = quota({"pods": "5", "count/widgets.example.com": "3"},
              {"hard": {"pods": "5", "count/widgets.example.com": "3"},
               "used": {"pods": "9", "count/widgets.example.com": "2", "secrets": "4"}})
    result = status_for(q, Registry([Evaluator(PODS, listing(running_pods()))]), NOW)
    assert result.status["used"] == {"pods": "2", "count/widgets.example.com": "2"}


def test_pod_past_its_deletion_grace_period_stops_counting() -> None:
    stuck = pod("stuck", "Running", "1")
    stuck["metadata"].update(deletionTimestamp=format_time(NOW - 60), deletionGracePeriodSeconds=30)
    leaving = pod("leaving", "Running", "1")
    leaving["metadata"].update(deletionTimestamp=format_time(NOW - 10), deletionGracePeriodSeconds=30)
    q = quota({"pods": "5", "count/pods": "5", "requests.cpu": "5"})
    result = status_for(q, Registry([Evaluator(PODS, listing([stuck, leaving]))]), NOW)
    assert result.status["used"] == {"pods": "1", "count/pods": "2", "requests.cpu": "1"}


# --- TestAddQuota ------------------------------------------------------------------------------------


class _NoClient:
    """The controller under test never reaches the API in these cases."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"unexpected client call {name}")


class _RecordingClient:
    def __init__(self) -> None:
        self.updates: list[Obj] = []

    async def update_status(self, res: Any, obj: Obj) -> Obj:
        self.updates.append(obj)
        return obj


def make_controller(client: Any | None = None) -> ResourceQuotaController:
    clock = FakeClock(NOW)
    api = cast(ApiClient, client or _NoClient())
    ctx = ControllerContext(client=api, informers=SharedInformerFactory(api, clock), clock=clock,
                            events=EventBroadcaster(api, clock), options={})
    return ResourceQuotaController(ctx)


@pytest.fixture
def controller() -> Iterator[ResourceQuotaController]:
    c = make_controller()
    yield c
    c.queue.shut_down()
    c.missing_usage_queue.shut_down()


def rq(hard: dict[str, str], status: Obj | None = None) -> Obj:
    return {"metadata": {"name": "rq", "namespace": "default"}, "spec": {"hard": hard}, "status": status or {}}


ADD_CASES = [
    pytest.param(rq({"cpu": "4"}), True, id="no status"),
    pytest.param(rq({"cpu": "4"}, {"hard": {"cpu": "4"}}), True, id="status, no usage"),
    pytest.param(rq({"requests.example/foobars.example.com": "4"},
                    {"hard": {"requests.example/foobars.example.com": "4"}}), True,
                 id="status, no usage(to validate it works for extended resources)"),
    pytest.param(rq({"cpu": "4"}, {"hard": {"cpu": "6"}, "used": {"cpu": "0"}}), True, id="status, mismatch"),
    pytest.param(rq({"foobars.example.com": "4"}, {"hard": {"foobars.example.com": "4"}}), False,
                 id="status, missing usage, but don't care (no informer)"),
    pytest.param(rq({"cpu": "4"}, {"hard": {"cpu": "4"}, "used": {"cpu": "0"}}), False, id="ready"),
]


@pytest.mark.parametrize(("q", "expected_priority"), ADD_CASES)
def test_add_quota(controller: ResourceQuotaController, q: Obj, expected_priority: bool) -> None:
    controller.add_quota(q)
    assert len(controller.missing_usage_queue) == (1 if expected_priority else 0)
    assert len(controller.queue) == (0 if expected_priority else 1)


def test_quota_events(controller: ResourceQuotaController) -> None:
    ready = rq({"cpu": "4"}, {"hard": {"cpu": "4"}, "used": {"cpu": "0"}})
    # A status-only update (this controller's or admission's) queues nothing.
    controller._on_quota(Updated(ready, rq({"cpu": "4"}, {"hard": {"cpu": "4"}, "used": {"cpu": "1"}})))
    assert (len(controller.queue), len(controller.missing_usage_queue)) == (0, 0)
    # The same spec written differently is no change either.
    controller._on_quota(Updated(ready, rq({"cpu": "4000m"}, ready["status"])))
    assert (len(controller.queue), len(controller.missing_usage_queue)) == (0, 0)
    controller._on_quota(Updated(ready, rq({"cpu": "5"}, ready["status"])))
    assert len(controller.missing_usage_queue) == 1
    controller._on_quota(Deleted(ready))
    assert len(controller.queue) == 1
    controller._on_quota(Added(ready))
    assert len(controller.queue) == 1  # the same key, queued once


async def test_replenish_queues_only_quotas_tracking_the_kind(controller: ResourceQuotaController) -> None:
    tracking = rq({"pods": "4"}, {"hard": {"pods": "4"}, "used": {"pods": "1"}})
    other = {**rq({"services": "4"}, {"hard": {"services": "4"}, "used": {"services": "0"}}),
             "metadata": {"name": "svc", "namespace": "default"}}
    elsewhere = {**tracking, "metadata": {"name": "rq", "namespace": "other"}}
    for obj in (tracking, other, elsewhere):
        controller.quotas.store._put(f"{obj['metadata']['namespace']}/{obj['metadata']['name']}", obj)
    controller.replenish(PODS, "default")
    controller.replenish(CONFIGMAPS, "default")  # no quota tracks configmaps
    assert len(controller.queue) == 1
    assert await controller.queue.get() == "default/rq"


async def test_sync_writes_status_and_raises_after_a_partial_failure() -> None:
    client = _RecordingClient()
    c = make_controller(client)
    c.registry = Registry([Evaluator(PODS, failing), Evaluator(CONFIGMAPS, listing([]))])
    q = quota({"pods": "1", "configmaps": "1"})
    with pytest.raises(UsageCalculationError, match="error listing"):
        await c.sync_quota(q)
    assert [u["status"] for u in client.updates] == [{"hard": {"pods": "1", "configmaps": "1"},
                                                      "used": {"configmaps": "0"}}]
    assert client.updates[0]["metadata"]["resourceVersion"] == "1"  # the cached version: a stale write is a 409
    client.updates.clear()
    await c.sync_quota({**q, "status": {"hard": {"configmaps": "1"}, "used": {"configmaps": "0"}},
                        "spec": {"hard": {"configmaps": "1"}}})
    assert client.updates == []


# --- DefaultUpdateFilter --------------------------------------------------------------------------------

def _svc(kind: str) -> Obj:
    return {"metadata": {"name": "s", "namespace": "default"}, "spec": {"type": kind}}


@pytest.mark.parametrize(("old", "new", "want"), [
    pytest.param(pod("p", "Running", "1"), pod("p", "Succeeded", "1"), True, id="pod-terminal"),
    pytest.param(pod("p", "Pending", "1"), pod("p", "Running", "1"), False, id="pod-running"),
    pytest.param(pod("p", "Running", "1"), {**pod("p", "Running", "1"), "spec": {
        **pod("p", "Running", "1")["spec"], "activeDeadlineSeconds": 5}}, True, id="pod-scope-changed"),
    pytest.param(pod("p", "Running", "1"), {**pod("p", "Running", "1"), "status": {
        "phase": "Running", "containerStatuses": [{"name": "ctr", "resources": {"requests": {"cpu": "2"}}}]}},
        True, id="pod-resized"),
])
def test_pod_update_filter(old: Obj, new: Obj, want: bool) -> None:
    assert replenish_on_update(PODS, old, new, NOW) is want


def test_service_and_claim_update_filter() -> None:
    assert replenish_on_update(SERVICES, _svc("NodePort"), _svc("ClusterIP"), NOW)
    assert not replenish_on_update(SERVICES, _svc("ClusterIP"), _svc(""), NOW)
    assert replenish_on_update(SERVICES, _svc("LoadBalancer"), _svc("NodePort"), NOW)
    assert not replenish_on_update(CONFIGMAPS, {"data": {"a": "1"}}, {"data": {}}, NOW)
