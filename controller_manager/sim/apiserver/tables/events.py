"""Printers of ``events.k8s.io``: its Events are stored as core Events upstream and printed by the core printer,
so they are read back into the core/v1 field names first."""

from __future__ import annotations

from typing import Any

from controller_manager.sim.apiserver.tables import core
from controller_manager.sim.apiserver.tables.cells import Obj, Printer

_CORE_NAMES = {"regarding": "involvedObject", "note": "message", "deprecatedSource": "source",
               "deprecatedFirstTimestamp": "firstTimestamp", "deprecatedLastTimestamp": "lastTimestamp",
               "deprecatedCount": "count"}


def as_core_event(event: Obj) -> Obj:
    return {_CORE_NAMES.get(k, k): v for k, v in event.items()}


def _event_cells(event: Obj, now: float) -> list[Any]:
    return core.event_cells(as_core_event(event), now)


PRINTERS: dict[str, Printer] = {"Event": Printer(core.PRINTERS["Event"].columns, _event_cells)}
