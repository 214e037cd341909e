"""Table printing of custom resources from their CRD's ``additionalPrinterColumns``, as upstream's
``pkg/registry/customresource/tableconvertor`` does it: a Name column, then each column in order (an
``Age`` of ``.metadata.creationTimestamp`` when the CRD names none). Cells: a ``string`` column prints the
JSONPath's value as text, ``integer``/``number``/``boolean`` take the value if it has that type, ``date``
shows the age; a path that finds nothing, or a value of another type, is an empty (null) cell.
"""

from __future__ import annotations

import json
import re
from typing import Any

from controller_manager.api.meta import parse_time
from controller_manager.sim.apiserver.crd.resource import CustomResource
from controller_manager.sim.apiserver.tables.cells import Column, Printer, human_duration

Obj = dict[str, Any]

NAME_DESCRIPTION = (
    "Name must be unique within a namespace. Is required when creating resources, although some resources may "
    "allow a client to request the generation of an appropriate name automatically. Name is primarily intended "
    "for creation idempotence and configuration definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names")
CREATION_DESCRIPTION = (
    "CreationTimestamp is a timestamp representing the server time when this object was created. It is not "
    "guaranteed to be set in happens-before order across separate operations. Clients may not set this value. "
    "It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More "
    "info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata")
DEFAULT_COLUMNS: tuple[Obj, ...] = ({"name": "Age", "type": "date", "description": CREATION_DESCRIPTION,
                                     "jsonPath": ".metadata.creationTimestamp"},)
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]|\[\?\(@\.([\w.]+)\s*==\s*[\"']([^\"']*)[\"']\)\]")


def printer(res: CustomResource) -> Printer:
    specs = res.columns or DEFAULT_COLUMNS
    columns = (Column("Name", "string", "name", description=NAME_DESCRIPTION),
               *(Column(str(c.get("name", "")), str(c.get("type", "string")), str(c.get("format", "")),
                        int(c.get("priority", 0) or 0), str(c.get("description", ""))) for c in specs))
    paths = [str(c.get("jsonPath", "")) for c in specs]
    types = [str(c.get("type", "string")) for c in specs]

    def cells(obj: Obj, now: float) -> list[Any]:
        row: list[Any] = [(obj.get("metadata") or {}).get("name", "")]
        for path, type_ in zip(paths, types, strict=True):
            found = find(obj, path)
            row.append(None if found is _MISSING else cell(type_, found, now))
        return row

    return Printer(columns, cells)


class _Missing:
    pass


_MISSING: Any = _Missing()


def find(obj: Any, path: str) -> Any:
    """The value at a simple JSONPath (``.a.b``, ``[0]``, ``[?(@.type=="Ready")]``), or ``_MISSING``."""
    value = obj
    pos = 0
    path = path.strip().removeprefix("{").removesuffix("}")
    while pos < len(path):
        m = _STEP.match(path, pos)
        if m is None:
            return _MISSING
        pos = m.end()
        key, index, filter_key, filter_value = m.groups()
        if key is not None:
            if not isinstance(value, dict) or key not in value:
                return _MISSING
            value = value[key]
        elif index is not None:
            if not isinstance(value, list) or int(index) >= len(value):
                return _MISSING
            value = value[int(index)]
        else:
            if not isinstance(value, list):
                return _MISSING
            matches = [v for v in value if find(v, "." + filter_key) == filter_value]
            if not matches:
                return _MISSING
            value = matches[0]
    return value


def cell(type_: str, value: Any, now: float) -> Any:
    if value is None:
        return None
    if type_ == "string":
        return _text(value)
    if type_ == "integer":
        return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
    if type_ == "number":
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
    if type_ == "boolean":
        return value if isinstance(value, bool) else None
    if type_ == "date" and isinstance(value, str):
        when = parse_time(value)
        return "<invalid>" if when is None else human_duration(now - when)
    return None


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"))
