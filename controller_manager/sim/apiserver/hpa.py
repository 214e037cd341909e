"""HorizontalPodAutoscalers: autoscaling/v2 defaults and validation, and the autoscaling/v1 view of the same
store (``pkg/apis/autoscaling/v2/defaults.go``, ``pkg/apis/autoscaling/validation``,
``pkg/apis/autoscaling/v1/conversion.go``).

Guarantees:
- Stored in the v2 form. v2 defaults: ``minReplicas`` 1; no metrics: CPU at 80% average utilization; a stated
  ``behavior`` has its missing scale-up (no window, Max of 100% or 4 pods per 15s) and scale-down (Max of 100%
  per 15s; no window: the controller's ``--horizontal-pod-autoscaler-downscale-stabilization`` applies) rules
  filled in.
- :func:`to_v1` shows a stored HPA as autoscaling/v1: the CPU utilization metric becomes
  ``targetCPUUtilizationPercentage`` (its current value ``currentCPUUtilizationPercentage``); the other metrics,
  current metrics, conditions and behavior travel in the ``autoscaling.alpha.kubernetes.io/*`` annotations, as
  upstream's conversion writes them. :func:`to_v2` reads them back, so a v1 client's update loses nothing.
- Validation: minReplicas >= 1, maxReplicas >= 1 and >= minReplicas, scaleTargetRef kind and name, each metric's
  type and source, utilization targets > 0, behavior's windows (0..3600s), selectPolicy and policies (type,
  value > 0, period 1..1800s, at least one); with upstream's messages.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from controller_manager.api.resources import HORIZONTALPODAUTOSCALERS
from controller_manager.sim.apiserver.validation_errors import FieldError, invalid, not_supported, required

Obj = dict[str, Any]

METRICS_ANNOTATION = "autoscaling.alpha.kubernetes.io/metrics"
CURRENT_METRICS_ANNOTATION = "autoscaling.alpha.kubernetes.io/current-metrics"
CONDITIONS_ANNOTATION = "autoscaling.alpha.kubernetes.io/conditions"
BEHAVIOR_ANNOTATION = "autoscaling.alpha.kubernetes.io/behavior"
_ROUND_TRIP = (METRICS_ANNOTATION, CURRENT_METRICS_ANNOTATION, CONDITIONS_ANNOTATION, BEHAVIOR_ANNOTATION)
DEFAULT_CPU_UTILIZATION = 80
_METRIC_TYPES = ("ContainerResource", "External", "Object", "Pods", "Resource")
_TARGET_TYPES = ("AverageValue", "Utilization", "Value")


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


# --- defaults -------------------------------------------------------------------------------------------

def _rules(rules: Any, window: int | None, policies: list[Obj]) -> Obj:
    out = dict(rules) if isinstance(rules, dict) else {}
    if out.get("stabilizationWindowSeconds") is None and window is not None:
        out["stabilizationWindowSeconds"] = window
    if not out.get("selectPolicy"):
        out["selectPolicy"] = "Max"
    if out.get("policies") is None:  # an explicit empty list stays (and fails validation), as upstream
        out["policies"] = policies
    return out


def apply_defaults(obj: Obj) -> None:
    """SetDefaults_HorizontalPodAutoscaler (v2) on ``obj`` (owned: edited in place)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        spec = obj["spec"] = {}
    if spec.get("minReplicas") is None:
        spec["minReplicas"] = 1
    if not spec.get("metrics"):
        spec["metrics"] = [{"type": "Resource", "resource": {"name": "cpu", "target": {
            "type": "Utilization", "averageUtilization": DEFAULT_CPU_UTILIZATION}}}]
    behavior = spec.get("behavior")
    if isinstance(behavior, dict):
        behavior["scaleUp"] = _rules(behavior.get("scaleUp"), 0, [
            {"type": "Pods", "value": 4, "periodSeconds": 15}, {"type": "Percent", "value": 100, "periodSeconds": 15}])
        # no scale-down window: the controller's --horizontal-pod-autoscaler-downscale-stabilization applies
        behavior["scaleDown"] = _rules(behavior.get("scaleDown"), None, [
            {"type": "Percent", "value": 100, "periodSeconds": 15}])


# --- validation -----------------------------------------------------------------------------------------

