"""The objects a claim must look at: those an owner controls, and the orphans of its namespace.

Upstream's ``FilterPodsByOwner`` (``pkg/controller/controller_utils.go``, with ``includeOrphanedPods``): a claim
(adopt matching orphans, release strays, keep its own) needs nothing else, since an object controlled by another
owner is never claimed. Listing the whole namespace instead costs a sync O(namespace): a DaemonSet in kube-system
walked every other DaemonSet's pods there (10,000 of them with two DaemonSets on 5,000 nodes), a Job of ten pods
walked the 3,000 pods of its namespace (bench/scale_paths.py).

Guarantees:
- :data:`ORPHANS_BY_NAMESPACE` indexes an object without a controller reference under its namespace (objects
  with one are not in it); register :func:`orphans_by_namespace` under that name on the informer (the same
  function object every time, so two controllers share one index).
- :func:`owned_or_orphaned` returns the objects whose controller reference names the owner's UID in the owner's
  namespace, then that namespace's orphans: exactly the objects of the namespace a claim can keep or adopt.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller_manager.api.meta import controller_ref, meta
from controller_manager.runtime.informers import CONTROLLER_UID_INDEX, Store

__all__ = ["ORPHANS_BY_NAMESPACE", "orphans_by_namespace", "owned_or_orphaned"]

ORPHANS_BY_NAMESPACE = "orphans-by-namespace"

Obj = dict[str, Any]


def orphans_by_namespace(obj: Obj) -> list[str]:
    if controller_ref(obj) is not None:
        return []
    namespace = meta(obj).get("namespace")
    return [namespace] if isinstance(namespace, str) and namespace else []


def owned_or_orphaned(store: Store, owner: Mapping[str, Any]) -> list[Obj]:
    m = meta(owner)
    namespace = str(m.get("namespace") or "")
    owned = [o for o in store.by_index(CONTROLLER_UID_INDEX, str(m.get("uid") or ""))
             if meta(o).get("namespace") == namespace]
    return [*owned, *store.by_index(ORPHANS_BY_NAMESPACE, namespace)]
