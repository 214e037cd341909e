"""Printers of ``discovery.k8s.io``: endpoint slices."""

from __future__ import annotations

from typing import Any

from controller_manager.sim.apiserver.tables.cells import (
    AGE,
    NAME,
    Column,
    Obj,
    Printer,
    age,
    list_with_more,
    name,
)


def _ports(ports: list[Obj]) -> str:
    """``formatDiscoveryPorts``: port numbers (or names, or ``*``), three at most."""
    shown = []
    for p in ports[:3]:
        shown.append(str(p["port"]) if p.get("port") is not None
                     else str(p["name"]) if p.get("name") is not None else "*")
    return list_with_more(shown, len(ports), 3)


def _endpoints(endpoints: list[Obj]) -> str:
    """``formatDiscoveryEndpoints``: the endpoints' addresses, three at most."""
    addresses = [str(a) for e in endpoints for a in e.get("addresses") or []]
    return list_with_more(addresses, len(addresses), 3)


def _endpoint_slice_cells(es: Obj, now: float) -> list[Any]:
    return [name(es), str(es.get("addressType") or ""), _ports(es.get("ports") or []),
            _endpoints(es.get("endpoints") or []), age(es, now)]


PRINTERS: dict[str, Printer] = {
    "EndpointSlice": Printer((NAME, Column("AddressType"), Column("Ports"), Column("Endpoints"), AGE),
                             _endpoint_slice_cells),
}
