"""Selecting through the namespace-label index gives exactly what testing every object of the namespace gives."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from controller_manager.api.selectors import EVERYTHING, NOTHING, Selector, from_label_selector, from_set, parse
from controller_manager.runtime.informers.labelindex import (
    NAMESPACE_LABEL_INDEX,
    namespace_label_index,
    select,
)
from controller_manager.runtime.informers.store import NAMESPACE_INDEX, Store, namespace_index

NAMESPACES = ["a", "b", ""]
KEYS = ["app", "tier", "pod-template-hash"]
VALUES = ["x", "y", "z"]

labels_st = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=3)


def obj(namespace: str, name: str, labels: dict[str, str] | None) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name}
    if namespace:
        md["namespace"] = namespace
    if labels is not None:
        md["labels"] = labels
    return {"metadata": md}


def indexed_store() -> Store:
    return Store({NAMESPACE_INDEX: namespace_index, NAMESPACE_LABEL_INDEX: namespace_label_index})


def by_walk(store: Store, namespace: str, selector: Selector) -> list[str]:
    return sorted(o["metadata"]["name"] for o in store.list()
                  if (o["metadata"].get("namespace") or "") == namespace
                  and selector.matches(o["metadata"].get("labels") or {}))


def names(objs: list[dict[str, Any]]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objs)


selectors_st = st.one_of(
    labels_st.map(from_set),
    st.just(EVERYTHING),
    st.just(NOTHING),
    st.builds(lambda k, vs: parse(f"{k} in ({','.join(vs)})"), st.sampled_from(KEYS),
              st.lists(st.sampled_from(VALUES), min_size=1, max_size=2, unique=True)),
    st.builds(lambda k, v, k2: parse(f"{k}={v},!{k2}"), st.sampled_from(KEYS), st.sampled_from(VALUES),
              st.sampled_from(KEYS)),
    st.builds(lambda k, v: from_label_selector({"matchLabels": {k: v},
                                                "matchExpressions": [{"key": "tier", "operator": "Exists"}]}),
              st.sampled_from(KEYS), st.sampled_from(VALUES)),
)

# (namespace, name index, labels or None for a delete)
writes_st = st.lists(st.tuples(st.sampled_from(NAMESPACES), st.integers(0, 6), st.one_of(st.none(), labels_st,
                                                                                        st.just({}))),
                     max_size=40)


@settings(max_examples=300, deadline=None)
@given(writes=writes_st, namespace=st.sampled_from(NAMESPACES), selector=selectors_st)
def test_select_matches_a_walk_of_the_namespace_after_any_writes(
        writes: list[tuple[str, int, dict[str, str] | None]], namespace: str, selector: Selector) -> None:
    store = indexed_store()
    for ns, i, labels in writes:
        key = f"{ns}/o{i}" if ns else f"o{i}"
        if labels is None:
            store._remove(key)
        else:
            store._put(key, obj(ns, f"o{i}", dict(labels)))
    assert names(select(store, namespace, selector)) == by_walk(store, namespace, selector)


def test_select_narrows_to_the_smallest_pair_bucket() -> None:
    store = indexed_store()
    for i in range(50):
        store._put(f"a/p{i}", obj("a", f"p{i}", {"app": "web", "hash": "h1" if i < 45 else "h2"}))
    store._put("b/q", obj("b", "q", {"app": "web", "hash": "h2"}))
    picked = select(store, "a", from_set({"app": "web", "hash": "h2"}))
    assert names(picked) == ["p45", "p46", "p47", "p48", "p49"]
    assert store.index_count(NAMESPACE_LABEL_INDEX, "a\0hash=h2") == 5


def test_select_without_the_label_index_falls_back_to_the_namespace() -> None:
    store = Store({NAMESPACE_INDEX: namespace_index})
    store._put("a/p", obj("a", "p", {"app": "web"}))
    store._put("a/q", obj("a", "q", {"app": "db"}))
    assert names(select(store, "a", from_set({"app": "web"}))) == ["p"]
    assert select(store, "a", NOTHING) == []
