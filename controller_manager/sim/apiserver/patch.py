"""The three PATCH formats the apiserver accepts, applied to an object held as a plain dict.

``apply_patch(original, patch, patch_type, kind)`` returns a new dict and never mutates its
inputs. ``patch_type`` is ``"merge"`` (RFC 7386, application/merge-patch+json), ``"json"``
(RFC 6902, application/json-patch+json) or ``"strategic"`` (application/strategic-merge-patch+json,
see :mod:`patch_strategic`); a content type string is accepted too. Strategic merge falls back to
merge semantics for kinds the server was not compiled with; a server that wants upstream's
behaviour answers 415 for those first, asking :func:`supports_strategic`.

Failures raise :class:`PatchError`, carrying the HTTP code and the Status the apiserver answers
with: 400 BadRequest for undecodable patches and malformed directives, 422 Invalid (with an
``UnexpectedServerResponse`` cause, as ``NewGenericServerResponse`` builds it) for JSON patch
operations that do not apply, 415 for an unknown patch type.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import orjson

from controller_manager.sim.apiserver.patch_schema import ROOTS
from controller_manager.sim.apiserver.patch_strategic import StrategicPatchError, strategic_merge

__all__ = ["PATCH_CONTENT_TYPES", "PatchError", "apply_patch", "json_merge_patch", "json_patch", "supports_strategic"]

PATCH_CONTENT_TYPES = {
    "application/merge-patch+json": "merge",
    "application/json-patch+json": "json",
    "application/strategic-merge-patch+json": "strategic",
}


class PatchError(ValueError):
    """A patch the server rejects; ``code`` is the HTTP status, :meth:`status` the body."""

    def __init__(self, message: str, code: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.code = code

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                "code": self.code}
        if self.code == 422:
            body["message"] = "the server rejected our request due to an error in our request"
            body["reason"] = "Invalid"
            body["details"] = {"causes": [{"reason": "UnexpectedServerResponse", "message": self.message}]}
        elif self.code == 415:
            body["message"] = self.message
            body["reason"] = "UnsupportedMediaType"
        elif self.code == 400:
            body["message"] = self.message
            body["reason"] = "BadRequest"
        else:
            body["message"] = self.message
        return body


def supports_strategic(kind: str) -> bool:
    """True for kinds compiled into the apiserver; CRDs get 415 for strategic merge upstream."""
    return kind in ROOTS


def apply_patch(original: dict[str, Any], patch: bytes | str | dict[str, Any] | list[Any], patch_type: str,
                kind: str, parse_float: Callable[[str], float] | None = None) -> dict[str, Any]:
    """``parse_float`` reads the numbers of a JSON or merge patch: json-patch keeps each value's raw bytes
    (its lazy nodes), so a number reaches the typed decode as its literal text; a strategic merge patch works
    on decoded maps, where a number is its float64 value."""
    ptype = PATCH_CONTENT_TYPES.get(patch_type.split(";")[0].strip(), patch_type)
    if ptype == "json":
        return _object(json_patch(original, _decode(patch, parse_float)))
    if ptype == "merge":
        return _object(json_merge_patch(original, _decode(patch, parse_float)))
    if ptype == "strategic":
        doc = _object(_decode(patch))
        if not supports_strategic(kind):
            return _object(json_merge_patch(original, doc))
        try:
            return strategic_merge(original, doc, ROOTS[kind])
        except StrategicPatchError as e:
            raise PatchError(str(e), e.code) from None
    raise PatchError(f"the body of the request was in an unknown format - accepted media types include: "
                     f"{', '.join(PATCH_CONTENT_TYPES)}", 415)


def _object(value: Any) -> dict[str, Any]:
    """An API object must stay a JSON object; anything else fails to decode, as upstream."""
    if not isinstance(value, dict):
        raise PatchError(f"json: cannot unmarshal {_json_type(value)} into Go value of type map[string]interface {{}}")
    return value


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return "object"


def _decode(patch: bytes | str | dict[str, Any] | list[Any], parse_float: Callable[[str], float] | None = None) -> Any:
    if isinstance(patch, bytes | bytearray | str):
        try:
            return json.loads(patch, parse_float=parse_float)
        except ValueError as e:
            raise PatchError(f"error decoding patch: {e}") from None
    return patch


# --- RFC 7386 -----------------------------------------------------------------------------------------

def json_merge_patch(original: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, anything else replaces."""
    return _merge_in_place(_copy(original), patch)


