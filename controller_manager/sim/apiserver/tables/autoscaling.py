"""Printers of ``autoscaling``: horizontal pod autoscalers (v2 and v1 shapes) and scales."""

from __future__ import annotations

from typing import Any

from controller_manager.sim.apiserver.tables.cells import (
    AGE,
    NAME,
    Column,
    Obj,
    Printer,
    age,
    integer,
    name,
    quantity_string,
    spec,
    status,
)


def _as_v2(hpa: Obj) -> tuple[list[Obj], list[Obj]]:
    """The metric specs and statuses, an autoscaling/v1 object's CPU target read as a v2 resource metric."""
    hpa_spec, hpa_status = spec(hpa), status(hpa)
    if "metrics" in hpa_spec or "targetCPUUtilizationPercentage" not in hpa_spec:
        return list(hpa_spec.get("metrics") or []), list(hpa_status.get("currentMetrics") or [])
    target = {"type": "Utilization", "averageUtilization": hpa_spec["targetCPUUtilizationPercentage"]}
    specs = [{"type": "Resource", "resource": {"name": "cpu", "target": target}}]
    current = hpa_status.get("currentCPUUtilizationPercentage")
    statuses = ([] if current is None else
                [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": current}}}])
    return specs, statuses


def _pointer_quantity(value: Any) -> str:
    """``(*Quantity).String()``: ``<nil>`` for an unset one."""
    return "<nil>" if value is None else quantity_string(value)


def _value_pair(target: Obj, current: Obj | None) -> str:
    if target.get("averageValue") is not None:
        now = "<unknown>"
        if current is not None and current.get("averageValue") is not None:
            now = quantity_string(current["averageValue"])
        return f"{now}/{quantity_string(target['averageValue'])} (avg)"
    now = "<unknown>" if current is None else _pointer_quantity(current.get("value"))
    return f"{now}/{_pointer_quantity(target.get('value'))}"


def _resource_pair(source: Obj, current: Obj | None) -> str:
    target = source.get("target") or {}
    resource = str(source.get("name") or "")
    if target.get("averageValue") is not None:
        now = "<unknown>" if current is None else _pointer_quantity(current.get("averageValue"))
        return f"{resource}: {now}/{quantity_string(target['averageValue'])}"
    now = "<unknown>"
    if current is not None and current.get("averageUtilization") is not None:
        now = f"{current['averageUtilization']}%"
    goal = "<auto>" if target.get("averageUtilization") is None else f"{target['averageUtilization']}%"
    return f"{resource}: {now}/{goal}"


def format_metrics(specs: list[Obj], statuses: list[Obj]) -> str:
    """``formatHPAMetrics``: each metric as current/target, two at most, then `` + N more...``."""
    if not specs:
        return "<none>"
    shown = []
    for i, metric in enumerate(specs):
        state = statuses[i] if i < len(statuses) else {}
        kind = metric.get("type")
        if kind == "External":
            current = (state.get("external") or {}).get("current") if state.get("external") else None
            shown.append(_value_pair((metric.get("external") or {}).get("target") or {}, current))
        elif kind == "Pods":
            current = (state.get("pods") or {}).get("current") if state.get("pods") else None
            target = (metric.get("pods") or {}).get("target") or {}
            now = "<unknown>" if current is None else _pointer_quantity(current.get("averageValue"))
            shown.append(f"{now}/{_pointer_quantity(target.get('averageValue'))}")
        elif kind == "Object":
            current = (state.get("object") or {}).get("current") if state.get("object") else None
            shown.append(_value_pair((metric.get("object") or {}).get("target") or {}, current))
        elif kind == "Resource":
            current = (state.get("resource") or {}).get("current") if state.get("resource") else None
            shown.append(_resource_pair(metric.get("resource") or {}, current))
        elif kind == "ContainerResource":
            current = ((state.get("containerResource") or {}).get("current")
                       if state.get("containerResource") else None)
            shown.append(_resource_pair(metric.get("containerResource") or {}, current))
        else:
            shown.append("<unknown type>")
    text = ", ".join(shown[:2])
    return f"{text} + {len(shown) - 2} more..." if len(shown) > 2 else text


def _hpa_cells(hpa: Obj, now: float) -> list[Any]:
    hpa_spec = spec(hpa)
    ref = hpa_spec.get("scaleTargetRef") or {}
    min_replicas = hpa_spec.get("minReplicas")
    return [name(hpa), f"{ref.get('kind') or ''}/{ref.get('name') or ''}", format_metrics(*_as_v2(hpa)),
            "<unset>" if min_replicas is None else str(min_replicas), integer(hpa_spec.get("maxReplicas")),
            integer(status(hpa).get("currentReplicas")), age(hpa, now)]


PRINTERS: dict[str, Printer] = {
    "HorizontalPodAutoscaler": Printer((NAME, Column("Reference"), Column("Targets"), Column("MinPods"),
                                        Column("MaxPods"), Column("Replicas"), AGE), _hpa_cells),
    # The scale subresource's table has no name format on its Name column, as upstream.
    "Scale": Printer((Column("Name"), Column("Desired", "integer"), Column("Available", "integer"), AGE),
                     lambda o, now: [name(o), integer(spec(o).get("replicas")), integer(status(o).get("replicas")),
                                     age(o, now)]),
}
