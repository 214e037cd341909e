"""Answers in protobuf: what kube-sim writes as JSON, re-encoded for a client that prefers
``application/vnd.kubernetes.protobuf`` (client-go's typed clients and kubectl send
``application/vnd.kubernetes.protobuf,application/json``).

Guarantees:
- An object, a list (its ``XxxList`` message), a Status and a PartialObjectMetadata(List) become the envelope
  (:func:`protobuf.encode_object`) with ``Content-Type: application/vnd.kubernetes.protobuf``.
- Kinds with no protobuf form (custom resources, Table) are left as JSON: :func:`object_body` returns None and
  the caller answers JSON when the client accepts it, 406 otherwise.
- A watch stream is ``application/vnd.kubernetes.protobuf;stream=watch``: one frame per event, a 4-byte
  big-endian length and a bare ``metav1.WatchEvent`` whose object is the enveloped object
  (:func:`protobuf.watch_frame`), as upstream's raw serializer and length-delimited framer write it.
"""

from __future__ import annotations

from typing import Any

import orjson

from controller_manager.api.resources import Resource
from controller_manager.sim.apiserver import protobuf, schema

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
WATCH_CONTENT_TYPE = "application/vnd.kubernetes.protobuf;stream=watch"


def object_body(json_body: bytes) -> bytes | None:
    """The protobuf body for a JSON response body, or None when its kind has no protobuf form."""
    try:
        obj = orjson.loads(json_body)
    except orjson.JSONDecodeError:
        return None
    return _encode(obj)


def _encode(obj: Any) -> bytes | None:
    if not isinstance(obj, dict):
        return None
    name = protobuf.struct_for(str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""))
    if name is None:
        return None
    return protobuf.encode_object(obj, name)


def watchable(res: Resource, metadata_only: bool) -> bool:
    """Whether a watch of ``res`` can stream protobuf (built-in kinds, and any kind's metadata)."""
    return metadata_only or schema.kind(res.api_version, res.kind) is not None


def watch_frames(lines: bytes) -> bytes:
    """JSON watch lines (``{"type": ..., "object": ...}`` each) as protobuf watch frames."""
    frames = bytearray()
    for line in lines.splitlines():
        if not line.strip():
            continue
        event = orjson.loads(line)
        body = _encode(event.get("object"))
        if body is None:  # not expected for a watchable resource: say so in-band rather than drop the event
            raise protobuf.ProtobufError(f"a {event.get('object', {}).get('kind')} has no protobuf form")
        frames += protobuf.watch_frame(str(event.get("type", "")), body)
    return bytes(frames)
