"""The quota monitor (resource_quota_monitor.go): which discovered resources it watches, the object-count
evaluators it adds, and which changes replenish a namespace's quotas."""

from __future__ import annotations

from typing import Any, cast

import structlog

from controller_manager.api.resources import DEPLOYMENTS, EVENTS, PODS, SERVICES, Resource
from controller_manager.client import ApiClient
from controller_manager.clock import FakeClock
from controller_manager.controllers.resourcequota.evaluators import Registry
from controller_manager.controllers.resourcequota.monitor import QuotaMonitor, quotable_resources
from controller_manager.runtime.informers import Added, Deleted, SharedInformerFactory, Updated

NOW = 1_700_000_000.0


def _resource(plural: str, *, namespaced: bool = True, verbs: tuple[str, ...] = ("create", "delete", "list", "watch"),
              group: str = "example.com", version: str = "v1") -> Resource:
    return Resource(group, version, plural, plural.title(), namespaced, verbs=verbs)


def test_quotable_resources_are_namespaced_preferred_and_fully_verbed() -> None:
    found = [_resource("widgets"), _resource("widgets", version="v1beta1"), _resource("nodes", namespaced=False),
             _resource("readonly", verbs=("list", "watch")), _resource("gadgets", version="v2")]
    assert sorted(quotable_resources(found)) == [("example.com", "v1", "widgets"), ("example.com", "v2", "gadgets")]


def _monitor() -> tuple[QuotaMonitor, list[tuple[str, str]]]:
    clock = FakeClock(NOW)
    client = cast(ApiClient, object())
    replenished: list[tuple[str, str]] = []
    qm = QuotaMonitor(SharedInformerFactory(client, clock), Registry(),
                      lambda res, ns: replenished.append((res.group_resource, ns)), clock,
                      structlog.get_logger("test"))
    return qm, replenished


def _gvr(res: Resource) -> tuple[str, str, str]:
    return (res.group, res.version, res.plural)


def _obj(**fields: Any) -> dict[str, Any]:
    return {"metadata": {"name": "x", "namespace": "ns"}, **fields}


def test_sync_monitors_adds_count_evaluators_and_skips_ignored_kinds() -> None:
    qm, _ = _monitor()
    assert qm.sync_monitors({_gvr(r): r for r in (PODS, DEPLOYMENTS, EVENTS)}) == []
    assert sorted(qm.monitors) == [("", "v1", "pods"), ("apps", "v1", "deployments")]
    evaluator = qm.registry.get("apps", "deployments")
    assert evaluator is not None
    assert evaluator.matching_resources(["count/deployments.apps", "pods"]) == ["count/deployments.apps"]
    assert not qm.is_synced()  # nothing has listed yet
    first = qm.monitors[_gvr(PODS)]
    qm.sync_monitors({_gvr(PODS): PODS})
    assert qm.monitors == {_gvr(PODS): first}  # kept, not rebuilt
    assert qm.registry.get("apps", "deployments") is evaluator


def test_deletes_and_charge_lowering_updates_replenish() -> None:
    qm, replenished = _monitor()
    qm.sync_monitors({_gvr(PODS): PODS, _gvr(SERVICES): SERVICES, _gvr(DEPLOYMENTS): DEPLOYMENTS})
    pods = qm._handler(qm.monitors[_gvr(PODS)])
    running = _obj(spec={}, status={"phase": "Running"})
    pods(Added(running))
    pods(Updated(running, running))  # a resync
    pods(Updated(running, _obj(spec={"nodeName": "n"}, status={"phase": "Running"})))
    assert replenished == []
    pods(Updated(running, _obj(spec={}, status={"phase": "Failed"})))
    pods(Deleted(running, final_state_unknown=True))
    services = qm._handler(qm.monitors[_gvr(SERVICES)])
    services(Updated(_obj(spec={"type": "LoadBalancer"}), _obj(spec={"type": "ClusterIP"})))
    deployments = qm._handler(qm.monitors[_gvr(DEPLOYMENTS)])
    deployments(Updated(_obj(spec={"replicas": 1}), _obj(spec={"replicas": 0})))
    deployments(Deleted(_obj()))
    assert replenished == [("pods", "ns"), ("pods", "ns"), ("services", "ns"), ("deployments.apps", "ns")]
    # A monitor dropped by a later discovery acts on nothing more.
    qm.sync_monitors({_gvr(PODS): PODS})
    deployments(Deleted(_obj()))
    assert len(replenished) == 4
