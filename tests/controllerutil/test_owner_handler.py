"""The owner-aware handler: which owner keys an event on an owned object wakes, and which hooks it calls."""

from __future__ import annotations

from typing import Any

import structlog

from controller_manager.api.meta import key_of
from controller_manager.api.resources import REPLICASETS
from controller_manager.clock import FakeClock
from controller_manager.controllerutil.owner_handler import DeletionStart, OwnerHandler
from controller_manager.controllerutil.selector_cache import SelectorCache
from controller_manager.runtime.informers import NAMESPACE_INDEX, Added, Deleted, Updated
from controller_manager.runtime.informers.store import Store
from controller_manager.runtime.workqueue import RateLimitingQueue

Obj = dict[str, Any]


def owner(name: str, selector: dict[str, Any] | None, namespace: str = "ns", min_ready: int = 0) -> Obj:
    spec: dict[str, Any] = {"minReadySeconds": min_ready} if min_ready else {}
    if selector is not None:
        spec["selector"] = selector
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "resourceVersion": "1"},
            "spec": spec}


def pod(name: str, rv: str = "1", labels: dict[str, str] | None = None, controller: Obj | None = None,
        deleting: bool = False, ready: bool = False, namespace: str = "ns") -> Obj:
    m: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}", "resourceVersion": rv}
    if labels is not None:
        m["labels"] = labels
    if controller is not None:
        m["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": controller["metadata"]["name"],
                                 "uid": controller["metadata"]["uid"], "controller": True}]
    if deleting:
        m["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    status = {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": m, "status": status}


class Rig:
    def __init__(self, *owners: Obj, deletion_start: DeletionStart = "deleted", skew: float | None = None,
                 wake_on_owned_add: bool = True, cache_selectors: bool = False, veto: bool = False) -> None:
        self.clock = FakeClock()
        self.store = Store({NAMESPACE_INDEX: lambda o: [str(o["metadata"].get("namespace") or "")]})
        for o in owners:
            self.store._put(key_of(o), o)
        self.queue: RateLimitingQueue[str] = RateLimitingQueue("owner_handler_test", clock=self.clock)
        self.calls: list[tuple[Any, ...]] = []

        def deleted(o: Obj | None, obj: Obj, final: bool) -> bool | None:
            self.calls.append(("deleted", o and o["metadata"]["name"], obj["metadata"]["name"], final))
            return False if veto else None

        self.handler = OwnerHandler(
            self.store, REPLICASETS, self.queue, log=structlog.get_logger("test"),
            selectors=SelectorCache() if cache_selectors else None, deletion_start=deletion_start,
            wake_on_owned_add=wake_on_owned_add, ready_requeue_skew=skew,
            created=lambda o, obj: self.calls.append(("created", o["metadata"]["name"], obj["metadata"]["name"])),
            updated=lambda o, old, cur: self.calls.append(("updated", o["metadata"]["name"], cur["metadata"]["name"])),
            deleted=deleted,
            orphan=lambda obj: self.calls.append(("orphan", obj["metadata"]["name"])))

    async def woken(self) -> list[str]:
        keys = []
        while len(self.queue):
            key = await self.queue.get()
            assert key is not None
            keys.append(key)
            self.queue.done(key)
        return sorted(keys)


SEL = {"matchLabels": {"app": "a"}}


async def test_orphan_wakes_every_owner_whose_selector_matches() -> None:
    for cache_selectors in (False, True):
        rig = Rig(owner("a", SEL), owner("b", {"matchLabels": {"app": "a"}, "matchExpressions": []}),
                  owner("empty", {}), owner("none", None), owner("other", SEL, namespace="elsewhere"),
                  owner("bad", {"matchExpressions": [{"key": "app", "operator": "Bogus", "values": ["a"]}]}),
                  owner("miss", {"matchLabels": {"app": "z"}}), cache_selectors=cache_selectors)
        rig.handler.on_event(Added(pod("p", labels={"app": "a"})))
        assert await rig.woken() == ["ns/a", "ns/b"]
        assert rig.calls == [("orphan", "p")]
        rig.handler.on_event(Added(pod("unlabelled")))
        assert await rig.woken() == []


async def test_owned_add_counts_a_creation_and_wakes_only_its_owner() -> None:
    a, b = owner("a", SEL), owner("b", SEL)
    rig = Rig(a, b)
    rig.handler.on_event(Added(pod("p", labels={"app": "a"}, controller=a)))
    assert await rig.woken() == ["ns/a"]
    assert rig.calls == [("created", "a", "p")]
    # A controller not in the cache (or with another UID) is nobody's business: no orphan matching either.
    stranger = {**owner("a", SEL), "metadata": {**a["metadata"], "uid": "other-uid"}}
    rig.handler.on_event(Added(pod("q", labels={"app": "a"}, controller=stranger)))
    assert await rig.woken() == []


