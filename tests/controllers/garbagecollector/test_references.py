"""Dangling and mismatched ownerReferences against kube-sim, as a client sees the outcome: what is deleted,
what is kept, and the Warning events recorded."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from controller_manager.api.meta import meta
from controller_manager.api.resources import CONFIGMAPS, NAMESPACES
from controller_manager.client.errors import NotFound
from controller_manager.controllers.garbagecollector import GarbageCollector
from tests.controllers.harness import Harness, controller_harness, wait_for


@pytest.fixture
async def h() -> AsyncIterator[Harness]:
    async with controller_harness(GarbageCollector, nodes=1, options={"concurrent_gc_syncs": 2}) as harness:
        gc = harness.controller(GarbageCollector)

        async def ready() -> bool:
            return gc.is_synced() and gc.workers_started

        await wait_for(ready, timeout=20, what="the garbage collector to sync")
        yield harness


def cm(name: str, namespace: str = "default", *owners: dict[str, Any]) -> dict[str, Any]:
    m: dict[str, Any] = {"name": name, "namespace": namespace}
    if owners:
        m["ownerReferences"] = list(owners)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": m}


def owned_by(obj: dict[str, Any], **extra: Any) -> dict[str, Any]:
    m = meta(obj)
    return {"apiVersion": "v1", "kind": obj.get("kind", "ConfigMap"), "name": m["name"], "uid": m["uid"], **extra}


async def exists(h: Harness, name: str, namespace: str = "default") -> bool:
    try:
        await h.client.get(CONFIGMAPS, name, namespace)
    except NotFound:
        return False
    return True


async def test_dependent_of_a_missing_owner_is_deleted_and_of_a_live_owner_kept(h: Harness) -> None:
    owner = await h.client.create(CONFIGMAPS, cm("owner"))
    await h.client.create(CONFIGMAPS, cm("kept", "default", owned_by(owner)))
    ghost = {"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost", "uid": "00000000-0000-0000-0000-000000000001"}
    await h.client.create(CONFIGMAPS, cm("dangling", "default", ghost))
    # The owner's name exists, but with another uid: that is another object, so this owner is absent too.
    await h.client.create(CONFIGMAPS, cm("mismatched", "default", {**owned_by(owner), "uid": "not-the-owner"}))
    # One live owner is enough: only the dangling reference is removed.
    await h.client.create(CONFIGMAPS, cm("half", "default", owned_by(owner), ghost))

    async def collected() -> bool:
        return not await exists(h, "dangling") and not await exists(h, "mismatched")

    await wait_for(collected, timeout=15, what="dependents of absent owners to be deleted")

    async def trimmed() -> bool:
        refs = meta(await h.client.get(CONFIGMAPS, "half", "default")).get("ownerReferences") or []
        return [r["uid"] for r in refs] == [meta(owner)["uid"]]

    await wait_for(trimmed, timeout=15, what="the dangling reference to be removed")
    assert await exists(h, "kept")
    assert await exists(h, "owner")


async def test_owner_in_another_namespace_is_absent_and_reported(h: Harness) -> None:
    await h.client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    owner = await h.client.create(CONFIGMAPS, cm("owner", "other"))
    await h.client.create(CONFIGMAPS, cm("cross", "default", owned_by(owner)))

    async def collected() -> bool:
        return not await exists(h, "cross")

    await wait_for(collected, timeout=15, what="the cross-namespace dependent to be deleted")
    assert await exists(h, "owner", "other")

    async def reported() -> list[dict[str, Any]]:
        return [e for e in await h.events_for("cross") if e.get("reason") == "OwnerRefInvalidNamespace"]

    events = await wait_for(reported, timeout=10, what="an OwnerRefInvalidNamespace event")
    assert events[0]["type"] == "Warning"
    assert events[0]["message"] == (f"ownerRef [v1/ConfigMap, namespace: default, name: owner, uid: "
                                    f"{meta(owner)['uid']}] does not exist in namespace \"default\"")
    assert events[0]["source"]["component"] == "garbage-collector-controller"


async def test_cluster_scoped_dependent_of_a_namespaced_owner_is_kept_and_reported(h: Harness) -> None:
    owner = await h.client.create(CONFIGMAPS, cm("ns-owner"))
    await h.client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                       "metadata": {"name": "owned-ns", "ownerReferences": [owned_by(owner)]}})

    async def reported() -> list[dict[str, Any]]:
        return [e for e in await h.events_for("owned-ns") if e.get("reason") == "OwnerRefInvalidNamespace"]

    events = await wait_for(reported, timeout=15, what="an OwnerRefInvalidNamespace event")
    assert events[0]["involvedObject"]["kind"] == "Namespace"
    assert events[0]["message"] == (f"ownerRef [v1/ConfigMap, namespace: , name: ns-owner, uid: {meta(owner)['uid']}] "
                                    f"does not exist in namespace \"\"")
    # Upstream never deletes it: the reference is invalid, not the object.
    ns = await h.client.get(NAMESPACES, "owned-ns")
    assert meta(ns).get("deletionTimestamp") is None
