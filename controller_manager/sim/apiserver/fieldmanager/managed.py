"""``metadata.managedFields``: decoding entries into per-manager field sets and writing them back.

A manager is identified as upstream's ``BuildManagerIdentifier`` does: manager name, operation, apiVersion
(left out for Apply, so one applier owns its fields across versions) and subresource. Entries are written in
upstream's order: Apply before Update, then by time (whole seconds), manager, apiVersion, subresource.

Decoding every entry's FieldsV1 on every write would cost more than the write: decoded sets are cached by
the identity of the (never mutated) stored FieldsV1 dict, holding a reference so the identity stays unique.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, NamedTuple

from controller_manager.sim.apiserver.fieldmanager.fieldpath import EMPTY, FieldsError, Set, from_fields_v1

__all__ = ["APPLY", "UPDATE", "DecodeError", "Managed", "ManagerId", "VersionedSet", "decode", "encode"]

APPLY = "Apply"
UPDATE = "Update"
_CACHE_SIZE = 8192


class DecodeError(ValueError):
    pass


class ManagerId(NamedTuple):
    manager: str
    operation: str
    api_version: str      # "" for Apply
    subresource: str = ""

    def describe(self) -> str:
        """printManager: ``"kubectl"``, ``"kubelet" with subresource "status" using v1``."""
        text = _go_quote(self.manager)
        if self.subresource:
            text += f" with subresource {_go_quote(self.subresource)}"
        if self.operation == UPDATE:
            text += f" using {self.api_version}"
        return text


def _go_quote(s: str) -> str:
    import json

    return json.dumps(s, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class VersionedSet:
    set: Set
    api_version: str
    applied: bool


@dataclass(slots=True)
class Managed:
    fields: dict[ManagerId, VersionedSet]
    times: dict[ManagerId, str | None]
    # The entry each manager came from, reused as is when its set, version and time are unchanged.
    entries: dict[ManagerId, dict[str, Any]]

    @classmethod
    def empty(cls) -> Managed:
        return cls({}, {}, {})

    def copy(self) -> Managed:
        return Managed(dict(self.fields), dict(self.times), dict(self.entries))


_decoded: OrderedDict[int, tuple[Any, Set]] = OrderedDict()


def _fields_set(doc: Any) -> Set:
    if doc is None:
        return EMPTY
    hit = _decoded.get(id(doc))
    if hit is not None and hit[0] is doc:
        _decoded.move_to_end(id(doc))
        return hit[1]
    try:
        result = from_fields_v1(doc)
    except FieldsError as e:
        raise DecodeError(f"error decoding set: {e}") from None
    _decoded[id(doc)] = (doc, result)
    if len(_decoded) > _CACHE_SIZE:
        _decoded.popitem(last=False)
    return result


def remember(entry: dict[str, Any], s: Set) -> None:
    """Seed the cache with a set just encoded into ``entry``."""
    doc = entry.get("fieldsV1")
    if doc is not None:
        _decoded[id(doc)] = (doc, s)
        if len(_decoded) > _CACHE_SIZE:
            _decoded.popitem(last=False)


def decode(entries: Any) -> Managed:
    """DecodeManagedFields; DecodeError for an entry upstream refuses."""
    out = Managed.empty()
    if not entries:
        return out
    if not isinstance(entries, list):
        raise DecodeError("managedFields must be a list")
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise DecodeError("managedFields entry must be an object")
        operation = entry.get("operation")
        if operation not in (APPLY, UPDATE):
            raise DecodeError("operation must be `Apply` or `Update`")
        api_version = entry.get("apiVersion") or ""
        if not api_version:
            raise DecodeError("apiVersion must not be empty")
        fields_type = entry.get("fieldsType") or ""
        if fields_type == "":
            raise DecodeError(f"missing fieldsType in managed fields entry {i}")
        if fields_type != "FieldsV1":
            raise DecodeError(f'invalid fieldsType "{fields_type}" in managed fields entry {i}')
        manager = entry.get("manager") or ""
        subresource = entry.get("subresource") or ""
        if not isinstance(manager, str) or not isinstance(subresource, str) or not isinstance(api_version, str):
            raise DecodeError("malformed managed fields entry")
        mid = ManagerId(manager, operation, "" if operation == APPLY else api_version, subresource)
        out.fields[mid] = VersionedSet(_fields_set(entry.get("fieldsV1")), api_version, operation == APPLY)
        out.times[mid] = entry.get("time")
        out.entries[mid] = entry
    return out


def _time_seconds(t: str | None) -> str:
    # RFC 3339 in UTC with second precision sorts as text; no time sorts first (Unix 0).
    return t or ""


def encode(managed: Managed) -> list[dict[str, Any]] | None:
    """The managedFields entries (None when no manager owns anything)."""
    if not managed.fields:
        return None
    out = []
    for mid, vs in managed.fields.items():
        t = managed.times.get(mid)
        old = managed.entries.get(mid)
        if (old is not None and old.get("apiVersion") == vs.api_version and old.get("time") == t
                and old.get("operation") == (APPLY if vs.applied else UPDATE)
                and old.get("fieldsType") == "FieldsV1" and _fields_set(old.get("fieldsV1")) is vs.set):
            out.append(old)
            continue
        entry: dict[str, Any] = {"manager": mid.manager, "operation": APPLY if vs.applied else UPDATE,
                                 "apiVersion": vs.api_version}
        if t is not None:
            entry["time"] = t
        entry["fieldsType"] = "FieldsV1"
        entry["fieldsV1"] = vs.set.to_fields_v1()
        if mid.subresource:
            entry["subresource"] = mid.subresource
        remember(entry, vs.set)
        out.append(entry)
    out.sort(key=lambda e: (e["operation"], _time_seconds(e.get("time")), e.get("manager", ""),
                            e["apiVersion"], e.get("subresource", "")))
    return out
