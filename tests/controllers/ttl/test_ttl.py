"""The TTL controller's tables (ttl_controller_test.go: TestPatchNode, TestUpdateNodeIfNeeded, TestDesiredTTL)
and its handlers, against a recording client and informer caches filled by hand."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from controller_manager.api.meta import key_of
from controller_manager.api.resources import NODES, Resource
from controller_manager.client.errors import ServerError
from controller_manager.clock import FakeClock
from controller_manager.controllers.ttl import TTL_ANNOTATION, TTL_BOUNDARIES, TTLController
from controller_manager.controllers.ttl.controller import annotation_int
from controller_manager.runtime.controller import ControllerContext
from controller_manager.runtime.events import EventBroadcaster
from controller_manager.runtime.informers import Added, Deleted, SharedInformerFactory, Updated


@dataclass
class PatchRecorder:
    """Records patches; ``error`` makes every patch fail."""

    error: Exception | None = None
    patches: list[tuple[str, str, Any, str | None, str]] = field(default_factory=list)

    async def patch(self, res: Resource, name: str, patch: Any, namespace: str | None = None, *,
                    patch_type: str = "merge", subresource: str | None = None) -> dict[str, Any]:
        self.patches.append((res.plural, name, patch, namespace, patch_type))
        if self.error is not None:
            raise self.error
        return {"metadata": {"name": name}}


def new_controller(client: PatchRecorder | None = None) -> tuple[TTLController, PatchRecorder]:
    client = client or PatchRecorder()
    clock = FakeClock()
    ctx = ControllerContext(client=client, informers=SharedInformerFactory(client, clock),  # type: ignore[arg-type]
                            clock=clock, events=EventBroadcaster(client, clock))  # type: ignore[arg-type]
    return TTLController(ctx), client


def node(name: str = "name", annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "resourceVersion": "1"}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta}


def ttl_patch(value: str) -> dict[str, Any]:
    return {"metadata": {"annotations": {TTL_ANNOTATION: value}}}


@pytest.mark.parametrize(("obj", "ttl", "value"), [
    (node(""), 0, "0"),
    (node(""), 10, "10"),
    (node("name"), 10, "10"),
    (node("name", {}), 10, "10"),
    (node("name", {TTL_ANNOTATION: "0"}), 10, "10"),
    (node("name", {TTL_ANNOTATION: "0", "a": "b"}), 10, "10"),
    (node("name", {TTL_ANNOTATION: "10", "a": "b"}), 10, "10"),  # always sent (upstream's "{}" is a no-op)
])
async def test_patch_node(obj: dict[str, Any], ttl: int, value: str) -> None:
    """TestPatchNode: one strategic-merge patch of nodes carrying only the annotation."""
    controller, client = new_controller()
    await controller.patch_node(obj, ttl)
    assert client.patches == [("nodes", obj["metadata"]["name"], ttl_patch(value), None, "strategic")]


@pytest.mark.parametrize(("obj", "desired", "value"), [
    (node("name"), 0, "0"),
    (node("name"), 15, "15"),
    (node("name"), 30, "30"),
    (node("name", {TTL_ANNOTATION: "0"}), 60, "60"),
    (node("name", {TTL_ANNOTATION: "60"}), 60, None),
    (node("name", {TTL_ANNOTATION: "60"}), 30, "30"),
    # beyond upstream's table: a value that is not an integer is overwritten
    (node("name", {TTL_ANNOTATION: "sixty"}), 0, "0"),
    (node("name", {TTL_ANNOTATION: " 0"}), 0, "0"),
    (node("name", {TTL_ANNOTATION: "+0"}), 0, None),  # strconv.Atoi reads "+0" as 0
])
async def test_update_node_if_needed(obj: dict[str, Any], desired: int, value: str | None) -> None:
    """TestUpdateNodeIfNeeded."""
    controller, client = new_controller()
    controller.node_informer.store._put(key_of(obj), obj)
    controller.desired_ttl_seconds = desired
    assert await controller.sync(key_of(obj)) is None
    expected = [] if value is None else [("nodes", "name", ttl_patch(value), None, "strategic")]
    assert client.patches == expected


async def test_a_node_gone_from_the_cache_is_nothing_to_do() -> None:
    controller, client = new_controller()
    assert await controller.sync("missing") is None
    assert client.patches == []


async def test_a_failed_patch_is_raised_for_a_retry() -> None:
    controller, _ = new_controller(PatchRecorder(error=ServerError(500, "InternalError", "boom")))
    obj = node()
    controller.node_informer.store._put(key_of(obj), obj)
    with pytest.raises(ServerError):
        await controller.sync(key_of(obj))


@pytest.mark.parametrize(("add", "node_count", "desired", "step", "expected"), [
    (True, 0, 0, 0, 0),
    (True, 99, 0, 0, 0),
    (True, 100, 0, 0, 15),
    (False, 101, 15, 1, 15),
    (False, 91, 15, 1, 15),
    (True, 91, 15, 1, 15),
    (False, 90, 15, 1, 0),
])
def test_desired_ttl(add: bool, node_count: int, desired: int, step: int, expected: int) -> None:
    """TestDesiredTTL: one add or delete from a given state."""
    controller, _ = new_controller()
    controller.node_count, controller.desired_ttl_seconds, controller.boundary_step = node_count, desired, step
    if add:
        controller.add_node(node())
    else:
        controller.delete_node(node())
    assert controller.desired_ttl_seconds == expected


def test_ttl_follows_cluster_size_with_hysteresis_across_every_range() -> None:
    controller, _ = new_controller()
    seen: dict[int, int] = {}
    for n in range(1, 2002):
        controller.add_node(node(f"n{n}"))
        seen[n] = controller.desired_ttl_seconds
    assert (seen[100], seen[101], seen[500], seen[501], seen[1000], seen[1001], seen[2000], seen[2001]) == (
        0, 15, 15, 30, 30, 60, 60, 300)
    going_down: dict[int, int] = {}
    for n in range(2000, 0, -1):
        controller.delete_node(node(f"n{n + 1}"))
        going_down[n] = controller.desired_ttl_seconds
    assert (going_down[1800], going_down[1799], going_down[900], going_down[899], going_down[450],
            going_down[449], going_down[90], going_down[89]) == (300, 60, 60, 30, 30, 15, 15, 0)
    assert controller.boundary_step == 0
    assert [b.ttl_seconds for b in TTL_BOUNDARIES] == [0, 15, 30, 60, 300]


async def test_handlers_queue_added_and_updated_nodes_never_deleted_ones() -> None:
    controller, _ = new_controller()
    a, b = node("a"), node("b")
    controller._on_node(Added(a))
    controller._on_node(Added(b))
    controller._on_node(Updated(a, a))  # resyncs too
    assert controller.node_count == 2
    keys = []
    while len(controller.queue):
        key = await controller.queue.get()
        assert key is not None
        controller.queue.done(key)
        keys.append(key)
    assert keys == ["a", "b"]
    controller._on_node(Deleted(b, final_state_unknown=True))
    assert controller.node_count == 1
    assert len(controller.queue) == 0


def test_identity_matches_upstream() -> None:
    assert (TTLController.name, TTLController.alias, TTLController.workers_option) == ("ttl-controller", "ttl", None)
    assert TTLController.default_workers == 5
    controller, _ = new_controller()
    assert controller.queue.name == "ttlcontroller"
    assert controller.node_informer.resource is NODES


@pytest.mark.parametrize(("annotations", "expected"), [
    (None, None), ({}, None), ({TTL_ANNOTATION: "15"}, 15), ({TTL_ANNOTATION: "-5"}, -5),
    ({TTL_ANNOTATION: "1_0"}, None), ({TTL_ANNOTATION: ""}, None), ({TTL_ANNOTATION: "15s"}, None),
])
def test_annotation_int(annotations: dict[str, str] | None, expected: int | None) -> None:
    assert annotation_int(node(annotations=annotations), TTL_ANNOTATION) == expected
