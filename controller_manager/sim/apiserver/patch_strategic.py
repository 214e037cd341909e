"""Applying a strategic merge patch as apimachinery's ``strategicpatch.StrategicMergePatch`` does.

Guarantees (the apiserver's options: merge parallel lists, ignore unmatched nulls):
- Objects merge key by key; ``null`` deletes a key; a value of another type replaces.
- Lists tagged ``merge`` (see :mod:`patch_schema`) merge: lists of objects by their merge key (a
  matching item is merged recursively, a new one is appended), lists of primitives as a set
  (first occurrence kept). Untagged lists are replaced.
- Directives: ``$patch: replace|delete`` on an object, ``{"$patch": "delete", <key>: v}`` and
  ``{"$patch": "replace"}`` items in merged lists, ``$retainKeys``, ``$deleteFromPrimitiveList/<f>``
  and ``$setElementOrder/<f>``; the result's list order follows upstream's rules (patch order,
  then the live order for server-only items, ``$setElementOrder`` overriding both).
- Nothing given is mutated: the input trees are copied before merging.
"""

from __future__ import annotations

import copy
from typing import Any

from controller_manager.sim.apiserver.patch_schema import ListMeta, field_meta

DIRECTIVE = "$patch"
RETAIN_KEYS = "$retainKeys"
DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"
SET_ORDER = "$setElementOrder/"


class StrategicPatchError(ValueError):
    """A patch the apiserver refuses: ``code`` is the HTTP status it answers with."""

    def __init__(self, message: str, code: int = 400) -> None:
        super().__init__(message)
        self.code = code


def strategic_merge(original: dict[str, Any], patch: dict[str, Any], root_type: str | None) -> dict[str, Any]:
    return _merge_map(copy.deepcopy(original), copy.deepcopy(patch), root_type)


# --- maps ---------------------------------------------------------------------------------------------

def _struct_of(type_name: str | None, key: str) -> str | None:
    meta = field_meta(type_name, key)
    return meta if isinstance(meta, str) else None


def _list_of(type_name: str | None, key: str) -> ListMeta | None:
    meta = field_meta(type_name, key)
    return meta if isinstance(meta, ListMeta) else None


def _merge_map(original: dict[str, Any] | None, patch: dict[str, Any], type_name: str | None) -> dict[str, Any]:
    if DIRECTIVE in patch:
        directive = patch[DIRECTIVE]
        if directive == "replace":
            return {k: _strip(v) for k, v in patch.items() if k != DIRECTIVE and v is not None}
        if directive == "delete":
            return {}
        raise StrategicPatchError(f"Unknown patch type: {directive} in map: {patch}")
    if original is None:
        original = {}
    _apply_retain_keys(original, patch)
    _apply_set_element_order(original, patch, type_name)
    for key, patch_value in list(patch.items()):
        is_delete_list = False
        if key.startswith(SET_ORDER):
            continue
        if key.startswith(DELETE_PRIMITIVE):
            is_delete_list = True
            key = key[len(DELETE_PRIMITIVE):]
        if patch_value is None:
            original.pop(key, None)
            continue
        if key not in original:
            if not is_delete_list:
                value = _fresh(patch_value, type_name, key)
                if value is not _SKIP:
                    original[key] = value
            continue
        current = original[key]
        if isinstance(current, dict) and isinstance(patch_value, dict):
            original[key] = _merge_map(current, patch_value, _struct_of(type_name, key))
        elif isinstance(current, list) and isinstance(patch_value, list):
            meta = _list_of(type_name, key)
            if meta is None:
                if not is_delete_list:
                    original[key] = _strip(patch_value)
            else:
                original[key] = _merge_list(current, patch_value, meta, is_delete_list)
        elif not is_delete_list:
            # Different types, or two primitives: the patch value wins.
            original[key] = _fresh_value(patch_value, type_name, key)
    return original


class _Skip:
    pass


_SKIP: Any = _Skip()


