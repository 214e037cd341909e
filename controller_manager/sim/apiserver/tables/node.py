"""Printers of ``node.k8s.io``: runtime classes."""

from __future__ import annotations

from controller_manager.sim.apiserver.tables.cells import AGE, NAME, Column, Printer, age, name

PRINTERS: dict[str, Printer] = {
    "RuntimeClass": Printer((NAME, Column("Handler"), AGE),
                            lambda o, now: [name(o), str(o.get("handler") or ""), age(o, now)]),
}
