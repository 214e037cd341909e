"""Request bodies in, as the real server's serializers read them: media types, typed decoding, fieldValidation.

Guarantees:
- A body is read by its ``Content-Type``: JSON (``application/json``), YAML (``application/yaml``) and, for
  built-in kinds, protobuf (``application/vnd.kubernetes.protobuf``: the ``k8s\\0`` envelope). Anything else
  is 415 with the media types the resource accepts.
- A body of a kind the schema knows is decoded into that kind as Go decodes it (:mod:`gojson`): a value of
  the wrong type is 400 ``<Kind> in version "<v>" cannot be handled as a <Kind>: json: cannot unmarshal ...``;
  unknown and duplicate fields follow ``fieldValidation``: ``Strict`` answers 400 ``... strict decoding error:
  unknown field "spec.replica"``, ``Warn`` (the default) drops them and returns one warning each, ``Ignore``
  drops them silently. Any other ``fieldValidation`` is 422 as upstream's option validation answers it.
  Keys repeated in a YAML body are YAMLToJSONStrict's one ``yaml: unmarshal errors:`` error, first in the
  list; as it spans lines, ``Warn`` sends no warning for it (the server's warning recorder drops it).
- Malformed bodies are 400 with upstream's wording; nothing a client sends makes the server raise anything
  but a :class:`errors.StatusError`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from controller_manager.api import quantity
from controller_manager.api.resources import Resource
from controller_manager.sim.apiserver import errors, gojson, gostructs, protobuf, schema, yamlbody
from controller_manager.sim.apiserver.crd import structural

JSON = "application/json"
YAML = "application/yaml"
PROTOBUF = "application/vnd.kubernetes.protobuf"
BODY_TYPES = (JSON, YAML, PROTOBUF)
FIELD_VALIDATION = ("Ignore", "Strict", "Warn")


@dataclass
class Decoded:
    """A decoded body: the object (None for an empty body) and the warnings to send back."""

    obj: Any
    warnings: list[str] = field(default_factory=list)


def field_validation(query: Mapping[str, str], options_kind: str) -> str:
    """The request's fieldValidation directive (``Warn`` when unset); 422 for an unsupported value."""
    value = query.get("fieldValidation", "")
    if value not in ("", *FIELD_VALIDATION):
        supported = ", ".join(f'"{v}"' for v in ("", *FIELD_VALIDATION))
        raise errors.StatusError(errors.status(
            422, "Invalid", f'{options_kind}.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: '
                            f'"{value}": supported values: {supported}',
            errors.details(group="meta.k8s.io", kind=options_kind, causes=[{
                "reason": "FieldValueNotSupported", "message": f'Unsupported value: "{value}": supported values: '
                                                               f'{supported}', "field": "fieldValidation"}])))
    return value or "Warn"


def media_type(content_type: str) -> str:
    return content_type.split(";")[0].strip().lower()


def parse(raw: bytes, content_type: str, *, keep_duplicates: bool, res: Resource | None = None,
          expect: tuple[str, str] | None = None, number_texts: bool = False) -> Any:
    """The JSON value of a body (None when empty). ``keep_duplicates`` records repeated keys for strict
    decoding (see :func:`gojson.parse_json_strict`). A protobuf body is read into the same JSON shape; it is
    taken for built-in kinds only (``res``), and ``expect`` (apiVersion, kind) is what the request decodes
    into when that is not ``res``'s kind (DeleteOptions, Scale, Eviction, Binding). ``number_texts``: the
    body is an object of ``res``'s built-in kind, decoded straight from its bytes (a create or an update),
    so its quantities given as JSON numbers read their literal text (see :func:`_parse_number_texts`)."""
    mime = media_type(content_type)
    if mime == PROTOBUF and res is not None and schema.kind(res.api_version, res.kind) is not None:
        return None if not raw else protobuf_body(raw, expect or (res.api_version, res.kind))
    if mime == PROTOBUF and res is not None:
        raise errors.unsupported_media_type((JSON, YAML))  # custom resources have no protobuf form
    if mime and mime not in (JSON, YAML, "application/json-patch+json", "application/merge-patch+json",
                             "application/strategic-merge-patch+json", "application/apply-patch+yaml"):
        raise errors.unsupported_media_type(BODY_TYPES)
    if not raw.strip():
        return None
    if mime in (YAML, "application/apply-patch+yaml"):
        try:
            value, strict = yamlbody.decode(raw)
        except ValueError as e:
            if res is None:
                raise errors.bad_request(str(e)) from None
            # YAMLToJSON failed before any kind was read: transformDecodeError's "unrecognized" wording.
            kind = (expect or (res.api_version, res.kind))[1]
            raise errors.bad_request(f"the object provided is unrecognized (must be of type {kind}): {e} "
                                     f"({protobuf.summarize(raw)})") from None
        if strict and keep_duplicates and isinstance(value, dict):
            document = _YAMLDocument(value)
            document.strict_errors = strict
            return document
        return value
    try:
        if number_texts and expect is None and res is not None and schema.kind(res.api_version, res.kind):
            return _parse_number_texts(raw, keep_duplicates)
        return gojson.parse_json_strict(raw) if keep_duplicates else orjson.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise errors.bad_request(f"couldn't get version/kind; json parse error: {_json_error(e)}") from None


