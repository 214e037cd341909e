"""A DaemonSet's sync walks its own pods, not the other DaemonSets' pods of its namespace (kube-system holds one
pod per node for each of them: 10,000 with two DaemonSets on 5,000 nodes)."""

from __future__ import annotations

from typing import Any

from bench.walks import StoreWalks
from controller_manager.api.meta import key_of
from controller_manager.api.selectors import from_label_selector
from controller_manager.clock import FakeClock
from controller_manager.controllers.daemonset import DaemonSetController
from controller_manager.runtime.controller import ControllerContext
from controller_manager.runtime.events import EventBroadcaster
from controller_manager.runtime.informers import SharedInformerFactory


class NoWrites:
    """Every pod here is already owned: claiming them needs no API call."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"unexpected API call: {name}")


def _ds(name: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": "kube-system", "uid": f"uid-{name}", "generation": 1},
            "spec": {"selector": {"matchLabels": {"app": "agent"}},  # both select the same labels
                     "template": {"metadata": {"labels": {"app": "agent"}}, "spec": {"containers": [{"name": "c"}]}}}}


def _pod(ds: dict[str, Any], node: str) -> dict[str, Any]:
    name = ds["metadata"]["name"]
    return {"metadata": {"name": f"{name}-{node}", "namespace": "kube-system", "uid": f"{name}-{node}",
                         "labels": {"app": "agent"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name,
                                              "uid": ds["metadata"]["uid"], "controller": True}]},
            "spec": {"nodeName": node}, "status": {"phase": "Running"}}


async def test_a_daemon_sets_pods_are_found_without_walking_the_other_daemon_sets_pods() -> None:
    client: Any = NoWrites()
    clock = FakeClock()
    ctrl = DaemonSetController(ControllerContext(client=client, informers=SharedInformerFactory(client, clock),
                                                 clock=clock, events=EventBroadcaster(client, clock)))
    mine, theirs = _ds("mine"), _ds("theirs")
    for node in range(3):
        pod = _pod(mine, f"node-{node}")
        ctrl.pod_informer.store._put(key_of(pod), pod)
    for node in range(300):
        pod = _pod(theirs, f"node-{node}")
        ctrl.pod_informer.store._put(key_of(pod), pod)
    with StoreWalks() as walks:
        by_node = await ctrl._node_pods(mine, from_label_selector(mine["spec"]["selector"]))
    assert sorted(by_node) == ["node-0", "node-1", "node-2"]
    assert sorted(p["metadata"]["name"] for pods in by_node.values() for p in pods) == [
        "mine-node-0", "mine-node-1", "mine-node-2"]
    assert walks.objects == 3
