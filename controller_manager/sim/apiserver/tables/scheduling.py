"""Printers of ``scheduling.k8s.io``: priority classes."""

from __future__ import annotations

from controller_manager.sim.apiserver.tables.cells import AGE, NAME, Column, Printer, age, integer, name

PRINTERS: dict[str, Printer] = {
    "PriorityClass": Printer((NAME, Column("Value", "integer"), Column("Global-Default", "boolean"), AGE,
                              Column("PreemptionPolicy")),
                             lambda o, now: [name(o), integer(o.get("value")), bool(o.get("globalDefault")),
                                             age(o, now), str(o.get("preemptionPolicy") or "")]),
}