# A number whose text may read differently as a Quantity than Go's float text does: an exponent, or a
# fraction of three digits or more (a kept input text like "1.500"). A match inside a string only costs a
# slower parse.
_NUMBER_TEXT_HINT = re.compile(rb"[0-9][eE]|\.[0-9]{3}")


class _NumberTextDocument(dict[str, Any]):
    """A JSON body holding :class:`gojson.JSONNumber` values; ``body`` is the parsed top-level object as
    it came (a ``_DuplicateKeys`` when keys repeat), which :func:`typed` decodes."""

    body: dict[str, Any]


def _number(text: str) -> float:
    """A JSON number with a fraction or an exponent: a float, kept with its text when a Quantity reads the
    text differently from the value (``1e3`` is ``1e3``, not ``1k``; ``1.500`` stays ``1.500``)."""
    value = float(text)
    try:
        differs = quantity.canonicalize(text) != quantity.canonicalize(value)
    except (ValueError, OverflowError):
        differs = False  # not a quantity either way: only the value matters
    if not differs:
        return value
    number = gojson.JSONNumber(value)
    number.text = text
    return number


class _NumberReader:
    """:func:`_number` for one body, remembering whether it kept any text (so a body without such numbers,
    the usual one, needs no walk to find them)."""

    __slots__ = ("kept",)

    def __init__(self) -> None:
        self.kept = False

    def __call__(self, text: str) -> float:
        number = _number(text)
        if type(number) is gojson.JSONNumber:
            self.kept = True
        return number


def _parse_number_texts(raw: bytes, keep_duplicates: bool) -> Any:
    """Quantity.UnmarshalJSON parses a number's literal bytes, as encoding/json hands a field with its own
    unmarshaller the raw value; such numbers are kept with their text until :func:`typed` has decoded the
    body, which turns any left outside quantities back into plain floats."""
    if not keep_duplicates and _NUMBER_TEXT_HINT.search(raw) is None:
        return orjson.loads(raw)
    reader = _NumberReader()
    value = gojson.parse_json_strict(raw, reader)
    if not reader.kept:
        return value
    if not isinstance(value, dict):
        return _plain_numbers(value)
    document = _NumberTextDocument(value)
    document.body = value
    return document


def number_text(text: str) -> float:
    """A JSON number's reader for bodies decoded straight into a kind (see :func:`_number`)."""
    return _number(text)


def with_number_texts(value: dict[str, Any]) -> dict[str, Any]:
    """``value`` (a patched object) marked for :func:`typed` when it holds numbers kept with their text."""
    if not _has_number_text(value):
        return value
    document = _NumberTextDocument(value)
    document.body = value
    return document


