"""Server-side field management: ``metadata.managedFields`` on every write, and server-side apply.

The package ports structured-merge-diff (``fieldpath``, ``typed``, the ``merge.Updater`` in ``updater``) and
apimachinery's ``pkg/util/managedfields/internal`` manager chain to kube-sim's one-version-per-kind world.
The ApiServer calls :func:`track_update` for creates, updates and patches (status and scale included) and
:mod:`.apply` for ``application/apply-patch+yaml``; the HTTP face resolves the manager name with
:func:`manager_name` and validates ``?fieldManager=`` with :func:`validate_field_manager`.
"""

from __future__ import annotations

import functools
import unicodedata
from collections import OrderedDict
from typing import Any

import orjson

from controller_manager.api.jsonbytes import kept
from controller_manager.api.resources import Resource
from controller_manager.sim.apiserver import codec, errors, schema, strategy, versions
from controller_manager.sim.apiserver.crd.resource import CustomResource
from controller_manager.sim.apiserver.fieldmanager import managed as managed_fields
from controller_manager.sim.apiserver.fieldmanager import typed, updater
from controller_manager.sim.apiserver.fieldmanager.fieldpath import Path, Set, field, path_string
from controller_manager.sim.apiserver.fieldmanager.managed import DecodeError, Managed
from controller_manager.sim.apiserver.fieldmanager.typed import MISSING

__all__ = ["FIELD_MANAGER_MAX_LENGTH", "MISSING", "conflict_error", "empty_object", "ignored_fields",
           "kind_atom", "manager_name", "other_versions", "track_update", "validate_field_manager"]

FIELD_MANAGER_MAX_LENGTH = 128
Obj = dict[str, Any]


def _printable(ch: str) -> bool:
    """Go's unicode.IsPrint: letters, marks, numbers, punctuation, symbols and the ASCII space."""
    return ch == " " or unicodedata.category(ch)[0] in "LMNPS"


def manager_name(field_manager: str | None, user_agent: str) -> str:
    """managerOrUserAgent: ``?fieldManager=``, else the User-Agent up to its first "/", without unprintable
    characters, cut to 128 bytes."""
    if field_manager:
        return field_manager
    return _agent_manager(user_agent)


@functools.lru_cache(maxsize=256)  # (a client sends the same User-Agent with every request)
def _agent_manager(user_agent: str) -> str:
    out = ""
    size = 0
    for ch in user_agent.split("/")[0]:
        if not _printable(ch):
            continue
        n = len(ch.encode())
        if size + n > FIELD_MANAGER_MAX_LENGTH:
            break
        out += ch
        size += n
    return out


def validate_field_manager(query: Any, options_kind: str, *, apply: bool = False) -> None:
    """ValidateCreate/Update/PatchOptions' fieldManager and force checks: 422 ``<Kind>.meta.k8s.io "" is
    invalid`` as upstream."""
    value = query.get("fieldManager", "")
    causes: list[tuple[str, str, str]] = []
    if options_kind == "PatchOptions":
        if apply:
            if not value:
                causes.append(("FieldValueRequired", "fieldManager",
                               "fieldManager: Required value: is required for apply patch"))
        elif "force" in query:
            causes.append(("FieldValueForbidden", "force",
                           "force: Forbidden: may not be specified for non-apply patch"))
    if len(value.encode()) > FIELD_MANAGER_MAX_LENGTH:
        causes.append(("FieldValueTooLong", "fieldManager",
                       f"fieldManager: Too long: may not be more than {FIELD_MANAGER_MAX_LENGTH} bytes"))
    for i, ch in enumerate(value):
        if not _printable(ch):
            causes.append(("FieldValueInvalid", "fieldManager",
                           f"fieldManager: Invalid value: {_go_quote(value)}: invalid character "
                           f"U+{ord(ch):04X} (at position {i})"))
    if causes:
        raise errors.invalid("meta.k8s.io", options_kind, "", causes)


