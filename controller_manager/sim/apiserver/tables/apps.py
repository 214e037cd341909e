"""Printers of ``apps``: deployments, replica sets, stateful sets, daemon sets, controller revisions."""

from __future__ import annotations

from typing import Any

from controller_manager.api import selectors
from controller_manager.sim.apiserver.tables.cells import (
    AGE,
    CONTAINERS,
    IMAGES,
    NAME,
    SELECTOR,
    Column,
    Obj,
    Printer,
    age,
    container_cells,
    format_label_selector,
    format_labels,
    integer,
    meta,
    name,
    pod_template_containers,
    spec,
    status,
)


def _template_cells(obj: Obj) -> tuple[str, str]:
    return container_cells(pod_template_containers(spec(obj).get("template")))


def _deployment_cells(d: Obj, now: float) -> list[Any]:
    st = status(d)
    try:
        selector = str(selectors.from_label_selector(spec(d).get("selector")))
    except selectors.InvalidSelector:
        selector = "<invalid>"
    names, images = _template_cells(d)
    return [name(d), f"{integer(st.get('readyReplicas'))}/{integer(spec(d).get('replicas', 1))}",
            integer(st.get("updatedReplicas")), integer(st.get("availableReplicas")), age(d, now),
            names, images, selector]


def _replica_set_cells(rs: Obj, now: float) -> list[Any]:
    st = status(rs)
    names, images = _template_cells(rs)
    return [name(rs), integer(spec(rs).get("replicas", 1)), integer(st.get("replicas")),
            integer(st.get("readyReplicas")), age(rs, now), names, images,
            format_label_selector(spec(rs).get("selector"))]


def _stateful_set_cells(s: Obj, now: float) -> list[Any]:
    names, images = _template_cells(s)
    return [name(s), f"{integer(status(s).get('readyReplicas'))}/{integer(spec(s).get('replicas', 1))}",
            age(s, now), names, images]


def _daemon_set_cells(ds: Obj, now: float) -> list[Any]:
    st = status(ds)
    names, images = _template_cells(ds)
    node_selector = spec(spec(ds).get("template") or {}).get("nodeSelector")
    return [name(ds), integer(st.get("desiredNumberScheduled")), integer(st.get("currentNumberScheduled")),
            integer(st.get("numberReady")), integer(st.get("updatedNumberScheduled")),
            integer(st.get("numberAvailable")), format_labels(node_selector), age(ds, now), names, images,
            format_label_selector(spec(ds).get("selector"))]


def owner_name(ref: Obj) -> str:
    """``formatResourceName`` of a controller reference: ``kind.group/name`` lower-cased (``kind/name`` for
    the core group)."""
    group = str(ref.get("apiVersion") or "").rpartition("/")[0]
    kind = str(ref.get("kind") or "")
    group_kind = f"{kind}.{group}" if group else kind
    return f"{group_kind.lower()}/{ref.get('name') or ''}" if group_kind else str(ref.get("name") or "")


def _controller_revision_cells(cr: Obj, now: float) -> list[Any]:
    controller = next((r for r in meta(cr).get("ownerReferences") or [] if r.get("controller")), None)
    return [name(cr), owner_name(controller) if controller else "<none>", integer(cr.get("revision")), age(cr, now)]


PRINTERS: dict[str, Printer] = {
    "Deployment": Printer((NAME, Column("Ready"), Column("Up-to-date"), Column("Available"), AGE, CONTAINERS,
                           IMAGES, SELECTOR), _deployment_cells),
    "ReplicaSet": Printer((NAME, Column("Desired", "integer"), Column("Current", "integer"),
                           Column("Ready", "integer"), AGE, CONTAINERS, IMAGES, SELECTOR), _replica_set_cells),
    "StatefulSet": Printer((NAME, Column("Ready"), AGE, CONTAINERS, IMAGES), _stateful_set_cells),
    "DaemonSet": Printer((NAME, Column("Desired", "integer"), Column("Current", "integer"),
                          Column("Ready", "integer"), Column("Up-to-date", "integer"),
                          Column("Available", "integer"), Column("Node Selector"), AGE, CONTAINERS, IMAGES,
                          SELECTOR), _daemon_set_cells),
    "ControllerRevision": Printer((NAME, Column("Controller"), Column("Revision"), AGE),
                                  _controller_revision_cells),
}
