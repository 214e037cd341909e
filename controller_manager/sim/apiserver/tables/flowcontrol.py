"""Printers of ``flowcontrol.apiserver.k8s.io``: flow schemas (listed in matching order) and priority levels."""

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
    spec,
    status,
)


def _flow_schema_cells(fs: Obj, now: float) -> list[Any]:
    fs_spec = spec(fs)
    method = fs_spec.get("distinguisherMethod")
    dangling = next((str(c.get("status") or "") for c in status(fs).get("conditions") or []
                     if c.get("type") == "Dangling"), "?")
    return [name(fs), str((fs_spec.get("priorityLevelConfiguration") or {}).get("name") or ""),
            integer(fs_spec.get("matchingPrecedence")),
            "<none>" if method is None else str(method.get("type") or ""), age(fs, now), dangling]


def _matching_order(schemas: list[Obj]) -> list[Obj]:
    """``FlowSchemaSequence``: by matching precedence, then name."""
    return sorted(schemas, key=lambda fs: (integer(spec(fs).get("matchingPrecedence")), name(fs)))


def _priority_level_cells(pl: Obj, now: float) -> list[Any]:
    limited = spec(pl).get("limited")
    shares: Any = "<none>"
    queues: Any = "<none>"
    hand_size: Any = "<none>"
    queue_length_limit: Any = "<none>"
    if limited is not None:
        shares = integer(limited.get("nominalConcurrencyShares"))
        queuing = (limited.get("limitResponse") or {}).get("queuing")
        if queuing is not None:
            queues = integer(queuing.get("queues"))
            hand_size = integer(queuing.get("handSize"))
            queue_length_limit = integer(queuing.get("queueLengthLimit"))
    return [name(pl), str(spec(pl).get("type") or ""), shares, queues, hand_size, queue_length_limit, age(pl, now)]


PRINTERS: dict[str, Printer] = {
    "FlowSchema": Printer((NAME, Column("PriorityLevel"), Column("MatchingPrecedence"),
                           Column("DistinguisherMethod"), AGE, Column("MissingPL")), _flow_schema_cells,
                          order=_matching_order),
    "PriorityLevelConfiguration": Printer((NAME, Column("Type"), Column("NominalConcurrencyShares"),
                                           Column("Queues"), Column("HandSize"), Column("QueueLengthLimit"), AGE),
                                          _priority_level_cells),
}
