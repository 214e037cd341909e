"""Bad input the API server would normally refuse still never crashes the DaemonSet controller: it is logged,
reported as a Warning Event on the DaemonSet, and skipped (no API write at all)."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.api.meta import key_of
from controller_manager.clock import FakeClock
from controller_manager.controllers.daemonset import DaemonSetController
from controller_manager.runtime.controller import ControllerContext
from controller_manager.runtime.events import EventBroadcaster
from controller_manager.runtime.informers import Added, SharedInformerFactory, Updated


class NoWrites:
    """A client that fails the test on any call: skipped DaemonSets must not touch the API."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"unexpected API call: {name}")


def _controller() -> tuple[DaemonSetController, list[tuple[str, str, str]]]:
    client: Any = NoWrites()
    clock = FakeClock()
    ctx = ControllerContext(client=client, informers=SharedInformerFactory(client, clock), clock=clock,
                            events=EventBroadcaster(client, clock))
    controller = DaemonSetController(ctx)
    events: list[tuple[str, str, str]] = []

    def record(obj: Any, type_: str, reason: str, message: str, **_: Any) -> None:
        events.append((type_, reason, message))

    controller.recorder.event = record  # type: ignore[method-assign,assignment]
    return controller, events


def _ds(selector: Any, labels: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"metadata": {"labels": labels or {"app": "x"}},
                                         "spec": {"containers": [{"name": "c", "image": "i"}]}}}
    if selector is not ...:
        spec["selector"] = selector
    return {"metadata": {"name": "ds", "namespace": "default", "uid": "u1", "generation": 1}, "spec": spec}


@pytest.mark.parametrize(("ds", "reason"), [
    pytest.param(_ds({}), "SelectingAll", id="empty selector selects everything"),
    pytest.param(_ds({"matchLabels": {}}), "SelectingAll", id="empty matchLabels selects everything"),
    pytest.param(_ds(...), "InvalidSelector", id="no selector selects nothing"),
    pytest.param(_ds({"matchExpressions": [{"key": "a", "operator": "Bogus"}]}), "InvalidSelector",
                 id="unparsable selector"),
    pytest.param(_ds({"matchLabels": {"app": "y"}}), "InvalidSelector", id="selector not matching the template"),
])
async def test_bad_selectors_are_reported_and_skipped(ds: dict[str, Any], reason: str) -> None:
    controller, events = _controller()
    controller.ds_informer.store._put(key_of(ds), ds)
    assert await controller.sync(key_of(ds)) is None
    assert [(t, r) for t, r, _ in events] == [("Warning", reason)]
    if reason == "SelectingAll":
        assert events[0][2] == "This daemon set is selecting all pods. A non-empty selector is required."


def test_malformed_nodes_keep_their_pods_and_are_reported() -> None:
    controller, events = _controller()
    good = {"metadata": {"name": "good", "labels": {}}, "spec": {}}
    bad = {"metadata": {"name": "bad"}, "spec": {"taints": [{"key": "k", "effect": "Sometimes"}]}}
    placement = controller._placement(_ds({"matchLabels": {"app": "x"}}), [good, bad])
    assert placement == {"good": (True, True), "bad": (False, True)}
    assert len(events) == 1
    assert events[0][:2] == ("Warning", "FailedPlacement")
    assert events[0][2].startswith("failed to place pod on 'bad': taint k has an unknown effect")


def test_node_events_with_malformed_nodes_do_not_raise() -> None:
    controller, _ = _controller()
    ds = _ds({"matchLabels": {"app": "x"}})
    controller.ds_informer.store._put(key_of(ds), ds)
    bad = {"metadata": {"name": "bad", "labels": ["oops"]}, "spec": {"taints": "nope"}}
    controller.handlers.on_node(Added(bad))
    controller.handlers.on_node(Updated({"metadata": {"name": "bad"}}, bad))
    assert len(controller.queue) == 1  # the DaemonSet is synced, where the node gets reported