def _validate_metric(metric: Mapping[str, Any], path: str) -> list[FieldError]:
    kind = metric.get("type")
    if not kind:
        return [required(f"{path}.type", "must specify a metric source type")]
    if kind not in _METRIC_TYPES:
        return [not_supported(f"{path}.type", kind, _METRIC_TYPES)]
    field = kind[0].lower() + kind[1:]
    source = metric.get(field)
    if not isinstance(source, Mapping):
        return [required(f"{path}.{field}", f"must populate information for the given metric source (only allowed "
                                            f"when type is {kind})")]
    errs: list[FieldError] = []
    target = _dict(source.get("target"))
    target_type = target.get("type")
    if not target_type:
        errs.append(required(f"{path}.{field}.target.type", "must specify a metric target type"))
    elif target_type not in _TARGET_TYPES:
        errs.append(not_supported(f"{path}.{field}.target.type", target_type, _TARGET_TYPES))
    utilization = target.get("averageUtilization")
    if isinstance(utilization, int) and utilization < 1:
        errs.append(invalid(f"{path}.{field}.target.averageUtilization", utilization, "must be greater than 0"))
    if kind in ("Resource", "ContainerResource") and not source.get("name"):
        errs.append(required(f"{path}.{field}.name", "must specify a resource name"))
    return errs


MAX_STABILIZATION_WINDOW_SECONDS = 3600
MAX_PERIOD_SECONDS = 1800
_SELECT_POLICIES = ("Disabled", "Max", "Min")
_POLICY_TYPES = ("Percent", "Pods")


def _validate_scaling_rules(rules: Mapping[str, Any], path: str) -> list[FieldError]:
    """validateScalingRules: windows within [0, 3600], a known selectPolicy, at least one valid policy."""
    errs: list[FieldError] = []
    window = rules.get("stabilizationWindowSeconds")
    if isinstance(window, int) and window < 0:
        errs.append(invalid(f"{path}.stabilizationWindowSeconds", window, "must be greater than or equal to zero"))
    if isinstance(window, int) and window > MAX_STABILIZATION_WINDOW_SECONDS:
        errs.append(invalid(f"{path}.stabilizationWindowSeconds", window,
                            f"must be less than or equal to {MAX_STABILIZATION_WINDOW_SECONDS}"))
    select = rules.get("selectPolicy")
    if select is not None and select not in _SELECT_POLICIES:
        errs.append(not_supported(f"{path}.selectPolicy", select, _SELECT_POLICIES))
    policies = rules.get("policies") or []
    if not policies:
        errs.append(required(f"{path}.policies", "must specify at least one Policy"))
    for i, policy in enumerate(policies):
        policy = _dict(policy)
        at = f"{path}.policies[{i}]"
        if policy.get("type") not in _POLICY_TYPES:
            errs.append(not_supported(f"{at}.type", policy.get("type") or "", _POLICY_TYPES))
        value = policy.get("value") or 0
        if isinstance(value, int) and value <= 0:
            errs.append(invalid(f"{at}.value", value, "must be greater than zero"))
        period = policy.get("periodSeconds") or 0
        if isinstance(period, int) and period <= 0:
            errs.append(invalid(f"{at}.periodSeconds", period, "must be greater than zero"))
        if isinstance(period, int) and period > MAX_PERIOD_SECONDS:
            errs.append(invalid(f"{at}.periodSeconds", period, f"must be less than or equal to {MAX_PERIOD_SECONDS}"))
    return errs


