"""Rolling-update invariants, by hypothesis, over a model cluster: the rolling functions run step after step
against a fake API that stores what they write, while a model ReplicaSet controller makes some of the wanted
pods available between steps. For any size, surge and unavailability:

- the pods wanted never exceed ``replicas + maxSurge``;
- once available, the pods available never drop below ``replicas - maxUnavailable`` through the controller's
  own doing (only scale-downs remove available pods here);
- the rollout finishes: the new ReplicaSet ends with every replica and the old ones with none.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller_manager.api.meta import meta
from controller_manager.api.resources import Resource
from controller_manager.clock import FakeClock
from controller_manager.controllers.deployment import util_strategy
from controller_manager.controllers.deployment.control import DeploymentControl
from controller_manager.controllers.deployment.rolling import rollout_rolling
from controller_manager.controllers.deployment.util_annotations import REVISION_ANNOTATION
from controller_manager.controllers.deployment.util_strategy import replica_set_replicas
from tests.controllers.deployment.test_sync import FakeRecorder, new_deployment


class ModelApi:
    """Stores ReplicaSets and the Deployment; creates, updates and status writes land in the store."""

    def __init__(self, deployment: dict[str, Any]) -> None:
        self.deployment = deployment
        self.replica_sets: dict[str, dict[str, Any]] = {}
        self._rv = 0

    def _stamp(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        self._rv += 1
        out = copy.deepcopy(dict(obj))
        out["metadata"]["resourceVersion"] = str(self._rv)
        return out

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        raise AssertionError("no reads expected")

    async def create(self, res: Resource, obj: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]:
        out = self._stamp(obj)
        out["metadata"]["uid"] = f"uid-{len(self.replica_sets)}"
        out["metadata"]["creationTimestamp"] = f"2024-01-01T00:00:{len(self.replica_sets):02d}Z"
        out["status"] = {"observedGeneration": 1}
        self.replica_sets[out["metadata"]["name"]] = out
        return copy.deepcopy(out)

    async def update(self, res: Resource, obj: Mapping[str, Any]) -> dict[str, Any]:
        assert res.plural == "replicasets"
        out = self._stamp(obj)
        out["status"] = self.replica_sets[out["metadata"]["name"]].get("status", {})
        self.replica_sets[out["metadata"]["name"]] = out
        return copy.deepcopy(out)

    async def update_status(self, res: Resource, obj: Mapping[str, Any]) -> dict[str, Any]:
        self.deployment = self._stamp(obj)
        return copy.deepcopy(self.deployment)

    async def delete(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        self.replica_sets.pop(name, None)
        return {}

    def available(self) -> int:
        """Pods available right now: scale-downs take effect at once, new pods wait for the model."""
        return sum(min(replica_set_replicas(rs), int((rs.get("status") or {}).get("availableReplicas", 0)))
                   for rs in self.replica_sets.values())

    def settle(self, new_ready: int) -> None:
        """The model ReplicaSet controller: pods follow spec; at most ``new_ready`` new ones become available."""
        for rs in self.replica_sets.values():
            wanted = replica_set_replicas(rs)
            status = rs.setdefault("status", {})
            available = min(int(status.get("availableReplicas", 0)), wanted)
            grown = min(wanted - available, new_ready)
            new_ready -= grown
            available += grown
            rs["status"] = {"observedGeneration": 1, "replicas": wanted, "readyReplicas": available,
                            "availableReplicas": available, "terminatingReplicas": 0}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(replicas=st.integers(1, 12), surge=st.one_of(st.integers(0, 4), st.sampled_from(["25%", "50%", "0%"])),
       unavailable=st.one_of(st.integers(0, 4), st.sampled_from(["25%", "50%", "0%"])),
       readiness=st.lists(st.integers(0, 5), min_size=1, max_size=8))
async def test_rolling_update_invariants(replicas: int, surge: int | str, unavailable: int | str,
                                         readiness: list[int]) -> None:
    d = new_deployment("web", replicas, max_surge=surge, max_unavailable=unavailable, selector={"app": "web"})
    d["metadata"]["generation"] = 1
    max_total = replicas + util_strategy.max_surge(d)
    floor = replicas - util_strategy.max_unavailable(d)
    api = ModelApi(d)
    dc = DeploymentControl(client=api, recorder=FakeRecorder(), clock=FakeClock(),
                           rs_lister=lambda ns, name: api.replica_sets.get(name))

    async def step() -> None:
        working = copy.deepcopy(api.deployment)
        await rollout_rolling(dc, working, [copy.deepcopy(rs) for rs in api.replica_sets.values()])

    # Revision 1 rolls out fully first.
    for _ in range(4 * replicas + 4):
        await step()
        api.settle(replicas)
    assert api.available() == replicas

    # Then the template changes and revision 2 rolls out, with pods becoming ready at the drawn pace.
    api.deployment["spec"]["template"]["spec"]["containers"][0]["image"] = "foo/baz"

    def sizes() -> dict[str, int]:
        return {meta(rs)["annotations"][REVISION_ANNOTATION]: replica_set_replicas(rs)
                for rs in api.replica_sets.values()}

    finished_steps = 0
    for i in range(20 * (replicas + 2)):
        await step()
        wanted = sum(replica_set_replicas(rs) for rs in api.replica_sets.values())
        assert wanted <= max_total, f"{wanted} pods wanted > {max_total}"
        assert api.available() >= floor, f"{api.available()} available < {floor}"
        api.settle(readiness[i % len(readiness)] or 1)
        # Finished and every pod available: a few more steps show it stays so, the rest of the budget would
        # only repeat them.
        finished_steps = finished_steps + 1 if sizes() == {"1": 0, "2": replicas} and api.available() == replicas \
            else 0
        if finished_steps > 3:
            break
    assert sizes() == {"1": 0, "2": replicas}
