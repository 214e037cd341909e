"""The disruption controller against kube-sim, with the Deployment and ReplicaSet controllers: PDB status as any
client reads it, and the eviction API (served by kube-sim) allowing and refusing evictions by that status."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from controller_manager.api.meta import format_time
from controller_manager.api.pods import is_pod_ready
from controller_manager.api.resources import DEPLOYMENTS, PODDISRUPTIONBUDGETS, PODS, REPLICASETS
from controller_manager.client import ApiClient, load_config
from controller_manager.client.errors import TooManyRequests
from controller_manager.controllers.deployment.controller import DeploymentController
from controller_manager.controllers.disruption import DisruptionController
from controller_manager.controllers.replicaset import ReplicaSetController
from tests.controllers.audit import conflicts, describe, writes
from tests.controllers.harness import Harness, controller_harness, wait_for

NS = "default"
SIM = "sim.controller-manager.io/"


def deployment(name: str, replicas: int, *, ready_after: float = 0.0) -> dict[str, Any]:
    template_meta: dict[str, Any] = {"labels": {"app": name}}
    if ready_after:
        template_meta["annotations"] = {SIM + "ready-after-seconds": str(ready_after)}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": NS},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": template_meta,
                                  "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}}}


def pdb(name: str, app: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": NS},
            "spec": {"selector": {"matchLabels": {"app": app}}, **spec}}


@contextlib.asynccontextmanager
async def harness() -> AsyncIterator[tuple[Harness, ApiClient]]:
    """The three controllers, plus a client that never retries a 429 (so a refused eviction is seen as one)."""
    async with controller_harness(DisruptionController, DeploymentController, ReplicaSetController) as h:
        config = await load_config(kubeconfig=str(h.cluster.kubeconfig_path))
        async with ApiClient(config, qps=0.0, burst=1, max_retries=0) as evictor:
            yield h, evictor


async def evict(client: ApiClient, name: str) -> Any:
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": NS}}
    return await client.request("POST", PODS.path(NS, name, "eviction"), body=body)


async def pdb_status(h: Harness, name: str, **want: Any) -> dict[str, Any]:
    """The PDB once its status has every field of ``want`` and its generation is observed."""
    async def check() -> dict[str, Any] | None:
        obj = await h.client.get(PODDISRUPTIONBUDGETS, name, NS)
        status = obj.get("status") or {}
        if status.get("observedGeneration") != obj["metadata"]["generation"]:
            return None
        return obj if all(status.get(k) == v for k, v in want.items()) else None
    return await wait_for(check, timeout=20.0, what=f"PDB {name} status {want}")


async def ready_pods(h: Harness, app: str) -> list[dict[str, Any]]:
    pods = await h.pods(NS, f"app={app}")
    return sorted((p for p in pods if is_pod_ready(p) and not p["metadata"].get("deletionTimestamp")),
                  key=lambda p: p["metadata"]["name"])


def condition(obj: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in obj["status"]["conditions"] if c["type"] == "DisruptionAllowed")


async def test_min_available_gates_evictions() -> None:
    """Deployment of 3, minAvailable 2: one eviction is allowed; the next is refused with 429 until the
    ReplicaSet controller's replacement is ready; then one is allowed again."""
    async with harness() as (h, evictor):
        await h.client.create(DEPLOYMENTS, deployment("web", 3, ready_after=1.0))
        await h.client.create(PODDISRUPTIONBUDGETS, pdb("web-pdb", "web", minAvailable=2))
        obj = await pdb_status(h, "web-pdb", disruptionsAllowed=1, currentHealthy=3, desiredHealthy=2,
                               expectedPods=3)
        cond = condition(obj)
        assert (cond["status"], cond["reason"], cond["message"]) == ("True", "SufficientPods", "")

        first, second = (p["metadata"]["name"] for p in (await ready_pods(h, "web"))[:2])
        status = await evict(evictor, first)
        assert status["status"] == "Success"
        with pytest.raises(TooManyRequests) as refused:
            await evict(evictor, second)
        assert refused.value.status == 429
        assert "Cannot evict pod as it would violate the pod's disruption budget." in str(refused.value)

        # While the replacement is not ready: 2 healthy of 2 desired, and evictions are refused.
        obj = await pdb_status(h, "web-pdb", disruptionsAllowed=0, currentHealthy=2, desiredHealthy=2)
        assert (condition(obj)["status"], condition(obj)["reason"]) == ("False", "InsufficientPods")
        if len(await ready_pods(h, "web")) < 3:
            with pytest.raises(TooManyRequests):
                await evict(evictor, second)

        await pdb_status(h, "web-pdb", disruptionsAllowed=1, currentHealthy=3, expectedPods=3)
        assert len(await ready_pods(h, "web")) == 3
        assert (await evict(evictor, second))["status"] == "Success"

        # A spec change is observed: minAvailable 3 allows nothing.
        await h.client.patch(PODDISRUPTIONBUDGETS, "web-pdb", {"spec": {"minAvailable": 3}}, NS)
        obj = await pdb_status(h, "web-pdb", disruptionsAllowed=0, desiredHealthy=3)
        assert obj["status"]["observedGeneration"] == 2


