"""owned_or_orphaned: what a claim needs (the owner's objects and its namespace's orphans), from indexes."""

from __future__ import annotations

from typing import Any

from bench.walks import StoreWalks
from controller_manager.api.meta import key_of
from controller_manager.controllerutil.owned import ORPHANS_BY_NAMESPACE, orphans_by_namespace, owned_or_orphaned
from controller_manager.runtime.informers import CONTROLLER_UID_INDEX, Store
from controller_manager.runtime.informers.store import controller_uid_index


def _pod(name: str, namespace: str = "default", owner: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": owner, "uid": owner,
                                    "controller": True}]
    return {"metadata": meta}


def test_the_owners_objects_and_its_namespaces_orphans_and_nothing_else() -> None:
    store = Store({CONTROLLER_UID_INDEX: controller_uid_index, ORPHANS_BY_NAMESPACE: orphans_by_namespace})
    pods = [_pod("mine", owner="a"), _pod("orphan"), _pod("elsewhere-orphan", "other"),
            _pod("mine-elsewhere", "other", owner="a"),  # a reference across namespaces never counts
            *(_pod(f"theirs-{i}", owner="b") for i in range(50))]
    for p in pods:
        store._put(key_of(p), p)
    owner = {"metadata": {"name": "a", "namespace": "default", "uid": "a"}}
    with StoreWalks() as walks:
        found = owned_or_orphaned(store, owner)
    assert sorted(key_of(p) for p in found) == ["default/mine", "default/orphan"]
    assert walks.objects == 3  # "mine", "mine-elsewhere" from the uid index, "orphan": not the 50 others'
    # An orphan that gets a controller reference leaves the orphans' index.
    store._put("default/orphan", _pod("orphan", owner="b"))
    assert [key_of(p) for p in owned_or_orphaned(store, owner)] == ["default/mine"]