def _has_number_text(value: Any) -> bool:
    if type(value) is gojson.JSONNumber:
        return True
    if isinstance(value, dict):
        return any(_has_number_text(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_number_text(v) for v in value)
    return False


def _plain_numbers(value: Any) -> Any:
    """``value`` with every :class:`gojson.JSONNumber` left in it a plain float (raw and untyped fields)."""
    if type(value) is gojson.JSONNumber:
        return float(value)
    if isinstance(value, dict):
        return {k: _plain_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain_numbers(v) for v in value]
    return value


def protobuf_body(raw: bytes, expect: tuple[str, str]) -> dict[str, Any]:
    """An enveloped protobuf body as a JSON-shaped object, with its ``apiVersion`` and ``kind`` (the envelope's,
    else ``expect``'s). Failures are 400 in the words of upstream's transformDecodeError: an unreadable
    envelope is "the object provided is unrecognized", an unreadable object "... cannot be handled as a ...".
    """
    expect_version, expect_kind = expect
    try:
        api_version, kind, message = protobuf.decode_envelope(raw)
    except protobuf.ProtobufError as e:
        raise errors.bad_request(f"the object provided is unrecognized (must be of type {expect_kind}): {e} "
                                 f"({protobuf.summarize(raw)})") from None
    api_version, kind = api_version or expect_version, kind or expect_kind
    try:
        name = protobuf.struct_for(api_version, kind)
        if name is None:
            raise protobuf.UnknownKindError(api_version, kind)
        obj = protobuf.decode_message(message, name)
    except protobuf.ProtobufError as e:
        version = api_version.rsplit("/", 1)[-1]
        raise errors.bad_request(f'{kind} in version "{version}" cannot be handled as a {expect_kind}: {e}') from None
    return {"kind": kind, "apiVersion": api_version, **obj}


def _json_error(e: Exception) -> str:
    # encoding/json's syntax errors read like "invalid character 'x' looking for beginning of value";
    # Python's differ, so say where the parse stopped.
    return str(e).split(":")[0] if isinstance(e, orjson.JSONDecodeError) else str(e)


def typed(res: Resource, body: Any, validation: str, old: dict[str, Any] | None = None, *,
          parsed: bool = False) -> Decoded:
    """A parsed body decoded into ``res``'s kind (see the module docstring). Kinds without a schema (custom
    resources) are taken as they are. ``old``: the stored object an update or patch replaces (a speed-up
    only: parts equal to it are not walked again). ``parsed``: ``body`` is :func:`parse`'s own result, whose
    top shows any key repeated anywhere in it, so a plain one may take :mod:`gostructs`' decode in C where
    that reads it as the walk would."""
    # (a YAML body, or one with numbers kept with their text, is always walked)
    fast = gostructs.convert if parsed and type(body) is dict else None
    yaml_strict: list[str] = []
    number_texts = isinstance(body, _NumberTextDocument)
    if number_texts:
        body = body.body
    if isinstance(body, _YAMLDocument):
        yaml_strict, body = body.strict_errors, dict(body)
    st = schema.kind(res.api_version, res.kind)
    if not isinstance(body, dict):
        return Decoded(body)
    kind = body.get("kind") if isinstance(body.get("kind"), str) and body.get("kind") else res.kind
    api_version = body.get("apiVersion") if isinstance(body.get("apiVersion"), str) else res.api_version
    version = str(api_version).rsplit("/", 1)[-1] or res.version
    obj, strict = body, list(yaml_strict)  # YAMLToJSONStrict's errors come before the JSON decoder's
    if st is not None:
        go_name = f"{_package(st.name)}.{st.go}"
        try:
            obj, json_strict = gojson.decode(body, st, go_name, old, fast)
        except gojson.GoTypeError as e:
            raise errors.bad_request(f'{kind} in version "{version}" cannot be handled as a {res.kind}: {e}') \
                from None
        strict += json_strict
        if number_texts:
            obj = _plain_numbers(obj)
    else:
        obj, unknown = structural.decode(res, body)  # a custom resource: pruned and defaulted
        strict += unknown
    if strict and validation == "Strict":
        raise errors.bad_request(f'{kind} in version "{version}" cannot be handled as a {res.kind}: '
                                 f"strict decoding error: {', '.join(strict)}")
    # The server's warning recorder drops a text it cannot put in a header (the YAML one spans lines).
    return Decoded(obj, [w for w in strict if _header_safe(w)] if validation == "Warn" else [])


def _header_safe(text: str) -> bool:
    """Whether a warning text has no control characters (Go's unicode.IsControl), as a header needs."""
    return not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in text)


class _YAMLDocument(dict[str, Any]):
    """A YAML body's top-level map, carrying what YAMLToJSONStrict reports beyond YAMLToJSON (repeated
    keys) to :func:`typed`, which applies fieldValidation to it."""

    strict_errors: list[str]


def _package(struct_name: str) -> str:
    return struct_name.rsplit(".", 2)[-2]


def normalize(res: Resource, obj: dict[str, Any], old: dict[str, Any] | None = None,
              like: dict[str, Any] | None = None) -> dict[str, Any]:
    """``obj`` as the real server would store and return it (Go's JSON rules); unchanged for kinds without a
    schema. ``old``: the stored version it replaces, and ``like``: the request body as :func:`typed` decoded
    it; parts equal to theirs are reused as they are."""
    st = schema.kind(res.api_version, res.kind)
    if st is None:
        return obj
    if old is None:  # (an update's walk shares what it did not change with the stored version: kept)
        written = gostructs.normalized(obj, st)
        if written is not None:
            return written
    return gojson.normalize(obj, st, old, like)


def warning_header(message: str) -> str:
    """The ``Warning`` header value upstream sends for a warning (RFC 7234, code 299, agent "-")."""
    escaped = message.replace("\\", "\\\\").replace('"', '\\"')
    return f'299 - "{escaped}"'
