"""The ReplicaSet controller against kube-sim, judged only by what an API client sees: pods, RS status, events."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from controller_manager.api.meta import controller_ref, is_being_deleted
from controller_manager.api.pods import is_pod_active
from controller_manager.api.resources import PODS, REPLICASETS
from controller_manager.controllers.replicaset import ReplicaSetController
from tests.controllers.harness import FAST_KUBELETS, Harness, controller_harness, wait_for

APP = {"app": "web"}
SIM = "sim.controller-manager.io/"


def replica_set(name: str = "web", replicas: int = 3, *, labels: dict[str, str] | None = None,
                min_ready_seconds: int = 0, annotations: dict[str, str] | None = None,
                pod_spec: dict[str, Any] | None = None) -> dict[str, Any]:
    labels = labels or APP
    template_meta: dict[str, Any] = {"labels": {**labels, "tier": "frontend"}}
    if annotations:
        template_meta["annotations"] = annotations
    spec: dict[str, Any] = {
        "replicas": replicas,
        "selector": {"matchLabels": labels},
        "template": {"metadata": template_meta,
                     "spec": pod_spec or {"containers": [{"name": "c", "image": "nginx"}]}},
    }
    if min_ready_seconds:
        spec["minReadySeconds"] = min_ready_seconds
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name, "namespace": "default"},
            "spec": spec}


def bare_pod(name: str, labels: dict[str, str] | None = None, *, annotations: dict[str, str] | None = None,
             node_selector: dict[str, str] | None = None, owner: dict[str, Any] | None = None,
             finalizers: list[str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "labels": labels or APP}
    if annotations:
        meta["annotations"] = annotations
    if owner:
        meta["ownerReferences"] = [owner]
    if finalizers:
        meta["finalizers"] = finalizers
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "nginx"}]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


async def get_rs(h: Harness, name: str = "web") -> dict[str, Any]:
    return await h.client.get(REPLICASETS, name, "default")


async def scale(h: Harness, replicas: int, name: str = "web") -> None:
    await h.client.patch(REPLICASETS, name, {"spec": {"replicas": replicas}}, "default")


def owned_by(pods: list[dict[str, Any]], rs: dict[str, Any]) -> list[dict[str, Any]]:
    uid = rs["metadata"]["uid"]
    return [p for p in pods if (controller_ref(p) or {}).get("uid") == uid]


def active(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in pods if is_pod_active(p)]


async def status_is(h: Harness, name: str = "web", **expected: Any) -> dict[str, Any] | None:
    rs = await get_rs(h, name)
    status = rs.get("status") or {}
    if all(status.get(k, 0) == v for k, v in expected.items()):
        return rs
    return None


async def until_status(h: Harness, name: str = "web", timeout: float = 15.0, **expected: Any) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        return await status_is(h, name, **expected)

    return await wait_for(check, timeout=timeout, what=f"{name} status {expected}")


async def test_scale_up_creates_exactly_n_pods_from_the_template() -> None:
    async with controller_harness(ReplicaSetController) as h:
        await h.client.create(REPLICASETS, replica_set(replicas=4, annotations={"team": "blue"}))
        rs = await until_status(h, replicas=4, readyReplicas=4, availableReplicas=4, fullyLabeledReplicas=4,
                                terminatingReplicas=0, observedGeneration=1)
        pods = await h.pods()
        assert len(pods) == 4
        for pod in pods:
            meta = pod["metadata"]
            assert meta["generateName"] == "web-"
            assert meta["name"].startswith("web-")
            assert meta["labels"] == {"app": "web", "tier": "frontend"}
            assert meta["annotations"]["team"] == "blue"
            assert meta["ownerReferences"] == [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": rs["metadata"]["uid"],
                "controller": True, "blockOwnerDeletion": True}]

        async def four_events() -> list[dict[str, Any]] | None:
            events = [e for e in await h.events_for("web") if e["reason"] == "SuccessfulCreate"]
            return events if len(events) == 4 else None

        events = await wait_for(four_events, what="4 SuccessfulCreate events")
        assert {e["message"] for e in events} == {f"Created pod: {p['metadata']['name']}" for p in pods}
        assert {e["source"]["component"] for e in events} == {"replicaset-controller"}
        assert {e["type"] for e in events} == {"Normal"}
        assert {e["involvedObject"]["kind"] for e in events} == {"ReplicaSet"}


async def test_scale_down_deletes_unscheduled_and_pending_pods_first() -> None:
    async with controller_harness(ReplicaSetController) as h:
        # Four orphans the RS will adopt: two that run, one no node can take, one stuck starting.
        for name in ("run-a", "run-b"):
            await h.client.create(PODS, bare_pod(name))
        await h.client.create(PODS, bare_pod("unschedulable", node_selector={"no-such": "node"}))
        await h.client.create(PODS, bare_pod("slow-start", annotations={SIM + "start-seconds": "600"}))

        async def running_and_scheduled() -> bool:
            pods = {p["metadata"]["name"]: p for p in await h.pods()}
            return (all((pods[n].get("status") or {}).get("phase") == "Running" for n in ("run-a", "run-b"))
                    and bool(pods["slow-start"]["spec"].get("nodeName")))

        await wait_for(running_and_scheduled, what="pods running and scheduled")
        await h.client.create(REPLICASETS, replica_set(replicas=4))
        await until_status(h, replicas=4, readyReplicas=2)
        rs = await get_rs(h)
        assert len(owned_by(await h.pods(), rs)) == 4  # adopted, none created

        await scale(h, 2)
        await until_status(h, replicas=2, readyReplicas=2, availableReplicas=2, observedGeneration=2)

        async def survivors() -> list[str] | None:
            names = sorted(p["metadata"]["name"] for p in active(await h.pods()))
            return names if len(names) == 2 else None

        assert await wait_for(survivors, what="2 pods left") == ["run-a", "run-b"]
        deleted = [e["message"] for e in await h.events_for("web") if e["reason"] == "SuccessfulDelete"]
        assert sorted(deleted) == ["Deleted pod: slow-start", "Deleted pod: unschedulable"]
        assert not [e for e in await h.events_for("web") if e["reason"] == "SuccessfulCreate"]


async def test_a_deleted_pod_is_replaced() -> None:
    async with controller_harness(ReplicaSetController) as h:
        await h.client.create(REPLICASETS, replica_set(replicas=3))
        await until_status(h, replicas=3, readyReplicas=3)
        victim = (await h.pods())[0]["metadata"]["name"]
        await h.client.delete(PODS, victim, "default")

        async def replaced() -> list[str] | None:
            names = [p["metadata"]["name"] for p in active(await h.pods())]
            return names if len(names) == 3 and victim not in names else None

        await wait_for(replaced, what="a replacement pod")
        await until_status(h, replicas=3, readyReplicas=3)
        created = [e for e in await h.events_for("web") if e["reason"] == "SuccessfulCreate"]
        assert len(created) == 4


async def test_orphans_are_adopted_and_pods_that_stop_matching_are_released() -> None:
    async with controller_harness(ReplicaSetController) as h:
        await h.client.create(PODS, bare_pod("orphan"))
        await h.client.create(REPLICASETS, replica_set(replicas=2))
        rs = await until_status(h, replicas=2, readyReplicas=2)
        pods = {p["metadata"]["name"]: p for p in await h.pods()}
        assert len(pods) == 2  # the orphan was adopted, so only one was created
        assert "orphan" in pods
        assert controller_ref(pods["orphan"])["uid"] == rs["metadata"]["uid"]  # type: ignore[index]

        # Relabel an owned pod out of the selector: it is released and replaced.
        await h.client.patch(PODS, "orphan", {"metadata": {"labels": {"app": "elsewhere"}}}, "default")

        async def released() -> dict[str, Any] | None:
            pod = await h.client.get(PODS, "orphan", "default")
            return pod if not pod["metadata"].get("ownerReferences") else None

        pod = await wait_for(released, what="the pod to be released")
        assert pod["metadata"]["labels"] == {"app": "elsewhere"}
        await until_status(h, replicas=2, readyReplicas=2)
        mine = owned_by(await h.pods(), rs)
        assert len(mine) == 2
        assert "orphan" not in {p["metadata"]["name"] for p in mine}


async def test_pods_owned_by_another_controller_are_never_touched() -> None:
    async with controller_harness(ReplicaSetController) as h:
        foreign_ref = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "someone-else",
                       "uid": "6f2d6b54-0000-4000-8000-000000000001", "controller": True}
        foreign = await h.client.create(PODS, bare_pod("foreign", owner=foreign_ref))
        await h.client.create(REPLICASETS, replica_set(replicas=2))
        rs = await until_status(h, replicas=2, readyReplicas=2)
        await scale(h, 0)
        await until_status(h, replicas=0, observedGeneration=2)
        await wait_for(lambda: _no_active_owned(h, rs), what="scale down to 0")
        still = await h.client.get(PODS, "foreign", "default")
        assert still["metadata"]["ownerReferences"] == foreign["metadata"]["ownerReferences"]
        assert not is_being_deleted(still)


async def _no_active_owned(h: Harness, rs: dict[str, Any]) -> bool:
    return not active(owned_by(await h.pods(), rs))


async def test_status_counts_ready_available_and_terminating_replicas() -> None:
    # Deleted pods take 3 s to stop (their grace period, capped): long enough to be seen terminating.
    async with controller_harness(ReplicaSetController,
                                  kubelet_config=dataclasses.replace(FAST_KUBELETS, termination_delay=3.0)) as h:
        await h.client.create(REPLICASETS, replica_set(replicas=3, min_ready_seconds=2))
        # Ready at once, available only after minReadySeconds: the controller looks again by itself.
        await until_status(h, replicas=3, readyReplicas=3, availableReplicas=0)
        await until_status(h, replicas=3, readyReplicas=3, availableReplicas=3, timeout=10)

        # A pod kept by a finalizer stays terminating; a replacement is made meanwhile.
        victim = (await h.pods())[0]["metadata"]["name"]
        await h.client.patch(PODS, victim, {"metadata": {"finalizers": ["example.com/hold"]}}, "default")
        await h.client.delete(PODS, victim, "default")
        await until_status(h, replicas=3, terminatingReplicas=1, readyReplicas=3)
        await h.client.patch(PODS, victim, {"metadata": {"finalizers": None}}, "default")
        await until_status(h, replicas=3, terminatingReplicas=0, readyReplicas=3, availableReplicas=3)


@pytest.mark.parametrize(("verb", "replicas", "scale_to", "reason", "event_message"), [
    pytest.param("create", 3, 3, "FailedCreate", "Error creating: injected fault (403)", id="creates refused"),
    pytest.param("delete", 3, 1, "FailedDelete", "Error deleting: injected fault (403)", id="deletes refused"),
])
async def test_replica_failure_condition_set_on_refusal_and_cleared_on_success(
        verb: str, replicas: int, scale_to: int, reason: str, event_message: str) -> None:
    async with controller_harness(ReplicaSetController) as h:
        start = 0 if verb == "create" else replicas
        await h.client.create(REPLICASETS, replica_set(replicas=start))
        await until_status(h, replicas=start, readyReplicas=start)
        rule = h.cluster.faults.fail(403, verbs=[verb], resources=["pods"])
        await scale(h, scale_to)

        async def failing() -> dict[str, Any] | None:
            conds = (await get_rs(h)).get("status", {}).get("conditions") or []
            return conds[0] if conds else None

        cond = await wait_for(failing, what="ReplicaFailure")
        assert (cond["type"], cond["status"], cond["reason"]) == ("ReplicaFailure", "True", reason)
        assert cond["message"] == "injected fault (403)"
        assert cond["lastTransitionTime"]
        warnings = [e for e in await h.events_for("web") if e["type"] == "Warning"]
        assert {e["reason"] for e in warnings} == {reason}
        assert {e["message"] for e in warnings} == {event_message}

        h.cluster.faults.rules.remove(rule)
        rs = await until_status(h, replicas=scale_to, readyReplicas=scale_to, timeout=20)
        assert "conditions" not in rs["status"]
        assert len(active(await h.pods())) == scale_to


@contextlib.asynccontextmanager
async def max_active_pods(h: Harness, rs_name: str = "web") -> AsyncIterator[list[int]]:
    """Sample, through the API, how many active pods the RS controls, as long as the block runs."""
    seen: list[int] = []

    async def sample() -> None:
        while True:
            try:
                rs = await get_rs(h, rs_name)
                seen.append(len(active(owned_by(await h.pods(), rs))))
            except Exception:  # the RS may not exist yet
                pass
            await asyncio.sleep(0.01)

    task = asyncio.create_task(sample(), name="test:sample-active-pods")
    try:
        yield seen
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_no_duplicates_with_a_lagging_and_cut_watch() -> None:
    async with controller_harness(ReplicaSetController, start=False) as h:
        # The controller's pod watch lags its own writes by 0.5 s, and is cut twice during the scale-up.
        h.cluster.faults.slow_watch(0.5, resources=["pods"])
        await h.start()
        async with max_active_pods(h) as seen:
            await h.client.create(REPLICASETS, replica_set(replicas=100))
            for count in (20, 60):
                await wait_for(lambda: _pods_at_least(h, count), what=f"{count} pods")  # noqa: B023
                h.cluster.faults.drop_watches()
            await until_status(h, replicas=100, readyReplicas=100, timeout=40)
            await asyncio.sleep(0.5)  # past the watch lag: any duplicate would have been created by now
        rs = await get_rs(h)
        assert len(active(owned_by(await h.pods(), rs))) == 100
        assert seen
        assert max(seen) <= 100


async def _pods_at_least(h: Harness, n: int) -> bool:
    return len(await h.pods()) >= n


@pytest.mark.parametrize("graceful", [pytest.param(True, id="clean restart"), pytest.param(False, id="crash")])
async def test_controller_restart_mid_scale_up_converges_without_extras(graceful: bool) -> None:
    async with controller_harness(ReplicaSetController, start=False) as h:
        h.cluster.faults.slow_watch(0.3, resources=["pods"])
        # Slow pod creates, so the restart lands in the middle of the slow-start batches.
        h.cluster.faults.set_latency(lambda r: 0.02 if r.method == "POST" and r.path.endswith("/pods") else 0.0)
        await h.start()
        async with max_active_pods(h) as seen:
            await h.client.create(REPLICASETS, replica_set(replicas=100))
            await wait_for(lambda: _pods_at_least(h, 10), what="the scale-up to start")
            await h.restart(graceful=graceful)
            await until_status(h, replicas=100, readyReplicas=100, timeout=40)
            await asyncio.sleep(0.4)  # past the watch lag
        rs = await get_rs(h)
        assert len(active(owned_by(await h.pods(), rs))) == 100
        assert max(seen) <= 100


async def test_status_writes_wait_for_the_cache_to_show_the_last_one_no_conflicts(tmp_path: Path) -> None:
    # The ReplicaSet watch lags the controller's own writes by 0.3 s while pods keep changing: without
    # read-your-own-writes each pod event syncs the RS from a copy older than its last status write, whose
    # update then fails with 409 Conflict (about half of them did). Counted from kube-sim's audit log.
    audit = tmp_path / "audit.log"
    async with controller_harness(ReplicaSetController, start=False, audit_log_path=audit) as h:
        h.cluster.faults.slow_watch(0.5, resources=["replicasets"])
        await h.start()
        await h.client.create(REPLICASETS, replica_set(replicas=20))
        await until_status(h, replicas=20, readyReplicas=20, availableReplicas=20, timeout=40)
        # Pods killed one after another, faster than the watch shows the RS's status: every one syncs the RS.
        for pod in (await h.pods())[:10]:
            await h.client.delete(PODS, pod["metadata"]["name"], "default")
            await asyncio.sleep(0.1)
        await until_status(h, replicas=20, readyReplicas=20, availableReplicas=20, timeout=40)
    rs_writes = [e for e in map(json.loads, audit.read_text().splitlines())
                 if e["verb"] in ("update", "patch") and e["objectRef"].get("resource") == "replicasets"]
    writes = [e for e in rs_writes if e["objectRef"].get("subresource") == "status"]
    conflicts = [e for e in writes if e["responseStatus"]["code"] == 409]
    assert len(writes) >= 4  # statuses were written along the way
    assert conflicts == [], [(e["verb"], e["objectRef"].get("subresource"), e["responseStatus"]["code"],
                              e["requestReceivedTimestamp"], e["stageTimestamp"]) for e in rs_writes]
