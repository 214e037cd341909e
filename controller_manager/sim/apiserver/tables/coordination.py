"""Printers of ``coordination.k8s.io``: leases and lease candidates."""

from __future__ import annotations

from controller_manager.sim.apiserver.tables.cells import AGE, NAME, Column, Printer, age, name, spec

PRINTERS: dict[str, Printer] = {
    "Lease": Printer((NAME, Column("Holder"), AGE),
                     lambda o, now: [name(o), str(spec(o).get("holderIdentity") or ""), age(o, now)]),
    "LeaseCandidate": Printer((NAME, Column("LeaseName"), Column("BinaryVersion"), Column("EmulationVersion"), AGE),
                              lambda o, now: [name(o), str(spec(o).get("leaseName") or ""),
                                              str(spec(o).get("binaryVersion") or ""),
                                              str(spec(o).get("emulationVersion") or ""), age(o, now)]),
}
