"""Printers of ``apiregistration.k8s.io`` (kube-aggregator's own table convertor): APIServices, with the service
that hosts them (``Local`` for the server's own) and whether they are available."""

from __future__ import annotations

from typing import Any

from controller_manager.sim.apiserver.tables.cells import AGE, NAME, Column, Obj, Printer, age, name, spec, status


def _api_service_cells(svc: Obj, now: float) -> list[Any]:
    service = spec(svc).get("service")
    where = "Local"
    if isinstance(service, dict):
        where = f"{service.get('namespace') or ''}/{service.get('name') or ''}"
    available = "Unknown"
    for condition in status(svc).get("conditions") or []:
        if condition.get("type") == "Available":
            state, reason = str(condition.get("status") or ""), str(condition.get("reason") or "")
            available = state if state == "True" or not reason else f"{state} ({reason})"
            break
    return [name(svc), where, available, age(svc, now)]


PRINTERS: dict[str, Printer] = {
    "APIService": Printer((NAME, Column("Service"), Column("Available"), AGE), _api_service_cells),
}
