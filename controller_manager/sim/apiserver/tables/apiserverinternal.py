"""Printers of ``internal.apiserver.k8s.io``: storage versions."""

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
    status,
)


def _storage_version_cells(sv: Obj, now: float) -> list[Any]:
    versions = [f"{v.get('apiServerID') or ''}={v.get('encodingVersion') or ''}"
                for v in status(sv).get("storageVersions") or []]
    common = status(sv).get("commonEncodingVersion")
    return [name(sv), "<unset>" if common is None else str(common), list_with_more(versions, len(versions), 3),
            age(sv, now)]


PRINTERS: dict[str, Printer] = {
    "StorageVersion": Printer((NAME, Column("CommonEncodingVersion"), Column("StorageVersions"), AGE),
                              _storage_version_cells),
}
