"""The horizontal pod autoscaler controller (kube-controller-manager's ``horizontal-pod-autoscaler-controller``,
``pkg/controller/podautoscaler/horizontal.go``).

Guarantees:
- Every HPA is reconciled every ``--horizontal-pod-autoscaler-sync-period`` (a fixed-interval rate limiter, as
  upstream's: an HPA's first reconcile also waits one period). Its target is resolved from
  ``scaleTargetRef`` by group and kind through discovery (every version the group serves, preferred first), and
  read and written through that resource's ``/scale`` subresource, so any scalable kind works.
- Target at 0 replicas with minReplicas > 0: autoscaling is off (``ScalingActive=False ScalingDisabled``). Above
  maxReplicas or below minReplicas the count is clamped first. Otherwise each metric proposes a count
  (:mod:`.replica_calculator`), the largest wins; failed metrics make ``ScalingActive`` False with the first
  failure's reason (``FailedGetResourceMetric``, ``FailedGetPodsMetric``, ...), and scaling goes on with the
  others only if it would not scale down.
- Without ``behavior``: the largest recommendation of the last ``--horizontal-pod-autoscaler-downscale-
  stabilization`` is used (``ScaleDownStabilized``), then the count is bounded by minReplicas and by
  ``min(maxReplicas, max(2 * current, 4))`` (``TooFewReplicas``/``TooManyReplicas``/``ScaleUpLimit``). With
  ``behavior``: per-direction stabilization windows and scaling policies (``Pods``/``Percent`` per period,
  ``selectPolicy`` Max/Min/Disabled) over the scale events this controller made, and per-direction tolerances.
- Status: ``currentReplicas``, ``desiredReplicas``, ``lastScaleTime`` (on a rescale), ``currentMetrics`` (one per
  metric; an empty entry for one that failed), conditions ``AbleToScale``/``ScalingActive``/``ScalingLimited`` with
  upstream's reasons and messages; written only when it changed. Events: ``SuccessfulRescale`` ("New size: N;
  reason: R"), ``FailedRescale``, ``FailedGetScale``, ``FailedComputeMetricsReplicas``, ``FailedGet*Metric``,
  ``SelectorRequired``, ``InvalidSelector``, ``AmbiguousSelector``, ``FailedUpdateStatus``.
- Prometheus: ``horizontal_pod_autoscaler_controller_reconciliations_total`` and
  ``_reconciliation_duration_seconds`` {action, error}, ``_metric_computation_total`` and
  ``_metric_computation_duration_seconds`` {action, error, metric_type}.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from prometheus_client import Counter, Histogram

from controller_manager.api import selectors
from controller_manager.api.meta import deep_copy, format_time, key_of, split_key
from controller_manager.api.quantity import QuantityError, milli_value, parse_quantity
from controller_manager.api.resources import HORIZONTALPODAUTOSCALERS, PODS, Resource
from controller_manager.api.selectors import Selector
from controller_manager.client.errors import ApiError
from controller_manager.controllers.podautoscaler.metrics import MetricsClient, MetricsError, RestMetricsClient
from controller_manager.controllers.podautoscaler.replica_calculator import (
    ReplicaCalculator,
    Tolerances,
    go_label_selector,
)
from controller_manager.runtime.controller import RATE_LIMITED, Controller, ControllerContext, Result
from controller_manager.runtime.informers import Added, Deleted, Event
from controller_manager.runtime.workqueue import RateLimitingQueue

__all__ = [
    "DEFAULT_SCALE_DOWN_POLICIES",
    "DEFAULT_SCALE_UP_POLICIES",
    "FixedIntervalRateLimiter",
    "HorizontalController",
    "SpecError",
    "calculate_scale_down_limit_with_behaviors",
    "calculate_scale_up_limit_with_scaling_rules",
    "convert_desired_replicas_with_rules",
    "set_condition",
]

Obj = dict[str, Any]

SCALE_UP_LIMIT_FACTOR = 2.0
SCALE_UP_LIMIT_MINIMUM = 4.0
DISCOVERY_RESET_PERIOD = 30.0
DEFAULT_SCALE_UP_POLICIES = ({"type": "Pods", "value": 4, "periodSeconds": 15},
                             {"type": "Percent", "value": 100, "periodSeconds": 15})
DEFAULT_SCALE_DOWN_POLICIES = ({"type": "Percent", "value": 100, "periodSeconds": 15},)

_BUCKETS = tuple(0.001 * 2**i for i in range(15))
_SUBSYSTEM = "horizontal_pod_autoscaler_controller"
RECONCILIATIONS = Counter(
    f"{_SUBSYSTEM}_reconciliations", "Number of reconciliations of HPA controller. The label 'action' should be "
    "either 'scale_down', 'scale_up', or 'none'. Also, the label 'error' should be either 'spec', 'internal', or "
    "'none'. Note that if both spec and internal errors happen during a reconciliation, the first one to occur is "
    "reported in `error` label.", ["action", "error"])
RECONCILIATION_DURATION = Histogram(
    f"{_SUBSYSTEM}_reconciliation_duration_seconds", "The time(seconds) that the HPA controller takes to reconcile "
    "once. The label 'action' should be either 'scale_down', 'scale_up', or 'none'. Also, the label 'error' should "
    "be either 'spec', 'internal', or 'none'. Note that if both spec and internal errors happen during a "
    "reconciliation, the first one to occur is reported in `error` label.", ["action", "error"], buckets=_BUCKETS)
METRIC_COMPUTATIONS = Counter(
    f"{_SUBSYSTEM}_metric_computation", "Number of metric computations. The label 'action' should be either "
    "'scale_down', 'scale_up', or 'none'. Also, the label 'error' should be either 'spec', 'internal', or 'none'. "
    "The label 'metric_type' corresponds to HPA.spec.metrics[*].type", ["action", "error", "metric_type"])
METRIC_COMPUTATION_DURATION = Histogram(
    f"{_SUBSYSTEM}_metric_computation_duration_seconds", "The time(seconds) that the HPA controller takes to "
    "calculate one metric. The label 'action' should be either 'scale_down', 'scale_up', or 'none'. The label "
    "'error' should be either 'spec', 'internal', or 'none'. The label 'metric_type' corresponds to "
    "HPA.spec.metrics[*].type", ["action", "error", "metric_type"], buckets=_BUCKETS)


class SpecError(Exception):
    """An error caused by the HPA's spec (upstream's errSpec): counted with error="spec"."""


class ReconcileError(Exception):
    """A reconcile failed (logged, retried after the sync period as any reconcile)."""


class FixedIntervalRateLimiter:
    """Every item waits the same interval (upstream's FixedItemIntervalRateLimiter, NewDefaultHPARateLimiter)."""

    def __init__(self, interval: float) -> None:
        self.interval = interval

    def when(self, item: Hashable) -> float:
        return self.interval

    def forget(self, item: Hashable) -> None:
        pass  # nothing is tracked

    def num_requeues(self, item: Hashable) -> int:
        return 0


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _seconds(options: Mapping[str, Any], name: str, default: float) -> float:
    value = options.get(name, options.get(name.replace("_", "-"), default))
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else default


def _go_format(message: str, *args: Any) -> str:
    return message % args if args else message


def set_condition(hpa: Obj, kind: str, status: str, reason: str, message: str, now: float) -> None:
    """setCondition: add or update the condition; its transition time moves only when the status changes."""
    conditions: list[Obj] = hpa.setdefault("status", {}).setdefault("conditions", []) or []
    hpa["status"]["conditions"] = conditions
    existing = next((c for c in conditions if c.get("type") == kind), None)
    if existing is None:
        existing = {"type": kind}
        conditions.append(existing)
    if existing.get("status") != status:
        existing["lastTransitionTime"] = format_time(now)
    existing["status"] = status
    existing["reason"] = reason
    existing["message"] = message


@dataclass(slots=True)
class _Recommendation:
    replicas: int
    timestamp: float


@dataclass(slots=True)
class _ScaleEvent:
    change: int  # absolute value
    timestamp: float
    outdated: bool = False


def _replicas_change_per_period(period: int, events: Sequence[_ScaleEvent], now: float) -> int:
    cutoff = now - period
    return sum(e.change for e in events if e.timestamp > cutoff)


def calculate_scale_up_limit_with_scaling_rules(current: int, up_events: Sequence[_ScaleEvent],
                                                down_events: Sequence[_ScaleEvent], rules: Mapping[str, Any],
                                                now: float) -> int:
    """The most replicas the scale-up rules allow now."""
    select = rules.get("selectPolicy") or "Max"
    if select == "Disabled":
        return current
    pick = min if select == "Min" else max
    result: int | None = None
    for policy in rules.get("policies") or ():
        period = int(policy.get("periodSeconds") or 0)
        start = current - _replicas_change_per_period(period, up_events, now) + _replicas_change_per_period(
            period, down_events, now)
        value = int(policy.get("value") or 0)
        if policy.get("type") == "Pods":
            proposed = start + value
        elif policy.get("type") == "Percent":
            proposed = math.ceil(start * (1 + value / 100))
        else:
            continue
        result = proposed if result is None else pick(result, proposed)
    return result if result is not None else (2**31 - 1 if select == "Min" else -(2**31))


def calculate_scale_down_limit_with_behaviors(current: int, up_events: Sequence[_ScaleEvent],
                                              down_events: Sequence[_ScaleEvent], rules: Mapping[str, Any],
                                              now: float) -> int:
    """The fewest replicas the scale-down rules allow now."""
    select = rules.get("selectPolicy") or "Max"
    if select == "Disabled":
        return current
    pick = max if select == "Min" else min
    result: int | None = None
    for policy in rules.get("policies") or ():
        period = int(policy.get("periodSeconds") or 0)
        start = current - _replicas_change_per_period(period, up_events, now) + _replicas_change_per_period(
            period, down_events, now)
        value = int(policy.get("value") or 0)
        if policy.get("type") == "Pods":
            proposed = start - value
        elif policy.get("type") == "Percent":
            proposed = int(start * (1 - value / 100))
        else:
            continue
        result = proposed if result is None else pick(result, proposed)
    return result if result is not None else (-(2**31) if select == "Min" else 2**31 - 1)


def calculate_scale_up_limit(current: int) -> int:
    return int(max(SCALE_UP_LIMIT_FACTOR * current, SCALE_UP_LIMIT_MINIMUM))


def convert_desired_replicas_with_rules(current: int, desired: int, hpa_min: int,
                                        hpa_max: int) -> tuple[int, str, str]:
    """Bounds for HPAs without behavior: (replicas, ScalingLimited reason, message)."""
    scale_up_limit = calculate_scale_up_limit(current)
    if hpa_max > scale_up_limit:
        maximum, reason, message = (scale_up_limit, "ScaleUpLimit",
                                    "the desired replica count is increasing faster than the maximum scale rate")
    else:
        maximum, reason, message = (hpa_max, "TooManyReplicas",
                                    "the desired replica count is more than the maximum replica count")
    if desired < hpa_min:
        return hpa_min, "TooFewReplicas", "the desired replica count is less than the minimum replica count"
    if desired > maximum:
        return maximum, reason, message
    return desired, "DesiredWithinRange", "the desired count is within the acceptable range"


def _milli(quantity: Any) -> int | None:
    if quantity is None:
        return None
    try:
        return milli_value(quantity)
    except (QuantityError, ValueError, TypeError):
        return None


def _milli_quantity(milli: int) -> str:
    """resource.NewMilliQuantity(v, DecimalSI).String()."""
    if milli % 1000 == 0:
        return str(milli // 1000)
    return f"{milli}m"


def _label_selector(selector: Any) -> Selector:
    """A metric's label selector. Upstream's LabelSelectorAsSelector(nil) is Nothing, whose string form is
    empty, and the metrics APIs read an empty selector as everything: so nil selects everything here."""
    if selector is None:
        return selectors.parse("")
    return selectors.from_label_selector(selector)


class _GroupKindMapper:
    """RESTMapper.RESTMappings(GroupKind) over discovery: the group's resources of that kind, preferred version
    first; refreshed on a miss at most every DISCOVERY_RESET_PERIOD seconds."""

    def __init__(self, ctx: ControllerContext) -> None:
        self._ctx = ctx
        self._by_group_kind: dict[tuple[str, str], list[Resource]] | None = None
        self._by_version_kind: dict[tuple[str, str], Resource] = {}
        self._at = float("-inf")

    async def _refresh(self) -> None:
        resources = await self._ctx.client.discover()
        groups = _dict(await self._ctx.client.request("GET", "/apis"))
        preferred = {str(_dict(g).get("name")): str(_dict(_dict(g).get("preferredVersion")).get("version") or "")
                     for g in groups.get("groups") or ()}
        preferred[""] = "v1"
        by_gk: dict[tuple[str, str], list[Resource]] = {}
        for res in resources:
            if "/" in res.plural:
                continue
            by_gk.setdefault((res.group, res.kind), []).append(res)
            self._by_version_kind[(res.api_version, res.kind)] = res
        for key, found in by_gk.items():
            found.sort(key=lambda r: r.version != preferred.get(key[0], ""))
        self._by_group_kind = by_gk
        self._at = self._ctx.clock.monotonic()

    async def mappings(self, group: str, kind: str) -> list[Resource]:
        key = (group, kind)
        if (self._by_group_kind is None or key not in self._by_group_kind) and (
                self._ctx.clock.monotonic() - self._at >= DISCOVERY_RESET_PERIOD or self._by_group_kind is None):
            await self._refresh()
        found = (self._by_group_kind or {}).get(key)
        if not found:
            raise LookupError(f'no matches for kind "{kind}" in group "{group}"')
        return found

    async def resource_name(self, api_version: str, kind: str) -> str:
        group = api_version.rpartition("/")[0] if "/" in api_version else ""
        return (await self.mappings(group, kind))[0].plural


def _parse_group_version(api_version: str) -> str:
    """The group of ``apiVersion`` (schema.ParseGroupVersion); ValueError as upstream words it."""
    if not api_version or api_version == "/":
        return ""
    if api_version.count("/") == 0:
        return ""
    if api_version.count("/") == 1:
        return api_version.partition("/")[0]
    raise ValueError(f"unexpected GroupVersion string: {api_version}")


class HorizontalController(Controller):
    """HPAs -> their targets' replica counts. The queue holds HPA keys."""

    name: ClassVar[str] = "horizontal-pod-autoscaler-controller"
    alias: ClassVar[str] = "horizontalpodautoscaling"
    queue_name: ClassVar[str | None] = "horizontalpodautoscaler"
    workers_option: ClassVar[str | None] = "concurrent-horizontal-pod-autoscaler-syncs"
    default_workers: ClassVar[int] = 5

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        options = ctx.options
        self.sync_period = _seconds(options, "horizontal_pod_autoscaler_sync_period", 15.0)
        self.downscale_stabilisation_window = _seconds(options, "horizontal_pod_autoscaler_downscale_stabilization",
                                                       300.0)
        self.tolerance = _seconds(options, "horizontal_pod_autoscaler_tolerance", 0.1)
        self.queue = RateLimitingQueue(self.queue_name or self.name,
                                       rate_limiter=FixedIntervalRateLimiter(self.sync_period), clock=ctx.clock)
        self.recorder = ctx.events.recorder("horizontal-pod-autoscaler")
        self.hpa_informer = ctx.informers.informer(HORIZONTALPODAUTOSCALERS)
        self.hpa_informer.add_handler(self._on_hpa)
        self.pod_informer = ctx.informers.informer(PODS)
        self.mapper = _GroupKindMapper(ctx)
        self.metrics: MetricsClient = RestMetricsClient(ctx.client, ctx.clock, self.mapper.resource_name)
        self.replica_calc = ReplicaCalculator(
            self.metrics, self._list_pods, ctx.clock,
            cpu_initialization_period=_seconds(options, "horizontal_pod_autoscaler_cpu_initialization_period",
                                               300.0),
            delay_of_initial_readiness_status=_seconds(options, "horizontal_pod_autoscaler_initial_readiness_delay",
                                                       30.0))
        # scale and status I/O; tests may replace them
        self.get_scale: Callable[[Resource, str, str], Awaitable[Obj]] = self._get_scale
        self.update_scale: Callable[[Resource, Obj], Awaitable[Obj]] = self._update_scale
        self.write_status: Callable[[Obj], Awaitable[Obj]] = self._write_status
        self.recommendations: dict[str, list[_Recommendation]] = {}
        self.scale_up_events: dict[str, list[_ScaleEvent]] = {}
        self.scale_down_events: dict[str, list[_ScaleEvent]] = {}
        # HPA key -> its target's selector (None until its first reconcile: selects nothing)
        self.hpa_selectors: dict[str, Selector | None] = {}

    # --- informer handlers --------------------------------------------------------------------------

    def _on_hpa(self, event: Event) -> None:
        if isinstance(event, Deleted):
            key = key_of(event.obj)
            self.queue.forget(key)
            self.hpa_selectors.pop(key, None)
            return
        obj = event.obj if isinstance(event, Added) else event.new
        key = key_of(obj)
        # Every request waits one sync period; a key already queued is not queued twice.
        self.queue.add_rate_limited(key)
        self.hpa_selectors.setdefault(key, None)

    def _list_pods(self, namespace: str, selector: Selector) -> list[Obj]:
        return [p for p in self.pod_informer.store.by_index("namespace", namespace)
                if selector.matches(_dict(_dict(p.get("metadata")).get("labels")))]

    # --- I/O ----------------------------------------------------------------------------------------

    async def _get_scale(self, res: Resource, namespace: str, name: str) -> Obj:
        return await self.ctx.client.get_scale(res, name, namespace)

    async def _update_scale(self, res: Resource, scale: Obj) -> Obj:
        return await self.ctx.client.update_subresource(res, scale, "scale")

    async def _write_status(self, hpa: Obj) -> Obj:
        return await self.ctx.client.update_status(HORIZONTALPODAUTOSCALERS, hpa)

    def now(self) -> float:
        return self.ctx.clock.now()

    # --- the sync -----------------------------------------------------------------------------------

    async def sync(self, key: str) -> Result | None:
        hpa = self.hpa_informer.store.get(key)
        if hpa is None:
            self.log.info("Horizontal Pod Autoscaler has been deleted", hpa=key)
            self.recommendations.pop(key, None)
            self.scale_up_events.pop(key, None)
            self.scale_down_events.pop(key, None)
            return None
        error = await self.reconcile_autoscaler(hpa, key)
        if error is not None:
            self.log.error("reconciling HPA failed", hpa=key, error=str(error))
        return RATE_LIMITED  # every HPA comes back after one sync period, error or not

    def _scaling_event(self, hpa: Obj, type_: str, reason: str, message: str) -> None:
        self.recorder.event(hpa, type_, reason, message, resource=HORIZONTALPODAUTOSCALERS)

    async def reconcile_autoscaler(self, shared: Obj, key: str) -> Exception | None:
        """reconcileAutoscaler; the error it would return (None on success). Records the reconciliation metrics."""
        start = time.perf_counter()
        action = "none"
        error: Exception | None = None
        try:
            action, error = await self._reconcile(shared, key)
        finally:
            label = "none" if error is None else "spec" if isinstance(error, SpecError) else "internal"
            RECONCILIATIONS.labels(action, label).inc()
            RECONCILIATION_DURATION.labels(action, label).observe(time.perf_counter() - start)
        return error

    async def _reconcile(self, shared: Obj, key: str) -> tuple[str, Exception | None]:
        hpa: Obj = deep_copy(dict(shared))
        hpa.setdefault("status", {})
        original_status = deep_copy(hpa.get("status"))
        spec = _dict(hpa.get("spec"))
        namespace = str(_dict(hpa.get("metadata")).get("namespace") or "")
        ref = _dict(spec.get("scaleTargetRef"))
        reference = f"{ref.get('kind')}/{namespace}/{ref.get('name')}"
        now = self.now()

        async def failed_get_scale(message: str) -> None:
            self._scaling_event(hpa, "Warning", "FailedGetScale", message)
            set_condition(hpa, "AbleToScale", "False", "FailedGetScale",
                          f"the HPA controller was unable to get the target's current scale: {message}", now)
            await self._update_status_if_needed(original_status, hpa)

        try:
            group = _parse_group_version(str(ref.get("apiVersion") or ""))
        except ValueError as err:
            await failed_get_scale(str(err))
            return "none", SpecError(f"invalid API version in scale target reference: {err}")
        try:
            mappings = await self.mapper.mappings(group, str(ref.get("kind") or ""))
        except (LookupError, ApiError) as err:
            await failed_get_scale(str(err))
            return "none", ReconcileError(f"unable to determine resource for scale target reference: {err}")
        try:
            scale, target = await self._scale_for_resource_mappings(namespace, str(ref.get("name") or ""), mappings)
        except ApiError as err:
            await failed_get_scale(str(err))
            return "none", ReconcileError(f"failed to query scale subresource for {reference}: {err}")
        set_condition(hpa, "AbleToScale", "True", "SucceededGetScale",
                      "the HPA controller was able to get the target's current scale", now)
        current_replicas = int(_dict(scale.get("spec")).get("replicas") or 0)
        self.recommendations.setdefault(key, [_Recommendation(current_replicas, now)])

        metric_statuses: list[Obj] | None = None
        desired = 0
        reason = ""
        min_replicas = int(spec["minReplicas"]) if spec.get("minReplicas") is not None else 1
        max_replicas = int(spec.get("maxReplicas") or 0)
        rescale = True
        ret_error: Exception | None = None

        if current_replicas == 0 and min_replicas != 0:
            desired = 0
            rescale = False
            set_condition(hpa, "ScalingActive", "False", "ScalingDisabled",
                          "scaling is disabled since the replica count of the target is zero", now)
        elif current_replicas > max_replicas:
            reason = "Current number of replicas above Spec.MaxReplicas"
            desired = max_replicas
        elif current_replicas < min_replicas:
            reason = "Current number of replicas below Spec.MinReplicas"
            desired = min_replicas
        else:
            metric_desired, metric_name, metric_statuses, error = await self.compute_replicas_for_metrics(
                hpa, scale, list(spec.get("metrics") or ()))
            if error is not None and metric_desired == -1:
                self._set_status(hpa, current_replicas, int(_dict(hpa.get("status")).get("desiredReplicas") or 0),
                                 metric_statuses, rescale=False)
                await self._update_status_if_needed(original_status, hpa)
                self._scaling_event(hpa, "Warning", "FailedComputeMetricsReplicas", str(error))
                wrapped: Exception = (SpecError if isinstance(error, SpecError) else ReconcileError)(
                    f"failed to compute desired number of replicas based on listed metrics for {reference}: "
                    f"{error}")
                return "none", wrapped
            ret_error = error
            self.log.debug("Proposing desired replicas", desired_replicas=metric_desired, metric=metric_name,
                           scale_target=reference)
            rescale_metric = ""
            if metric_desired > desired:
                desired = metric_desired
                rescale_metric = metric_name
            if desired > current_replicas:
                reason = f"{rescale_metric} above target"
            if desired < current_replicas:
                reason = "All metrics below target"
            if spec.get("behavior") is None:
                desired = self.normalize_desired_replicas(hpa, key, current_replicas, desired, min_replicas)
            else:
                desired = self.normalize_desired_replicas_with_behaviors(hpa, key, current_replicas, desired,
                                                                         min_replicas)
            rescale = desired != current_replicas

        action = "none"
        if rescale:
            new_scale = deep_copy(scale)
            new_scale.setdefault("spec", {})["replicas"] = desired
            try:
                await self.update_scale(target, new_scale)
            except ApiError as err:
                self._scaling_event(hpa, "Warning", "FailedRescale",
                                    f"New size: {desired}; reason: {reason}; error: {err}")
                set_condition(hpa, "AbleToScale", "False", "FailedUpdateScale",
                              f"the HPA controller was unable to update the target scale: {err}", now)
                self._set_status(hpa, current_replicas, int(_dict(hpa.get("status")).get("desiredReplicas") or 0),
                                 metric_statuses, rescale=False)
                await self._update_status_if_needed(original_status, hpa)
                return "none", ReconcileError(f"failed to rescale {reference}: {err}")
            set_condition(hpa, "AbleToScale", "True", "SucceededRescale",
                          f"the HPA controller was able to update the target scale to {desired}", now)
            self._scaling_event(hpa, "Normal", "SuccessfulRescale", f"New size: {desired}; reason: {reason}")
            self._store_scale_event(spec.get("behavior"), key, current_replicas, desired)
            self.log.info("Successfully rescaled", hpa=key, current_replicas=current_replicas,
                          desired_replicas=desired, reason=reason)
            action = "scale_up" if desired > current_replicas else "scale_down"
        else:
            self.log.debug("Decided not to scale", scale_target=reference, desired_replicas=desired,
                           last_scale_time=_dict(hpa.get("status")).get("lastScaleTime"))
            desired = current_replicas

        self._set_status(hpa, current_replicas, desired, metric_statuses, rescale)
        try:
            await self._update_status_if_needed(original_status, hpa, raise_errors=True)
        except ApiError as err:
            return action, ReconcileError(f"failed to update status for {_dict(hpa.get('metadata')).get('name')}: "
                                          f"{err}")
        return action, ret_error

    async def _scale_for_resource_mappings(self, namespace: str, name: str,
                                           mappings: Sequence[Resource]) -> tuple[Obj, Resource]:
        first: ApiError | None = None
        for i, res in enumerate(mappings):
            try:
                return await self.get_scale(res, namespace, name), res
            except ApiError as err:
                if i == 0:
                    first = err
        raise first or ApiError(0, "", "unrecognized resource")

    # --- status -------------------------------------------------------------------------------------

    def _set_status(self, hpa: Obj, current: int, desired: int, metric_statuses: list[Obj] | None,
                    rescale: bool) -> None:
        old = _dict(hpa.get("status"))
        status: Obj = {}
        if old.get("lastScaleTime") is not None:
            status["lastScaleTime"] = old["lastScaleTime"]
        if current:
            status["currentReplicas"] = current
        status["desiredReplicas"] = desired
        status["currentMetrics"] = metric_statuses
        if old.get("conditions"):
            status["conditions"] = old["conditions"]
        if rescale:
            status["lastScaleTime"] = format_time(self.now())
        hpa["status"] = status

    async def _update_status_if_needed(self, old: Any, hpa: Obj, *, raise_errors: bool = False) -> None:
        new = _dict(hpa.get("status"))
        if _normalized_status(old) == _normalized_status(new):
            return
        try:
            await self.write_status(hpa)
        except ApiError as err:
            self._scaling_event(hpa, "Warning", "FailedUpdateStatus", str(err))
            if raise_errors:
                raise
            self.log.error("failed to update HPA status", hpa=key_of(hpa), error=str(err))
            return
        self.log.debug("Successfully updated status", hpa=key_of(hpa))

    # --- metrics ------------------------------------------------------------------------------------

    def _tolerances(self, hpa: Obj) -> Tolerances:
        """tolerancesForHpa: the flag's tolerance, unless behavior sets one per direction."""
        down = up = self.tolerance
        behavior = _dict(_dict(hpa.get("spec")).get("behavior"))
        for field, direction in (("scaleDown", "down"), ("scaleUp", "up")):
            value = _dict(behavior.get(field)).get("tolerance")
            if value is None:
                continue
            try:
                tolerance = float(parse_quantity(value))
            except (QuantityError, ValueError, TypeError):
                continue
            if direction == "down":
                down = tolerance
            else:
                up = tolerance
        return Tolerances(down, up)

    def _selector_conflict(self, hpa: Obj, selector: Selector) -> list[str]:
        """HPAs (other than ``hpa``, known to this controller) whose target selects a pod ``selector`` selects."""
        key = key_of(hpa)
        namespace = str(_dict(hpa.get("metadata")).get("namespace") or "")
        if key in self.hpa_selectors:
            self.hpa_selectors[key] = selector
        pods = self._list_pods(namespace, selector)
        owners: set[str] = set()
        for other, other_selector in self.hpa_selectors.items():
            if other_selector is None or split_key(other)[0] != namespace:
                continue
            if any(other_selector.matches(_dict(_dict(p.get("metadata")).get("labels"))) for p in pods):
                owners.add(other)
        return sorted(owners)

    def _validate_and_parse_selector(self, hpa: Obj, selector_text: str) -> Selector:
        now = self.now()
        if not selector_text:
            self._scaling_event(hpa, "Warning", "SelectorRequired", "selector is required")
            set_condition(hpa, "ScalingActive", "False", "InvalidSelector",
                          "the HPA target's scale is missing a selector", now)
            raise ReconcileError("selector is required")
        try:
            selector = selectors.parse(selector_text)
        except selectors.InvalidSelector as err:
            message = f"couldn't convert selector into a corresponding internal selector object: {err}"
            self._scaling_event(hpa, "Warning", "InvalidSelector", message)
            set_condition(hpa, "ScalingActive", "False", "InvalidSelector", message, now)
            raise ReconcileError(message) from err
        owners = self._selector_conflict(hpa, selector)
        if len(owners) > 1:
            listed = " ".join(owners)
            message = f"pods by selector {selector_text} are controlled by multiple HPAs: [{listed}]"
            self._scaling_event(hpa, "Warning", "AmbiguousSelector", message)
            set_condition(hpa, "ScalingActive", "False", "AmbiguousSelector", message, now)
            raise ReconcileError(message)
        return selector

    async def compute_replicas_for_metrics(self, hpa: Obj, scale: Obj, metric_specs: Sequence[Mapping[str, Any]]
                                           ) -> tuple[int, str, list[Obj] | None, Exception | None]:
        """(replicas or -1, metric description, statuses, error): the largest proposal over the metrics."""
        try:
            selector = self._validate_and_parse_selector(hpa, str(_dict(scale.get("status")).get("selector") or ""))
        except ReconcileError as err:
            return -1, "", None, err
        spec_replicas = int(_dict(scale.get("spec")).get("replicas") or 0)
        status_replicas = int(_dict(scale.get("status")).get("replicas") or 0)
        statuses: list[Obj] = [{"type": ""} for _ in metric_specs]
        replicas = 0
        metric = ""
        invalid = 0
        first_error: Exception | None = None
        first_condition: tuple[str, str, str, str] | None = None
        for i, metric_spec in enumerate(metric_specs):
            result = await self._compute_replicas_for_metric(hpa, metric_spec, spec_replicas, status_replicas,
                                                             selector)
            if isinstance(result, _Failure):
                if invalid == 0:
                    first_condition = result.condition
                    first_error = result.error
                invalid += 1
                continue
            proposal, name, status = result
            statuses[i] = status
            if replicas == 0 or proposal > replicas:
                replicas = proposal
                metric = name
        error: Exception | None = None
        if first_error is not None:
            cls = SpecError if isinstance(first_error, SpecError) else ReconcileError
            error = cls(f"invalid metrics ({invalid} invalid out of {len(metric_specs)}), first error is: "
                        f"{first_error}")
        if invalid >= len(metric_specs) or (invalid > 0 and replicas < spec_replicas):
            if first_condition is not None:
                set_condition(hpa, *first_condition, now=self.now())
            return -1, "", statuses, error
        set_condition(hpa, "ScalingActive", "True", "ValidMetricFound",
                      f"the HPA was able to successfully calculate a replica count from {metric}", self.now())
        return replicas, metric, statuses, error

    def _unable(self, hpa: Obj, reason: str, error: Exception) -> tuple[str, str, str, str]:
        self._scaling_event(hpa, "Warning", reason, str(error))
        return ("ScalingActive", "False", reason, f"the HPA was unable to compute the replica count: {error}")

    async def _compute_replicas_for_metric(self, hpa: Obj, spec: Mapping[str, Any], spec_replicas: int,
                                           status_replicas: int, selector: Selector
                                           ) -> tuple[int, str, Obj] | _Failure:
        start = time.perf_counter()
        kind = str(spec.get("type") or "")
        result = await self._compute(hpa, kind, spec, spec_replicas, status_replicas, selector)
        current = int(_dict(hpa.get("status")).get("currentReplicas") or 0)
        if isinstance(result, _Failure):
            action = "none"
            label = "spec" if isinstance(result.error, SpecError) else "internal"
        else:
            action = "scale_up" if result[0] > current else "scale_down" if result[0] < current else "none"
            label = "none"
        METRIC_COMPUTATIONS.labels(action, label, kind).inc()
        METRIC_COMPUTATION_DURATION.labels(action, label, kind).observe(time.perf_counter() - start)
        return result

    async def _compute(self, hpa: Obj, kind: str, spec: Mapping[str, Any], spec_replicas: int,
                       status_replicas: int, selector: Selector) -> tuple[int, str, Obj] | _Failure:
        namespace = str(_dict(hpa.get("metadata")).get("namespace") or "")
        tolerances = self._tolerances(hpa)
        calc = self.replica_calc
        if kind == "Object":
            source = _dict(spec.get("object"))
            metric_id = _dict(source.get("metric"))
            name = str(metric_id.get("name") or "")
            try:
                metric_selector = _label_selector(metric_id.get("selector"))
            except selectors.InvalidSelector as err:
                return _Failure(self._unable(hpa, "FailedGetObjectMetric", err),
                                ReconcileError(f"failed to get object metric value: {err}"))
            target = _dict(source.get("target"))
            described = _dict(source.get("describedObject"))
            value, average = _milli(target.get("value")), _milli(target.get("averageValue"))
            try:
                if target.get("type") == "Value" and value is not None:
                    replicas, usage, _ = await calc.get_object_metric_replicas(
                        spec_replicas, value, name, tolerances, namespace, described, selector, metric_selector)
                    status = {"type": "Object", "object": {
                        "describedObject": dict(described), "metric": _metric_id(metric_id),
                        "current": {"value": _milli_quantity(usage)}}}
                    return replicas, f"{described.get('kind')} metric {name}", status
                if target.get("type") == "AverageValue" and average is not None:
                    try:
                        replicas, usage, _ = await calc.get_object_per_pod_metric_replicas(
                            status_replicas, average, name, tolerances, namespace, described, metric_selector)
                    except MetricsError as err:
                        condition = self._unable(hpa, "FailedGetObjectMetric", err)
                        return _Failure(condition, ReconcileError(
                            f"failed to get object metric value: failed to get {name} object metric: {err}"))
                    status = {"type": "Object", "object": {
                        "describedObject": dict(described), "metric": _metric_id(metric_id),
                        "current": {"averageValue": _milli_quantity(usage)}}}
                    return replicas, f"external metric {name}({go_label_selector(metric_id.get('selector'))})", status
            except MetricsError as err:
                return _Failure(self._unable(hpa, "FailedGetObjectMetric", err),
                                ReconcileError(f"failed to get object metric value: {err}"))
            invalid = SpecError("invalid object metric source: neither a value target nor an average value target "
                                "was set")
            return _Failure(self._unable(hpa, "FailedGetObjectMetric", invalid),
                            SpecError(f"failed to get object metric value: {invalid}"))
        if kind == "Pods":
            source = _dict(spec.get("pods"))
            metric_id = _dict(source.get("metric"))
            name = str(metric_id.get("name") or "")
            try:
                metric_selector = _label_selector(metric_id.get("selector"))
            except selectors.InvalidSelector as err:
                return _Failure(self._unable(hpa, "FailedGetPodsMetric", err),
                                ReconcileError(f"failed to get pods metric value: {err}"))
            average = _milli(_dict(source.get("target")).get("averageValue")) or 0
            try:
                replicas, usage, _ = await calc.get_metric_replicas(spec_replicas, average, name, tolerances,
                                                                     namespace, selector, metric_selector)
            except MetricsError as err:
                return _Failure(self._unable(hpa, "FailedGetPodsMetric", err),
                                ReconcileError(f"failed to get pods metric value: {err}"))
            status = {"type": "Pods", "pods": {"metric": _metric_id(metric_id),
                                               "current": {"averageValue": _milli_quantity(usage)}}}
            return replicas, f"pods metric {name}", status
        if kind in ("Resource", "ContainerResource"):
            field = "resource" if kind == "Resource" else "containerResource"
            source = _dict(spec.get(field))
            resource = str(source.get("name") or "")
            container = str(source.get("container") or "") if kind == "ContainerResource" else ""
            reason = "FailedGetResourceMetric" if kind == "Resource" else "FailedGetContainerResourceMetric"
            outer = (f"failed to get {resource} resource metric value" if kind == "Resource"
                     else f"failed to get {container} container metric value")
            try:
                replicas, current, description = await self._resource_metric(
                    spec_replicas, _dict(source.get("target")), resource, namespace, container, selector, kind,
                    tolerances)
            except (MetricsError, SpecError) as err:
                cls = SpecError if isinstance(err, SpecError) else ReconcileError
                return _Failure(self._unable(hpa, reason, err), cls(f"{outer}: {err}"))
            body: Obj = {"name": resource}
            if container:
                body["container"] = container
            body["current"] = current
            return replicas, description, {"type": kind, field: body}
        if kind == "External":
            source = _dict(spec.get("external"))
            metric_id = _dict(source.get("metric"))
            name = str(metric_id.get("name") or "")
            target = _dict(source.get("target"))
            raw_selector = metric_id.get("selector")
            try:
                metric_selector = _label_selector(raw_selector)
            except selectors.InvalidSelector as err:
                return _Failure(self._unable(hpa, "FailedGetExternalMetric", err),
                                ReconcileError(f"failed to get {name} external metric value: {err}"))
            description = f"external metric {name}({go_label_selector(raw_selector)})"
            average, value = _milli(target.get("averageValue")), _milli(target.get("value"))
            if average is not None:
                try:
                    replicas, usage, _ = await calc.get_external_per_pod_metric_replicas(
                        status_replicas, average, name, tolerances, namespace, raw_selector, metric_selector)
                except MetricsError as err:
                    return _Failure(self._unable(hpa, "FailedGetExternalMetric", err), ReconcileError(
                        f"failed to get {name} external metric value: failed to get {name} external metric: {err}"))
                return replicas, description, {"type": "External", "external": {
                    "metric": _metric_id(metric_id), "current": {"averageValue": _milli_quantity(usage)}}}
            if value is not None:
                try:
                    replicas, usage, _ = await calc.get_external_metric_replicas(
                        spec_replicas, value, name, tolerances, namespace, raw_selector, metric_selector, selector)
                except MetricsError as err:
                    return _Failure(self._unable(hpa, "FailedGetExternalMetric", err), ReconcileError(
                        f"failed to get {name} external metric value: failed to get external metric {name}: {err}"))
                return replicas, description, {"type": "External", "external": {
                    "metric": _metric_id(metric_id), "current": {"value": _milli_quantity(usage)}}}
            invalid = SpecError("invalid external metric source: neither a value target nor an average value target "
                                "was set")
            return _Failure(self._unable(hpa, "FailedGetExternalMetric", invalid),
                            SpecError(f"failed to get {name} external metric value: {invalid}"))
        unknown = SpecError(f'unknown metric source type "{kind}"')
        return _Failure(self._unable(hpa, "InvalidMetricSourceType", unknown), unknown)

    async def _resource_metric(self, current_replicas: int, target: Mapping[str, Any], resource: str,
                               namespace: str, container: str, selector: Selector, kind: str,
                               tolerances: Tolerances) -> tuple[int, Obj, str]:
        """computeStatusForResourceMetricGeneric: (replicas, current MetricValueStatus, description)."""
        calc = self.replica_calc
        average = _milli(target.get("averageValue"))
        if average is not None:
            try:
                replicas, raw, _ = await calc.get_raw_resource_replicas(current_replicas, average, resource,
                                                                        tolerances, namespace, selector, container)
            except MetricsError as err:
                raise MetricsError(f"failed to get {resource} usage: {err}") from err
            return replicas, {"averageValue": _milli_quantity(raw)}, f"{resource} resource"
        utilization = target.get("averageUtilization")
        if utilization is None:
            raise SpecError("invalid resource metric source: neither an average utilization target nor an average "
                            "value (usage) target was set")
        try:
            replicas, percentage, raw, _ = await calc.get_resource_replicas(
                current_replicas, int(utilization), resource, tolerances, namespace, selector, container)
        except MetricsError as err:
            raise MetricsError(f"failed to get {resource} utilization: {err}") from err
        description = (f"{resource} resource utilization (percentage of request)" if kind == "Resource"
                       else f"{resource} container resource utilization (percentage of request)")
        return replicas, {"averageValue": _milli_quantity(raw), "averageUtilization": percentage}, description

    # --- normalization ------------------------------------------------------------------------------

    def _stabilize_recommendation(self, key: str, prenormalized: int) -> int:
        now = self.now()
        cutoff = now - self.downscale_stabilisation_window
        recommendations = self.recommendations.setdefault(key, [])
        highest = prenormalized
        old_index: int | None = None
        for i, rec in enumerate(recommendations):
            if rec.timestamp < cutoff:
                old_index = i
            elif rec.replicas > highest:
                highest = rec.replicas
        if old_index is not None:
            recommendations[old_index] = _Recommendation(prenormalized, now)
        else:
            recommendations.append(_Recommendation(prenormalized, now))
        return highest

    def normalize_desired_replicas(self, hpa: Obj, key: str, current: int, prenormalized: int,
                                   min_replicas: int) -> int:
        now = self.now()
        stabilized = self._stabilize_recommendation(key, prenormalized)
        if stabilized != prenormalized:
            set_condition(hpa, "AbleToScale", "True", "ScaleDownStabilized",
                          "recent recommendations were higher than current one, applying the highest recent "
                          "recommendation", now)
        else:
            set_condition(hpa, "AbleToScale", "True", "ReadyForNewScale", "recommended size matches current size",
                          now)
        desired, reason, message = convert_desired_replicas_with_rules(
            current, stabilized, min_replicas, int(_dict(hpa.get("spec")).get("maxReplicas") or 0))
        set_condition(hpa, "ScalingLimited", "False" if desired == stabilized else "True", reason, message, now)
        return desired

    def _behavior(self, hpa: Obj) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
        """The behavior's rules, with upstream's defaults where the API server left gaps."""
        behavior = _dict(_dict(hpa.get("spec")).get("behavior"))
        up = dict(_dict(behavior.get("scaleUp")))
        down = dict(_dict(behavior.get("scaleDown")))
        up.setdefault("stabilizationWindowSeconds", 0)
        if down.get("stabilizationWindowSeconds") is None:  # maybeInitScaleDownStabilizationWindow
            down["stabilizationWindowSeconds"] = int(self.downscale_stabilisation_window)
        up["selectPolicy"] = up.get("selectPolicy") or "Max"
        down["selectPolicy"] = down.get("selectPolicy") or "Max"
        if not up.get("policies"):
            up["policies"] = list(DEFAULT_SCALE_UP_POLICIES)
        if not down.get("policies"):
            down["policies"] = list(DEFAULT_SCALE_DOWN_POLICIES)
        return up, down

    def normalize_desired_replicas_with_behaviors(self, hpa: Obj, key: str, current: int, prenormalized: int,
                                                  min_replicas: int) -> int:
        now = self.now()
        up, down = self._behavior(hpa)
        max_replicas = int(_dict(hpa.get("spec")).get("maxReplicas") or 0)
        stabilized, reason, message = self._stabilize_with_behaviors(key, current, prenormalized, up, down)
        if stabilized != prenormalized:
            set_condition(hpa, "AbleToScale", "True", reason, message, now)
        else:
            set_condition(hpa, "AbleToScale", "True", "ReadyForNewScale", "recommended size matches current size",
                          now)
        desired, reason, message = self._convert_with_behavior_rate(key, current, stabilized, min_replicas,
                                                                    max_replicas, up, down)
        set_condition(hpa, "ScalingLimited", "False" if desired == stabilized else "True", reason, message, now)
        return desired

    def _stabilize_with_behaviors(self, key: str, current: int, desired: int, up: Mapping[str, Any],
                                  down: Mapping[str, Any]) -> tuple[int, str, str]:
        now = self.now()
        up_cutoff = now - int(up["stabilizationWindowSeconds"])
        down_cutoff = now - int(down["stabilizationWindowSeconds"])
        up_recommendation = down_recommendation = desired
        recommendations = self.recommendations.setdefault(key, [])
        old_index: int | None = None
        for i, rec in enumerate(recommendations):
            if rec.timestamp > up_cutoff:
                up_recommendation = min(rec.replicas, up_recommendation)
            if rec.timestamp > down_cutoff:
                down_recommendation = max(rec.replicas, down_recommendation)
            if rec.timestamp < up_cutoff and rec.timestamp < down_cutoff:
                old_index = i
        recommendation = max(current, up_recommendation)
        recommendation = min(recommendation, down_recommendation)
        if old_index is not None:
            recommendations[old_index] = _Recommendation(desired, now)
        else:
            recommendations.append(_Recommendation(desired, now))
        if desired >= current:
            return (recommendation, "ScaleUpStabilized",
                    "recent recommendations were lower than current one, applying the lowest recent recommendation")
        return (recommendation, "ScaleDownStabilized",
                "recent recommendations were higher than current one, applying the highest recent recommendation")

    def _convert_with_behavior_rate(self, key: str, current: int, desired: int, min_replicas: int,
                                    max_replicas: int, up: Mapping[str, Any],
                                    down: Mapping[str, Any]) -> tuple[int, str, str]:
        now = self.now()
        up_events = self.scale_up_events.get(key, [])
        down_events = self.scale_down_events.get(key, [])
        if desired > current:
            limit = max(calculate_scale_up_limit_with_scaling_rules(current, up_events, down_events, up, now),
                        current)
            if max_replicas > limit:
                allowed, reason, message = (limit, "ScaleUpLimit",
                                            "the desired replica count is increasing faster than the maximum scale "
                                            "rate")
            else:
                allowed, reason, message = (max_replicas, "TooManyReplicas",
                                            "the desired replica count is more than the maximum replica count")
            if desired > allowed:
                return allowed, reason, message
        elif desired < current:
            limit = min(calculate_scale_down_limit_with_behaviors(current, up_events, down_events, down, now),
                        current)
            if min_replicas < limit:
                allowed, reason, message = (limit, "ScaleDownLimit",
                                            "the desired replica count is decreasing faster than the maximum scale "
                                            "rate")
            else:
                allowed, reason, message = (min_replicas, "TooFewReplicas",
                                            "the desired replica count is less than the minimum replica count")
            if desired < allowed:
                return allowed, reason, message
        return desired, "DesiredWithinRange", "the desired count is within the acceptable range"

    def _store_scale_event(self, behavior: Any, key: str, previous: int, new: int) -> None:
        if behavior is None:
            return  # only behaviors use the history
        up, down = self._behavior({"spec": {"behavior": behavior}})
        now = self.now()
        if new > previous:
            events, rules, change = self.scale_up_events.setdefault(key, []), up, new - previous
        else:
            events, rules, change = self.scale_down_events.setdefault(key, []), down, previous - new
        longest = max((int(p.get("periodSeconds") or 0) for p in rules.get("policies") or ()), default=0)
        cutoff = now - longest
        old_index: int | None = None
        for i, event in enumerate(events):
            if event.timestamp < cutoff:
                event.outdated = True
            if event.outdated:
                old_index = i
        if old_index is not None:
            events[old_index] = _ScaleEvent(change, now)
        else:
            events.append(_ScaleEvent(change, now))


@dataclass(frozen=True, slots=True)
class _Failure:
    condition: tuple[str, str, str, str]
    error: Exception


def _metric_id(metric_id: Mapping[str, Any]) -> Obj:
    out: Obj = {"name": metric_id.get("name") or ""}
    if metric_id.get("selector") is not None:
        out["selector"] = metric_id["selector"]
    return out


def _normalized_status(status: Any) -> Any:
    """Semantic equality: absent and empty are the same."""
    if isinstance(status, Mapping):
        return {k: _normalized_status(v) for k, v in status.items() if v not in (None, [], {}, "", 0)}
    if isinstance(status, list):
        return [_normalized_status(v) for v in status]
    return status
