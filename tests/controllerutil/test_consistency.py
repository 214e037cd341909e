"""The consistency store: a sync is held back until the informers show this controller's own last writes."""

from __future__ import annotations

import pytest

from controller_manager.controllerutil.consistency import ConsistencyStore, StaleCache, compare_resource_versions


def test_compare_resource_versions_numerically() -> None:
    assert compare_resource_versions("9", "10") == -1
    assert compare_resource_versions("10", "10") == 0
    assert compare_resource_versions("100", "99") == 1
    for bad in ("", "abc", "012", "-1"):
        with pytest.raises(ValueError, match="not comparable"):
            compare_resource_versions(bad, "1")


def test_ready_once_every_informer_caught_up_then_forgotten() -> None:
    read = {"replicasets": "5", "pods": "5"}
    store = ConsistencyStore({r: (lambda r=r: read[r]) for r in read})  # type: ignore[misc]
    store.ensure_ready("ns/a")  # nothing written: ready
    store.wrote_at("ns/a", "uid-a", "replicasets", "12")
    store.wrote_at("ns/a", "uid-a", "pods", "9")
    store.wrote_at("ns/a", "uid-a", "pods", "7")  # older than what is kept: ignored
    with pytest.raises(StaleCache) as stale:
        store.ensure_ready("ns/a")
    assert str(stale.value) in ("read version: 5 is not as new as written version: 12 for group resource replicasets",
                                "read version: 5 is not as new as written version: 9 for group resource pods")
    read["replicasets"] = "12"
    with pytest.raises(StaleCache, match="written version: 9 for group resource pods"):
        store.ensure_ready("ns/a")
    store.ensure_ready("ns/b")  # other owners are not held back
    read["pods"] = "8"
    with pytest.raises(StaleCache):
        store.ensure_ready("ns/a")
    read["pods"] = "40"
    store.ensure_ready("ns/a")
    assert len(store) == 0  # caught up: the record is gone


def test_unknown_versions_never_block_and_clear_respects_the_uid() -> None:
    read = {"replicasets": ""}
    store = ConsistencyStore({"replicasets": lambda: read["replicasets"]})
    store.wrote_at("ns/a", "uid-1", "replicasets", "30")
    store.wrote_at("ns/a", "uid-1", "jobs", "30")  # no informer for it: never blocks
    store.ensure_ready("ns/a")  # the informer has no version yet
    store.wrote_at("ns/a", "uid-1", "replicasets", "30")
    read["replicasets"] = "not-a-number"
    store.ensure_ready("ns/a")
    store.wrote_at("ns/a", "uid-1", "replicasets", "30")
    store.clear("ns/a", "uid-2")  # another incarnation's clear leaves this one's record
    read["replicasets"] = "10"
    with pytest.raises(StaleCache):
        store.ensure_ready("ns/a")
    store.wrote_at("ns/a", "uid-2", "replicasets", "3")  # recreated under the same name: a fresh record
    store.ensure_ready("ns/a")
    store.wrote_at("ns/a", "uid-2", "replicasets", "50")
    store.clear("ns/a")
    store.ensure_ready("ns/a")
