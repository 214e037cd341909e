"""PATCH with ``application/apply-patch+yaml``: server-side apply of one object (the applyPatcher).

The configuration is merged into the live object (an absent object is created from it), ownership moves as
:func:`updater.apply` decides, and the result goes through the ordinary create or update (defaults,
strategy, validation, admission, dry run), carrying the managedFields computed here. An autoscaling/v1
Scale applied to ``/scale`` (:func:`apply_scale`; a built-in kind's or a custom resource's) is applied to the
Scale view, with the parent's managedFields mapped to it and back as apimachinery's ScaleHandler maps them,
through the parent's replicas path (a custom resource's ``specReplicasPath``).

Failures as upstream answers them: undecodable YAML 400 ``error decoding YAML: ...``; another kind 400
``invalid object type: <gvk>``; managedFields in the configuration 400; conflicts 409 with
FieldManagerConflict causes; a configuration the schema refuses (an undeclared field, duplicate list keys)
500 with SMD's message and no reason, as a non-Status error comes out of the handler.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from controller_manager.api.meta import format_time
from controller_manager.api.resources import Resource
from controller_manager.sim.apiserver import errors, yamlbody
from controller_manager.sim.apiserver.fieldmanager import (
    conflict_error,
    empty_object,
    ignored_fields,
    kind_atom,
    managed,
    other_versions,
    typed,
    updater,
)
from controller_manager.sim.apiserver.fieldmanager.fieldpath import Path, Set, field

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer

Obj = dict[str, Any]


def _gvk(config: Obj) -> str:
    api_version = config.get("apiVersion")
    kind = config.get("kind")
    api_version = api_version if isinstance(api_version, str) else ""
    group, _, version = api_version.rpartition("/")
    return f"{group}/{version}, Kind={kind if isinstance(kind, str) else ''}"


def _ident(config: Obj, name: str) -> str:
    """objectGVKNN: ``namespace/name; group/version, Kind=kind`` of the applied configuration."""
    meta = config.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or name}; {_gvk(config)}"


def parse(body: bytes | str) -> Obj:
    try:
        config = yamlbody.yaml_to_json_value(body)
    except yamlbody.YAMLError as e:
        raise errors.bad_request(f"error decoding YAML: {e}") from None
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise errors.bad_request("error decoding YAML: json: cannot unmarshal "
                                 f"{'array' if isinstance(config, list) else 'string'} into Go value of type "
                                 "map[string]interface {}")
    return config


def apply(api: ApiServer, res: Resource, namespace: str | None, name: str, body: bytes | str, *, manager: str,
          force: bool, subresource: str | None = None, dry_run: bool = False,
          decode: Callable[[Obj, Obj], Obj] | None = None) -> tuple[Obj, bool]:
    """Apply ``body`` to the named object; returns (the object as stored, whether it was created)."""
    config = parse(body)
    if config.get("apiVersion") != res.api_version or config.get("kind") != res.kind:
        raise errors.bad_request(f"invalid object type: {_gvk(config)}")
    meta = config.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        raise errors.bad_request("metadata must be an object")
    meta = meta or {}
    if meta.get("managedFields") is not None:
        raise errors.bad_request("metadata.managedFields must be nil")
    if meta.get("name") not in (None, name):
        raise errors.bad_request(f"the name of the object ({meta.get('name')}) does not match the name on the "
                                 f"URL ({name})")
    ns = namespace if res.namespaced else None
    stored = api.store(res).get(api.key(res, ns, name))
    live: Obj | None = api.view(res)(stored)[0] if stored is not None else None
    if live is None and subresource:
        raise errors.not_found(res.group, res.plural, name)
    try:
        current = managed.decode((live or {}).get("metadata", {}).get("managedFields"))
    except managed.DecodeError as e:
        raise errors.internal_error(f"failed to decode managed fields: {e}") from None
    base = live if live is not None else empty_object(res.api_version, res.kind)
    sub = subresource or ""
    atom = kind_atom(res)
    invalid = typed.validate(config, atom)
    if invalid:
        # Not a Status error upstream: the handler answers 500 with the error's text and no reason.
        text = invalid[0] if len(invalid) == 1 else "errors:\n" + "\n".join(f"  {e}" for e in invalid)
        raise errors.StatusError(errors.status(500, "", f"failed to create typed patch object "
                                                       f"({_ident(config, name)}): {text}"))

    def run(force: bool) -> tuple[Any, managed.Managed]:
        return updater.apply(current, base, config, atom, manager=manager, api_version=res.api_version,
                             subresource=sub, force=force, ignored=ignored_fields(res, sub),
                             now=format_time(api.clock.now()), empty=empty_object(res.api_version, res.kind),
                             other_for=other_versions(res, sub))

    try:
        try:
            merged, result = run(force)
        except updater.Conflicts as e:
            if manager != "kubectl" or live is None:
                raise
            # lastAppliedManager: kubectl moving from client-side apply may take the fields its
            # last-applied configuration still describes.
            allowed = _allowed_by_last_applied(res, live, atom)
            if allowed is None:
                raise
            rest = [(m, p) for m, p in e.conflicts if not allowed.has(p)]
            if rest:
                raise updater.Conflicts(rest) from None
            merged, result = run(True)
    except updater.Conflicts as e:
        raise conflict_error(e.conflicts) from None
    except typed.TypedError as e:
        raise errors.StatusError(errors.status(500, "", f"failed to merge config ({_ident(config, name)}): "
                                                       f"{e}")) from None
    obj = updater.without_managed_fields(merged if merged is not None else base)
    if manager == "kubectl":
        obj = _update_last_applied(obj, config)
    obj = {**obj, "apiVersion": res.api_version, "kind": res.kind,
           "metadata": {**(obj.get("metadata") or {}), "name": name}}
    if decode is not None:
        obj = decode(obj, stored.obj if stored is not None else {})
    entries = managed.encode(result)
    if live is None:
        return api.create(res, obj, namespace, dry_run=dry_run, managed_fields=entries), True
    return api.update(res, obj, subresource=subresource, dry_run=dry_run, namespace=namespace, name=name,
                      managed_fields=entries), False


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _allowed_by_last_applied(res: Resource, live: Obj, atom: typed.Atom) -> Set | None:
    """The fields of the live object's last-applied configuration whose values it still has."""
    text = ((live.get("metadata") or {}).get("annotations") or {}).get(LAST_APPLIED)
    if not text:
        return None
    try:
        last = json.loads(text)
    except ValueError:
        return None
    if not isinstance(last, dict) or last.get("apiVersion") != res.api_version:
        return None
    try:
        fields = typed.to_field_set(last, atom)
        cmp = typed.compare(last, updater.without_managed_fields(live), atom)
    except typed.TypedError:
        return None
    return fields.difference(cmp.modified).difference(cmp.added).difference(cmp.removed)


