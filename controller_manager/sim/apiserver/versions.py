"""Kinds served in more than one version over one store: which resource holds the stored form, and the
conversions between a served version and it (the core/events.k8s.io Events pair predates this and keeps its
own path in the server).

Guarantees: :func:`storage_of` is None for a resource stored in its own form; otherwise writes through the
resource are converted with :func:`to_storage` and handed to the storage resource, and everything it shows
(get, list, watch, write answers) is converted back with :func:`from_storage`, written by Go's JSON rules of
the served version.
"""

from __future__ import annotations

from typing import Any

from controller_manager.api.resources import HORIZONTALPODAUTOSCALERS, HORIZONTALPODAUTOSCALERS_V1, Resource
from controller_manager.sim.apiserver import codec, hpa

Obj = dict[str, Any]

_STORAGE: dict[tuple[str, str, str], Resource] = {
    (HORIZONTALPODAUTOSCALERS_V1.group, HORIZONTALPODAUTOSCALERS_V1.version, HORIZONTALPODAUTOSCALERS_V1.plural):
        HORIZONTALPODAUTOSCALERS,
}


def storage_of(res: Resource) -> Resource | None:
    return _STORAGE.get((res.group, res.version, res.plural))


def to_storage(res: Resource, obj: Obj) -> Obj:
    if res.kind == "HorizontalPodAutoscaler":
        return hpa.to_v2(obj)
    return obj


def from_storage(res: Resource, obj: Obj) -> Obj:
    if res.kind == "HorizontalPodAutoscaler":
        return codec.normalize(res, hpa.to_v1(obj))
    return obj


_SERVED: tuple[Resource, ...] = (HORIZONTALPODAUTOSCALERS_V1,)


def served_defaults(res: Resource, obj: Obj) -> Obj:
    """``obj`` with the defaults of the version it was sent in (what that version's decoder fills in):
    autoscaling/v1 defaults only ``minReplicas`` (its CPU target is filled in converting to storage)."""
    if res.kind == "HorizontalPodAutoscaler" and storage_of(res) is not None:
        spec = obj.get("spec")
        if isinstance(spec, dict) and spec.get("minReplicas") is None:
            return {**obj, "spec": {**spec, "minReplicas": 1}}
    return obj


def multi_version(res: Resource) -> bool:
    """Whether ``res``'s kind is served here in more than one version over one store."""
    storage = storage_of(res) or res
    return any(served.kind == res.kind and storage_of(served) == storage for served in _SERVED) or \
        storage_of(res) is not None


def convert(res: Resource, obj: Obj, api_version: str) -> tuple[Resource, Obj] | None:
    """``obj``, as ``res`` serves it, in ``api_version`` of the same kind, with the resource serving that
    version (the managed fields' VersionConverter); None when no served version of the kind has it."""
    if api_version == res.api_version:
        return res, obj
    storage = storage_of(res) or res
    in_storage = obj if storage == res else codec.normalize(storage, to_storage(res, obj))
    if api_version == storage.api_version:
        return storage, in_storage
    for served in _SERVED:
        if storage_of(served) == storage and served.api_version == api_version and served.kind == res.kind:
            return served, from_storage(served, in_storage)
    return None