async def test_max_unavailable_percent() -> None:
    """maxUnavailable "50%" of 3 rounds up to 2: two evictions pass, the third is refused."""
    async with harness() as (h, evictor):
        # Pods take a second to become ready: the replacements cannot refill the budget before the third eviction.
        await h.client.create(DEPLOYMENTS, deployment("api", 3, ready_after=1.0))
        await h.client.create(PODDISRUPTIONBUDGETS, pdb("api-pdb", "api", maxUnavailable="50%"))
        await pdb_status(h, "api-pdb", disruptionsAllowed=2, currentHealthy=3, desiredHealthy=1, expectedPods=3)
        names = [p["metadata"]["name"] for p in await ready_pods(h, "api")]
        assert len(names) == 3
        assert (await evict(evictor, names[0]))["status"] == "Success"
        assert (await evict(evictor, names[1]))["status"] == "Success"
        with pytest.raises(TooManyRequests):
            await evict(evictor, names[2])
        await pdb_status(h, "api-pdb", disruptionsAllowed=2, currentHealthy=3, desiredHealthy=1, expectedPods=3)


async def test_stale_disruption_target_condition_is_reset() -> None:
    """A running pod marked DisruptionTarget=True long ago, and never deleted, gets the condition set to False."""
    async with controller_harness(DisruptionController) as h:
        await h.client.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": NS},
                                     "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}})
        await wait_for(lambda: _running(h), what="pod running")
        stale_since = format_time(time.time() - 600)
        await h.client.patch(PODS, "p", {"status": {"conditions": [{
            "type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
            "message": "Eviction API: evicting", "lastTransitionTime": stale_since}]}}, NS,
            patch_type="strategic", subresource="status")

        async def reset() -> dict[str, Any] | None:
            pod = await h.client.get(PODS, "p", NS)
            cond = next((c for c in pod["status"].get("conditions") or () if c["type"] == "DisruptionTarget"), None)
            return cond if cond is not None and cond["status"] == "False" else None
        cond = await wait_for(reset, what="DisruptionTarget reset")
        assert "reason" not in cond
        assert "message" not in cond
        assert cond["lastTransitionTime"] != stale_since


async def _running(h: Harness) -> bool:
    pod = await h.client.get(PODS, "p", NS)
    return (pod.get("status") or {}).get("phase") == "Running"


async def test_status_writes_wait_for_the_cache_to_show_the_last_one_no_conflicts(tmp_path: Path) -> None:
    # The PDB watch lags the controller's writes by 0.5 s while its pods keep changing: without read-your-own-writes
    # each pod event syncs the PDB from a copy older than its last status write, and that write is refused with
    # 409 Conflict (about half of them were in a chaos run). Nobody else writes this PDB here (no evictions), so
    # every conflict would be the controller's own. Counted from kube-sim's audit log.
    audit = tmp_path / "audit.log"
    async with controller_harness(DisruptionController, ReplicaSetController, start=False,
                                  audit_log_path=audit) as h:
        h.cluster.faults.slow_watch(0.5, resources=["poddisruptionbudgets"])
        await h.start()
        web = deployment("web", 6, ready_after=2.0)  # replacements not Ready at once: the churn must show
        await h.client.create(REPLICASETS, {**web, "kind": "ReplicaSet"}, NS)
        await h.client.create(PODDISRUPTIONBUDGETS, pdb("web", "web", minAvailable=2), NS)
        await pdb_status(h, "web", currentHealthy=6, expectedPods=6, disruptionsAllowed=4)
        # Pods deleted one after another, faster than the watch shows the last status write: each one changes
        # currentHealthy (and its replacement changes it back), so every sync has a status to write.
        churn_started = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # as the audit log stamps requests
        for pod in (await ready_pods(h, "web"))[:5]:
            await h.client.delete(PODS, pod["metadata"]["name"], NS)
            await asyncio.sleep(0.1)
        await pdb_status(h, "web", currentHealthy=6, expectedPods=6, disruptionsAllowed=4)
    status_writes = writes(audit, "poddisruptionbudgets", "status")
    # Statuses were written while the pods churned (not only when the PDB was new).
    assert any(e["requestReceivedTimestamp"] > churn_started for e in status_writes), describe(status_writes)
    assert conflicts(status_writes) == [], describe(status_writes)