def _update_last_applied(obj: Obj, config: Obj) -> Obj:
    """lastAppliedUpdater: an object that carries kubectl's last-applied annotation gets the configuration
    just applied in it, so a later client-side apply sees what server-side apply did."""
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    if not annotations.get(LAST_APPLIED):
        return obj
    cmeta = dict(config.get("metadata") or {})
    cannotations = {k: v for k, v in (cmeta.get("annotations") or {}).items() if k != LAST_APPLIED}
    if cannotations:
        cmeta["annotations"] = cannotations
    else:
        cmeta.pop("annotations", None)
    text = _go_json({**config, "metadata": cmeta}) + "\n"
    return {**obj, "metadata": {**meta, "annotations": {**annotations, LAST_APPLIED: text}}}


def _go_json(value: Any) -> str:
    """encoding/json's Marshal of a map: sorted keys, compact, HTML characters escaped."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                    ("\u2029", "\\u2029")):
        text = text.replace(ch, esc)
    return text


_SCALE_VERSION = "autoscaling/v1"
_REPLICAS: Path = (field("spec"), field("replicas"))  # in the Scale and in each built-in scalable kind

ReplicasPaths = dict[str, Path | None]
"""Where each apiVersion of the parent keeps the Scale's replicas (None: that version has no /scale)."""


def replicas_paths(api: ApiServer, res: Resource) -> ReplicasPaths:
    """The parent's replicas path by apiVersion: ``spec.replicas`` for a built-in kind; for a custom resource
    each served version's ``specReplicasPath``, as the CRD's scale storage builds its path mappings (upstream
    maps every version the CRD declares, served or not: an entry of a version no longer served is dropped
    here)."""
    from controller_manager.sim.apiserver.crd.resource import CustomResource

    if not isinstance(res, CustomResource):
        return {res.api_version: _REPLICAS}
    out: ReplicasPaths = {}
    for version in api.crds.served.get(res.crd_name, [res]):
        spec_path = str((version.scale or {}).get("specReplicasPath") or "").lstrip(".")
        out[version.api_version] = tuple(field(p) for p in spec_path.split(".") if p) or None
    out.setdefault(res.api_version, None)
    return out


