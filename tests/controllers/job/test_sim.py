"""The Job controller in-process against kube-sim: what a client sees through the API."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from controller_manager.api.meta import parse_time
from controller_manager.api.resources import JOBS, PODS
from controller_manager.client.errors import Invalid
from controller_manager.controllers.job import JobController
from controller_manager.runtime.controller import ControllerContext
from tests.controllers.audit import conflicts, describe, writes
from tests.controllers.harness import Harness, controller_harness, wait_for

ANN = "sim.controller-manager.io/"
KUBECTL = str(Path(sys.executable).parent / "kubectl")


class FastJobController(JobController):
    """Upstream behaviour with the pod-recreation backoff and the batching shortened for real-time tests."""

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, pod_backoff_base=0.2, pod_backoff_max=1.0, sync_batch_period=0.05)


def job_manifest(name: str, *, completions: int | None = 1, parallelism: int = 1, backoff_limit: int = 6,
                 run_seconds: float = 0.2, exit_code: int = 0, restart_policy: str = "Never",
                 **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"parallelism": parallelism, "backoffLimit": backoff_limit, **spec}
    if completions is not None:
        body["completions"] = completions
    body["template"] = {
        "metadata": {"annotations": {ANN + "run-seconds": str(run_seconds), ANN + "exit-code": str(exit_code)}},
        "spec": {"restartPolicy": restart_policy, "containers": [{"name": "main", "image": "busybox"}]},
    }
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "default"},
            "spec": body}


def cond_types(job: dict[str, Any]) -> list[str]:
    return [c["type"] for c in (job.get("status") or {}).get("conditions") or () if c.get("status") == "True"]


async def wait_condition(h: Harness, name: str, ctype: str, timeout: float = 20.0) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        job = await h.client.get(JOBS, name, "default")
        return job if ctype in cond_types(job) else None
    return await wait_for(check, timeout=timeout, what=f"job {name} {ctype}")


async def test_job_completes() -> None:
    async with controller_harness(FastJobController) as h:
        await h.client.create(JOBS, job_manifest("ok", completions=3, parallelism=2), "default")
        job = await wait_condition(h, "ok", "Complete")
        status = job["status"]
        assert status["succeeded"] == 3
        assert cond_types(job) == ["SuccessCriteriaMet", "Complete"]
        assert status.get("active", 0) == 0
        assert status["ready"] == 0
        assert status["terminating"] == 0
        assert status["completionTime"]
        assert status["startTime"]
        assert status["uncountedTerminatedPods"] == {}
        pods = await h.pods()
        assert len(pods) == 3
        assert all(not p["metadata"].get("finalizers") for p in pods)


async def kubectl(h: Harness, home: Path, *args: str, timeout: float = 60.0) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        KUBECTL, "--kubeconfig", str(h.cluster.kubeconfig_path), "--cache-dir", str(home / "cache"),
        "-n", "default", *args, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT, env={**os.environ, "HOME": str(home)})
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def event_reasons(h: Harness, name: str) -> list[str]:
    async def check() -> list[str] | None:
        return [e["reason"] for e in await h.events_for(name)] or None
    return await wait_for(check, what=f"events of {name}")


async def test_kubectl_wait_complete(tmp_path: Path) -> None:
    async with controller_harness(FastJobController) as h:
        await h.client.create(JOBS, job_manifest("pi", completions=2, parallelism=2), "default")
        code, out = await kubectl(h, tmp_path, "wait", "--for=condition=complete", "job/pi", "--timeout=30s")
        assert code == 0, out
        assert "condition met" in out

        async def completed_event() -> bool:
            return "Completed" in [e["reason"] for e in await h.events_for("pi")]
        await wait_for(completed_event, what="Completed event")
        reasons = [e["reason"] for e in await h.events_for("pi")]
        assert reasons.count("SuccessfulCreate") == 2


async def test_backoff_limit_exceeded_kubectl_wait_failed(tmp_path: Path) -> None:
    async with controller_harness(FastJobController) as h:
        await h.client.create(JOBS, job_manifest("boom", backoff_limit=1, exit_code=1, run_seconds=0.1), "default")
        code, out = await kubectl(h, tmp_path, "wait", "--for=condition=failed", "job/boom", "--timeout=30s")
        assert code == 0, out
        job = await h.client.get(JOBS, "boom", "default")
        status = job["status"]
        assert status["failed"] == 2
        assert status.get("succeeded", 0) == 0
        failed = [c for c in status["conditions"] if c["type"] in ("FailureTarget", "Failed")]
        assert [(c["type"], c["reason"], c["message"]) for c in failed] == [
            ("FailureTarget", "BackoffLimitExceeded", "Job has reached the specified backoff limit"),
            ("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit"),
        ]
        assert "completionTime" not in status
        pods = await h.pods()
        assert len(pods) == 2
        assert all(p["status"]["phase"] == "Failed" for p in pods)
        assert all(not p["metadata"].get("finalizers") for p in pods)

        async def warned() -> bool:
            return "BackoffLimitExceeded" in [e["reason"] for e in await h.events_for("boom")]
        await wait_for(warned, what="BackoffLimitExceeded event")


async def test_indexed_job_completes_every_index() -> None:
    async with controller_harness(FastJobController) as h:
        await h.client.create(JOBS, job_manifest("idx", completions=3, parallelism=3, completionMode="Indexed"),
                              "default")
        job = await wait_condition(h, "idx", "Complete")
        assert job["status"]["completedIndexes"] == "0-2"
        assert job["status"]["succeeded"] == 3
        pods = await h.pods()
        by_index = {p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]: p for p in pods}
        assert sorted(by_index) == ["0", "1", "2"]
        for ix, pod in by_index.items():
            assert pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] == ix
            assert pod["spec"]["hostname"] == f"idx-{ix}"
            assert pod["metadata"]["name"].startswith(f"idx-{ix}-")
            env = pod["spec"]["containers"][0]["env"]
            assert {"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
                "apiVersion": "v1", "fieldPath": "metadata.labels['batch.kubernetes.io/job-completion-index']"}}} in env


async def test_restart_mid_job_counts_every_pod_once() -> None:
    async with controller_harness(FastJobController) as h:
        await h.client.create(JOBS, job_manifest("many", completions=8, parallelism=3, run_seconds=0.3), "default")

        async def some_done() -> bool:
            job = await h.client.get(JOBS, "many", "default")
            return int(job["status"].get("succeeded", 0)) >= 2
        await wait_for(some_done, what="first successes")
        await h.restart(graceful=False)  # a crash: in-flight syncs are abandoned wherever they are

        async def more_done() -> bool:
            job = await h.client.get(JOBS, "many", "default")
            return int(job["status"].get("succeeded", 0)) >= 5
        await wait_for(more_done, what="more successes")
        await h.restart()
        job = await wait_condition(h, "many", "Complete")
        pods = await h.pods()
        succeeded_pods = [p for p in pods if p["status"]["phase"] == "Succeeded"]
        assert job["status"]["succeeded"] == len(succeeded_pods) == 8
        assert job["status"].get("failed", 0) == 0
        assert all(not p["metadata"].get("finalizers") for p in pods)


async def test_user_deleting_a_running_pod_counts_a_failure_and_replaces_it() -> None:
    async with controller_harness(FastJobController) as h:
        await h.client.create(JOBS, job_manifest("long", run_seconds=60), "default")

        async def running() -> dict[str, Any] | None:
            pods = await h.pods()
            return pods[0] if pods and pods[0]["status"].get("phase") == "Running" else None
        victim = await wait_for(running, what="a running pod")
        await h.client.delete(PODS, victim["metadata"]["name"], "default")

        async def replaced() -> dict[str, Any] | None:
            job = await h.client.get(JOBS, "long", "default")
            pods = await h.pods()
            uids = {p["metadata"]["uid"] for p in pods}
            # active is written by a sync after the replacement's create reached the cache (read-your-own-writes)
            if job["status"].get("failed") == 1 and victim["metadata"]["uid"] not in uids and len(pods) == 1 \
                    and job["status"].get("active") == 1:
                return job
            return None
        job = await wait_for(replaced, what="failure counted and pod replaced")
        assert job["status"]["uncountedTerminatedPods"] == {}
        assert job["status"]["active"] == 1
        assert not cond_types(job)


async def test_pending_past_active_deadline_fails_with_deadline_exceeded() -> None:
    async with controller_harness(FastJobController) as h:
        manifest = job_manifest("stuck", activeDeadlineSeconds=2)
        manifest["spec"]["template"]["spec"]["nodeSelector"] = {"no-such-label": "x"}
        await h.client.create(JOBS, manifest, "default")
        job = await wait_condition(h, "stuck", "Failed", timeout=15)
        conds = [(c["type"], c.get("reason")) for c in job["status"]["conditions"]]
        assert conds == [("FailureTarget", "DeadlineExceeded"), ("Failed", "DeadlineExceeded")]
        assert job["status"]["failed"] == 1
        start = parse_time(job["status"]["startTime"])
        failed_at = parse_time(job["status"]["conditions"][-1]["lastTransitionTime"])
        assert start is not None
        assert failed_at is not None
        assert failed_at - start >= 2

        async def pods_gone() -> bool:
            return not await h.pods()
        await wait_for(pods_gone, what="pending pod deleted")
        assert "DeadlineExceeded" in await event_reasons(h, "stuck")


async def test_suspend_and_resume() -> None:
    async with controller_harness(FastJobController) as h:
        await h.client.create(JOBS, job_manifest("sus", completions=2, parallelism=2, run_seconds=0.3,
                                                 suspend=True), "default")
        job = await wait_condition(h, "sus", "Suspended")
        assert "startTime" not in job["status"]
        assert await h.pods() == []
        await h.client.patch(JOBS, "sus", {"spec": {"suspend": False}}, "default")
        job = await wait_condition(h, "sus", "Complete")
        suspended = next(c for c in job["status"]["conditions"] if c["type"] == "Suspended")
        assert (suspended["status"], suspended["reason"], suspended["message"]) == ("False", "JobResumed",
                                                                                    "Job resumed")
        reasons = await event_reasons(h, "sus")
        assert "Suspended" in reasons
        assert "Resumed" in reasons


async def test_pod_failure_policy_fail_job() -> None:
    async with controller_harness(FastJobController) as h:
        manifest = job_manifest("pfp", exit_code=42, podFailurePolicy={"rules": [
            {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]})
        await h.client.create(JOBS, manifest, "default")
        job = await wait_condition(h, "pfp", "Failed")
        failed = job["status"]["conditions"][-1]
        assert failed["reason"] == "PodFailurePolicy"
        assert failed["message"].startswith("Container main for pod default/pfp-")
        assert failed["message"].endswith("failed with exit code 42 matching FailJob rule at index 0")
        assert job["status"]["failed"] == 1


async def test_invalid_job_is_refused_and_others_run() -> None:
    async with controller_harness(FastJobController) as h:
        with pytest.raises(Invalid):
            await h.client.create(JOBS, job_manifest("neg", parallelism=-1), "default")
        await h.client.create(JOBS, job_manifest("fine"), "default")
        await wait_condition(h, "fine", "Complete")


async def test_syncs_wait_for_the_cache_to_show_their_own_writes_no_conflicts(tmp_path: Path) -> None:
    # The Job and pod watches lag the controller's writes by 0.5 s while pods start and finish: without
    # read-your-own-writes a sync reads a Job older than its last status write, and that status update fails
    # with 409 Conflict. Counted from kube-sim's audit log.
    audit = tmp_path / "audit.log"
    async with controller_harness(FastJobController, start=False, audit_log_path=audit) as h:
        h.cluster.faults.slow_watch(0.5, resources=["jobs", "pods"])
        await h.start()
        await h.client.create(JOBS, job_manifest("steady", completions=8, parallelism=4, run_seconds=0.3),
                              "default")
        job = await wait_condition(h, "steady", "Complete", timeout=40.0)
        assert job["status"]["succeeded"] == 8
    status_writes = writes(audit, "jobs", "status")
    assert len(status_writes) >= 4  # statuses were written along the way
    assert conflicts(status_writes) == [], describe(status_writes)
    assert len(writes(audit, "pods", verbs=("create",))) == 8  # no pod created twice for one completion
