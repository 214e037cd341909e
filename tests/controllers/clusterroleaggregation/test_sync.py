"""The ClusterRole aggregation controller's table (clusterroleaggregation_controller_test.go: TestSyncClusterRole,
with server-side apply and with the update fallback) and its handler, against a recording client and an
informer cache filled by hand."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from controller_manager.api.resources import Resource
from controller_manager.client.errors import UnsupportedMediaType
from controller_manager.clock import FakeClock
from controller_manager.controllers.clusterroleaggregation import ClusterRoleAggregationController
from controller_manager.controllers.clusterroleaggregation.controller import (
    FIELD_MANAGER,
    aggregated_rules,
    rules_equal,
)
from controller_manager.runtime.controller import ControllerContext
from controller_manager.runtime.events import EventBroadcaster
from controller_manager.runtime.informers import Added, Deleted, SharedInformerFactory, Updated


@dataclass
class Recorder:
    """Records applies and updates; ``ssa=False`` answers applies 415, as a server without server-side apply."""

    ssa: bool = True
    actions: list[tuple[str, str, Any, dict[str, Any]]] = field(default_factory=list)

    async def apply(self, res: Resource, obj: Mapping[str, Any], namespace: str | None = None, *,
                    field_manager: str, force: bool = False) -> dict[str, Any]:
        self.actions.append(("apply", res.plural, dict(obj), {"field_manager": field_manager, "force": force}))
        if not self.ssa:
            raise UnsupportedMediaType(415, "UnsupportedMediaType", "Apply not supported")
        return dict(obj)

    async def update(self, res: Resource, obj: Mapping[str, Any]) -> dict[str, Any]:
        self.actions.append(("update", res.plural, dict(obj), {}))
        return dict(obj)


def new_controller(roles: list[dict[str, Any]], ssa: bool = True) -> tuple[ClusterRoleAggregationController, Recorder]:
    client = Recorder(ssa=ssa)
    clock = FakeClock()
    ctx = ControllerContext(client=client, informers=SharedInformerFactory(client, clock),  # type: ignore[arg-type]
                            clock=clock, events=EventBroadcaster(client, clock))  # type: ignore[arg-type]
    controller = ClusterRoleAggregationController(ctx)
    for role in roles:
        controller.informer.store._put(role["metadata"]["name"], role)
    return controller, client


def hammer() -> list[dict[str, Any]]:
    return [{"verbs": ["hammer"], "resources": ["nails"]}, {"verbs": ["hammer"], "resources": ["wedges"]}]


def chisel() -> list[dict[str, Any]]:
    return [{"verbs": ["chisel"], "resources": ["mortises"]}]


def saw() -> list[dict[str, Any]]:
    return [{"verbs": ["saw"], "resources": ["boards"]}]


def role(name: str, labels: dict[str, str], rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name, "labels": labels, "resourceVersion": "1"}, "rules": rules}


def combined(selectors: list[dict[str, str]], *rules: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "combined", "resourceVersion": "1"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": s} for s in selectors]}}
    flat = [r for group in rules for r in group]
    if flat:
        out["rules"] = flat
    return out


def combined_apply(*rules: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                           "metadata": {"name": "combined"}}
    flat = [r for group in rules for r in group]
    if flat:
        out["rules"] = flat
    return out


BAR, NOT_BAR = {"foo": "bar"}, {"foo": "not-bar"}

CASES = [
    pytest.param([role("hammer", BAR, hammer()), combined([BAR], saw())],
                 combined([BAR], hammer()), combined_apply(hammer()), id="remove dead rules"),
    pytest.param([role("hammer", NOT_BAR, hammer()), combined([BAR], hammer())],
                 combined([BAR]), combined_apply(), id="strip rules"),
    pytest.param([role("hammer", BAR, hammer()), role("chisel", BAR, chisel()), role("saw", NOT_BAR, saw()),
                  combined([BAR])],
                 combined([BAR], chisel(), hammer()), combined_apply(chisel(), hammer()),
                 id="select properly and put in order"),
    pytest.param([role("hammer", BAR, hammer()), role("chisel", BAR, chisel()), role("saw", NOT_BAR, saw()),
                  combined([BAR, NOT_BAR])],
                 combined([BAR, NOT_BAR], chisel(), hammer(), saw()), combined_apply(chisel(), hammer(), saw()),
                 id="select properly with multiple selectors"),
    pytest.param([role("hammer", BAR, hammer()), role("chisel", BAR, chisel()), role("saw", BAR, saw()),
                  role("other-saw", NOT_BAR, saw()), combined([BAR, NOT_BAR])],
                 combined([BAR, NOT_BAR], chisel(), hammer(), saw()), combined_apply(chisel(), hammer(), saw()),
                 id="select properly remove duplicates"),
    pytest.param([role("hammer", BAR, hammer()), combined([BAR], hammer())], None, None, id="no diff skip"),
]


@pytest.mark.parametrize("ssa", [True, False], ids=["server-side apply", "update fallback"])
@pytest.mark.parametrize(("roles", "expected_role", "expected_apply"), CASES)
async def test_sync_cluster_role(roles: list[dict[str, Any]], expected_role: dict[str, Any] | None,
                                 expected_apply: dict[str, Any] | None, ssa: bool) -> None:
    controller, client = new_controller(roles, ssa=ssa)
    await controller.sync("combined")
    if expected_apply is None:
        assert client.actions == []
        return
    assert len(client.actions) == (1 if ssa else 2)
    verb, plural, body, options = client.actions[0]
    assert (verb, plural, options) == ("apply", "clusterroles", {"field_manager": FIELD_MANAGER, "force": True})
    assert body == expected_apply
    if not ssa:
        verb, plural, body, _ = client.actions[1]
        assert (verb, plural) == ("update", "clusterroles")
        assert body == expected_role


async def test_roles_gone_or_without_an_aggregation_rule_are_left_alone() -> None:
    controller, client = new_controller([role("hammer", BAR, hammer())])
    await controller.sync("hammer")
    await controller.sync("missing")
    assert client.actions == []


async def test_an_invalid_selector_fails_the_sync() -> None:
    bad = combined([])
    bad["aggregationRule"]["clusterRoleSelectors"] = [{"matchExpressions": [{"key": "foo", "operator": "Bad"}]}]
    controller, client = new_controller([role("hammer", BAR, hammer()), bad])
    with pytest.raises(ValueError, match="not a valid label selector operator"):
        await controller.sync("combined")
    assert client.actions == []


def test_rules_compare_semantically_and_apply_carries_only_non_empty_lists() -> None:
    """An absent list equals an empty one (equality.Semantic), so such a role is not rewritten."""
    with_empty = {"verbs": ["get"], "resources": ["pods"], "resourceNames": [], "apiGroups": [""]}
    without = {"verbs": ["get"], "resources": ["pods"], "apiGroups": [""]}
    assert rules_equal([with_empty], [without])
    assert not rules_equal([without], [without, without])
    source = role("pods", BAR, [with_empty, without])
    assert aggregated_rules(combined([BAR]), [source]) == [with_empty]  # taken once


async def test_an_empty_selector_selects_every_other_role() -> None:
    controller, client = new_controller([role("hammer", {}, hammer()), role("saw", NOT_BAR, saw()), combined([{}])])
    await controller.sync("combined")
    assert client.actions[0][2] == combined_apply(hammer(), saw())


async def drain(controller: ClusterRoleAggregationController) -> list[str]:
    keys = []
    while len(controller.queue):
        key = await controller.queue.get()
        assert key is not None
        controller.queue.done(key)
        keys.append(key)
    return sorted(keys)


async def test_every_change_queues_every_aggregated_role() -> None:
    other = combined([NOT_BAR])
    other["metadata"]["name"] = "other"
    plain = role("hammer", BAR, hammer())
    controller, _ = new_controller([combined([BAR]), other, plain])
    for event in (Added(plain), Updated(plain, plain), Deleted(plain)):
        controller._on_cluster_role(event)
        assert await drain(controller) == ["combined", "other"]


def test_identity_matches_upstream() -> None:
    controller, _ = new_controller([])
    assert (controller.name, controller.alias, controller.workers_option) == (
        "clusterrole-aggregation-controller", "clusterrole-aggregation", None)
    assert controller.default_workers == 5
    assert controller.queue.name == "ClusterRoleAggregator"