def _go_quote(s: str) -> str:
    import json

    return json.dumps(s, ensure_ascii=False)


def kind_atom(res: Resource) -> typed.Atom:
    """The kind's schema for field management: built-in kinds' from kube-sim's schema, a custom resource's
    from its version's structural schema (the deduced, untyped one when it has none)."""
    if isinstance(res, CustomResource):
        return typed.crd_atom(res.schema) if isinstance(res.schema, dict) else typed.UNTYPED
    return _builtin_atom(res.api_version, res.kind)


# (kube-sim's schema of the built-in kinds never changes: each kind's atom is looked up once)
_builtin_atom = functools.cache(typed.kind_atom)


@functools.cache
def empty_object(api_version: str, kind: str) -> Obj:
    """The kind's zero value as the server writes it (what a create is compared against). Shared: never mutate."""
    st = schema.kind(api_version, kind)
    return schema.zero_struct(st.name) if st is not None else {}


@functools.cache
def _ignored(kind: str, has_status: bool, subresource: str) -> Set | None:
    if not has_status:
        return None
    if subresource == "status":
        return Set.of((field("spec"),), *((field("metadata"), field(f))
                                          for f in strategy.STATUS_RESET_META.get(kind, ())))
    if subresource:
        return None
    return Set.of((field("status"),))


def ignored_fields(res: Resource, subresource: str) -> Set | None:
    """The strategy's reset fields (GetResetFields): what a write through this endpoint never owns —
    status on the main resource, spec (and some metadata) on /status."""
    return _ignored(res.kind, strategy.has_status(res), subresource)


def _decode_or_empty(entries: Any) -> Managed:
    try:
        return managed_fields.decode(entries)
    except DecodeError:
        return Managed.empty()


def _is_reset(entries: Any) -> bool:
    """isResetManagedFields: ``[]`` or ``[{}]`` asks for managedFields to be cleared."""
    return isinstance(entries, list) and (not entries or (len(entries) == 1 and entries[0] == {}))


def keep_reset(sent: Any, decoded: Obj) -> Obj:
    """``decoded`` (typed decoding drops an empty list) still asking for managedFields to be cleared when the
    body ``sent`` did."""
    meta = sent.get("metadata") if isinstance(sent, dict) else None
    if isinstance(meta, dict) and _is_reset(meta.get("managedFields")):
        return {**decoded, "metadata": {**(decoded.get("metadata") or {}), "managedFields": []}}
    return decoded


def other_versions(res: Resource, subresource: str) -> updater.OtherVersions | None:
    """How a write to ``res`` compares in another served version of its kind (the managed fields'
    VersionConverter): both objects converted, compared with that version's schema and reset fields. None
    for kinds served in one version here (entries naming another version are compared in the writer's)."""
    if not versions.multi_version(res):
        return None

    def for_write(live: Any, new: Any) -> updater.OtherVersion:
        def compare_in(api_version: str) -> typed.Comparison | None:
            old_in = versions.convert(res, live, api_version)
            new_in = versions.convert(res, new, api_version)
            if old_in is None or new_in is None:
                return None
            other_res = old_in[0]
            return typed.compare(old_in[1], new_in[1], kind_atom(other_res)).excluding(
                ignored_fields(other_res, subresource))
        return compare_in
    return for_write


