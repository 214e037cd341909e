"""Printers of ``storagemigration.k8s.io``: storage version migrations."""

from __future__ import annotations

from controller_manager.sim.apiserver.tables.cells import Column, Printer, name, spec


def _resource(obj: dict[str, object]) -> str:
    """The migrated resource as ``resource.version.group``."""
    ref = spec(obj).get("resource") or {}
    return f"{ref.get('resource') or ''}.{ref.get('version') or ''}.{ref.get('group') or ''}"


# Upstream's Name column here has no name format.
PRINTERS: dict[str, Printer] = {
    "StorageVersionMigration": Printer((Column("Name"), Column("Resource")),
                                       lambda o, now: [name(o), _resource(o)]),
}
