"""Watch events decoded straight into their cached form: parse, strip, project and share in one pass.

Why: on the watch path the default transform (transform.py) used to cost more than parsing itself, because
orjson first builds every node of the object (managedFields, volumes, env, probes, ...) and Python then walks it
again to drop and share. Here msgspec (C) parses the event into its sections with each field's value left as
the raw JSON text the server sent (``msgspec.Raw``: a slice, not parsed), and only what is kept is decoded:
- dropped fields (``managedFields``; a pod's volumes that name no claim) are skipped in C and never built;
- a kept field whose value is an object or array is looked up in the sharer's pool by that raw text: a repeat
  (a pod's labels, ownerReferences, tolerations, nodeSelector, ...) costs one dict lookup and is the shared
  object itself, with no parse and no walk;
- only values new to the pool are parsed (orjson), projected where the pod projection says so, and shared
  through :class:`~.transform.Sharer` as the default transform would.

Guarantees:
- :meth:`WireDecoder.decode` returns ``(type, object)`` where the object is equal to what
  ``default_transform(orjson.loads(line)["object"])`` gives (tested with hypothesis), for every kind; an
  ``ERROR`` event's object is the Status as sent.
- Anything outside the fast path's shape (a top-level field other than apiVersion, kind, metadata, spec and
  status, a section that is not an object, an ERROR event) takes the general path: orjson, then the transform.
- Invalid JSON raises ``ValueError`` (the watch turns it into a ServerError), as the plain decoder does.
- Shares the pool with the default transform, so objects from a re-list and from the watch share sub-trees.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import msgspec
import orjson

from controller_manager.client.watch import plain_decode

from .transform import (
    CONTAINER_LISTS,
    CONTAINER_STATUS_LISTS,
    MAX_INTERNED_LENGTH,
    METADATA_UNIQUE_KEYS,
    POD_CONTAINER_KEEP,
    POD_CONTAINER_STATUS_KEEP,
    POD_SPEC_DROP,
    POD_STATUS_IP_LISTS,
    POD_VOLUME_SOURCES_KEPT,
    VOLATILE_KEYS,
    Sharer,
    Transform,
    default_sharer,
    default_transform,
    project_container_statuses,
    project_containers,
    project_volumes,
    single_address,
)

Obj = dict[str, Any]
_Sections = dict[str, msgspec.Raw]


# gc=False: these hold no reference cycles, so the cyclic collector need not track (or count) them.
class _Object(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    apiVersion: str | msgspec.UnsetType = msgspec.UNSET
    kind: str | msgspec.UnsetType = msgspec.UNSET
    metadata: _Sections | msgspec.UnsetType = msgspec.UNSET
    spec: _Sections | msgspec.UnsetType = msgspec.UNSET
    status: _Sections | msgspec.UnsetType = msgspec.UNSET


class _Event(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    type: str
    object: _Object


class _List(msgspec.Struct, gc=False):
    """A List response: only its metadata and items are read (kind and apiVersion are the list's own)."""

    metadata: dict[str, Any] = {}
    items: list[msgspec.Raw] | None = None


_decode_event = msgspec.json.Decoder(_Event).decode
_decode_object = msgspec.json.Decoder(_Object).decode
_decode_list = msgspec.json.Decoder(_List).decode
_loads = orjson.loads
_intern = sys.intern



class _Container(msgspec.Struct, gc=False):
    """A container as the pod projection keeps it: msgspec skips every other field (env, probes, ...) in C."""

    name: Any = msgspec.UNSET
    image: Any = msgspec.UNSET
    resources: Any = msgspec.UNSET
    restartPolicy: Any = msgspec.UNSET
    ports: Any = msgspec.UNSET


class _ContainerStatus(msgspec.Struct, gc=False):
    """A container status as the pod projection keeps it."""

    name: Any = msgspec.UNSET
    state: Any = msgspec.UNSET
    lastState: Any = msgspec.UNSET
    ready: Any = msgspec.UNSET
    restartCount: Any = msgspec.UNSET
    started: Any = msgspec.UNSET
    image: Any = msgspec.UNSET
    resources: Any = msgspec.UNSET
    allocatedResources: Any = msgspec.UNSET


assert frozenset(_Container.__struct_fields__) == POD_CONTAINER_KEEP, "keep _Container in step with the projection"
assert frozenset(_ContainerStatus.__struct_fields__) == POD_CONTAINER_STATUS_KEEP, "and _ContainerStatus"
_decode_containers = msgspec.json.Decoder(list[_Container]).decode
_decode_container_statuses = msgspec.json.Decoder(list[_ContainerStatus]).decode
_encode = msgspec.json.Encoder().encode

# Per section, the fields that are not simply looked up in the pool: DROP (never decoded), UNIQUE (a scalar
# unique per object, decoded and never pooled: VOLATILE_KEYS, and name/uid in metadata), or a projection (a
# WireDecoder method turning the raw text into the kept value; bound per decoder, see WireDecoder.__init__).
DROP = "drop"
UNIQUE = "unique"
_Rules = dict[str, Any]


def _rules(kind_is_pod: bool) -> dict[str, dict[str, str]]:
    unique = dict.fromkeys(VOLATILE_KEYS, UNIQUE)
    metadata = unique | dict.fromkeys(METADATA_UNIQUE_KEYS, UNIQUE) | {"managedFields": DROP}
    if not kind_is_pod:
        return {"metadata": metadata, "spec": unique, "status": unique}
    return {
        "metadata": metadata,
        "spec": unique | dict.fromkeys(POD_SPEC_DROP, "_volumes") | dict.fromkeys(CONTAINER_LISTS, "_containers"),
        "status": unique | dict.fromkeys(POD_STATUS_IP_LISTS, "_ip_list")
        | dict.fromkeys(CONTAINER_STATUS_LISTS, "_container_statuses"),
    }


_MISS = object()
_DROPPED = object()  # what a projection returns for a field it leaves out
_VOLUME_SOURCE_TEXTS = tuple(f'"{source}"'.encode() for source in POD_VOLUME_SOURCES_KEPT)


class WireDecoder:
    """Decodes the watch events and list pages of one informer into cached objects (see the module docstring).

    ``kind``/``api_version``: what the informer caches; List items come without them, and are stamped with them
    (before the pod projection, which goes by kind), as the reflector stamps plainly parsed items.
    """

    def __init__(self, sharer: Sharer | None = None, fallback: Transform = default_transform, *,
                 kind: str | None = None, api_version: str | None = None) -> None:
        self._sharer = sharer or default_sharer()
        self._pool = self._sharer.pool
        self._fallback = fallback
        self._kind = kind
        self._api_version = api_version
        # The rules with projection names bound to this decoder's methods: one dict lookup per field says it all.
        self._pod_rules, self._other_rules = (
            {section: {key: getattr(self, rule) if rule not in (DROP, UNIQUE) else rule for key, rule in r.items()}
             for section, r in _rules(pod).items()}
            for pod in (True, False))

    def decode(self, line: bytes | memoryview) -> tuple[str, Any]:
        """One watch event line -> ``(type, cached form of its object)``."""
        try:
            event = _decode_event(line)
        except msgspec.ValidationError:
            return self._general(line)
        except msgspec.DecodeError as exc:
            raise ValueError(f"invalid JSON: {exc}") from None
        obj = self._object(event.object, stamp=False)
        self._sharer.maybe_sweep()
        return event.type, obj

    def decode_list(self, body: bytes) -> dict[str, Any]:
        """One List response -> ``{"metadata": ..., "items": [cached form of each item]}``."""
        try:
            page = _decode_list(body)
        except msgspec.ValidationError:  # not a List's shape: the general path, odd parts left as sent
            plain = self._loads_checked(body)
            meta, odd = plain.get("metadata"), plain.get("items")
            return {"metadata": meta if type(meta) is dict else {},
                    "items": [self._general_object(i, stamp=True) for i in odd] if type(odd) is list else odd}
        except msgspec.DecodeError as exc:
            raise ValueError(f"invalid JSON: {exc}") from None
        items: list[Any] = []
        for raw in page.items or ():
            try:
                items.append(self._object(_decode_object(raw), stamp=True))
            except msgspec.ValidationError:
                items.append(self._general_object(orjson.loads(bytes(raw)), stamp=True))
        self._sharer.maybe_sweep()
        return {"metadata": page.metadata, "items": items}

    def _object(self, wire: _Object, *, stamp: bool) -> Obj:
        """``stamp``: a List item, given the informer's kind and apiVersion when it has no kind of its own."""
        obj: Obj = {}
        kind: str | None = None
        if stamp and wire.kind is msgspec.UNSET and self._kind is not None:
            kind = obj["kind"] = self._kind
            obj["apiVersion"] = self._api_version
        else:
            if wire.apiVersion is not msgspec.UNSET:
                obj["apiVersion"] = _intern(wire.apiVersion)
            if wire.kind is not msgspec.UNSET:
                kind = obj["kind"] = _intern(wire.kind)
        rules = self._pod_rules if kind == "Pod" else self._other_rules
        if wire.metadata is not msgspec.UNSET:
            obj["metadata"] = self._section(wire.metadata, rules["metadata"])
        if wire.spec is not msgspec.UNSET:
            obj["spec"] = self._section(wire.spec, rules["spec"])
        if wire.status is not msgspec.UNSET:
            obj["status"] = self._section(wire.status, rules["status"])
        return obj

    def _section(self, fields: _Sections, rules: _Rules) -> Obj:
        # The hot loop: one rules lookup, one bytes copy and one pool lookup per field when the value repeats.
        # Keys need no interning: msgspec hands out the same key objects for every decode.
        pool = self._pool
        out: Obj = {}
        for key, raw in fields.items():
            rule = rules.get(key)
            if rule is None:
                text = bytes(raw)
                value = pool.get(text, _MISS)
                if value is _MISS:
                    value = self._new_value(text)
            elif rule is UNIQUE:
                value = _loads(bytes(raw))
                if type(value) is dict or type(value) is list:
                    value = self._sharer.canonical(value)
            elif rule is DROP:
                continue
            else:
                value = rule(bytes(raw))
                if value is _DROPPED:
                    continue
            out[key] = value
        return out

    def _new_value(self, text: bytes) -> Any:
        """A value the pool does not hold yet: parse, share, and pool it if it is seen again."""
        value = _loads(text)
        kind = type(value)
        if kind is dict or kind is list:
            return self._sharer.canonical(value, text)
        if kind is str and len(value) > MAX_INTERNED_LENGTH:
            return value
        return self._sharer.canonical_scalar(value, text)

    def _containers(self, text: bytes) -> Any:
        """A pod's container list, projected by msgspec; its projected JSON text is its pool key."""
        return self._projected(text, _decode_containers, project_containers)

    def _container_statuses(self, text: bytes) -> Any:
        return self._projected(text, _decode_container_statuses, project_container_statuses)

    def _volumes(self, text: bytes) -> Any:
        # Most pods' volumes (service account tokens, config maps) name no kept source: dropped without a parse.
        if not any(source in text for source in _VOLUME_SOURCE_TEXTS):
            return _DROPPED
        value = project_volumes(_loads(text))
        return _DROPPED if value is None else self._sharer.canonical(value)

    def _ip_list(self, text: bytes) -> Any:
        # An array text with no comma anywhere holds at most one element: single-stack, dropped without a parse.
        if text[:1] == b"[" and b"," not in text:
            return _DROPPED
        value = _loads(text)
        return _DROPPED if single_address(value) else self._sharer.canonical(value)

    def _projected(self, text: bytes, decode: Callable[[bytes], list[Any]], project: Callable[[Any], Any]) -> Any:
        try:
            kept = decode(text)
        except (msgspec.ValidationError, msgspec.DecodeError):  # not a list of objects, or odd numbers
            return self._sharer.canonical(project(_loads(text)))
        form = _encode(kept)
        value = self._pool.get(form)
        if value is None:
            value = self._sharer.canonical(msgspec.to_builtins(kept), form)
        return value

    def _general(self, line: bytes | memoryview) -> tuple[str, Any]:
        try:
            etype, obj = plain_decode(line)
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"invalid JSON: {exc}") from None
        if etype == "ERROR":
            return etype, obj
        return etype, self._general_object(obj, stamp=False)

    def _general_object(self, obj: Any, *, stamp: bool) -> Any:
        """An object outside the fast path's shape: the transform on the plainly parsed object."""
        if type(obj) is not dict:
            return obj
        if stamp and "kind" not in obj and self._kind is not None:
            obj = {**obj, "kind": self._kind, "apiVersion": self._api_version}
        try:
            return self._fallback(obj)
        except Exception:  # an odd object is cached as sent rather than failing the watch
            return obj

    @staticmethod
    def _loads_checked(body: bytes) -> dict[str, Any]:
        try:
            page = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"invalid JSON: {exc}") from None
        return page if type(page) is dict else {"items": page}
