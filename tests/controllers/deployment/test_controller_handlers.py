"""Which informer events enqueue which Deployments (deployment_controller_test.go's handler tests), and the
sync paths decided before any rollout (SelectingAll, dropping a key after MAX_RETRIES)."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.api.meta import key_of
from controller_manager.client.errors import ServerError
from controller_manager.clock import FakeClock
from controller_manager.controllers.deployment.controller import MAX_RETRIES, DeploymentController
from controller_manager.runtime.controller import ControllerContext
from controller_manager.runtime.events import EventBroadcaster
from controller_manager.runtime.informers import Added, Deleted, SharedInformer, SharedInformerFactory, Updated
from tests.controllers.deployment.test_sync import FakeClient, new_deployment


class _Client(FakeClient):
    """The fake client plus what an (unused) informer factory and event broadcaster need to be built."""

    async def list(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        raise AssertionError("informers are not run in these tests")


def new_controller() -> tuple[DeploymentController, _Client]:
    client, clock = _Client(), FakeClock()
    factory = SharedInformerFactory(client, clock)  # type: ignore[arg-type]
    ctx = ControllerContext(client=client, informers=factory, clock=clock,  # type: ignore[arg-type]
                            events=EventBroadcaster(client, clock))  # type: ignore[arg-type]
    return DeploymentController(ctx), client


def cache(informer: SharedInformer, *objs: dict[str, Any]) -> None:
    for obj in objs:
        informer.store._put(key_of(obj), obj)


async def drain(controller: DeploymentController) -> list[str]:
    keys: list[str] = []
    while len(controller.queue):
        key = await controller.queue.get()
        if key is None:
            break
        controller.queue.done(key)
        keys.append(key)
    return keys


def owned_rs(name: str, owner: dict[str, Any] | None, labels: dict[str, str], rv: str = "1") -> dict[str, Any]:
    refs = [] if owner is None else [{"apiVersion": "apps/v1", "kind": "Deployment", "controller": True,
                                      "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"]}]
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": rv,
                         "labels": labels, "ownerReferences": refs},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels}}}


def pod_of(rs: dict[str, Any], name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "controller": True, "name": rs["metadata"]["name"],
         "uid": rs["metadata"]["uid"]}]}}


async def test_deployment_events_enqueue_the_deployment() -> None:
    dc, _ = new_controller()
    d = new_deployment("foo", 1, selector={"app": "foo"})
    dc._on_deployment(Added(d))
    assert await drain(dc) == ["default/foo"]
    dc._on_deployment(Updated(d, d))
    dc._on_deployment(Deleted(d))
    assert await drain(dc) == ["default/foo"]


async def test_replica_set_events_enqueue_their_controller_or_adopters() -> None:
    dc, _ = new_controller()
    foo = new_deployment("foo", 1, selector={"app": "foo"})
    bar = new_deployment("bar", 1, selector={"app": "bar"})
    cache(dc.d_informer, foo, bar)

    dc._on_replica_set(Added(owned_rs("foo-1", foo, {"app": "foo"})))
    assert await drain(dc) == ["default/foo"]

    stranger = dict(foo, metadata={**foo["metadata"], "uid": "someone-else"})
    dc._on_replica_set(Added(owned_rs("foo-2", stranger, {"app": "foo"})))
    assert await drain(dc) == []  # a controller reference to a Deployment we do not know

    dc._on_replica_set(Added(owned_rs("orphan", None, {"app": "bar"})))
    assert await drain(dc) == ["default/bar"]  # who may adopt it

    dc._on_replica_set(Deleted(owned_rs("orphan", None, {"app": "bar"})))
    assert await drain(dc) == []  # nobody waits for an orphan to go
    dc._on_replica_set(Deleted(owned_rs("foo-1", foo, {"app": "foo"})))
    assert await drain(dc) == ["default/foo"]


@pytest.mark.parametrize(("old_owner", "new_owner", "old_labels", "new_labels", "rv", "expected"), [
    pytest.param("foo", "foo", {"app": "foo"}, {"app": "foo"}, "1", [], id="resync: same resourceVersion"),
    pytest.param("foo", "foo", {"app": "foo"}, {"app": "foo"}, "2", ["default/foo"], id="owned: its controller"),
    pytest.param("foo", "bar", {"app": "foo"}, {"app": "foo"}, "2", ["default/foo", "default/bar"],
                 id="controller changed: both"),
    pytest.param(None, None, {"app": "foo"}, {"app": "bar"}, "2", ["default/bar"],
                 id="orphan relabelled: its new adopters"),
    pytest.param(None, None, {"app": "foo"}, {"app": "foo"}, "2", [], id="orphan unchanged: nobody"),
])
async def test_replica_set_updates(old_owner: str | None, new_owner: str | None, old_labels: dict[str, str],
                                   new_labels: dict[str, str], rv: str, expected: list[str]) -> None:
    dc, _ = new_controller()
    deployments = {name: new_deployment(name, 1, selector={"app": name}) for name in ("foo", "bar")}
    cache(dc.d_informer, *deployments.values())
    old = owned_rs("rs", deployments.get(old_owner or ""), old_labels, "1")
    cur = owned_rs("rs", deployments.get(new_owner or ""), new_labels, rv)
    dc._on_replica_set(Updated(old, cur))
    assert await drain(dc) == expected


@pytest.mark.parametrize(("strategy", "pods_left", "expected"), [
    pytest.param("Recreate", 0, ["default/foo"], id="recreate: last pod gone"),
    pytest.param("Recreate", 1, [], id="recreate: pods left"),
    pytest.param("RollingUpdate", 0, [], id="rolling update: not interested"),
])
async def test_pod_deletion_wakes_a_recreate_deployment_once_its_pods_are_gone(strategy: str, pods_left: int,
                                                                               expected: list[str]) -> None:
    dc, _ = new_controller()
    d = new_deployment("foo", 1, selector={"app": "foo"})
    d["spec"]["strategy"] = {"type": strategy}
    rs = owned_rs("foo-1", d, {"app": "foo"})
    cache(dc.d_informer, d)
    cache(dc.rs_informer, rs)
    cache(dc.pod_informer, *(pod_of(rs, f"left-{i}") for i in range(pods_left)))
    dc._on_pod(Deleted(pod_of(rs, "gone")))
    assert await drain(dc) == expected


async def test_selecting_all_is_reported_and_only_observed() -> None:
    dc, client = new_controller()
    d = new_deployment("foo", 1)
    d["spec"]["selector"] = {}
    d["metadata"]["generation"] = 2
    cache(dc.d_informer, d)
    assert await dc.sync("default/foo") is None
    [written] = client.verbs("update_status", "deployments")
    assert written["status"] == {"observedGeneration": 2}
    assert client.verbs("create") == []


async def test_key_is_dropped_after_max_retries() -> None:
    dc, client = new_controller()
    d = new_deployment("foo", 1, selector={"app": "foo"})
    cache(dc.d_informer, d)
    client.fail("create", "replicasets", ServerError(500, "InternalError", "boom"))
    with pytest.raises(ServerError):
        await dc.sync("default/foo")
    assert dc.max_retries == MAX_RETRIES
    for _ in range(MAX_RETRIES):
        dc.queue.add_rate_limited("default/foo")
    # The runner's step: past the retry budget the failure is logged and the key dropped (upstream's
    # handleErr), not requeued.
    dc.queue.add("default/foo")
    waiting = dc.queue.waiting()
    assert await dc.process_next(dc.queue, dc.sync)
    assert dc.queue.num_requeues("default/foo") == 0
    assert len(dc.queue) == 0
    assert dc.queue.waiting() == waiting
