"""Printers of ``storagemigration.k8s.io``: storage version migrations."""

from __future__ import annotations

from controller_manager.sim.apiserver.tables.cells import Column, Printer, name, spec


def _resource(obj: dict[str, object]) -> str:
    """The migrated resource: ``resource.group`` as ``GroupResource.String()`` writes it (1.37's spec names a
    group and resource; the older printer also had a version between them)."""
    ref = spec(obj).get("resource") or {}
    resource, group = str(ref.get("resource") or ""), str(ref.get("group") or "")
    return f"{resource}.{group}" if group else resource


# Upstream's Name column here has no name format.
PRINTERS: dict[str, Printer] = {
    "StorageVersionMigration": Printer((Column("Name"), Column("Resource")),
                                       lambda o, now: [name(o), _resource(o)]),
}
