"""Watch events decoded straight into their cached form: parse, strip, project and share in one pass.

Why: on the watch path the default transform (transform.py) used to cost more than parsing itself, because
orjson first builds every node of the object (managedFields, volumes, env, probes, ...) and Python then walks it
again to drop and share. Here msgspec (C) parses the event into its sections with each field's value left as
the raw JSON text the server sent (``msgspec.Raw``: a slice, not parsed), and only what is kept is decoded:
- dropped fields (``managedFields``; a pod's volumes) are skipped in C and never built;
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

A pod's spec is mostly its template, the same text for every pod of a ReplicaSet: it is decoded field by field
once, and then found whole by that text (see :meth:`WireDecoder._pod_spec`), leaving only the fields that differ
between such pods (node, hostname, volumes, containers) to the per-field loop.
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
    POD_VOLUME_SOURCES_KEEP,
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
_decode_value = msgspec.json.Decoder().decode  # a field's raw text, read in place (no copy into bytes first)
_loads = orjson.loads
_intern = sys.intern



# The kept fields are left as their raw text (msgspec.Raw): writing a projected list back out (its pool key) is
# then a copy of those texts, and Python objects are only made for a list new to the pool, by orjson like the rest.
class _Container(msgspec.Struct, gc=False):
    """A container as the pod projection keeps it: msgspec skips every other field (env, probes, ...) in C."""

    name: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    image: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    resources: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    restartPolicy: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    ports: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


class _ContainerStatus(msgspec.Struct, gc=False):
    """A container status as the pod projection keeps it."""

    name: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    state: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    lastState: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    ready: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    restartCount: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    started: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    image: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    resources: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    allocatedResources: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


class _Volume(msgspec.Struct, gc=False):
    """A pod volume as the projection keeps it (its name and a claim or CSI source; the rest is skipped in C)."""

    name: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    persistentVolumeClaim: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    ephemeral: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    csi: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


assert frozenset(_Volume.__struct_fields__) - {"name"} == POD_VOLUME_SOURCES_KEEP, "keep _Volume in step"
assert frozenset(_Container.__struct_fields__) == POD_CONTAINER_KEEP, "keep _Container in step with the projection"
assert frozenset(_ContainerStatus.__struct_fields__) == POD_CONTAINER_STATUS_KEEP, "and _ContainerStatus"
_decode_containers = msgspec.json.Decoder(list[_Container]).decode
_decode_volumes = msgspec.json.Decoder(list[_Volume]).decode
_decode_container_statuses = msgspec.json.Decoder(list[_ContainerStatus]).decode
_encode = msgspec.json.Encoder().encode
_VOLUME_SOURCE_KEYS = tuple(f'"{k}"'.encode() for k in sorted(POD_VOLUME_SOURCES_KEEP))

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
        "spec": unique | dict.fromkeys(POD_SPEC_DROP, DROP) | dict.fromkeys(CONTAINER_LISTS, "_containers")
        | {"volumes": "_volumes"},
        "status": unique | dict.fromkeys(POD_STATUS_IP_LISTS, "_ip_list")
        | dict.fromkeys(CONTAINER_STATUS_LISTS, "_container_statuses"),
    }


_MISS = object()
_DROPPED = object()  # what a projection returns for a field it leaves out

# The fields of a pod's spec that usually differ between pods of one template, left out of the spec memo's key:
# the scheduler's node, a StatefulSet pod's hostname, the volumes and the containers (the service-account token
# volume has a random name per pod, and every container mounts it by that name).
POD_SPEC_PER_POD: tuple[str, ...] = ("nodeName", "volumes", "hostname", *CONTAINER_LISTS)
# Pod templates remembered at most (each entry is its spec's JSON text, ~1 KiB, and the decoded spec without
# the per-pod fields, whose values are shared with the cache anyway): a cluster's live templates, not its pods.
SPEC_MEMO_SIZE = 512


class WireDecoder:
    """Decodes the watch events and list pages of one informer into cached objects (see the module docstring).

    ``kind``/``api_version``: what the informer caches; List items come without them, and are stamped with them
    (before the pod projection, which goes by kind), as the reflector stamps plainly parsed items.
    """

    def __init__(self, sharer: Sharer | None = None, fallback: Transform = default_transform, *,
                 kind: str | None = None, api_version: str | None = None) -> None:
        self._sharer = sharer if sharer is not None else default_sharer()  # an empty Sharer is falsy
        self._pool = self._sharer.pool
        self._fallback = fallback
        self._kind = kind
        self._api_version = api_version
        # The rules with projection names bound to this decoder's methods: one dict lookup per field says it all.
        self._pod_rules, self._other_rules = (
            {section: {key: getattr(self, rule) if rule not in (DROP, UNIQUE) else rule for key, rule in r.items()}
             for section, r in _rules(pod).items()}
            for pod in (True, False))
        self._pod_spec_rules = self._pod_rules["spec"]
        # A pod spec's text without the per-pod fields -> those fields decoded (a section of their own, copied into
        # each pod). Filled on the second sight of a text (hashes seen once are in _specs_seen), so specs that
        # never repeat cost no entry.
        self._spec_memo: dict[bytes, Obj] = {}
        self._specs_seen: set[int] = set()

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
            spec_rules = rules["spec"]
            obj["spec"] = (self._pod_spec(wire.spec) if spec_rules is self._pod_spec_rules
                           else self._section(wire.spec, spec_rules))
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
                value = _decode_value(raw)
                if type(value) is not str:  # as orjson reads it (it reads integers past 64 bits as floats)
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

    def _pod_spec(self, fields: _Sections) -> Obj:
        """A pod's spec: its template part found whole by its text, the per-pod fields decoded one by one.

        The result equals :meth:`_section`'s (each field's value depends on its own text alone); its keys come in
        another order (the per-pod fields last), which no reader of a dict can tell but by iterating it."""
        per_pod: _Sections = {}
        for key in POD_SPEC_PER_POD:
            raw = fields.pop(key, None)
            if raw is not None:
                per_pod[key] = raw
        text = _encode(fields)
        template = self._spec_memo.get(text)
        if template is None:
            template = self._section(fields, self._pod_spec_rules)
            self._remember_spec(text, template)
        spec = template.copy()
        if per_pod:
            spec.update(self._section(per_pod, self._pod_spec_rules))
        return spec

    def _remember_spec(self, text: bytes, template: Obj) -> None:
        h = hash(text)
        seen = self._specs_seen
        if h not in seen:
            if len(seen) >= 4 * SPEC_MEMO_SIZE:
                seen.clear()
            seen.add(h)
            return
        memo = self._spec_memo
        if len(memo) >= SPEC_MEMO_SIZE:
            # Forget the oldest half: live templates come back within a few pods, dead ones do not.
            for old in list(memo)[:SPEC_MEMO_SIZE // 2]:
                del memo[old]
        memo[text] = template

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

    def _volumes(self, text: bytes) -> Any:
        """A pod's volumes: only those naming a claim or a CSI driver are kept (see project_volumes)."""
        if text[:1] != b"[":
            return self._new_value(text)  # not a list: kept as it is, as project_volumes does
        if not any(source in text for source in _VOLUME_SOURCE_KEYS):
            return _DROPPED  # no kept source anywhere in the text: nothing to parse
        try:
            kept = [v for v in _decode_volumes(text)
                    if v.persistentVolumeClaim is not msgspec.UNSET or v.ephemeral is not msgspec.UNSET
                    or v.csi is not msgspec.UNSET]
        except (msgspec.ValidationError, msgspec.DecodeError):
            projected = project_volumes(_loads(text))
            return _DROPPED if projected is None else self._sharer.canonical(projected)
        if not kept:
            return _DROPPED
        form = _encode(kept)
        value = self._pool.get(form)
        if value is None:
            value = self._sharer.canonical(_loads(form), form)
        return value

    def _container_statuses(self, text: bytes) -> Any:
        return self._projected(text, _decode_container_statuses, project_container_statuses)

    def _ip_list(self, text: bytes) -> Any:
        # An array text with no comma anywhere holds at most one element: single-stack, dropped without a parse.
        if text[:1] == b"[" and b"," not in text:
            return _DROPPED
        value = _loads(text)
        return _DROPPED if single_address(value) else self._sharer.canonical(value)

    def _projected(self, text: bytes, decode: Callable[[bytes], list[Any]], project: Callable[[Any], Any]) -> Any:
        try:
            kept = decode(text)
        except (msgspec.ValidationError, msgspec.DecodeError):  # not a list of objects
            return self._sharer.canonical(project(_loads(text)))
        form = _encode(kept)
        value = self._pool.get(form)
        if value is None:
            value = self._sharer.canonical(_loads(form), form)
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
