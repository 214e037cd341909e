"""Printers of ``certificates.k8s.io``: certificate signing requests and cluster trust bundles."""

from __future__ import annotations

from typing import Any

from controller_manager.sim.apiserver.tables.cells import (
    AGE,
    NAME,
    Column,
    Obj,
    Printer,
    age,
    human_duration,
    name,
    spec,
    status,
)


def csr_condition(csr: Obj) -> str:
    """``extractCSRStatus``: Denied, Approved or Pending, then ``,Failed`` and ``,Issued``."""
    types = {c.get("type") for c in status(csr).get("conditions") or []}
    text = "Denied" if "Denied" in types else "Approved" if "Approved" in types else "Pending"
    if "Failed" in types:
        text += ",Failed"
    if status(csr).get("certificate"):
        text += ",Issued"
    return text


def _csr_cells(csr: Obj, now: float) -> list[Any]:
    csr_spec = spec(csr)
    seconds = csr_spec.get("expirationSeconds")
    return [name(csr), age(csr, now), csr_spec.get("signerName") or "<none>", str(csr_spec.get("username") or ""),
            "<none>" if seconds is None else human_duration(seconds), csr_condition(csr)]


PRINTERS: dict[str, Printer] = {
    "CertificateSigningRequest": Printer((NAME, AGE, Column("SignerName"), Column("Requestor"),
                                          Column("RequestedDuration"), Column("Condition")), _csr_cells),
    "ClusterTrustBundle": Printer((NAME, Column("SignerName")),
                                  lambda o, now: [name(o), spec(o).get("signerName") or "<none>"]),
}
