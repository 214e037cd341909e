"""Printers of ``policy``: pod disruption budgets."""

from __future__ import annotations

from typing import Any

from controller_manager.sim.apiserver.tables.cells import (
    AGE,
    NAME,
    Column,
    Obj,
    Printer,
    age,
    int_or_string,
    integer,
    name,
    spec,
    status,
)


def _pdb_cells(pdb: Obj, now: float) -> list[Any]:
    pdb_spec = spec(pdb)
    min_available, max_unavailable = pdb_spec.get("minAvailable"), pdb_spec.get("maxUnavailable")
    return [name(pdb), "N/A" if min_available is None else int_or_string(min_available),
            "N/A" if max_unavailable is None else int_or_string(max_unavailable),
            integer(status(pdb).get("disruptionsAllowed")), age(pdb, now)]


PRINTERS: dict[str, Printer] = {
    "PodDisruptionBudget": Printer((NAME, Column("Min Available"), Column("Max Unavailable"),
                                    Column("Allowed Disruptions", "integer"), AGE), _pdb_cells),
}