def _merge_in_place(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return _copy(patch)
    result = target if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_in_place(result.get(key), value)
    return result


def _copy(value: Any) -> Any:
    """A deep copy of a JSON value: an orjson round trip (several times faster than copy.deepcopy)."""
    if not isinstance(value, dict | list):
        return value
    try:
        return orjson.loads(orjson.dumps(value))
    except TypeError:  # what JSON cannot hold (non-string keys, huge ints)
        return copy.deepcopy(value)


# --- RFC 6902 -----------------------------------------------------------------------------------------

def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str):
        raise PatchError("operation missing path field")
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f'invalid JSON pointer: "{path}"', 422)
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(token: str, length: int, *, allow_end: bool, path: str) -> int:
    if token == "-" and allow_end:
        return length
    try:
        idx = int(token)
    except ValueError:
        raise PatchError(f"Unable to access invalid index: {token}: invalid index referenced", 422) from None
    if idx < 0:
        # evanphx/json-patch accepts negative indices counting from the end.
        idx += length
    upper = length if allow_end else length - 1
    if idx < 0 or idx > upper:
        raise PatchError(f"Unable to access invalid index: {token}: invalid index referenced", 422)
    return idx


def _parent(doc: Any, parts: list[str], op: str, path: str) -> Any:
    node = doc
    for token in parts[:-1]:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list):
            try:
                node = node[_index(token, len(node), allow_end=False, path=path)]
            except PatchError:
                raise PatchError(f'{op} operation does not apply: doc is missing path: "{path}": missing value',
                                 422) from None
        else:
            raise PatchError(f'{op} operation does not apply: doc is missing path: "{path}": missing value', 422)
    if not isinstance(node, dict | list):
        raise PatchError(f'{op} operation does not apply: doc is missing path: "{path}": missing value', 422)
    return node


def _get(doc: Any, path: str, op: str) -> Any:
    parts = _pointer(path)
    if not parts:
        return doc
    parent = _parent(doc, parts, op, path)
    last = parts[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"{op} operation does not apply: doc is missing from path: {path}: missing value", 422)
        return parent[last]
    return parent[_index(last, len(parent), allow_end=False, path=path)]


def _add(doc: Any, path: str, value: Any, op: str = "add") -> Any:
    parts = _pointer(path)
    if not parts:
        return value
    parent = _parent(doc, parts, op, path)
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    else:
        parent.insert(_index(last, len(parent), allow_end=True, path=path), value)
    return doc


def _remove(doc: Any, path: str, op: str = "remove") -> tuple[Any, Any]:
    parts = _pointer(path)
    if not parts:
        return None, doc
    parent = _parent(doc, parts, op, path)
    last = parts[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"Unable to remove nonexistent key: {last}: missing value", 422)
        return doc, parent.pop(last)
    return doc, parent.pop(_index(last, len(parent), allow_end=False, path=path))


def _replace(doc: Any, path: str, value: Any) -> Any:
    parts = _pointer(path)
    if not parts:
        return value
    parent = _parent(doc, parts, "replace", path)
    last = parts[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"replace operation does not apply: doc is missing key: {path}: missing value", 422)
        parent[last] = value
    else:
        parent[_index(last, len(parent), allow_end=False, path=path)] = value
    return doc


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)


def json_patch(original: Any, ops: Any) -> Any:
    """RFC 6902 as evanphx/json-patch applies it: operations in order, all or nothing."""
    if not isinstance(ops, list):
        raise PatchError(f"json: cannot unmarshal {_json_type(ops)} into Go value of type jsonpatch.Patch")
    doc = _copy(original)
    for op in ops:
        if not isinstance(op, dict):
            raise PatchError(f"json: cannot unmarshal {_json_type(op)} into Go value of type jsonpatch.Operation")
        kind = op.get("op")
        path = op.get("path")
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError(f"{kind} operation does not apply: missing value", 422)
        if kind == "add":
            doc = _add(doc, _str_path(path), copy.deepcopy(op["value"]))
        elif kind == "remove":
            doc, _ = _remove(doc, _str_path(path))
        elif kind == "replace":
            doc = _replace(doc, _str_path(path), copy.deepcopy(op["value"]))
        elif kind == "move":
            src = _str_path(op.get("from"), "from")
            value = _get(doc, src, "move")
            doc, _ = _remove(doc, src, "move")
            doc = _add(doc, _str_path(path), value, "move")
        elif kind == "copy":
            value = copy.deepcopy(_get(doc, _str_path(op.get("from"), "from"), "copy"))
            doc = _add(doc, _str_path(path), value, "copy")
        elif kind == "test":
            p = _str_path(path)
            try:
                current = _get(doc, p, "test")
            except PatchError:
                current = _MISSING
            if current is _MISSING or not _equal(current, op["value"]):
                raise PatchError(f"testing value {p} failed: test failed", 422)
        else:
            raise PatchError(f"Unexpected kind: {kind}", 422)
    return doc


_MISSING = object()


def _str_path(path: Any, name: str = "path") -> str:
    if not isinstance(path, str):
        raise PatchError(f"operation missing {name} field", 422)
    return path
