"""Printers of ``resource.k8s.io`` (dynamic resource allocation): device classes, claims, claim templates and
resource slices."""

from __future__ import annotations

from typing import Any

from controller_manager.sim.apiserver.tables.cells import (
    AGE,
    NAME,
    Column,
    Obj,
    Printer,
    age,
    meta,
    name,
    spec,
    status,
)


def claim_state(claim: Obj) -> str:
    """``resourceClaimState``: deleted / pending / allocated / reserved, comma-joined."""
    states = []
    deleting = meta(claim).get("deletionTimestamp") is not None
    if deleting:
        states.append("deleted")
    if status(claim).get("allocation") is None:
        if not deleting:
            states.append("pending")
    else:
        states.append("allocated")
        if status(claim).get("reservedFor"):
            states.append("reserved")
    return ",".join(states)


def _slice_cells(rs: Obj, now: float) -> list[Any]:
    rs_spec = spec(rs)
    return [name(rs), str(rs_spec.get("nodeName") or ""), str(rs_spec.get("driver") or ""),
            str((rs_spec.get("pool") or {}).get("name") or ""), age(rs, now)]


_NAME_AGE = Printer((NAME, AGE), lambda o, now: [name(o), age(o, now)])
PRINTERS: dict[str, Printer] = {
    "DeviceClass": _NAME_AGE,
    "ResourceClaim": Printer((NAME, Column("State"), AGE), lambda o, now: [name(o), claim_state(o), age(o, now)]),
    "ResourceClaimTemplate": _NAME_AGE,
    "ResourceSlice": Printer((NAME, Column("Node"), Column("Driver"), Column("Pool"), AGE), _slice_cells),
}