async def test_owned_add_may_wake_nobody() -> None:
    a = owner("a", SEL)
    rig = Rig(a, wake_on_owned_add=False)
    rig.handler.on_event(Added(pod("p", controller=a)))
    assert await rig.woken() == []
    assert rig.calls == [("created", "a", "p")]


async def test_added_while_being_deleted_is_a_deletion() -> None:
    a = owner("a", SEL)
    rig = Rig(a)
    rig.handler.on_event(Added(pod("p", controller=a, deleting=True)))
    assert await rig.woken() == ["ns/a"]
    assert rig.calls == [("deleted", "a", "p", False)]


async def test_controller_ref_change_wakes_old_and_new_owner() -> None:
    a, b = owner("a", SEL), owner("b", {"matchLabels": {"app": "b"}})
    rig = Rig(a, b)
    old = pod("p", "1", labels={"app": "a"}, controller=a)
    rig.handler.on_event(Updated(old, pod("p", "2", labels={"app": "a"}, controller=b)))
    assert await rig.woken() == ["ns/a", "ns/b"]
    assert rig.calls == [("updated", "a", "p"), ("updated", "b", "p")]


async def test_released_pod_wakes_old_owner_and_matching_owners() -> None:
    a, b = owner("a", SEL), owner("b", {"matchLabels": {"app": "b"}})
    rig = Rig(a, b)
    rig.handler.on_event(Updated(pod("p", "1", labels={"app": "a"}, controller=a), pod("p", "2", labels={"app": "b"})))
    assert await rig.woken() == ["ns/a", "ns/b"]
    assert rig.calls == [("updated", "a", "p"), ("orphan", "p")]


async def test_orphan_update_wakes_matching_owners_only_when_labels_change() -> None:
    rig = Rig(owner("a", SEL))
    rig.handler.on_event(Updated(pod("p", "1", labels={"app": "a"}), pod("p", "2", labels={"app": "a"})))
    assert await rig.woken() == []
    rig.handler.on_event(Updated(pod("p", "2", labels={"app": "x"}), pod("p", "3", labels={"app": "a"})))
    assert await rig.woken() == ["ns/a"]


async def test_resync_does_nothing() -> None:
    a = owner("a", SEL)
    rig = Rig(a)
    same = pod("p", "1", labels={"app": "a"}, controller=a)
    rig.handler.on_event(Updated(same, same))
    assert await rig.woken() == []
    assert rig.calls == []


async def test_deletion_start_policies() -> None:
    a, b = owner("a", SEL), owner("b", {"matchLabels": {"app": "b"}})
    old = pod("p", "1", labels={"app": "a"}, controller=a)
    cur = pod("p", "2", labels={"app": "b"}, controller=a, deleting=True)

    rig = Rig(a, b, deletion_start="deleted")
    rig.handler.on_event(Updated(old, cur))
    assert await rig.woken() == ["ns/a"]
    assert rig.calls == [("deleted", "a", "p", False)]

    rig = Rig(a, b, deletion_start="deleted_old_too")
    rig.handler.on_event(Updated(old, cur))
    assert await rig.woken() == ["ns/a"]
    assert rig.calls == [("deleted", "a", "p", False), ("deleted", "a", "p", False)]

    rig = Rig(a, b, deletion_start="ignore")
    rig.handler.on_event(Updated(old, cur))
    assert await rig.woken() == ["ns/a"]
    assert rig.calls == [("updated", "a", "p")]


async def test_delete_and_tombstone_wake_the_owner_orphans_nobody() -> None:
    a = owner("a", SEL)
    rig = Rig(a)
    rig.handler.on_event(Deleted(pod("p", controller=a), final_state_unknown=True))
    assert await rig.woken() == ["ns/a"]
    rig.handler.on_event(Deleted(pod("orphan", labels={"app": "a"})))
    assert await rig.woken() == []
    assert rig.calls == [("deleted", "a", "p", True), ("deleted", None, "orphan", True)]


async def test_deleted_hook_may_keep_the_owner_asleep() -> None:
    a = owner("a", SEL)
    rig = Rig(a, veto=True)
    rig.handler.on_event(Deleted(pod("p", controller=a)))
    assert await rig.woken() == []
    assert rig.calls == [("deleted", "a", "p", True)]


async def test_turning_ready_wakes_the_owner_again_after_min_ready_seconds() -> None:
    a = owner("a", SEL, min_ready=10)
    rig = Rig(a, skew=1.0)
    rig.handler.on_event(Updated(pod("p", "1", controller=a), pod("p", "2", controller=a, ready=True)))
    assert await rig.woken() == ["ns/a"]
    rig.clock.advance(10.9)
    assert await rig.woken() == []
    rig.clock.advance(0.2)
    assert await rig.woken() == ["ns/a"]
    # Without a skew configured, readiness wakes nobody later.
    rig = Rig(a)
    rig.handler.on_event(Updated(pod("p", "1", controller=a), pod("p", "2", controller=a, ready=True)))
    assert await rig.woken() == ["ns/a"]
    rig.clock.advance(60.0)
    assert await rig.woken() == []