def scale_to_subresource(parent: managed.Managed, paths: ReplicasPaths) -> managed.Managed:
    """ScaleHandler.ToSubresource: each manager of the parent that owns its replicas (at the path of its entry's
    apiVersion) owns the Scale's ``spec.replicas`` (as autoscaling/v1), keeping its identity, applied flag and
    time."""
    out = managed.Managed.empty()
    for mid, vs in parent.fields.items():
        path = paths.get(vs.api_version)
        if path is not None and vs.set.has(path):
            out.fields[mid] = managed.VersionedSet(Set.of(_REPLICAS), _SCALE_VERSION, vs.applied)
            out.times[mid] = parent.times.get(mid)
    return out


def scale_to_parent(parent: managed.Managed, scale: managed.Managed, paths: ReplicasPaths,
                    parent_version: str) -> managed.Managed:
    """ScaleHandler.ToParent: parent managers that owned the replicas keep them only if the Scale's
    managers still include them; new Scale managers owning ``spec.replicas`` own the parent's replicas (at the
    path of ``parent_version``, the request's). Entries of an apiVersion the parent does not know are dropped;
    those of a version without /scale are kept as they are. A manager new to the parent gets no time
    (upstream takes times from the parent's entries)."""
    out = managed.Managed.empty()
    remaining = dict(scale.fields)
    for mid, vs in parent.fields.items():
        if vs.api_version not in paths:
            continue
        path = paths[vs.api_version]
        if path is None or not vs.set.has(path):
            out.fields[mid] = vs
        elif mid not in remaining:
            rest = vs.set.difference(Set.of(path))
            if rest.empty():
                continue
            out.fields[mid] = managed.VersionedSet(rest, vs.api_version, vs.applied)
        else:
            out.fields[mid] = vs
            del remaining[mid]
        out.times[mid] = parent.times.get(mid)
        if mid in parent.entries:
            out.entries[mid] = parent.entries[mid]
    target = paths.get(parent_version)
    for mid, vs in remaining.items():
        if vs.set.has(_REPLICAS) and target is not None:
            out.fields[mid] = managed.VersionedSet(Set.of(target), parent_version, vs.applied)
            out.times[mid] = parent.times.get(mid)
    return out


def apply_scale(api: ApiServer, res: Resource, namespace: str | None, name: str, body: bytes | str, *,
                manager: str, force: bool, dry_run: bool = False) -> Obj:
    """Apply an autoscaling/v1 Scale to ``res``'s ``/scale``: the configuration is applied to the Scale
    view, its managers being the parent's owners of the replicas (ToSubresource); the replicas go to the
    parent and the ownership back to it (ToParent), the applier recorded with subresource ``scale``."""
    from controller_manager.sim.apiserver import subresources

    config = parse(body)
    if config.get("apiVersion") != _SCALE_VERSION or config.get("kind") != "Scale":
        raise errors.bad_request(f"invalid object type: {_gvk(config)}")
    meta = config.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        raise errors.bad_request("metadata must be an object")
    if (meta or {}).get("managedFields") is not None:
        raise errors.bad_request("metadata.managedFields must be nil")
    live_scale = subresources.get_scale(api, res, namespace, name)  # 404 when the object is absent
    existing = api.get_stored(res, namespace, name)
    parent_entries = api.view(res)(existing)[0].get("metadata", {}).get("managedFields")
    try:
        parent = managed.decode(parent_entries)
    except managed.DecodeError as e:
        raise errors.internal_error(f"failed to decode managed fields: {e}") from None
    paths = replicas_paths(api, res)
    atom = typed.kind_atom(_SCALE_VERSION, "Scale")
    invalid = typed.validate(config, atom)
    if invalid:
        text = invalid[0] if len(invalid) == 1 else "errors:\n" + "\n".join(f"  {e}" for e in invalid)
        raise errors.StatusError(errors.status(500, "", f"failed to create typed patch object "
                                                       f"({_ident(config, name)}): {text}"))
    try:
        merged, result = updater.apply(scale_to_subresource(parent, paths), live_scale, config, atom,
                                       manager=manager, api_version=_SCALE_VERSION, subresource="scale",
                                       force=force, ignored=None, now=format_time(api.clock.now()),
                                       empty=empty_object(_SCALE_VERSION, "Scale"))
    except updater.Conflicts as e:
        raise conflict_error(e.conflicts) from None
    except typed.TypedError as e:
        raise errors.StatusError(errors.status(500, "", f"failed to merge config ({_ident(config, name)}): "
                                                       f"{e}")) from None
    scale = merged if merged is not None else live_scale
    entries = managed.encode(scale_to_parent(parent, result, paths, res.api_version))
    replicas = (scale.get("spec") or {}).get("replicas", 0)
    written = subresources.update_scale(api, res, namespace, name, {"spec": {"replicas": replicas}},
                                        dry_run=dry_run, managed_fields=entries if entries is not None else [])
    return written
