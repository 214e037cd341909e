"""What the collector's metadata-only informers keep of each object.

Guarantees: :func:`gc_metadata` (the informers' transform) keeps only the metadata the collector reads (name,
namespace, uid, resourceVersion, ownerReferences, finalizers, deletionTimestamp), so labels, annotations and
managedFields are never cached; the strings every object repeats (namespace, an ownerReference's apiVersion
and kind) are interned so 10,000 objects share one copy. The input is not mutated.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from controller_manager.api.meta import meta

_FIELDS = ("name", "uid", "resourceVersion", "finalizers", "deletionTimestamp")


def _owner_ref(ref: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(ref)
    for key in ("apiVersion", "kind"):
        value = out.get(key)
        if isinstance(value, str):
            out[key] = sys.intern(value)
    return out


def gc_metadata(obj: dict[str, Any]) -> dict[str, Any]:
    """The informer transform: ``obj`` reduced to what the collector reads."""
    m = meta(obj)
    out: dict[str, Any] = {key: m[key] for key in _FIELDS if key in m}
    namespace = m.get("namespace")
    if isinstance(namespace, str) and namespace:
        out["namespace"] = sys.intern(namespace)
    refs = m.get("ownerReferences")
    if refs:
        out["ownerReferences"] = [_owner_ref(r) for r in refs if isinstance(r, Mapping)]
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "metadata": out}
