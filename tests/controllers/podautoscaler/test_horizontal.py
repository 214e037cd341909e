"""Upstream's horizontal_test.go cases, through one reconcile of the controller against fake API responses: the
desired replicas, the scale written, the conditions (type/status/reason) and events. Resource and ContainerResource
metrics come from a resource metrics API; the Pods/Object/External cases run on a cluster without the custom and
external metrics APIs and expect upstream's errors. Also the pure helpers' tables (convertDesiredReplicasWithRules,
scaling rules with scale events, stabilization)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from controller_manager.api import selectors
from controller_manager.api.meta import format_time
from controller_manager.api.resources import DEPLOYMENTS, REPLICASETS, STATEFULSETS, Resource
from controller_manager.client.errors import ApiError, Conflict, NotFound
from controller_manager.clock import FakeClock
from controller_manager.controllers.podautoscaler import HorizontalController
from controller_manager.controllers.podautoscaler.controller import (
    _Recommendation,
    _ScaleEvent,
    calculate_scale_down_limit_with_behaviors,
    calculate_scale_up_limit_with_scaling_rules,
    convert_desired_replicas_with_rules,
)
from controller_manager.runtime.controller import ControllerContext
from controller_manager.runtime.events import EventBroadcaster
from controller_manager.runtime.informers import Added, Deleted, SharedInformerFactory, Updated
from tests.controllers.podautoscaler.fakes import NAMESPACE, POD_PREFIX
from tests.prometheus import sample_value

NOW = 1_700_000_000.0
HOT = NOW
COOL = NOW - 3 * 60
HPA_NAME = "test-hpa"
KEY = f"{NAMESPACE}/{HPA_NAME}"
RC = Resource("", "v1", "replicationcontrollers", "ReplicationController", True, subresources=("status", "scale"))
OPTIONS = {"horizontal_pod_autoscaler_tolerance": 0.1, "horizontal_pod_autoscaler_cpu_initialization_period": 120.0,
           "horizontal_pod_autoscaler_initial_readiness_delay": 10.0,
           "horizontal_pod_autoscaler_downscale_stabilization": 300.0}
NO_CUSTOM_METRICS = ("unable to fetch metrics from custom metrics API: no custom metrics API (custom.metrics.k8s.io) "
                     "registered")


@dataclass
class FakeApi:
    """The API server as the controller sees it: discovery, /scale, HPA status, the metrics APIs."""

    scale: dict[str, Any]
    pod_metrics: list[dict[str, Any]]
    get_scale_error: ApiError | None = None
    update_scale_error: ApiError | None = None
    scale_writes: list[tuple[str, int]] = field(default_factory=list)
    statuses: list[dict[str, Any]] = field(default_factory=list)

    async def request(self, method: str, path: str, *, params: Any = None, **_: Any) -> Any:
        if path == "/apis":
            return {"groups": [{"name": "apps", "preferredVersion": {"version": "v1"}},
                               {"name": "metrics.k8s.io", "preferredVersion": {"version": "v1beta1"}}]}
        if path == f"/apis/metrics.k8s.io/v1beta1/namespaces/{NAMESPACE}/pods":
            assert params == {"labelSelector": f"name={POD_PREFIX}"}
            return {"items": self.pod_metrics}
        if path.startswith("/apis/external.metrics.k8s.io/"):
            raise NotFound(404, "NotFound", "the server could not find the requested resource", None,
                           b"404 page not found")
        raise AssertionError(f"unexpected request {method} {path}")

    async def discover(self) -> list[Resource]:
        return [DEPLOYMENTS, REPLICASETS, STATEFULSETS, RC]

    async def get_scale(self, res: Resource, name: str, namespace: str | None) -> dict[str, Any]:
        if self.get_scale_error is not None:
            raise self.get_scale_error
        return dict(self.scale)

    async def update_subresource(self, res: Resource, obj: dict[str, Any], subresource: str) -> dict[str, Any]:
        assert subresource == "scale"
        if self.update_scale_error is not None:
            raise self.update_scale_error
        self.scale_writes.append((res.plural, obj["spec"]["replicas"]))
        return obj

    async def update_status(self, res: Resource, obj: dict[str, Any]) -> dict[str, Any]:
        self.statuses.append(obj["status"])
        return obj


@dataclass
class FakeRecorder:
    events: list[tuple[str, str, str]] = field(default_factory=list)

    def event(self, obj: Any, type_: str, reason: str, message: str, *, resource: Resource | None = None) -> None:
        self.events.append((type_, reason, message))


def cpu(target: int) -> dict[str, Any]:
    return {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization",
                                                                      "averageUtilization": target}}}


@dataclass
class Case:
    min_replicas: int | None
    max_replicas: int
    spec_replicas: int
    expected: int
    metrics: list[dict[str, Any]] = field(default_factory=list)
    levels: list[int] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    readiness: list[str] | None = None
    start: list[float] | None = None
    phase: list[str] | None = None
    deleted: list[bool] | None = None
    cpu_current: int | None = None
    conditions: dict[str, tuple[str, str]] = field(default_factory=dict)  # overrides of statusOk
    kind: tuple[str, str] = ("ReplicationController", "v1")
    behavior: dict[str, Any] | None = None
    selector: str = f"name={POD_PREFIX}"
    recommendations: list[tuple[int, float]] | None = field(default_factory=list)
    events: list[tuple[str, str, str]] = field(default_factory=list)  # expected among the recorded ones
    exact: bool = False  # conditions are all there is (not overrides of statusOk)


STATUS_OK = {"AbleToScale": ("True", "SucceededRescale"), "ScalingActive": ("True", "ValidMetricFound"),
             "ScalingLimited": ("False", "DesiredWithinRange")}


def pods(case: Case) -> list[dict[str, Any]]:
    count = max(case.spec_replicas, len(case.phase or ()))
    out = []
    for i in range(count):
        start = case.start[i] if case.start else 0.0
        containers = [{"name": f"container{c}", "image": "i"} for c in (1, 2)]
        if i < len(case.requests):
            for c in containers:
                c["resources"] = {"requests": {"cpu": case.requests[i]}}
        meta: dict[str, Any] = {"name": f"{POD_PREFIX}-{i}", "namespace": NAMESPACE,
                                "labels": {"name": POD_PREFIX}}
        if case.deleted and case.deleted[i]:
            meta["deletionTimestamp"] = format_time(NOW)
        out.append({"metadata": meta, "spec": {"containers": containers}, "status": {
            "phase": case.phase[i] if case.phase else "Running", "startTime": format_time(start),
            "conditions": [{"type": "Ready", "status": case.readiness[i] if case.readiness else "True",
                            "lastTransitionTime": format_time(start)}]}})
    return out


def pod_metrics(case: Case) -> list[dict[str, Any]]:
    return [{"metadata": {"name": f"{POD_PREFIX}-{i}", "namespace": NAMESPACE}, "timestamp": format_time(NOW),
             "window": "1m0s", "containers": [{"name": f"container{c}", "usage": {"cpu": f"{level}m"}}
                                               for c in (1, 2)]}
            for i, level in enumerate(case.levels)]


def hpa_object(case: Case) -> dict[str, Any]:
    kind, api_version = case.kind
    spec: dict[str, Any] = {"scaleTargetRef": {"kind": kind, "name": "test-target", "apiVersion": api_version},
                            "maxReplicas": case.max_replicas, "metrics": case.metrics}
    if case.min_replicas is not None:
        spec["minReplicas"] = case.min_replicas
    if case.behavior is not None:
        spec["behavior"] = case.behavior
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": HPA_NAME, "namespace": NAMESPACE, "resourceVersion": "1", "generation": 1},
            "spec": spec, "status": {"currentReplicas": case.spec_replicas, "desiredReplicas": case.spec_replicas}}


def new_controller(case: Case, api: FakeApi, *, extra_pods: list[dict[str, Any]] = ()) -> tuple[
        HorizontalController, FakeRecorder]:
    clock = FakeClock(NOW)
    factory = SharedInformerFactory(api, clock)  # type: ignore[arg-type]
    ctx = ControllerContext(client=api, informers=factory, clock=clock,  # type: ignore[arg-type]
                            events=EventBroadcaster(api, clock), options=OPTIONS)  # type: ignore[arg-type]
    controller = HorizontalController(ctx)
    recorder = FakeRecorder()
    controller.recorder = recorder  # type: ignore[assignment]
    for pod in [*pods(case), *extra_pods]:
        controller.pod_informer.store._put(f"{NAMESPACE}/{pod['metadata']['name']}", pod)
    if case.recommendations is not None:
        controller.recommendations[KEY] = [_Recommendation(r, t) for r, t in case.recommendations]
    return controller, recorder


async def run_case(case: Case, api: FakeApi | None = None) -> tuple[FakeApi, FakeRecorder, Exception | None]:
    kind = case.kind[0]
    api = api or FakeApi({"kind": "Scale", "apiVersion": "autoscaling/v1",
                          "metadata": {"name": "test-target", "namespace": NAMESPACE},
                          "spec": {"replicas": case.spec_replicas},
                          "status": {"replicas": case.spec_replicas, "selector": case.selector}}, pod_metrics(case))
    controller, recorder = new_controller(case, api)
    error = await controller.reconcile_autoscaler(hpa_object(case), KEY)
    replicas = api.scale_writes[-1][1] if api.scale_writes else case.spec_replicas
    assert replicas == case.expected, (api.scale_writes, recorder.events, error)
    if api.scale_writes:
        plural = {"ReplicationController": "replicationcontrollers", "Deployment": "deployments",
                  "ReplicaSet": "replicasets"}[kind]
        assert api.scale_writes == [(plural, case.expected)]
    status = api.statuses[-1]
    got = {c["type"]: (c["status"], c["reason"]) for c in status.get("conditions") or ()}
    if case.exact:
        want = case.conditions
    elif case.conditions.get("ScalingActive", ("True",))[0] == "False":  # no replica count: nothing limited it
        want = {k: v for k, v in {**STATUS_OK, **case.conditions}.items() if k != "ScalingLimited"}
    else:
        want = {**STATUS_OK, **case.conditions}
    assert got == want, recorder.events
    if case.cpu_current is not None:
        assert status["currentMetrics"][0]["resource"]["current"]["averageUtilization"] == case.cpu_current
    for event in case.events:
        assert event in recorder.events, recorder.events
    return api, recorder, error


ONE = "1.0"
CASES = {
    "scale up": Case(2, 6, 3, 5, [cpu(30)], [300, 500, 700], [ONE] * 3, cpu_current=50,
                     events=[("Normal", "SuccessfulRescale", "New size: 5; reason: cpu resource utilization "
                                                             "(percentage of request) above target")]),
    "scale up container": Case(2, 6, 3, 5, [{"type": "ContainerResource", "containerResource": {
        "name": "cpu", "container": "container1", "target": {"type": "Utilization", "averageUtilization": 30}}}],
        [300, 500, 700], [ONE] * 3,
        events=[("Normal", "SuccessfulRescale", "New size: 5; reason: cpu container resource utilization "
                                                "(percentage of request) above target")]),
    "scale up unready less scale": Case(2, 6, 3, 4, [cpu(30)], [300, 500, 700], [ONE] * 3,
                                        readiness=["False", "True", "True"], cpu_current=60),
    "scale up hot cpu less scale": Case(2, 6, 3, 4, [cpu(30)], [300, 500, 700], [ONE] * 3, start=[HOT, COOL, COOL],
                                        cpu_current=60),
    "scale up unready no scale": Case(2, 6, 3, 3, [cpu(30)], [400, 500, 700], [ONE] * 3,
                                      readiness=["True", "False", "False"], cpu_current=40,
                                      conditions={"AbleToScale": ("True", "ReadyForNewScale")}),
    "scale up hot cpu no scale": Case(2, 6, 3, 3, [cpu(30)], [400, 500, 700], [ONE] * 3,
                                      readiness=["True", "False", "False"], start=[COOL, HOT, HOT], cpu_current=40,
                                      conditions={"AbleToScale": ("True", "ReadyForNewScale")}),
    "scale up ignores failed pods": Case(2, 6, 2, 4, [cpu(30)], [500, 700], [ONE] * 4,
                                         readiness=["True", "True", "False", "False"],
                                         phase=["Running", "Running", "Failed", "Failed"], cpu_current=60),
    "scale up ignores deletion pods": Case(2, 6, 2, 4, [cpu(30)], [500, 700], [ONE] * 4,
                                           readiness=["True", "True", "False", "False"], phase=["Running"] * 4,
                                           deleted=[False, False, True, True], cpu_current=60),
    "scale up deployment": Case(2, 6, 3, 5, [cpu(30)], [300, 500, 700], [ONE] * 3, kind=("Deployment", "apps/v1")),
    "scale up replicaset": Case(2, 6, 3, 5, [cpu(30)], [300, 500, 700], [ONE] * 3, kind=("ReplicaSet", "apps/v1")),
    "scale down": Case(2, 6, 5, 3, [cpu(50)], [100, 300, 500, 250, 250], [ONE] * 5, cpu_current=28,
                       events=[("Normal", "SuccessfulRescale", "New size: 3; reason: All metrics below target")]),
    "scale down ignores unready pods": Case(2, 6, 5, 2, [cpu(50)], [100, 300, 500, 250, 250], [ONE] * 5,
                                            readiness=["True", "True", "True", "False", "False"], cpu_current=30),
    "scale down ignores hot cpu pods": Case(2, 6, 5, 2, [cpu(50)], [100, 300, 500, 250, 250], [ONE] * 5,
                                            start=[COOL, COOL, COOL, HOT, HOT], cpu_current=30),
    "scale down ignores failed pods": Case(2, 6, 5, 3, [cpu(50)], [100, 300, 500, 250, 250], [ONE] * 7,
                                           readiness=["True"] * 5 + ["False"] * 2,
                                           phase=["Running"] * 5 + ["Failed"] * 2, cpu_current=28),
    "tolerance": Case(1, 5, 3, 3, [cpu(100)], [1010, 1030, 1020], ["0.9", "1.0", "1.1"],
                      conditions={"AbleToScale": ("True", "ReadyForNewScale")}),
    "min replicas": Case(2, 5, 3, 2, [cpu(90)], [10, 95, 10], ["0.9", "1.0", "1.1"],
                         conditions={"ScalingLimited": ("True", "TooFewReplicas")}),
    "zero min replicas": Case(0, 5, 3, 0, [cpu(90)], [0, 0, 0], ["0.9", "1.0", "1.1"]),
    "max replicas": Case(2, 5, 3, 5, [cpu(90)], [8000, 9500, 1000], ["0.9", "1.0", "1.1"],
                         conditions={"ScalingLimited": ("True", "TooManyReplicas")}),
    "upscale cap": Case(1, 100, 3, 6, [cpu(10)], [100, 200, 300], ["0.1"] * 3,
                        conditions={"ScalingLimited": ("True", "ScaleUpLimit")}),
    "upscale cap greater than max replicas": Case(1, 20, 3, 6, [cpu(10)], [100, 200, 300], ["0.1"] * 3,
                                                  conditions={"ScalingLimited": ("True", "ScaleUpLimit")}),
    "more replicas than spec max": Case(2, 6, 7, 6, [cpu(50)], [100] * 7, [ONE] * 7,
                                        events=[("Normal", "SuccessfulRescale", "New size: 6; reason: Current "
                                                                                "number of replicas above "
                                                                                "Spec.MaxReplicas")],
                                        conditions={"AbleToScale": ("True", "SucceededRescale")}, exact=True),
    "fewer replicas than spec min": Case(4, 6, 2, 4, [cpu(50)], [100] * 2, [ONE] * 2,
                                         events=[("Normal", "SuccessfulRescale", "New size: 4; reason: Current "
                                                                                 "number of replicas below "
                                                                                 "Spec.MinReplicas")],
                                         conditions={"AbleToScale": ("True", "SucceededRescale")}, exact=True),
    "stabilize downscale": Case(1, 5, 4, 4, [cpu(50)], [50, 50, 50, 50], [ONE] * 4,
                                recommendations=[(10, NOW - 10 * 60), (4, NOW - 60)],
                                conditions={"AbleToScale": ("True", "ScaleDownStabilized")}),
    "no stabilization without history": Case(1, 5, 4, 1, [cpu(50)], [50, 50, 50, 50], [ONE] * 4,
                                             recommendations=[]),
    "first reconcile records the current count": Case(1, 5, 4, 4, [cpu(50)], [50, 50, 50, 50], [ONE] * 4,
                                                      recommendations=None,
                                                      conditions={"AbleToScale": ("True", "ScaleDownStabilized")}),
    "scale down with behavior limit": Case(1, 10, 5, 4, [cpu(50)], [100] * 5, [ONE] * 5, behavior={
        "scaleDown": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                      "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}},
        conditions={"ScalingLimited": ("True", "ScaleDownLimit")}),
    "behavior without a scale-down window uses the flag's": Case(1, 10, 5, 5, [cpu(50)], [100] * 5, [ONE] * 5,
                                                                 behavior={"scaleDown": {"selectPolicy": "Max"}},
                                                                 recommendations=[(5, NOW - 60)],
                                                                 conditions={"AbleToScale": ("True",
                                                                                             "ScaleDownStabilized")}),
    "scale up with behavior limit": Case(1, 10, 2, 3, [cpu(50)], [1000] * 2, [ONE] * 2, behavior={
        "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                    "policies": [{"type": "Percent", "value": 50, "periodSeconds": 60}]}},
        conditions={"ScalingLimited": ("True", "ScaleUpLimit")}),
    "scale up disabled by behavior": Case(1, 10, 2, 2, [cpu(50)], [1000] * 2, [ONE] * 2, behavior={
        "scaleUp": {"selectPolicy": "Disabled"}},
        conditions={"AbleToScale": ("True", "ReadyForNewScale"), "ScalingLimited": ("True", "ScaleUpLimit")}),
    "behavior tolerance keeps a small scale up": Case(1, 10, 3, 3, [cpu(100)], [1150] * 3, [ONE] * 3, behavior={
        "scaleUp": {"tolerance": "0.2"}}, conditions={"AbleToScale": ("True", "ReadyForNewScale")}),
    "behavior tolerance allows a small scale up": Case(1, 10, 3, 4, [cpu(100)], [1080] * 3, [ONE] * 3, behavior={
        "scaleUp": {"tolerance": "0.05"}}),
}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
async def test_reconcile(case: Case) -> None:
    await run_case(case)


def failed_active(reason: str) -> dict[str, tuple[str, str]]:
    return {"AbleToScale": ("True", "SucceededGetScale"), "ScalingActive": ("False", reason)}


DEPLOY_REF = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "some-deployment"}
# Pods/Object/External metrics on a cluster serving neither custom.metrics.k8s.io nor external.metrics.k8s.io
ABSENT_API_CASES = {
    "pods metric": (
        {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue",
                                                                       "averageValue": "15"}}},
        "FailedGetPodsMetric", f"unable to get metric qps: {NO_CUSTOM_METRICS}",
        "failed to get pods metric value: unable to get metric qps: " + NO_CUSTOM_METRICS),
    "object metric": (
        {"type": "Object", "object": {"describedObject": DEPLOY_REF, "metric": {"name": "qps"},
                                      "target": {"type": "Value", "value": "15"}}},
        "FailedGetObjectMetric",
        f"unable to get metric qps: Deployment on {NAMESPACE} some-deployment/{NO_CUSTOM_METRICS}",
        f"failed to get object metric value: unable to get metric qps: Deployment on {NAMESPACE} "
        f"some-deployment/{NO_CUSTOM_METRICS}"),
    "per-pod object metric": (
        {"type": "Object", "object": {"describedObject": DEPLOY_REF, "metric": {"name": "qps"},
                                      "target": {"type": "AverageValue", "averageValue": "10"}}},
        "FailedGetObjectMetric",
        f"unable to get metric qps: Deployment on {NAMESPACE} some-deployment/{NO_CUSTOM_METRICS}",
        f"failed to get object metric value: failed to get qps object metric: unable to get metric qps: "
        f"Deployment on {NAMESPACE} some-deployment/{NO_CUSTOM_METRICS}"),
    "external metric": (
        {"type": "External", "external": {"metric": {"name": "qps", "selector": {}},
                                          "target": {"type": "Value", "value": "6666m"}}},
        "FailedGetExternalMetric",
        f"unable to get external metric {NAMESPACE}/qps/&LabelSelector{{MatchLabels:map[string]string{{}},"
        "MatchExpressions:[]LabelSelectorRequirement{},}: unable to fetch metrics from external metrics API: the "
        "server could not find the requested resource (get qps.external.metrics.k8s.io)",
        None),
    "per-pod external metric": (
        {"type": "External", "external": {"metric": {"name": "qps", "selector": {"matchLabels": {"a": "b"}}},
                                          "target": {"type": "AverageValue", "averageValue": "2222m"}}},
        "FailedGetExternalMetric",
        f"unable to get external metric {NAMESPACE}/qps/&LabelSelector{{MatchLabels:map[string]string{{a: b,}},"
        "MatchExpressions:[]LabelSelectorRequirement{},}: unable to fetch metrics from external metrics API: the "
        "server could not find the requested resource (get qps.external.metrics.k8s.io)",
        None),
}


@pytest.mark.parametrize(("metric", "reason", "message", "error"), list(ABSENT_API_CASES.values()),
                         ids=list(ABSENT_API_CASES))
async def test_metrics_api_absent(metric: dict[str, Any], reason: str, message: str, error: str | None) -> None:
    case = Case(2, 6, 3, 3, [metric], [], [ONE] * 3, conditions=failed_active(reason),
                events=[("Warning", reason, message)])
    api, recorder, err = await run_case(case)
    assert api.statuses[-1]["currentMetrics"] == [{"type": ""}]
    condition = next(c for c in api.statuses[-1]["conditions"] if c["type"] == "ScalingActive")
    assert condition["message"] == f"the HPA was unable to compute the replica count: {message}"
    assert err is not None
    assert "invalid metrics (1 invalid out of 1), first error is: " in str(err)
    if error is not None:
        assert str(err).endswith(error)
    computed = [e for e in recorder.events if e[1] == "FailedComputeMetricsReplicas"]
    assert computed == [("Warning", "FailedComputeMetricsReplicas",
                         f"invalid metrics (1 invalid out of 1), first error is: {str(err).split('is: ', 1)[1]}")]


async def test_one_invalid_metric_does_not_stop_a_scale_up() -> None:
    case = Case(2, 6, 3, 4, [cpu(30), {"type": "CheddarCheese"}], [300, 400, 500], [ONE] * 3)
    _, recorder, err = await run_case(case)
    assert str(err) == ('invalid metrics (1 invalid out of 2), first error is: unknown metric source type '
                        '"CheddarCheese"')
    assert ("Warning", "InvalidMetricSourceType", 'unknown metric source type "CheddarCheese"') in recorder.events


async def test_one_invalid_metric_stops_a_scale_down() -> None:
    case = Case(2, 6, 5, 5, [cpu(50), {"type": "CheddarCheese"}], [100, 300, 500, 250, 250], [ONE] * 5,
                conditions=failed_active("InvalidMetricSourceType"))
    await run_case(case)


async def test_scaling_disabled_at_zero_replicas() -> None:
    case = Case(1, 6, 0, 0, [cpu(50)], [], [], conditions={"AbleToScale": ("True", "SucceededGetScale"),
                                                          "ScalingActive": ("False", "ScalingDisabled")})
    api, _, err = await run_case(case)
    assert err is None
    assert api.scale_writes == []
    assert api.statuses[-1]["desiredReplicas"] == 0
    assert "currentReplicas" not in api.statuses[-1]


@pytest.mark.parametrize(("selector", "reason", "event"), [
    ("", "InvalidSelector", ("Warning", "SelectorRequired", "selector is required")),
    ("cheddar cheese", "InvalidSelector", None),
])
async def test_condition_invalid_selector(selector: str, reason: str, event: tuple[str, str, str] | None) -> None:
    case = Case(1, 6, 3, 3, [cpu(50)], [100] * 3, [ONE] * 3, selector=selector, conditions=failed_active(reason),
                events=[event] if event else [])
    _, recorder, _ = await run_case(case)
    assert any(e[1] in ("SelectorRequired", "InvalidSelector") for e in recorder.events)


async def test_condition_ambiguous_selector() -> None:
    case = Case(1, 6, 3, 3, [cpu(50)], [100] * 3, [ONE] * 3)
    api = FakeApi({"spec": {"replicas": 3}, "status": {"replicas": 3, "selector": f"name={POD_PREFIX}"}},
                  pod_metrics(case))
    controller, recorder = new_controller(case, api)
    controller.hpa_selectors[KEY] = None
    controller.hpa_selectors[f"{NAMESPACE}/other"] = selectors.parse(f"name={POD_PREFIX}")
    await controller.reconcile_autoscaler(hpa_object(case), KEY)
    condition = next(c for c in api.statuses[-1]["conditions"] if c["type"] == "ScalingActive")
    message = (f"pods by selector name={POD_PREFIX} are controlled by multiple HPAs: "
               f"[{NAMESPACE}/other {NAMESPACE}/{HPA_NAME}]")
    assert (condition["status"], condition["reason"], condition["message"]) == ("False", "AmbiguousSelector", message)
    assert ("Warning", "AmbiguousSelector", message) in recorder.events
    assert api.scale_writes == []


async def test_condition_failed_get_scale() -> None:
    case = Case(1, 6, 3, 3, [cpu(50)], [], [], conditions={"AbleToScale": ("False", "FailedGetScale")})
    api = FakeApi({}, [], get_scale_error=NotFound(404, "NotFound",
                                                   'replicationcontrollers "test-target" not found'))
    controller, recorder = new_controller(case, api)
    err = await controller.reconcile_autoscaler(hpa_object(case), KEY)
    assert str(err) == (f"failed to query scale subresource for ReplicationController/{NAMESPACE}/test-target: "
                        'replicationcontrollers "test-target" not found')
    condition = api.statuses[-1]["conditions"][0]
    assert (condition["type"], condition["status"], condition["reason"], condition["message"]) == (
        "AbleToScale", "False", "FailedGetScale", "the HPA controller was unable to get the target's current "
                                                  'scale: replicationcontrollers "test-target" not found')
    assert recorder.events == [("Warning", "FailedGetScale", 'replicationcontrollers "test-target" not found')]


async def test_condition_failed_get_scale_for_an_unknown_kind() -> None:
    case = Case(1, 6, 3, 3, [cpu(50)], [], [], kind=("Cheese", "dairy.example/v1"))
    api = FakeApi({}, [])
    controller, recorder = new_controller(case, api)
    err = await controller.reconcile_autoscaler(hpa_object(case), KEY)
    assert str(err) == ('unable to determine resource for scale target reference: no matches for kind "Cheese" in '
                        'group "dairy.example"')
    assert recorder.events == [("Warning", "FailedGetScale", 'no matches for kind "Cheese" in group "dairy.example"')]


async def test_condition_failed_update_scale() -> None:
    case = Case(2, 6, 3, 3, [cpu(30)], [300, 500, 700], [ONE] * 3)
    api = FakeApi({"spec": {"replicas": 3}, "status": {"replicas": 3, "selector": f"name={POD_PREFIX}"}},
                  pod_metrics(case), update_scale_error=Conflict(409, "Conflict", "the object has been modified"))
    controller, recorder = new_controller(case, api)
    err = await controller.reconcile_autoscaler(hpa_object(case), KEY)
    assert str(err) == (f"failed to rescale ReplicationController/{NAMESPACE}/test-target: "
                        "the object has been modified")
    got = {c["type"]: (c["status"], c["reason"]) for c in api.statuses[-1]["conditions"]}
    assert got["AbleToScale"] == ("False", "FailedUpdateScale")
    assert ("Warning", "FailedRescale", "New size: 5; reason: cpu resource utilization (percentage of request) above "
                                        "target; error: the object has been modified") in recorder.events


async def test_status_is_written_only_when_it_changes_and_reconciliations_are_counted() -> None:
    case = Case(1, 5, 3, 3, [cpu(100)], [1010, 1030, 1020], ["0.9", "1.0", "1.1"])
    api = FakeApi({"spec": {"replicas": 3}, "status": {"replicas": 3, "selector": f"name={POD_PREFIX}"}},
                  pod_metrics(case))
    controller, _ = new_controller(case, api)

    def count(action: str) -> float:
        return sample_value("horizontal_pod_autoscaler_controller_reconciliations_total",
                                         {"action": action, "error": "none"}) or 0.0

    before = count("none")
    hpa = hpa_object(case)
    await controller.reconcile_autoscaler(hpa, KEY)
    assert len(api.statuses) == 1
    hpa["status"] = api.statuses[-1]
    await controller.reconcile_autoscaler(hpa, KEY)
    assert len(api.statuses) == 1  # nothing changed: no write
    assert count("none") == before + 2
    assert sample_value("horizontal_pod_autoscaler_controller_metric_computation_total",
                                     {"action": "none", "error": "none", "metric_type": "Resource"})


# --- the pure helpers' tables -------------------------------------------------------------------------------

@pytest.mark.parametrize(("current", "desired", "low", "high", "want", "condition"), [
    pytest.param(5, 7, 3, 8, 7, "DesiredWithinRange", id="prenormalized desired replicas within range"),
    pytest.param(3, 1, 2, 8, 2, "TooFewReplicas", id="prenormalized desired replicas < minReplicas"),
    pytest.param(1, 0, 0, 10, 0, "DesiredWithinRange", id="prenormalized desired zeroed replicas within range"),
    pytest.param(20, 1000, 1, 10, 10, "TooManyReplicas",
                 id="maxReplicas is the limit because maxReplicas < scaleUpLimit"),
    pytest.param(3, 1000, 1, 2000, 6, "ScaleUpLimit",
                 id="scaleUpLimit is the limit because scaleUpLimit < maxReplicas"),
])
def test_convert_desired_replicas_with_rules(current: int, desired: int, low: int, high: int, want: int,
                                             condition: str) -> None:
    assert convert_desired_replicas_with_rules(current, desired, low, high)[:2] == (want, condition)


def rules(pods: int = 0, pods_period: int = 0, percent: int = 0, percent_period: int = 0,
          window: int = 0, select: str = "Max") -> dict[str, Any]:
    policies = []
    if pods:
        policies.append({"type": "Pods", "value": pods, "periodSeconds": pods_period})
    if percent:
        policies.append({"type": "Percent", "value": percent, "periodSeconds": percent_period})
    return {"stabilizationWindowSeconds": window, "selectPolicy": select, "policies": policies}


def test_calculate_limits_with_min_select_policy() -> None:
    up = rules(2, 60, 50, 60, 300, select="Min")
    assert calculate_scale_up_limit_with_scaling_rules(1, [], [], up, NOW) == 2
    assert calculate_scale_down_limit_with_behaviors(5, [], [], up, NOW) == 3


def uniform_events(changes: list[int], period: int) -> list[_ScaleEvent]:
    """Events spread over the last ``period`` seconds, each in the middle of its slice (upstream's generator)."""
    segment = period / len(changes)
    return [_ScaleEvent(c, NOW - int(period - segment * (i + 1) + segment / 2)) for i, c in enumerate(changes)]


E = uniform_events
SCALING_RULES = {
    "prenormalized desired replicas within range": (None, None, [], [], 3, 8, 5, 7, 7, "DesiredWithinRange"),
    "prenormalized desired replicas < minReplicas": (None, None, [], [], 2, 8, 3, 1, 2, "TooFewReplicas"),
    "within range when minReplicas is 0": (None, None, [], [], 0, 10, 1, 0, 0, "DesiredWithinRange"),
    "maxReplicas is the limit": (None, None, [], [], 1, 10, 20, 1000, 10, "TooManyReplicas"),
    "desired more than maximum": (None, None, [], [], 100, 150, 100, 1000, 150, "TooManyReplicas"),
    "scaleUpLimit with user policies": (rules(0, 0, 1, 60), None, [], [], 1, 2000, 3, 1000, 4, "ScaleUpLimit"),
    "scaleDownLimit with user policies": (None, rules(20, 60), [], [], 3, 2000, 1000, 3, 980, "ScaleDownLimit"),
    "scaleUp with default behavior": (None, None, [], [], 1, 1000, 10, 50, 20, "ScaleUpLimit"),
    "scaleUp pods policy larger": (rules(100, 60, 100, 60), None, [], [], 1, 1000, 10, 500, 110, "ScaleUpLimit"),
    "scaleUp percent policy larger": (rules(2, 60, 100, 60), None, [], [], 1, 1000, 10, 500, 20, "ScaleUpLimit"),
    "scaleUp large pod policy": (rules(100, 60), None, [], [], 1, 1000, 10, 50, 50, "DesiredWithinRange"),
    "scaleUp large percent policy": (rules(10000, 60), None, [], [], 1, 1000, 10, 50, 50, "DesiredWithinRange"),
    "scaleUp pod policy limitation": (rules(30, 60), None, [], [], 1, 1000, 10, 50, 40, "ScaleUpLimit"),
    "scaleUp percent policy limitation": (rules(0, 0, 200, 60), None, [], [], 1, 1000, 10, 50, 30, "ScaleUpLimit"),
    "scaleDown percent policy larger": (None, rules(20, 60, 1, 60, 300), [], [], 1, 1000, 100, 2, 80,
                                        "ScaleDownLimit"),
    "scaleDown pod policy larger": (None, rules(2, 60, 1, 60, 300), [], [], 1, 1000, 100, 2, 98, "ScaleDownLimit"),
    "scaleDown MinReplicas with large pod policy": (None, rules(100, 60, 0, 0, 300), [], [], 1, 1000, 10, 0, 1,
                                                    "TooFewReplicas"),
    "scaleDown MinReplicas with large percent policy": (None, rules(0, 0, 100, 60, 300), [], [], 5, 1000, 10, 2, 5,
                                                        "TooFewReplicas"),
    "scaleDown pod policy limitation": (None, rules(5, 60, 0, 0, 300), [], [], 1, 1000, 10, 2, 5, "ScaleDownLimit"),
    "scaleDown percent policy limitation": (None, rules(0, 0, 50, 60, 300), [], [], 1, 1000, 10, 5, 5,
                                            "DesiredWithinRange"),
    "scaleUp max with large pod policy and events": (rules(300, 60), None, E([1, 5, 9], 120), [], 1, 200, 100, 500,
                                                     200, "TooManyReplicas"),
    "scaleUp max with large percent policy and events": (rules(0, 0, 10000, 60), None, E([1, 5, 9], 120), [], 1,
                                                         200, 100, 500, 200, "TooManyReplicas"),
    "scaleUp currentReplicas limitation after many events": (rules(5, 120), None, E([1, 5, 9], 120), [], 1, 1000,
                                                             100, 500, 100, "ScaleUpLimit"),
    "scaleUp pod policy and previous events": (rules(150, 120), None, E([1, 5, 9], 120), [], 1, 1000, 100, 500, 235,
                                               "ScaleUpLimit"),
    "scaleUp percent policy and previous events": (rules(0, 0, 200, 120), None, E([1, 5, 9], 120), [], 1, 1000, 100,
                                                   500, 255, "ScaleUpLimit"),
    "scaleDown default policy and previous events": (None, None, [], E([1, 5, 9], 120), 1, 1000, 10, 5, 5,
                                                     "DesiredWithinRange"),
    "scaleDown MinReplicas large pod policy and events": (None, rules(115, 120, 0, 0, 300), [], E([1, 5, 9], 120), 1,
                                                          1000, 100, 0, 1, "TooFewReplicas"),
    "scaleDown MinReplicas=5 large pod policy and events": (None, rules(130, 120, 0, 0, 300), [], E([1, 5, 9], 120),
                                                            5, 1000, 100, 0, 5, "TooFewReplicas"),
    "scaleDown MinReplicas large percent policy and events": (None, rules(0, 0, 100, 120, 300), [],
                                                              E([1, 5, 9], 120), 5, 1000, 100, 2, 5,
                                                              "TooFewReplicas"),
    "scaleDown pod policy limitation and events": (None, rules(5, 120, 0, 0, 300), [], E([1, 5, 9], 120), 1, 1000,
                                                   100, 2, 100, "ScaleDownLimit"),
    "scaleDown percent policy limitation and events": (None, rules(0, 0, 50, 120, 300), [], E([2, 4, 6], 120), 1,
                                                       1000, 100, 0, 56, "ScaleDownLimit"),
    "scaleDown events preventing further scale down": (None, rules(0, 0, 10, 120, 300), [], E([10, 10, 10], 120), 1,
                                                       1000, 100, 0, 100, "ScaleDownLimit"),
    "scaleDown events still allowing more scale down": (None, rules(0, 0, 1000, 120, 300), [], E([10, 10, 10], 120),
                                                        1, 1000, 10, 5, 5, "DesiredWithinRange"),
    "outdated flag for one behavior up": (rules(1000, 60), None, E([8, 12, 9, 11], 120), [], 1, 1000, 100, 200, 200,
                                          "DesiredWithinRange"),
    "outdated flag two policies up": (rules(1000, 120, 100, 60), None, E([8, 12, 9, 11], 120), [], 1, 1000, 100,
                                      200, 200, "DesiredWithinRange"),
    "outdated flag one behavior down": (None, rules(1000, 60, 0, 0, 300), [], E([8, 12, 9, 11], 120), 1, 1000, 100,
                                        5, 5, "DesiredWithinRange"),
    "outdated flag two policies down": (None, rules(1000, 120, 100, 60, 300), [], E([8, 12, 9, 11], 120), 1, 1000,
                                        100, 5, 5, "DesiredWithinRange"),
}


@pytest.mark.parametrize(("up", "down", "up_events", "down_events", "low", "high", "current", "desired", "want",
                          "condition"), list(SCALING_RULES.values()), ids=list(SCALING_RULES))
def test_scaling_with_rules(up: dict[str, Any] | None, down: dict[str, Any] | None, up_events: list[_ScaleEvent],
                            down_events: list[_ScaleEvent], low: int, high: int, current: int, desired: int,
                            want: int, condition: str) -> None:
    case = Case(low, high, 0, 0)
    controller, _ = new_controller(case, FakeApi({}, []))
    controller.scale_up_events[KEY] = up_events
    controller.scale_down_events[KEY] = down_events
    behavior: dict[str, Any] = {}
    if up is not None:
        behavior["scaleUp"] = up
    if down is not None:
        behavior["scaleDown"] = down
    up_rules, down_rules = controller._behavior({"spec": {"behavior": behavior}})
    got = controller._convert_with_behavior_rate(KEY, current, desired, low, high, up_rules, down_rules)
    assert got[:2] == (want, condition)


@pytest.mark.parametrize(("history", "prenormalized", "stabilized", "log_length"), [
    pytest.param([], 5, 5, 1, id="empty log"),
    pytest.param([(4, NOW - 120), (5, NOW - 60)], 3, 5, 3, id="stabilize"),
    pytest.param([(1, NOW - 120), (2, NOW - 60)], 3, 3, 3, id="no stabilize"),
    pytest.param([(10, NOW - 600), (9, NOW - 540)], 3, 3, 2, id="no stabilize - old recommendations"),
    pytest.param([(10, NOW - 600), (4, NOW - 60), (5, NOW - 120), (9, NOW - 540)], 3, 5, 4,
                 id="stabilize - old recommendations"),
])
def test_stabilize_recommendation(history: list[tuple[int, float]], prenormalized: int, stabilized: int,
                                  log_length: int) -> None:
    controller, _ = new_controller(Case(1, 10, 0, 0), FakeApi({}, []))
    controller.recommendations["k"] = [_Recommendation(r, t) for r, t in history]
    assert controller._stabilize_recommendation("k", prenormalized) == stabilized
    assert len(controller.recommendations["k"]) == log_length


@pytest.mark.parametrize(("previous", "behavior", "kept_change"), [
    pytest.param([], None, 0, id="empty entries with default behavior"),
    pytest.param([], rules(10, 60, 100, 60), 0, id="empty entries with two-policy-behavior"),
    pytest.param([(7, NOW - 61)], None, 0, id="one outdated entry to be kept untouched without behavior"),
    pytest.param([(7, NOW - 61)], rules(10, 60, 100, 60), 0, id="one outdated entry to be replaced with behavior"),
    pytest.param([(7, NOW - 58)], rules(10, 60, 100, 60), 7, id="one actual entry to be not touched with behavior"),
    pytest.param([(7, NOW - 61), (6, NOW - 59)], rules(10, 60), 6, id="two entries, one of them to be replaced"),
])
def test_store_scale_events(previous: list[tuple[int, float]], behavior: dict[str, Any] | None,
                            kept_change: int) -> None:
    controller, _ = new_controller(Case(1, 10, 0, 0), FakeApi({}, []))
    controller.scale_up_events[KEY] = [_ScaleEvent(c, t) for c, t in previous]
    stored = None if behavior is None else {"scaleUp": behavior}
    controller._store_scale_event(stored, KEY, 5, 10)
    events = controller.scale_up_events[KEY]
    # the change in the last 60 seconds, besides the new event (which is only stored with a behavior)
    recent = sum(e.change for e in events if e.timestamp > NOW - 60 and e.timestamp != NOW)
    assert recent == kept_change
    assert (any(e.timestamp == NOW and e.change == 5 for e in events)) == (behavior is not None)


async def test_every_hpa_is_synced_once_a_sync_period() -> None:
    """Upstream's queue: a new HPA waits one period (15s by default); an update meanwhile does not hurry it."""
    case = Case(1, 5, 3, 3)
    controller, _ = new_controller(case, FakeApi({}, []))
    clock = controller.ctx.clock
    assert isinstance(clock, FakeClock)
    hpa = hpa_object(case)
    controller._on_hpa(Added(hpa))
    clock.advance(10)
    controller._on_hpa(Updated(hpa, hpa))
    clock.advance(4.9)
    assert len(controller.queue) == 0
    clock.advance(0.2)
    assert len(controller.queue) == 1
    controller._on_hpa(Deleted(hpa))
    assert KEY not in controller.hpa_selectors
