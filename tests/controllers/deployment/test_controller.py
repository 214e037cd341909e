"""The Deployment controller with the ReplicaSet controller against kube-sim, judged only by what an API client
sees: Deployments, ReplicaSets, pods and events."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from controller_manager.api.meta import controller_ref, is_being_deleted
from controller_manager.api.pods import is_pod_active, is_pod_ready
from controller_manager.api.resources import DEPLOYMENTS, REPLICASETS
from controller_manager.controllers.deployment.controller import DeploymentController
from controller_manager.controllers.replicaset import ReplicaSetController
from tests.controllers.audit import conflicts, describe, writes
from tests.controllers.harness import Harness, controller_harness, wait_for

SIM = "sim.controller-manager.io/"
NEVER_READY = {SIM + "ready-after-seconds": "100000"}


def deployment(name: str = "web", replicas: int = 3, image: str = "nginx:1", *, strategy: dict[str, Any] | None = None,
               pod_annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    template_meta: dict[str, Any] = {"labels": {"app": name}}
    if pod_annotations:
        template_meta["annotations"] = pod_annotations
    body: dict[str, Any] = {
        "replicas": replicas,
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": template_meta, "spec": {"containers": [{"name": "c", "image": image}]}},
        **spec,
    }
    if strategy is not None:
        body["strategy"] = strategy
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": body}


def rolling(max_surge: int | str, max_unavailable: int | str) -> dict[str, Any]:
    return {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": max_surge, "maxUnavailable": max_unavailable}}


async def get_d(h: Harness, name: str = "web") -> dict[str, Any]:
    return await h.client.get(DEPLOYMENTS, name, "default")


def condition(d: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in (d.get("status") or {}).get("conditions") or () if c["type"] == kind), None)


async def complete(h: Harness, name: str = "web", timeout: float = 20.0) -> dict[str, Any]:
    """The Deployment once its rollout is complete, as ``kubectl rollout status`` judges it."""
    async def check() -> dict[str, Any] | None:
        d = await get_d(h, name)
        status, replicas = d.get("status") or {}, d["spec"]["replicas"]
        progressing = condition(d, "Progressing")
        if (status.get("observedGeneration", 0) >= d["metadata"]["generation"]
                and status.get("updatedReplicas", 0) == replicas and status.get("replicas", 0) == replicas
                and status.get("availableReplicas", 0) == replicas
                and progressing is not None and progressing["reason"] == "NewReplicaSetAvailable"):
            return d
        return None
    return await wait_for(check, timeout=timeout, what=f"deployment {name} complete")


async def owned_rss(h: Harness, d: dict[str, Any]) -> list[dict[str, Any]]:
    uid = d["metadata"]["uid"]
    rss = await h.list_objects(REPLICASETS)
    # By revision: creation timestamps have one-second resolution.
    return sorted((rs for rs in rss if (controller_ref(rs) or {}).get("uid") == uid),
                  key=lambda rs: int((rs["metadata"].get("annotations") or {}).get(
                      "deployment.kubernetes.io/revision", "0")))


async def set_image(h: Harness, image: str, name: str = "web") -> None:
    await h.client.patch(DEPLOYMENTS, name,
                         {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": image}]}}}}, "default")


@contextlib.asynccontextmanager
async def watching(h: Harness, check: Callable[[list[dict[str, Any]]], None]) -> AsyncIterator[list[str]]:
    """Poll the pods during the block and run ``check`` on every listing; failures are re-raised at the end."""
    failures: list[str] = []
    stop = asyncio.Event()

    async def poll() -> None:
        while not stop.is_set():
            try:
                check(await h.pods())
            except AssertionError as err:
                failures.append(str(err))
            await asyncio.sleep(0.01)

    task = asyncio.create_task(poll(), name="test:watch-pods")
    try:
        yield failures
    finally:
        stop.set()
        await task
    assert not failures, failures[:3]


def active_pods(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in pods if is_pod_active(p)]


# --- rollout -------------------------------------------------------------------------------------------------


async def test_create_becomes_available_with_a_revision_1_replica_set() -> None:
    async with controller_harness(DeploymentController, ReplicaSetController) as h:
        await h.client.create(DEPLOYMENTS, deployment())
        d = await complete(h)
        assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
        available = condition(d, "Available")
        assert available is not None
        assert (available["status"], available["reason"], available["message"]) == (
            "True", "MinimumReplicasAvailable", "Deployment has minimum availability.")
        [rs] = await owned_rss(h, d)
        hash_label = rs["metadata"]["labels"]["pod-template-hash"]
        assert rs["metadata"]["name"] == f"web-{hash_label}"
        assert rs["spec"]["selector"]["matchLabels"] == {"app": "web", "pod-template-hash": hash_label}
        assert rs["metadata"]["annotations"] == {"deployment.kubernetes.io/revision": "1",
                                                 "deployment.kubernetes.io/desired-replicas": "3",
                                                 "deployment.kubernetes.io/max-replicas": "4"}
        progressing = condition(d, "Progressing")
        assert progressing is not None
        assert progressing["message"] == f'ReplicaSet "{rs["metadata"]["name"]}" has successfully progressed.'
        assert d["status"]["terminatingReplicas"] == 0
        events = [(e["reason"], e["message"]) for e in await h.events_for("web")]
        assert ("ScalingReplicaSet", f"Scaled up replica set {rs['metadata']['name']} from 0 to 3") in events


async def test_image_change_rolls_to_a_new_replica_set() -> None:
    async with controller_harness(DeploymentController, ReplicaSetController) as h:
        await h.client.create(DEPLOYMENTS, deployment(replicas=4, strategy=rolling(1, 1)))
        d = await complete(h)
        await set_image(h, "nginx:2")
        d = await complete(h)
        old, new = await owned_rss(h, d)
        assert old["spec"]["replicas"] == 0
        assert new["spec"]["replicas"] == 4
        assert old["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
        assert new["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
        assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
        pods = active_pods(await h.pods())
        assert len(pods) == 4
        assert {p["spec"]["containers"][0]["image"] for p in pods} == {"nginx:2"}
        messages = [e["message"] for e in await h.events_for("web") if e["reason"] == "ScalingReplicaSet"]
        old_name, new_name = old["metadata"]["name"], new["metadata"]["name"]
        assert f"Scaled up replica set {new_name} from 0 to 1" in messages
        assert any(m.startswith(f"Scaled down replica set {old_name} from 4 to ") for m in messages)
        assert any(m == f"Scaled down replica set {old_name} from 1 to 0" for m in messages)


@pytest.mark.parametrize(("replicas", "max_surge", "max_unavailable", "surge", "unavailable"), [
    pytest.param(4, 1, 0, 1, 0, id="surge 1, unavailable 0"),
    pytest.param(4, 0, 1, 0, 1, id="surge 0, unavailable 1"),
    pytest.param(5, "40%", "20%", 2, 1, id="percentages"),
])
async def test_rollout_respects_surge_and_availability(replicas: int, max_surge: int | str,
                                                       max_unavailable: int | str, surge: int,
                                                       unavailable: int) -> None:
    async with controller_harness(DeploymentController, ReplicaSetController) as h:
        await h.client.create(DEPLOYMENTS, deployment(replicas=replicas, strategy=rolling(max_surge, max_unavailable),
                                                      pod_annotations={SIM + "ready-after-seconds": "0.2"}))
        await complete(h)

        def invariants(pods: list[dict[str, Any]]) -> None:
            active = active_pods(pods)
            assert len(active) <= replicas + surge, f"{len(active)} pods > {replicas} + {surge}"
            ready = [p for p in active if is_pod_ready(p)]
            assert len(ready) >= replicas - unavailable, f"{len(ready)} ready < {replicas} - {unavailable}"

        async with watching(h, invariants):
            await set_image(h, "nginx:2")
            d = await complete(h, timeout=30)
        assert {p["spec"]["containers"][0]["image"] for p in active_pods(await h.pods())} == {"nginx:2"}
        assert len(await owned_rss(h, d)) == 2


async def test_recreate_starts_no_new_pod_before_all_old_pods_are_gone() -> None:
    async with controller_harness(DeploymentController, ReplicaSetController) as h:
        await h.client.create(DEPLOYMENTS, deployment(replicas=3, strategy={"type": "Recreate"}))
        await complete(h)

        def never_mixed(pods: list[dict[str, Any]]) -> None:
            images = {p["spec"]["containers"][0]["image"] for p in pods}
            assert images != {"nginx:1", "nginx:2"}, "old and new pods exist at once"

        async with watching(h, never_mixed):
            await set_image(h, "nginx:2")
            await complete(h)
        assert len(active_pods(await h.pods())) == 3


async def test_scaling_mid_rollout_is_proportional() -> None:
    async with controller_harness(DeploymentController, ReplicaSetController) as h:
        await h.client.create(DEPLOYMENTS, deployment(replicas=10, strategy=rolling(3, 2)))
        d = await complete(h)
        # The new pods never become ready: the rollout stops at old 8 + new 5 (upstream's example).
        await h.client.patch(DEPLOYMENTS, "web", {"spec": {"template": {
            "metadata": {"annotations": NEVER_READY}}}}, "default")

        async def stuck() -> list[dict[str, Any]] | None:
            rss = await owned_rss(h, d)
            sizes = [rs["spec"]["replicas"] for rs in rss]
            return rss if sizes == [8, 5] else None
        await wait_for(stuck, what="rollout stuck at 8 + 5")

        await h.client.patch(DEPLOYMENTS, "web", {"spec": {"replicas": 20}}, "default")

        async def resized() -> list[int] | None:
            sizes = [rs["spec"]["replicas"] for rs in await owned_rss(h, d)]
            return sizes if sum(sizes) == 23 else None
        old_size, new_size = await wait_for(resized, what="proportional resize")
        # 13 pods -> 23: each ReplicaSet keeps its share (8:5), the rounding leftover to the largest.
        assert (old_size, new_size) == (14, 9)
        rs_annotations = [rs["metadata"]["annotations"] for rs in await owned_rss(h, d)]
        assert all(a["deployment.kubernetes.io/desired-replicas"] == "20" for a in rs_annotations)


async def test_paused_deployment_scales_but_does_not_roll() -> None:
    async with controller_harness(DeploymentController, ReplicaSetController) as h:
        await h.client.create(DEPLOYMENTS, deployment(replicas=2))
        d = await complete(h)
        await h.client.patch(DEPLOYMENTS, "web", {"spec": {"paused": True}}, "default")

        async def paused() -> dict[str, Any] | None:
            got = await get_d(h)
            cond = condition(got, "Progressing")
            return got if cond is not None and cond["reason"] == "DeploymentPaused" else None
        d = await wait_for(paused, what="DeploymentPaused")
        assert condition(d, "Progressing")["status"] == "Unknown"  # type: ignore[index]

        await set_image(h, "nginx:2")
        await h.client.patch(DEPLOYMENTS, "web", {"spec": {"replicas": 4}}, "default")

        async def scaled() -> dict[str, Any] | None:
            got = await get_d(h)
            status = got.get("status") or {}
            ok = status.get("observedGeneration") == got["metadata"]["generation"] and status.get(
                "availableReplicas") == 4
            return got if ok else None
        d = await wait_for(scaled, what="paused deployment scaled")
        [rs] = await owned_rss(h, d)
        assert rs["spec"]["replicas"] == 4
        assert {p["spec"]["containers"][0]["image"] for p in active_pods(await h.pods())} == {"nginx:1"}

        await h.client.patch(DEPLOYMENTS, "web", {"spec": {"paused": False}}, "default")
        d = await complete(h)
        assert len(await owned_rss(h, d)) == 2
        assert {p["spec"]["containers"][0]["image"] for p in active_pods(await h.pods())} == {"nginx:2"}


async def test_progress_deadline_exceeded_when_new_pods_never_become_ready() -> None:
    async with controller_harness(DeploymentController, ReplicaSetController) as h:
        await h.client.create(DEPLOYMENTS, deployment(replicas=2, progressDeadlineSeconds=2,
                                                      pod_annotations=NEVER_READY))

        async def timed_out() -> dict[str, Any] | None:
            got = await get_d(h)
            cond = condition(got, "Progressing")
            return got if cond is not None and cond["reason"] == "ProgressDeadlineExceeded" else None
        d = await wait_for(timed_out, timeout=15, what="ProgressDeadlineExceeded")
        cond = condition(d, "Progressing")
        [rs] = await owned_rss(h, d)
        assert cond is not None
        assert (cond["status"], cond["message"]) == (
            "False", f'ReplicaSet "{rs["metadata"]["name"]}" has timed out progressing.')
        available = condition(d, "Available")
        assert available is not None
        assert available["status"] == "False"


async def test_rollback_by_template_and_by_the_deprecated_annotation() -> None:
    async with controller_harness(DeploymentController, ReplicaSetController) as h:
        await h.client.create(DEPLOYMENTS, deployment(replicas=2))
        d = await complete(h)
        first_rs = (await owned_rss(h, d))[0]
        await set_image(h, "nginx:2")
        await complete(h)
        # kubectl rollout undo: the old template comes back and its ReplicaSet becomes the new one again.
        await set_image(h, "nginx:1")
        d = await complete(h)
        rss = {rs["metadata"]["name"]: rs for rs in await owned_rss(h, d)}
        assert len(rss) == 2
        back = rss[first_rs["metadata"]["name"]]
        assert back["spec"]["replicas"] == 2
        assert back["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
        assert back["metadata"]["annotations"]["deployment.kubernetes.io/revision-history"] == "1"
        assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"

        # The extensions/v1beta1 rollbackTo round-trip annotation: back to revision 2.
        await h.client.patch(DEPLOYMENTS, "web", {"metadata": {"annotations": {
            "deprecated.deployment.rollback.to": "2"}}}, "default")

        async def rolled_back() -> dict[str, Any] | None:
            got = await get_d(h)
            image = got["spec"]["template"]["spec"]["containers"][0]["image"]
            annotations = got["metadata"].get("annotations") or {}
            return got if image == "nginx:2" and "deprecated.deployment.rollback.to" not in annotations else None
        await wait_for(rolled_back, what="rollback to revision 2")
        d = await complete(h)
        assert {p["spec"]["containers"][0]["image"] for p in active_pods(await h.pods())} == {"nginx:2"}
        events = [(e["type"], e["reason"], e["message"]) for e in await h.events_for("web")]
        assert ("Normal", "DeploymentRollback", 'Rolled back deployment "web" to revision 2') in events


async def test_revision_history_limit_deletes_the_oldest_empty_replica_sets() -> None:
    async with controller_harness(DeploymentController, ReplicaSetController) as h:
        await h.client.create(DEPLOYMENTS, deployment(replicas=1, revisionHistoryLimit=1))
        await complete(h)
        for image in ("nginx:2", "nginx:3"):
            await set_image(h, image)
            d = await complete(h)

        async def trimmed() -> list[dict[str, Any]] | None:
            rss = await owned_rss(h, d)
            return rss if len(rss) == 2 else None
        old, new = await wait_for(trimmed, what="history trimmed to one old ReplicaSet")
        assert old["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
        assert new["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"


# --- adoption and bad input -------------------------------------------------------------------------------


async def test_existing_replica_set_and_pods_are_adopted_not_recreated() -> None:
    async with controller_harness(DeploymentController, ReplicaSetController) as h:
        template = deployment()["spec"]["template"]
        rs_template = {**template, "metadata": {"labels": {"app": "web", "pod-template-hash": "5d4f8b9c7"}}}
        orphan = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                  "metadata": {"name": "web-5d4f8b9c7", "namespace": "default",
                               "labels": {"app": "web", "pod-template-hash": "5d4f8b9c7"}},
                  "spec": {"replicas": 3, "template": rs_template,
                           "selector": {"matchLabels": {"app": "web", "pod-template-hash": "5d4f8b9c7"}}}}
        await h.client.create(REPLICASETS, orphan)

        async def pods_ready() -> list[dict[str, Any]] | None:
            pods = [p for p in active_pods(await h.pods()) if is_pod_ready(p)]
            return pods if len(pods) == 3 else None
        before = {p["metadata"]["uid"] for p in await wait_for(pods_ready, what="orphan RS pods ready")}

        created = await h.client.create(DEPLOYMENTS, deployment())
        d = await complete(h)
        [rs] = await owned_rss(h, d)
        assert rs["metadata"]["name"] == "web-5d4f8b9c7"
        assert controller_ref(rs) == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                      "uid": created["metadata"]["uid"], "controller": True,
                                      "blockOwnerDeletion": True}
        assert {p["metadata"]["uid"] for p in active_pods(await h.pods())} == before
        assert rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"


async def test_foreign_replica_sets_are_left_alone_and_unselected_ones_released() -> None:
    async with controller_harness(DeploymentController, ReplicaSetController) as h:
        web = await h.client.create(DEPLOYMENTS, deployment("web", replicas=1))
        await complete(h, "web")
        # A second Deployment selecting the same pods (a user error): controller references keep each to its own.
        other = deployment("other", replicas=1)
        other["spec"]["selector"] = {"matchLabels": {"app": "web"}}
        other["spec"]["template"]["metadata"]["labels"] = {"app": "web"}
        await h.client.create(DEPLOYMENTS, other)
        await complete(h, "other")
        [rs_web] = await owned_rss(h, await get_d(h, "web"))
        [rs_other] = await owned_rss(h, await get_d(h, "other"))
        assert rs_web["metadata"]["uid"] != rs_other["metadata"]["uid"]

        # web's ReplicaSet stops matching its selector: released (and nobody adopts it), web makes a new one.
        await h.client.patch(REPLICASETS, rs_web["metadata"]["name"],
                             {"metadata": {"labels": {"app": "elsewhere"}}}, "default")

        async def released() -> dict[str, Any] | None:
            rs = await h.client.get(REPLICASETS, rs_web["metadata"]["name"], "default")
            return rs if controller_ref(rs) is None else None
        await wait_for(released, what="the unselected ReplicaSet released")

        async def replaced() -> list[dict[str, Any]] | None:
            # The Deployment's status still reads complete from before the release until it syncs again.
            owned = await owned_rss(h, await get_d(h, "web"))
            return owned if owned and owned[0]["metadata"]["uid"] != rs_web["metadata"]["uid"] else None
        await wait_for(replaced, what="web to own a new ReplicaSet")
        d = await complete(h, "web")
        [rs_new] = await owned_rss(h, d)
        assert rs_new["metadata"]["uid"] != rs_web["metadata"]["uid"]
        assert d["metadata"]["uid"] == web["metadata"]["uid"]
        [still_other] = await owned_rss(h, await get_d(h, "other"))
        assert still_other["metadata"]["uid"] == rs_other["metadata"]["uid"]
        orphan = await h.client.get(REPLICASETS, rs_web["metadata"]["name"], "default")
        assert controller_ref(orphan) is None


async def test_refused_pod_creates_surface_as_replica_failure_on_the_deployment() -> None:
    async with controller_harness(DeploymentController, ReplicaSetController) as h:
        rule = h.cluster.faults.fail(403, verbs=["create"], resources=["pods"])
        await h.client.create(DEPLOYMENTS, deployment(replicas=2))

        async def failing() -> dict[str, Any] | None:
            got = await get_d(h)
            return got if condition(got, "ReplicaFailure") is not None else None
        d = await wait_for(failing, what="ReplicaFailure on the Deployment")
        cond = condition(d, "ReplicaFailure")
        assert cond is not None
        assert (cond["status"], cond["reason"]) == ("True", "FailedCreate")
        [rs] = await owned_rss(h, d)
        rs_events = [(e["type"], e["reason"]) for e in await h.events_for(rs["metadata"]["name"])]
        assert ("Warning", "FailedCreate") in rs_events

        h.cluster.faults.rules.remove(rule)
        d = await complete(h, timeout=30)
        assert condition(d, "ReplicaFailure") is None


async def test_refused_replica_set_create_reports_replica_set_create_error() -> None:
    async with controller_harness(DeploymentController, ReplicaSetController) as h:
        rule = h.cluster.faults.fail(403, verbs=["create"], resources=["replicasets"])
        await h.client.create(DEPLOYMENTS, deployment(replicas=1))

        async def reported() -> dict[str, Any] | None:
            got = await get_d(h)
            cond = condition(got, "Progressing")
            return got if cond is not None and cond["reason"] == "ReplicaSetCreateError" else None
        d = await wait_for(reported, what="ReplicaSetCreateError")
        cond = condition(d, "Progressing")
        assert cond is not None
        assert cond["status"] == "False"
        assert cond["message"].startswith('Failed to create new replica set "web-')
        warnings = [e for e in await h.events_for("web") if e["type"] == "Warning"]
        assert {e["reason"] for e in warnings} == {"ReplicaSetCreateError"}

        h.cluster.faults.rules.remove(rule)
        await complete(h, timeout=30)


async def test_deployment_being_deleted_is_not_rolled() -> None:
    async with controller_harness(DeploymentController, ReplicaSetController) as h:
        body = deployment(replicas=1)
        body["metadata"]["finalizers"] = ["example.com/hold"]
        await h.client.create(DEPLOYMENTS, body)
        d = await complete(h)
        await h.client.delete(DEPLOYMENTS, "web", "default")
        await h.client.patch(DEPLOYMENTS, "web", {"spec": {"replicas": 2}}, "default")

        async def observed() -> dict[str, Any] | None:
            got = await get_d(h)
            return got if (got.get("status") or {}).get("observedGeneration") == got["metadata"]["generation"] \
                else None
        d = await wait_for(observed, what="status of the deleted Deployment")
        assert is_being_deleted(d)
        [rs] = await owned_rss(h, d)
        assert rs["spec"]["replicas"] == 1  # status only: no scaling while being deleted


async def test_syncs_wait_for_the_cache_to_show_their_own_writes_no_conflicts(tmp_path: Path) -> None:
    # The Deployment and ReplicaSet watches lag every write by 0.5 s through a rolling update: without
    # read-your-own-writes each ReplicaSet status change syncs the Deployment from a copy older than its own last
    # status write, and its status update fails with 409 Conflict (58 of 74 did). Counted from kube-sim's audit
    # log.
    audit = tmp_path / "audit.log"
    async with controller_harness(DeploymentController, ReplicaSetController, start=False,
                                  audit_log_path=audit) as h:
        h.cluster.faults.slow_watch(0.5, resources=["deployments", "replicasets"])
        await h.start()
        await h.client.create(DEPLOYMENTS, deployment(replicas=6, strategy=rolling(2, 1)))
        await complete(h, timeout=40.0)
        await set_image(h, "nginx:2")
        await complete(h, timeout=40.0)
    status_writes = writes(audit, "deployments", "status")
    assert len(status_writes) >= 4  # statuses were written along the way
    assert conflicts(status_writes) == [], describe(status_writes)
    # The Deployment's scales of its ReplicaSets wait likewise for the ReplicaSet controller's status writes to
    # reach the shared cache (36 of 43 conflicted without): only a scale racing a status write still in flight
    # can conflict now.
    scales = writes(audit, "replicasets")
    assert len(scales) >= 4  # the rollout scaled both ReplicaSets, step by step
    assert len(conflicts(scales)) <= 3, describe(scales)