def track_update(res: Resource, live: Obj | None, new: Obj, *, manager: str, subresource: str, incoming: Any,
                 now: str) -> list[Obj] | None:
    """The managedFields of ``new`` after an Update operation by ``manager`` (FieldManager.UpdateNoErrors).

    ``live`` is the stored object and ``new`` the object about to be stored, both as the server writes them;
    on create ``live`` is None and ``new`` the defaulted object before the registry's own additions (not yet
    written in the server's form); ``incoming`` is the managedFields the client sent (MISSING if none), which
    a main-resource write may use to replace or (``[]``) clear the recorded ones.
    """
    live_entries = (live or {}).get("metadata", {}).get("managedFields")
    if subresource:
        managed = _decode_or_empty(live_entries)
    elif _is_reset(incoming):
        managed = Managed.empty()
    else:
        managed = Managed.empty()
        if incoming is not MISSING and incoming is not None:
            # The entries read back unchanged decode from the cache of the stored ones.
            managed = _decode_or_empty(live_entries if incoming == live_entries else incoming)
        if not managed.fields:
            managed = _decode_or_empty(live_entries)
    if not managed.fields and live is not None:
        # skipNonApplied: an existing object nobody tracks stays untracked until it is applied.
        return None
    if live is None and not managed.fields:
        owned = _created_fields(res, new)
        if owned.empty():
            return None
        mid = managed_fields.ManagerId(manager or "unknown", managed_fields.UPDATE, res.api_version, "")
        return managed_fields.encode(Managed({mid: managed_fields.VersionedSet(owned, res.api_version, False)},
                                             {mid: now}, {}))
    base = live
    if live is None:
        base = empty_object(res.api_version, res.kind)
        new = codec.normalize(res, new)
    result = updater.update(managed, base, new, kind_atom(res), manager=manager, api_version=res.api_version,
                            subresource=subresource, ignored=ignored_fields(res, subresource), now=now,
                            other_for=other_versions(res, subresource))
    return managed_fields.encode(result)


_SERVER_META = frozenset({"name", "namespace", "creationTimestamp", "selfLink", "uid", "clusterName", "generation",
                          "managedFields", "resourceVersion"})
_CREATED_CACHE_SIZE = 1024
_created: OrderedDict[tuple[str, str, int, bytes], Set] = OrderedDict()


def _created_fields(res: Resource, new: Obj) -> Set:
    """What the creator of ``new`` owns. Objects made from one template (a ReplicaSet's pods) differ only in
    metadata nobody owns, so the answer is cached by the rest of the object."""
    meta = new.get("metadata") or {}
    key = (res.api_version, res.kind, id(kind_atom(res)),
           orjson.dumps({**new, "metadata": {k: v for k, v in meta.items() if k not in _SERVER_META}}))
    owned = _created.get(key)
    if owned is not None:
        _created.move_to_end(key)
        return owned
    # A kept key gets bytes of its own size (orjson's result holds its worst-case buffer: api.jsonbytes).
    key = (*key[:3], kept(key[3]))
    cmp = typed.compare(empty_object(res.api_version, res.kind), codec.normalize(res, new), kind_atom(res))
    owned = cmp.excluding(ignored_fields(res, "")).changed().difference(updater.STRIPPED)
    _created[key] = owned
    if len(_created) > _CREATED_CACHE_SIZE:
        _created.popitem(last=False)
    return owned


def conflict_error(conflicts: list[tuple[managed_fields.ManagerId, Path]]) -> errors.StatusError:
    """NewApplyConflict: 409 reason Conflict, one FieldManagerConflict cause per field."""
    causes = [{"reason": "FieldManagerConflict", "message": f"conflict with {mid.describe()}",
               "field": path_string(path)} for mid, path in conflicts]
    if len(conflicts) == 1:
        mid, path = conflicts[0]
        message = f"Apply failed with 1 conflict: conflict with {mid.describe()}: {path_string(path)}"
    else:
        lines: list[str] = []
        by_manager: dict[str, list[str]] = {}
        described: dict[str, str] = {}
        for mid, path in conflicts:
            key = updater.identifier(mid)
            by_manager.setdefault(key, []).append(path_string(path))
            described[key] = mid.describe()
        for key in sorted(by_manager):
            lines.append(f"conflicts with {described[key]}:")
            lines.extend(f"- {p}" for p in by_manager[key])
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return errors.StatusError(errors.status(409, "Conflict", message, errors.details(causes=causes)))
