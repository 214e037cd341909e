"""Answers in protobuf: what kube-sim writes as JSON, re-encoded for a client that prefers
``application/vnd.kubernetes.protobuf`` (client-go's typed clients and kubectl send
``application/vnd.kubernetes.protobuf,application/json``).

Guarantees:
- An object, a list (its ``XxxList`` message), a Status, a discovery document and a PartialObjectMetadata(List)
  become the envelope (:func:`protobuf.encode_object`) with ``Content-Type: application/vnd.kubernetes.protobuf``.
- Kinds with no protobuf form (custom resources, Table) are left as JSON: :func:`object_body` and
  :func:`list_body` return None and the caller answers JSON when the client accepts it, 406 otherwise.
- A watch stream is ``application/vnd.kubernetes.protobuf;stream=watch``: one frame per event, a 4-byte
  big-endian length and a bare ``metav1.WatchEvent`` whose object is the enveloped object
  (:func:`protobuf.watch_frame`), as upstream's raw serializer and length-delimited framer write it.
- A stored version is encoded once however many lists and watchers send it: messages are cached by the
  object's JSON bytes (the same bytes for the same version), the most recent few thousand kept.
"""

from __future__ import annotations

from typing import Any

import orjson

from controller_manager.api.resources import Resource
from controller_manager.sim.apiserver import protobuf, schema

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
WATCH_CONTENT_TYPE = "application/vnd.kubernetes.protobuf;stream=watch"

_CACHE_SIZE = 10_000
_CACHED_BODY_LIMIT = 64 * 1024
_messages: dict[bytes, bytes] = {}  # an object's JSON bytes -> its bare protobuf message


def object_body(json_body: bytes) -> bytes | None:
    """The protobuf body for a JSON response body, or None when its kind has no protobuf form."""
    try:
        obj = orjson.loads(json_body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict):
        return None
    name = _struct(obj)
    if name is None:
        return None
    if len(json_body) > _CACHED_BODY_LIMIT:  # a list, say: encoded once, not kept
        return protobuf.encode_object(obj, name)
    # Cached: the object just written is what its watchers are sent next, as the same JSON bytes.
    return protobuf.envelope(str(obj.get("apiVersion") or ""), str(obj["kind"]), _message(obj, json_body, name))


def list_body(head: dict[str, Any], meta: dict[str, Any], items: list[tuple[Any, bytes]]) -> bytes | None:
    """A list (``head``: its kind and apiVersion; ``items``: each item as a dict and its JSON bytes) in
    protobuf, or None when the kind has no protobuf form."""
    api_version, kind = head["apiVersion"], head["kind"]
    name = protobuf.struct_for(api_version, kind)
    if name is None:
        return None
    items_field = schema.struct(name).json_fields.get("items")
    if items_field is None or items_field.type.elem is None:
        return None
    item_struct = items_field.type.elem.name
    return protobuf.encode_list(api_version, kind, name, meta,
                                [_message(obj, raw, item_struct) for obj, raw in items])


def watchable(res: Resource, metadata_only: bool) -> bool:
    """Whether a watch of ``res`` can stream protobuf (built-in kinds, and any kind's metadata)."""
    return metadata_only or schema.kind(res.api_version, res.kind) is not None


def watch_frames(events: list[tuple[str, Any, bytes]]) -> bytes:
    """Watch events (type, object or None, the object's JSON bytes) as protobuf watch frames."""
    frames = bytearray()
    for event_type, obj, raw in events:
        if obj is None:
            obj = orjson.loads(raw)
        name = _struct(obj)
        if name is None:  # not expected for a watchable resource: fail loudly rather than drop an event
            raise protobuf.ProtobufError(f"a {obj.get('kind')} has no protobuf form")
        body = protobuf.envelope(str(obj.get("apiVersion") or ""), str(obj["kind"]), _message(obj, raw, name))
        frames += protobuf.watch_frame(event_type, body)
    return bytes(frames)


def _struct(obj: dict[str, Any]) -> str | None:
    return protobuf.struct_for(str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""))


def _message(obj: dict[str, Any], raw: bytes, struct_name: str) -> bytes:
    found = _messages.get(raw)
    if found is None:
        found = protobuf.encode_message(obj, struct_name)
        if len(_messages) >= _CACHE_SIZE:
            del _messages[next(iter(_messages))]  # the oldest entry
        _messages[raw] = found
    return found
