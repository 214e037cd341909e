"""Server-side printing: the ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io`` answers kubectl asks for.

Each API group's module ports the column definitions and cell logic of upstream's
``pkg/printers/internalversion/printers.go`` for every kind it prints, keyed here by (group, kind) so a kind
gets its columns as soon as kube-sim serves it; any other kind gets the default Name / Created At table
(``rest.NewDefaultTableConvertor``). As on a real server every column is filled (the wide ones too: kubectl
drops priority-1 columns unless asked for ``-o wide``), columns are sent only on the first page of a list or
the first event of a watch, and each row carries its object as ``includeObject`` says: PartialObjectMetadata
(``Metadata``, the default), the whole object (``Object``) or ``null`` (``None``).
"""

from __future__ import annotations

from controller_manager.api.resources import Resource
from controller_manager.sim.apiserver import errors
from controller_manager.sim.apiserver.crd import printers as crd_printers
from controller_manager.sim.apiserver.crd.resource import CustomResource
from controller_manager.sim.apiserver.tables import (
    admissionregistration,
    apiregistration,
    apiserverinternal,
    apps,
    autoscaling,
    batch,
    certificates,
    coordination,
    core,
    discovery,
    events,
    flowcontrol,
    networking,
    node,
    policy,
    rbac,
    resource,
    scheduling,
    storage,
    storagemigration,
)
from controller_manager.sim.apiserver.tables.cells import Column, Obj, Printer, human_duration, meta, name

__all__ = ["DEFAULT", "PRINTERS", "check_include_object", "human_duration", "printer_for", "table"]

_BY_GROUP: dict[str, dict[str, Printer]] = {
    "": core.PRINTERS,
    "apps": apps.PRINTERS,
    "batch": batch.PRINTERS,
    "autoscaling": autoscaling.PRINTERS,
    "policy": policy.PRINTERS,
    "networking.k8s.io": networking.PRINTERS,
    "discovery.k8s.io": discovery.PRINTERS,
    "rbac.authorization.k8s.io": rbac.PRINTERS,
    "storage.k8s.io": storage.PRINTERS,
    "certificates.k8s.io": certificates.PRINTERS,
    "coordination.k8s.io": coordination.PRINTERS,
    "scheduling.k8s.io": scheduling.PRINTERS,
    "node.k8s.io": node.PRINTERS,
    "flowcontrol.apiserver.k8s.io": flowcontrol.PRINTERS,
    "admissionregistration.k8s.io": admissionregistration.PRINTERS,
    "internal.apiserver.k8s.io": apiserverinternal.PRINTERS,
    "resource.k8s.io": resource.PRINTERS,
    "storagemigration.k8s.io": storagemigration.PRINTERS,
    "events.k8s.io": events.PRINTERS,
    "apiregistration.k8s.io": apiregistration.PRINTERS,
}
PRINTERS: dict[tuple[str, str], Printer] = {
    (group, kind): printer for group, printers in _BY_GROUP.items() for kind, printer in printers.items()}
DEFAULT = Printer((Column("Name", format="name", description="Name of the object."),
                   Column("Created At", "date", description="When the object was created.")),
                  lambda obj, now: [name(obj), meta(obj).get("creationTimestamp")])
_INCLUDE_OBJECT = ("Metadata", "Object", "None", "")


def printer_for(group: str, kind: str) -> Printer:
    return PRINTERS.get((group, kind), DEFAULT)


def check_include_object(value: str) -> None:
    """``ValidateTableOptions``: an unknown ``includeObject`` is a bad request."""
    if value not in _INCLUDE_OBJECT:
        raise errors.bad_request(
            f'includeObject: Invalid value: "{value}": must be \'Metadata\', \'Object\', \'None\', or empty')


def _row(printer: Printer, obj: Obj, now: float, include_object: str) -> Obj:
    row: Obj = {"cells": printer.cells(obj, now)}
    if printer.conditions is not None and (conditions := printer.conditions(obj)):
        row["conditions"] = conditions
    if include_object == "Object":
        row["object"] = obj
    elif include_object == "None":
        row["object"] = None
    else:
        row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta(obj)}
    return row


def table(res: Resource, objects: list[Obj], now: float, resource_version: str | None = None, *,
          include_object: str = "Metadata", continue_token: str = "", remaining: int | None = None,
          with_columns: bool = True, kind: tuple[str, str] | None = None) -> Obj:
    """The Table of ``objects`` (a list page, one object, or one watch event's object).

    ``resource_version`` is the list's; None (one object) takes the object's own, as upstream does.
    ``with_columns=False`` leaves ``columnDefinitions`` null (later pages' and watch events' tables).
    ``kind`` (group, kind) prints objects of another kind than ``res``'s (a scale subresource)."""
    if isinstance(res, CustomResource) and kind is None:
        printer = crd_printers.printer(res)  # built from the CRD's additionalPrinterColumns
    else:
        printer = printer_for(*(kind or (res.group, res.kind)))
    items = printer.order(objects) if printer.order is not None else objects
    list_meta: Obj = {}
    rv = resource_version
    if rv is None and len(objects) == 1:
        rv = str(meta(objects[0]).get("resourceVersion") or "")
    if rv:
        list_meta["resourceVersion"] = rv
    if continue_token:
        list_meta["continue"] = continue_token
        if remaining is not None:
            list_meta["remainingItemCount"] = remaining
    columns: list[Obj] | None = [c.definition() for c in printer.columns] if with_columns else None
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta, "columnDefinitions": columns,
            "rows": [_row(printer, obj, now, include_object) for obj in items]}