def _fresh(patch_value: Any, type_name: str | None, key: str) -> Any:
    """The value for a key the original lacks: the patch value with directives and nulls applied to nothing."""
    value = _fresh_value(patch_value, type_name, key)
    # A patch made only of directives against an absent field (a release patch deleting an ownerReference
    # the object never had) leaves the field absent rather than creating an empty one.
    if value in ({}, []) and patch_value not in ({}, []):
        return _SKIP
    return value


def _fresh_value(patch_value: Any, type_name: str | None, key: str) -> Any:
    if isinstance(patch_value, dict):
        return _merge_map({}, patch_value, _struct_of(type_name, key))
    if isinstance(patch_value, list):
        meta = _list_of(type_name, key)
        if meta is None:
            return _strip(patch_value)
        return _merge_list([], patch_value, meta, False)
    return patch_value


def _strip(value: Any) -> Any:
    """Drop nulls inside objects (upstream discards unmatched nulls from added values)."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _apply_retain_keys(original: dict[str, Any], patch: dict[str, Any]) -> None:
    if RETAIN_KEYS not in patch:
        return
    keep = patch.pop(RETAIN_KEYS)
    if not isinstance(keep, list) or not all(isinstance(k, str) for k in keep):
        raise StrategicPatchError("invalid patch format for retainKeys: the value must be a list of strings")
    for k in [k for k in original if k not in keep]:
        del original[k]


def _apply_set_element_order(original: dict[str, Any], patch: dict[str, Any], type_name: str | None) -> None:
    for directive_key in [k for k in patch if k.startswith(SET_ORDER)]:
        order = patch[directive_key]
        if not isinstance(order, list):
            raise StrategicPatchError(f"invalid patch format for {directive_key}: the value must be a list")
        field = directive_key[len(SET_ORDER):]
        meta = _list_of(type_name, field) or ListMeta()
        key = meta.merge_key
        in_original, in_patch = field in original, field in patch
        orig_list = original.get(field) if in_original else None
        patch_list = patch.get(field) if in_patch else None
        if in_original and not isinstance(orig_list, list):
            raise StrategicPatchError(f"invalid type for {field}: expected a list")
        if in_patch and patch_list is not None and not isinstance(patch_list, list):
            raise StrategicPatchError(f"invalid type for {field}: expected a list")
        _check_order_covers_patch(patch_list or [], order, key)
        if in_original and not in_patch:
            merged_list = list(orig_list or [])
        elif not in_original and in_patch:
            merged_list = _merge_list([], patch_list or [], meta, False)
        elif in_original and in_patch:
            merged_list = _merge_list(orig_list or [], patch_list or [], meta, False)
        else:
            continue
        patch_items, server_only = _partition(merged_list, order, key)
        original[field] = _normalize_order(patch_items, server_only, order, orig_list or [], key)
        patch.pop(field, None)


def _check_order_covers_patch(patch_list: list[Any], order: list[Any], key: str | None) -> None:
    """Every non-directive patch item must appear in $setElementOrder, in the same relative order."""
    wanted = [_ident(item, key) for item in patch_list
              if not (isinstance(item, dict) and DIRECTIVE in item)]
    order_ids = [_ident(item, key) for item in order]
    pos = 0
    for ident in wanted:
        try:
            pos = order_ids.index(ident, pos) + 1
        except ValueError:
            raise StrategicPatchError(
                f"The order in patch list:\n{patch_list}\n doesn't match {SET_ORDER} list:\n{order}\n") from None


# --- lists --------------------------------------------------------------------------------------------

def _ident(item: Any, key: str | None) -> Any:
    if key is not None and isinstance(item, dict):
        return _hashable(item.get(key))
    return _hashable(item)


def _hashable(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return (type(value).__name__, value)


def _merge_list(original: list[Any], patch: list[Any], meta: ListMeta, is_delete_list: bool) -> list[Any]:
    if not original and not patch:
        return list(original)
    items = [*original, *patch]
    if any(isinstance(v, list) for v in items):
        raise StrategicPatchError("lists of lists are not supported", 422)
    has_maps = any(isinstance(v, dict) for v in items)
    if has_maps and not all(isinstance(v, dict) for v in items):
        raise StrategicPatchError("mismatched types in list: cannot mix objects and primitives")
    key = meta.merge_key
    if not has_maps:
        if is_delete_list:
            drop = {_hashable(v) for v in patch}
            return [v for v in original if _hashable(v) not in drop]
        seen: set[Any] = set()
        merged_scalars = []
        for v in items:
            h = _hashable(v)
            if h not in seen:
                seen.add(h)
                merged_scalars.append(v)
        patch_items, server_only = _partition(merged_scalars, patch, None)
        return _normalize_order(patch_items, server_only, patch, original, None)
    if key is None:
        raise StrategicPatchError("cannot merge lists without merge key")
    original, patch = _special_elements(original, patch, key)
    merged_maps = list(original)
    for item in patch:
        if key not in item:
            raise StrategicPatchError(f"map: {item} does not contain declared merge key: {key}")
        for i, current in enumerate(merged_maps):
            if isinstance(current, dict) and current.get(key) == item[key]:
                merged_maps[i] = _merge_map(current, item, meta.item)
                break
        else:
            merged_maps.append(_merge_map({}, item, meta.item))
    patch_items, server_only = _partition(merged_maps, patch, key)
    return _normalize_order(patch_items, server_only, patch, original, key)


def _special_elements(original: list[Any], patch: list[Any], key: str) -> tuple[list[Any], list[Any]]:
    """Apply ``$patch`` items: delete by key, or replace the whole list with the other items."""
    plain: list[Any] = []
    replace = False
    for item in patch:
        directive = item.get(DIRECTIVE)
        if directive is None:
            plain.append(item)
        elif directive == "delete":
            if key not in item:
                raise StrategicPatchError(f"map: {item} does not contain declared merge key: {key}")
            original = [o for o in original if not (isinstance(o, dict) and o.get(key) == item[key])]
        elif directive == "replace":
            replace = True
        elif directive == "merge":
            raise StrategicPatchError("merging lists cannot yet be specified in the patch")
        else:
            raise StrategicPatchError(f"Unknown patch type: {directive} in map: {item}")
    if replace:
        return [_merge_map({}, p, None) for p in plain], []
    return original, plain


def _partition(items: list[Any], by: list[Any], key: str | None) -> tuple[list[Any], list[Any]]:
    wanted = {_ident(v, key) for v in by if not (isinstance(v, dict) and DIRECTIVE in v)}
    inside = [v for v in items if _ident(v, key) in wanted]
    outside = [v for v in items if _ident(v, key) not in wanted]
    return inside, outside


def _index(order: list[Any], item: Any, key: str | None) -> int:
    ident = _ident(item, key)
    for i, v in enumerate(order):
        if _ident(v, key) == ident:
            return i
    return -1


def _sorted_by(items: list[Any], order: list[Any], key: str | None) -> list[Any]:
    def rank(item: Any) -> int:
        i = _index(order, item, key)
        return i if i >= 0 else len(order)

    return sorted(items, key=rank)


def _normalize_order(patch_items: list[Any], server_only: list[Any], patch_order: list[Any],
                     server_order: list[Any], key: str | None) -> list[Any]:
    """Patch items in patch order, server-only items in live order, interleaved by the live order."""
    right = _sorted_by(patch_items, patch_order, key)
    left = _sorted_by(server_only, server_order, key)
    out: list[Any] = []
    i = j = 0
    while i < len(left) or j < len(right):
        if i >= len(left):
            out.append(right[j])
            j += 1
        elif j >= len(right):
            out.append(left[i])
            i += 1
        else:
            li, ri = _index(server_order, left[i], key), _index(server_order, right[j], key)
            if li >= 0 and ri >= 0 and li < ri:
                out.append(left[i])
                i += 1
            else:
                out.append(right[j])
                j += 1
    return out
