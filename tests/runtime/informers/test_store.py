"""The cache and its indexes (client-go thread_safe_store semantics, table-driven)."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.api.resources import NODES, PODS
from controller_manager.clock import FakeClock
from controller_manager.runtime.informers import (
    CONTROLLER_UID_INDEX,
    NAMESPACE_INDEX,
    NODE_NAME_INDEX,
    SharedInformerFactory,
    Store,
    UnknownIndex,
)
from controller_manager.runtime.informers.informer import builtin_indexers

from .conftest import Runner
from .fakes import FakeClient, FakeServer, eventually

pytestmark = pytest.mark.timeout(20)


def pod(name: str, ns: str = "default", node: str | None = None, owner: str | None = None,
        labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "resourceVersion": "1", "labels": labels or {}}
    if owner is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "x", "uid": "not-controller"},
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": owner, "controller": True},
        ]
    obj: dict[str, Any] = {"metadata": meta, "spec": {}}
    if node is not None:
        obj["spec"]["nodeName"] = node
    return obj


def pod_store() -> Store:
    return Store(builtin_indexers(PODS))


def keys(store: Store, index: str, value: str) -> list[str]:
    return sorted(store.index_keys(index, value))


@pytest.mark.parametrize(
    ("index", "obj", "expected"),
    [
        pytest.param(NAMESPACE_INDEX, pod("a", ns="kube-system"), ["kube-system"], id="namespace"),
        pytest.param(NAMESPACE_INDEX, {"metadata": {"name": "n1"}}, [], id="cluster-scoped-has-no-namespace"),
        pytest.param(CONTROLLER_UID_INDEX, pod("a", owner="rs-uid"), ["rs-uid"], id="controller-owner"),
        pytest.param(CONTROLLER_UID_INDEX, pod("a"), [], id="no-owner"),
        pytest.param(CONTROLLER_UID_INDEX,
                     {"metadata": {"ownerReferences": [{"uid": "u", "controller": False}]}}, [], id="not-controller"),
        pytest.param(NODE_NAME_INDEX, pod("a", node="n1"), ["n1"], id="bound-pod"),
        pytest.param(NODE_NAME_INDEX, pod("a"), [], id="pending-pod"),
        pytest.param(NODE_NAME_INDEX, {"metadata": {}, "spec": {"nodeName": ""}}, [], id="empty-node-name"),
    ],
)
def test_builtin_index_functions(index: str, obj: dict[str, Any], expected: list[str]) -> None:
    assert builtin_indexers(PODS)[index](obj) == expected


def test_node_name_index_is_for_pods_only() -> None:
    assert NODE_NAME_INDEX in builtin_indexers(PODS)
    assert set(builtin_indexers(NODES)) == {NAMESPACE_INDEX, CONTROLLER_UID_INDEX}
    with pytest.raises(UnknownIndex, match="Index with name node-name does not exist"):
        Store(builtin_indexers(NODES)).by_index(NODE_NAME_INDEX, "n1")


def test_read_api() -> None:
    store = pod_store()
    a, b = pod("a"), pod("b", ns="other")
    store._put("default/a", a)
    store._put("other/b", b)
    assert store.get("default/a") is a
    assert store.get("default/missing") is None
    assert len(store) == 2
    assert "other/b" in store
    assert sorted(store.keys()) == ["default/a", "other/b"]
    assert sorted(o["metadata"]["name"] for o in store.list()) == ["a", "b"]
    assert store.by_index(NAMESPACE_INDEX, "other") == [b]
    assert store.by_index(NAMESPACE_INDEX, "nowhere") == []
    assert sorted(store.index_values(NAMESPACE_INDEX)) == ["default", "other"]


def test_update_that_changes_the_indexed_value_moves_the_key() -> None:
    store = pod_store()
    store._put("default/a", pod("a", node="n1", owner="rs-1"))
    store._put("default/b", pod("b", node="n1", owner="rs-1"))
    assert keys(store, NODE_NAME_INDEX, "n1") == ["default/a", "default/b"]

    old = store._put("default/a", pod("a", node="n2", owner="rs-2"))
    assert old is not None
    assert old["spec"]["nodeName"] == "n1"
    assert keys(store, NODE_NAME_INDEX, "n1") == ["default/b"]
    assert keys(store, NODE_NAME_INDEX, "n2") == ["default/a"]
    assert keys(store, CONTROLLER_UID_INDEX, "rs-1") == ["default/b"]
    assert keys(store, CONTROLLER_UID_INDEX, "rs-2") == ["default/a"]

    store._put("default/b", pod("b", owner="rs-1"))  # unbound: leaves every node bucket
    assert keys(store, NODE_NAME_INDEX, "n1") == []
    assert "n1" not in store.index_values(NODE_NAME_INDEX)  # empty buckets are dropped


def test_delete_removes_the_key_from_every_index() -> None:
    store = pod_store()
    store._put("default/a", pod("a", node="n1", owner="rs-1"))
    store._put("default/b", pod("b", node="n1", owner="rs-1"))
    removed = store._remove("default/a")
    assert removed is not None
    assert removed["metadata"]["name"] == "a"
    assert store._remove("default/a") is None
    assert keys(store, NODE_NAME_INDEX, "n1") == ["default/b"]
    assert keys(store, CONTROLLER_UID_INDEX, "rs-1") == ["default/b"]
    store._remove("default/b")
    assert store.index_values(NODE_NAME_INDEX) == []
    assert store.index_values(CONTROLLER_UID_INDEX) == []
    assert store.index_values(NAMESPACE_INDEX) == []


def test_multi_value_index_function() -> None:
    def by_label_values(obj: dict[str, Any]) -> list[str]:
        return sorted(obj["metadata"]["labels"].values())

    store = Store({"labels": by_label_values})
    store._put("default/a", pod("a", labels={"x": "1", "y": "2"}))
    store._put("default/a", pod("a", labels={"x": "1", "y": "3"}))
    assert keys(store, "labels", "1") == ["default/a"]
    assert keys(store, "labels", "2") == []
    assert keys(store, "labels", "3") == ["default/a"]


def test_indexer_added_later_is_built_from_the_current_contents() -> None:
    store = pod_store()
    store._put("default/a", pod("a", labels={"app": "web"}))
    store._put("default/b", pod("b", labels={"app": "db"}))
    store.add_indexers({"app": lambda o: [o["metadata"]["labels"]["app"]]})
    assert keys(store, "app", "web") == ["default/a"]
    store._put("default/c", pod("c", labels={"app": "web"}))
    assert keys(store, "app", "web") == ["default/a", "default/c"]
    with pytest.raises(ValueError, match="indexer conflict"):
        store.add_indexers({"app": lambda o: []})


def test_failing_index_function_leaves_the_store_unchanged() -> None:
    def picky(obj: dict[str, Any]) -> list[str]:
        return [obj["metadata"]["labels"]["required"]]

    store = Store({"picky": picky})
    good = pod("a", labels={"required": "yes"})
    store._put("default/a", good)
    with pytest.raises(KeyError):
        store._put("default/a", pod("a"))
    assert store.get("default/a") is good
    assert keys(store, "picky", "yes") == ["default/a"]


def test_reads_are_snapshots() -> None:
    store = pod_store()
    for name in "abc":
        store._put(f"default/{name}", pod(name))
    for key in store:  # deleting while iterating is allowed
        store._remove(key)
    assert len(store) == 0


async def test_indexes_follow_watch_events(server: FakeServer, clock: FakeClock, run: Runner) -> None:
    factory = SharedInformerFactory(FakeClient(server), clock)
    informer = factory.informer(PODS)
    server.add("a", spec={"nodeName": "n1"})
    server.add("b", spec={"nodeName": "n1"})
    run(factory.run)
    await factory.wait_for_cache_sync()
    await eventually(lambda: server.open_watches == 1)
    assert sorted(o["metadata"]["name"] for o in informer.store.by_index(NODE_NAME_INDEX, "n1")) == ["a", "b"]

    server.update("default/a", lambda o: o["spec"].update(nodeName="n2"))
    await eventually(lambda: len(informer.store.by_index(NODE_NAME_INDEX, "n2")) == 1)
    assert [o["metadata"]["name"] for o in informer.store.by_index(NODE_NAME_INDEX, "n1")] == ["b"]

    server.delete("default/b")
    await eventually(lambda: informer.store.by_index(NODE_NAME_INDEX, "n1") == [])
    assert informer.store.index_values(NODE_NAME_INDEX) == ["n2"]
    assert [o["metadata"]["name"] for o in informer.store.by_index(NAMESPACE_INDEX, "default")] == ["a"]


def test_index_count_counts_without_building_a_list() -> None:
    store = Store(builtin_indexers(PODS))
    for i in range(3):
        store._put(f"a/p{i}", {"metadata": {"name": f"p{i}", "namespace": "a"}})
    store._put("b/q", {"metadata": {"name": "q", "namespace": "b"}})
    assert store.index_count(NAMESPACE_INDEX, "a") == 3
    assert store.index_count(NAMESPACE_INDEX, "b") == 1
    assert store.index_count(NAMESPACE_INDEX, "c") == 0
