"""Server-side printing: ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io`` answers, as kubectl asks.

Guarantees: the columns of the kinds kubectl users look at most (pods, nodes, namespaces, deployments,
replicasets, statefulsets, jobs, events) follow ``pkg/printers/internalversion/printers.go``; every other
kind gets the default Name / Created At table. Ages use apimachinery's ``HumanDuration``. Each row carries
the object as PartialObjectMetadata (``includeObject=Metadata``, the default), the whole object
(``Object``) or nothing (``None``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from controller_manager.api.meta import parse_time
from controller_manager.api.resources import Resource
from controller_manager.sim.apiserver.objects import partial_metadata

Obj = dict[str, Any]
Column = tuple[str, str, str, int]  # name, type, format, priority
Row = Callable[[Obj, float], list[Any]]


def human_duration(seconds: float) -> str:
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rem = s % 60
        return f"{minutes}m" if rem == 0 else f"{minutes}m{rem}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        rem = minutes % 60
        return f"{hours}h" if rem == 0 else f"{hours}h{rem}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rem = hours % 24
        return f"{hours // 24}d" if rem == 0 else f"{hours // 24}d{rem}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


def _age(obj: Obj, now: float, field: str = "creationTimestamp") -> str:
    ts = parse_time((obj.get("metadata") or {}).get(field))
    return "<unknown>" if ts is None else human_duration(now - ts)


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _pod_row(pod: Obj, now: float) -> list[Any]:
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for c in statuses if c.get("ready"))
    restarts = sum(int(c.get("restartCount") or 0) for c in statuses)
    reason = status.get("reason") or status.get("phase") or ""
    for c in statuses:
        state = c.get("state") or {}
        if (state.get("waiting") or {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif (state.get("terminated") or {}).get("reason"):
            reason = state["terminated"]["reason"]
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        reason = "Terminating"
    return [_name(pod), f"{ready}/{len(spec.get('containers') or [])}", reason, restarts, _age(pod, now),
            status.get("podIP") or "<none>", spec.get("nodeName") or "<none>",
            status.get("nominatedNodeName") or "<none>", "<none>"]


def _node_row(node: Obj, now: float) -> list[Any]:
    conditions = {c.get("type"): c.get("status") for c in (node.get("status") or {}).get("conditions") or []}
    ready = conditions.get("Ready")
    state = "Ready" if ready == "True" else "NotReady" if ready == "False" else "Unknown"
    if (node.get("spec") or {}).get("unschedulable"):
        state += ",SchedulingDisabled"
    labels = (node.get("metadata") or {}).get("labels") or {}
    roles = sorted(k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/"))
    info = (node.get("status") or {}).get("nodeInfo") or {}
    return [_name(node), state, ",".join(roles) or "<none>", _age(node, now), info.get("kubeletVersion", "")]


def _deployment_row(d: Obj, now: float) -> list[Any]:
    st = d.get("status") or {}
    replicas = int((d.get("spec") or {}).get("replicas", 0) or 0)
    return [_name(d), f"{int(st.get('readyReplicas') or 0)}/{replicas}", int(st.get("updatedReplicas") or 0),
            int(st.get("availableReplicas") or 0), _age(d, now)]


def _replicaset_row(rs: Obj, now: float) -> list[Any]:
    st = rs.get("status") or {}
    return [_name(rs), int((rs.get("spec") or {}).get("replicas", 0) or 0), int(st.get("replicas") or 0),
            int(st.get("readyReplicas") or 0), _age(rs, now)]


def _statefulset_row(s: Obj, now: float) -> list[Any]:
    st = s.get("status") or {}
    return [_name(s), f"{int(st.get('readyReplicas') or 0)}/{int((s.get('spec') or {}).get('replicas', 0) or 0)}",
            _age(s, now)]


def _job_row(j: Obj, now: float) -> list[Any]:
    st = j.get("status") or {}
    conds = {c.get("type"): c.get("status") for c in st.get("conditions") or []}
    status = ("Complete" if conds.get("Complete") == "True" else "Failed" if conds.get("Failed") == "True"
              else "Running")
    completions = (j.get("spec") or {}).get("completions")
    succeeded = int(st.get("succeeded") or 0)
    return [_name(j), status, f"{succeeded}/{completions}" if completions is not None else f"{succeeded}/1 of 1",
            "", _age(j, now)]


def _namespace_row(ns: Obj, now: float) -> list[Any]:
    return [_name(ns), (ns.get("status") or {}).get("phase", ""), _age(ns, now)]


def _event_row(e: Obj, now: float) -> list[Any]:
    inv = e.get("involvedObject") or {}
    last = e.get("lastTimestamp") or e.get("eventTime") or (e.get("metadata") or {}).get("creationTimestamp")
    ts = parse_time(last)
    return ["<unknown>" if ts is None else human_duration(now - ts), e.get("type", ""), e.get("reason", ""),
            f"{str(inv.get('kind', '')).lower()}/{inv.get('name', '')}", e.get("message", "")]


def _default_row(obj: Obj, now: float) -> list[Any]:
    return [_name(obj), (obj.get("metadata") or {}).get("creationTimestamp")]


_NAME: Column = ("Name", "string", "name", 0)
_AGE: Column = ("Age", "string", "", 0)
PRINTERS: dict[str, tuple[list[Column], Row]] = {
    "Pod": ([_NAME, ("Ready", "string", "", 0), ("Status", "string", "", 0), ("Restarts", "string", "", 0), _AGE,
             ("IP", "string", "", 1), ("Node", "string", "", 1), ("Nominated Node", "string", "", 1),
             ("Readiness Gates", "string", "", 1)], _pod_row),
    "Node": ([_NAME, ("Status", "string", "", 0), ("Roles", "string", "", 0), _AGE, ("Version", "string", "", 0)],
             _node_row),
    "Namespace": ([_NAME, ("Status", "string", "", 0), _AGE], _namespace_row),
    "Deployment": ([_NAME, ("Ready", "string", "", 0), ("Up-to-date", "integer", "", 0),
                    ("Available", "integer", "", 0), _AGE], _deployment_row),
    "ReplicaSet": ([_NAME, ("Desired", "integer", "", 0), ("Current", "integer", "", 0), ("Ready", "integer", "", 0),
                    _AGE], _replicaset_row),
    "StatefulSet": ([_NAME, ("Ready", "string", "", 0), _AGE], _statefulset_row),
    "Job": ([_NAME, ("Status", "string", "", 0), ("Completions", "string", "", 0), ("Duration", "string", "", 0),
             _AGE], _job_row),
    "Event": ([("Last Seen", "string", "", 0), ("Type", "string", "", 0), ("Reason", "string", "", 0),
               ("Object", "string", "", 0), ("Message", "string", "", 0)], _event_row),
}
_DEFAULT: tuple[list[Column], Row] = ([_NAME, ("Created At", "date", "", 0)], _default_row)


def table(res: Resource, objects: list[Obj], now: float, resource_version: str, *, include_object: str = "Metadata",
          continue_token: str = "", with_columns: bool = True) -> Obj:
    columns, row = PRINTERS.get(res.kind, _DEFAULT) if res.group in ("", "apps", "batch") else _DEFAULT
    if res.kind == "Event" and res.group:
        columns, row = _DEFAULT
    rows = []
    for obj in objects:
        entry: Obj = {"cells": row(obj, now)}
        if include_object == "Object":
            entry["object"] = obj
        elif include_object != "None":
            entry["object"] = partial_metadata(obj)
        rows.append(entry)
    meta: Obj = {"resourceVersion": resource_version}
    if continue_token:
        meta["continue"] = continue_token
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta,
            "columnDefinitions": [{"name": n, "type": t, "format": f, "description": "", "priority": p}
                                  for n, t, f, p in columns] if with_columns else None,
            "rows": rows}