def validate(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    spec = _dict(obj.get("spec"))
    errs: list[FieldError] = []
    ref = _dict(spec.get("scaleTargetRef"))
    if not ref.get("kind"):
        errs.append(required("spec.scaleTargetRef.kind"))
    if not ref.get("name"):
        errs.append(required("spec.scaleTargetRef.name"))
    low = spec.get("minReplicas")
    high = spec.get("maxReplicas")
    if isinstance(low, int) and low < 1:
        errs.append(invalid("spec.minReplicas", low, "must be greater than or equal to 1"))
    if not isinstance(high, int) or high < 1:
        errs.append(invalid("spec.maxReplicas", high or 0, "must be greater than 0"))
    elif isinstance(low, int) and high < low:
        errs.append(invalid("spec.maxReplicas", high, "must be greater than or equal to `minReplicas`"))
    for i, metric in enumerate(spec.get("metrics") or ()):
        errs.extend(_validate_metric(_dict(metric), f"spec.metrics[{i}]"))
    behavior = spec.get("behavior")
    if isinstance(behavior, Mapping):
        for direction in ("scaleUp", "scaleDown"):
            if isinstance(behavior.get(direction), Mapping):
                errs.extend(_validate_scaling_rules(behavior[direction], f"spec.behavior.{direction}"))
    return errs


# --- autoscaling/v1 <-> v2 -----------------------------------------------------------------------------

def _is_cpu_utilization(metric: Mapping[str, Any]) -> bool:
    resource = _dict(metric.get("resource"))
    return (metric.get("type") == "Resource" and resource.get("name") == "cpu"
            and _dict(resource.get("target")).get("averageUtilization") is not None)


def _compact(obj: Mapping[str, Any]) -> Obj:
    return {k: v for k, v in obj.items() if v is not None}


def _metric_to_v1(metric: Mapping[str, Any], current: bool) -> Obj:
    """A v2 MetricSpec (or MetricStatus) in autoscaling/v1's older shape."""
    kind = str(metric.get("type") or "")
    value_key = "current" if current else "target"
    prefix = "current" if current else "target"
    out: Obj = {"type": kind}
    if kind in ("Resource", "ContainerResource"):
        source = _dict(metric.get("resource" if kind == "Resource" else "containerResource"))
        value = _dict(source.get(value_key))
        out["resource" if kind == "Resource" else "containerResource"] = _compact({
            "name": source.get("name"), "container": source.get("container"),
            f"{prefix}AverageUtilization": value.get("averageUtilization"),
            f"{prefix}AverageValue": value.get("averageValue")})
    elif kind == "Pods":
        source = _dict(metric.get("pods"))
        metric_id = _dict(source.get("metric"))
        out["pods"] = _compact({"metricName": metric_id.get("name"),
                                f"{prefix}AverageValue": _dict(source.get(value_key)).get("averageValue"),
                                "selector": metric_id.get("selector")})
    elif kind == "Object":
        source = _dict(metric.get("object"))
        metric_id = _dict(source.get("metric"))
        value = _dict(source.get(value_key))
        out["object"] = _compact({"target": source.get("describedObject"), "metricName": metric_id.get("name"),
                                  f"{prefix}Value": value.get("value"), "selector": metric_id.get("selector"),
                                  "averageValue": value.get("averageValue")})
    elif kind == "External":
        source = _dict(metric.get("external"))
        metric_id = _dict(source.get("metric"))
        value = _dict(source.get(value_key))
        out["external"] = _compact({"metricName": metric_id.get("name"), "metricSelector": metric_id.get("selector"),
                                    f"{prefix}Value": value.get("value"),
                                    f"{prefix}AverageValue": value.get("averageValue")})
    return out


def _metric_to_v2(metric: Mapping[str, Any], current: bool) -> Obj:
    kind = str(metric.get("type") or "")
    value_key = "current" if current else "target"
    prefix = "current" if current else "target"

    def value(source: Mapping[str, Any], utilization: bool = False) -> Obj:
        out: Obj = {}
        if source.get(f"{prefix}Value") is not None:
            out["value"] = source[f"{prefix}Value"]
        if source.get(f"{prefix}AverageValue") is not None or source.get("averageValue") is not None:
            out["averageValue"] = source.get(f"{prefix}AverageValue", source.get("averageValue"))
        if utilization and source.get(f"{prefix}AverageUtilization") is not None:
            out["averageUtilization"] = source[f"{prefix}AverageUtilization"]
        if not current:
            out["type"] = ("Utilization" if "averageUtilization" in out else
                           "AverageValue" if "averageValue" in out else "Value")
        return out

    out: Obj = {"type": kind}
    if kind in ("Resource", "ContainerResource"):
        field = "resource" if kind == "Resource" else "containerResource"
        source = _dict(metric.get(field))
        out[field] = _compact({"name": source.get("name"), "container": source.get("container"),
                               value_key: value(source, utilization=True)})
    elif kind == "Pods":
        source = _dict(metric.get("pods"))
        out["pods"] = {"metric": _compact({"name": source.get("metricName"), "selector": source.get("selector")}),
                       value_key: value(source)}
    elif kind == "Object":
        source = _dict(metric.get("object"))
        out["object"] = {"describedObject": source.get("target") or {},
                         "metric": _compact({"name": source.get("metricName"), "selector": source.get("selector")}),
                         value_key: value(source)}
    elif kind == "External":
        source = _dict(metric.get("external"))
        out["external"] = {"metric": _compact({"name": source.get("metricName"),
                                               "selector": source.get("metricSelector")}),
                           value_key: value(source)}
    return out


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def to_v1(stored: Obj) -> Obj:
    """A stored (v2) HPA as autoscaling/v1 shows it."""
    meta = dict(stored.get("metadata") or {})
    annotations = {k: v for k, v in _dict(meta.get("annotations")).items() if k not in _ROUND_TRIP}
    spec = _dict(stored.get("spec"))
    status = _dict(stored.get("status"))
    v1_spec: Obj = {"scaleTargetRef": spec.get("scaleTargetRef"), "minReplicas": spec.get("minReplicas"),
                    "maxReplicas": spec.get("maxReplicas")}
    others = []
    for metric in spec.get("metrics") or ():
        if _is_cpu_utilization(_dict(metric)) and "targetCPUUtilizationPercentage" not in v1_spec:
            v1_spec["targetCPUUtilizationPercentage"] = _dict(_dict(metric)["resource"]["target"])[
                "averageUtilization"]
        else:
            others.append(_metric_to_v1(_dict(metric), current=False))
    v1_status: Obj = {k: status[k] for k in ("observedGeneration", "lastScaleTime", "currentReplicas",
                                             "desiredReplicas") if k in status}
    v1_status.setdefault("currentReplicas", 0)
    v1_status.setdefault("desiredReplicas", 0)
    current_others = []
    for metric in status.get("currentMetrics") or ():
        resource = _dict(_dict(metric).get("resource"))
        utilization = _dict(resource.get("current")).get("averageUtilization")
        if _dict(metric).get("type") == "Resource" and resource.get("name") == "cpu" and utilization is not None:
            v1_status["currentCPUUtilizationPercentage"] = utilization
        else:
            current_others.append(_metric_to_v1(_dict(metric), current=True))
    if others:
        annotations[METRICS_ANNOTATION] = _json(others)
    if current_others:
        annotations[CURRENT_METRICS_ANNOTATION] = _json(current_others)
    if spec.get("behavior") is not None:
        annotations[BEHAVIOR_ANNOTATION] = _json(spec["behavior"])
    if status.get("conditions"):
        annotations[CONDITIONS_ANNOTATION] = _json(status["conditions"])
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    out: Obj = {"kind": "HorizontalPodAutoscaler", "apiVersion": "autoscaling/v1", "metadata": meta,
                "spec": _compact(v1_spec)}
    if "status" in stored:
        out["status"] = v1_status
    return out


def _annotation(annotations: Mapping[str, Any], key: str) -> Any:
    try:
        return json.loads(str(annotations[key])) if key in annotations else None
    except ValueError:
        return None


def to_v2(v1: Obj) -> Obj:
    """An autoscaling/v1 HPA as the v2 object it is stored as (round-trip annotations read and dropped)."""
    v1 = copy.deepcopy(v1)
    meta = dict(v1.get("metadata") or {})
    annotations = dict(_dict(meta.get("annotations")))
    spec = _dict(v1.get("spec"))
    status = _dict(v1.get("status"))
    metrics = [_metric_to_v2(_dict(m), current=False) for m in _annotation(annotations, METRICS_ANNOTATION) or ()]
    if spec.get("targetCPUUtilizationPercentage") is not None:
        metrics.append({"type": "Resource", "resource": {"name": "cpu", "target": {
            "type": "Utilization", "averageUtilization": spec["targetCPUUtilizationPercentage"]}}})
    v2_spec: Obj = _compact({"scaleTargetRef": spec.get("scaleTargetRef"), "minReplicas": spec.get("minReplicas"),
                             "maxReplicas": spec.get("maxReplicas"), "metrics": metrics or None,
                             "behavior": _annotation(annotations, BEHAVIOR_ANNOTATION)})
    current = [_metric_to_v2(_dict(m), current=True)
               for m in _annotation(annotations, CURRENT_METRICS_ANNOTATION) or ()]
    if status.get("currentCPUUtilizationPercentage") is not None:
        current.append({"type": "Resource", "resource": {"name": "cpu", "current": {
            "averageUtilization": status["currentCPUUtilizationPercentage"]}}})
    v2_status: Obj = {k: status[k] for k in ("observedGeneration", "lastScaleTime", "currentReplicas",
                                             "desiredReplicas") if k in status}
    if current:
        v2_status["currentMetrics"] = current
    conditions = _annotation(annotations, CONDITIONS_ANNOTATION)
    if conditions:
        v2_status["conditions"] = conditions
    for key in _ROUND_TRIP:
        annotations.pop(key, None)
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    out: Obj = {"kind": "HorizontalPodAutoscaler", "apiVersion": HORIZONTALPODAUTOSCALERS.api_version,
                "metadata": meta, "spec": v2_spec}
    if "status" in v1:
        out["status"] = v2_status
    return out
