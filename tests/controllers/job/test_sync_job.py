"""``syncJob`` over cached Jobs and pods with a recording client: job_controller_test.go's TestControllerSyncJob,
TestSyncJobPastDeadline, TestSyncJobWithJobPodFailurePolicy (excerpts), TestSyncJobComplete, TestSyncJobDeleted,
TestSyncJobWhenManagedBy and TestSingleJobFailedCondition.

Upstream's tables switch feature gates; these rows are the ones for today's defaults (JobPodReplacementPolicy,
JobManagedBy, JobSuccessPolicy, JobBackoffLimitPerIndex, PodIndexLabel on): ``terminating`` is always reported and
``Failed``/``Complete`` follow ``FailureTarget``/``SuccessCriteriaMet``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from bench.walks import StoreWalks
from controller_manager.api.meta import format_time, key_of
from controller_manager.client.errors import ApiError, ServerError
from controller_manager.controllers.job.backoff import BackoffRecord

from .fakes import INDEX, RecordingClient, build_pod, cache, new_controller, new_job

BLE = ("FailureTarget", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
BLE_FAILED = ("Failed", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
DEADLINE = ("FailureTarget", "True", "DeadlineExceeded", "Job was active longer than specified deadline")
DEADLINE_FAILED = ("Failed", "True", "DeadlineExceeded", "Job was active longer than specified deadline")
SCM = ("SuccessCriteriaMet", "True", "CompletionsReached", "Reached expected number of succeeded pods")
COMPLETE = ("Complete", "True", "CompletionsReached", "Reached expected number of succeeded pods")
SUSPENDED = ("Suspended", "True", "JobSuspended", "Job suspended")
RESUMED = ("Suspended", "False", "JobResumed", "Job resumed")


@dataclass
class Case:
    parallelism: int | None
    completions: int | None
    backoff_limit: int = 6
    deleting: bool = False
    pod_limit: int = 0
    indexed: bool = False
    was_suspended: bool = False
    suspend: bool = False
    pod_replacement_policy: str | None = None
    pod_failure_policy: dict[str, Any] | None = None
    initial: dict[str, Any] | None = None
    backoff_failures: int | None = None
    pod_error: bool = False
    pending: int = 0
    active: int = 0
    ready: int = 0
    succeeded: int = 0
    failed: int = 0
    terminating: int = 0
    indexed_pods: list[tuple[str | None, str]] = field(default_factory=list)
    expect_creations_before: int = 0  # negative: deletions

    want_creations: int = 0
    want_deletions: int = 0
    want_active: int = 0
    want_ready: int = 0
    want_succeeded: int = 0
    want_completed: str = ""
    want_failed: int = 0
    want_terminating: int = 0
    want_conditions: list[tuple[str, str, str, str]] = field(default_factory=list)
    want_indexes: set[int] = field(default_factory=set)
    want_patches: int = 0


CASES = [
    pytest.param(Case(2, 5, want_creations=2, want_active=2), id="job start"),
    pytest.param(Case(2, None, want_creations=2, want_active=2), id="WQ job start"),
    pytest.param(Case(2, 5, pending=2, want_active=2), id="pending pods"),
    pytest.param(Case(3, 5, active=3, ready=2, want_active=3, want_ready=2), id="correct # of pods"),
    pytest.param(Case(2, None, active=2, want_active=2), id="WQ job: correct # of pods"),
    pytest.param(Case(2, 5, active=1, succeeded=1, want_creations=1, want_active=2, want_succeeded=1,
                      want_patches=1), id="too few active pods"),
    pytest.param(Case(1, None, active=1, failed=1, terminating=1, pod_replacement_policy="Failed",
                      want_terminating=1, want_patches=1, want_failed=1, want_active=1),
                 id="WQ job: recreate pods when failed"),
    pytest.param(Case(1, 1, active=1, failed=1, terminating=1, want_terminating=1, want_active=1, want_patches=2,
                      want_failed=2), id="WQ job: PodReplacementPolicy not set"),
    pytest.param(Case(1, None, active=1, failed=1, terminating=1, pod_replacement_policy="TerminatingOrFailed",
                      want_terminating=1, want_active=1, want_patches=2, want_failed=2),
                 id="WQ job: recreate pods when terminating or failed"),
    pytest.param(Case(1, 1, active=2, terminating=4, pod_replacement_policy="Failed", want_terminating=5,
                      want_active=1, want_deletions=1, want_patches=1),
                 id="more terminating pods than parallelism"),
    pytest.param(Case(1, 1, active=2, terminating=4, pod_failure_policy={}, want_terminating=5, want_active=1,
                      want_deletions=1, want_patches=1),
                 id="more terminating pods than parallelism; PodFailurePolicy used"),
    pytest.param(Case(1, 1, backoff_failures=1, initial={}, want_active=0),
                 id="too few active pods and active back-off"),
    pytest.param(Case(1, 1, backoff_failures=0, want_creations=1, want_active=1),
                 id="too few active pods and no back-offs"),
    pytest.param(Case(2, None, active=1, want_creations=1, want_active=2),
                 id="too few active pods with a dynamic job"),
    pytest.param(Case(2, 5, pod_error=True, active=1, succeeded=1, want_creations=1, want_active=1,
                      want_patches=1), id="too few active pods, with controller error"),
    pytest.param(Case(2, 5, active=3, want_deletions=1, want_active=2, want_patches=1, want_terminating=1),
                 id="too many active pods"),
    pytest.param(Case(2, 5, pod_error=True, active=3, want_patches=1, want_active=3),
                 id="too many active pods, with controller error"),
    pytest.param(Case(2, 5, active=3, ready=3, want_deletions=1, want_active=2, want_patches=1, want_ready=2,
                      want_terminating=1), id="count ready pods when too many active pods"),
    pytest.param(Case(2, 5, active=1, succeeded=1, failed=1, want_creations=1, want_active=2, want_succeeded=1,
                      want_failed=1, want_patches=2), id="failed + succeed pods: reset backoff delay"),
    pytest.param(Case(2, 5, active=1, failed=1, want_creations=1, want_active=2, want_failed=1, want_patches=1),
                 id="new failed pod"),
    pytest.param(Case(1, 1, initial={"active": 1, "failed": 1}, active=1, want_active=1, want_failed=1),
                 id="no new pod; possible finalizer update of failed pod"),
    pytest.param(Case(2, 5, pod_error=True, active=1, failed=1, want_creations=1, want_active=1, want_patches=1),
                 id="only new failed pod with controller error"),
    pytest.param(Case(2, 5, succeeded=5, want_succeeded=5, want_conditions=[SCM, COMPLETE], want_patches=5),
                 id="job finish"),
    pytest.param(Case(2, None, active=1, succeeded=1, want_active=1, want_succeeded=1, want_patches=1),
                 id="WQ job finishing"),
    pytest.param(Case(2, None, succeeded=2, want_succeeded=2, want_conditions=[SCM, COMPLETE], want_patches=2),
                 id="WQ job all finished"),
    pytest.param(Case(2, None, succeeded=1, failed=1, want_succeeded=1, want_failed=1,
                      want_conditions=[SCM, COMPLETE], want_patches=2),
                 id="WQ job all finished despite one failure"),
    pytest.param(Case(2, 5, active=10, want_deletions=8, want_active=2, want_patches=8, want_terminating=8),
                 id="more active pods than parallelism"),
    pytest.param(Case(3, 4, active=3, succeeded=2, want_deletions=1, want_active=2, want_succeeded=2,
                      want_patches=3, want_terminating=1), id="more active pods than remaining completions"),
    pytest.param(Case(2, 5, active=2, succeeded=2, want_active=2, want_succeeded=2, want_patches=2),
                 id="status change"),
    pytest.param(Case(2, 5, deleting=True, pending=1, active=1, succeeded=1, want_active=2, want_succeeded=1,
                      want_patches=3), id="deleting job"),
    pytest.param(Case(100, 200, pod_limit=10, want_creations=10, want_active=10), id="limited pods"),
    pytest.param(Case(2, 5, backoff_limit=0, deleting=True, failed=1, want_failed=1,
                      want_conditions=[BLE, BLE_FAILED], want_patches=1), id="too many job failures"),
    pytest.param(Case(2, 5, backoff_limit=0, deleting=True, failed=1, expect_creations_before=1, want_failed=1,
                      want_patches=1), id="job failures, unsatisfied expectations"),
    pytest.param(Case(2, 5, indexed=True, want_creations=2, want_active=2, want_indexes={0, 1}),
                 id="indexed job start"),
    pytest.param(Case(2, 5, indexed=True, pod_replacement_policy="Failed", terminating=1, want_creations=1,
                      want_active=1, want_indexes={0}, want_terminating=1),
                 id="indexed job with some pods deleted, podReplacementPolicy Failed"),
    pytest.param(Case(2, 5, indexed=True, pod_replacement_policy="TerminatingOrFailed", terminating=1,
                      want_creations=2, want_active=2, want_indexes={0, 1}, want_terminating=1, want_patches=1),
                 id="indexed job with some pods deleted, podReplacementPolicy TerminatingOrFailed"),
    pytest.param(Case(2, 3, indexed=True, indexed_pods=[("0", "Succeeded"), ("1", "Failed"), ("1", "Succeeded"),
                                                        ("2", "Succeeded")],
                      want_succeeded=3, want_failed=1, want_completed="0-2", want_conditions=[SCM, COMPLETE],
                      want_patches=4), id="indexed job completed"),
    pytest.param(Case(2, 3, backoff_limit=0, indexed=True,
                      indexed_pods=[("0", "Succeeded"), ("1", "Failed"), ("2", "Running")],
                      want_succeeded=1, want_failed=2, want_completed="0", want_conditions=[BLE], want_patches=3,
                      want_deletions=1, want_terminating=1), id="indexed job failed"),
    pytest.param(Case(2, 3, backoff_limit=0, active=2, ready=2, failed=1, want_failed=3, want_conditions=[BLE],
                      want_patches=3, want_deletions=2, want_terminating=2), id="count ready pods when job fails"),
    pytest.param(Case(2, 3, indexed=True, indexed_pods=[("0", "Succeeded"), ("1", "Succeeded"),
                                                        ("1", "Succeeded")],
                      want_creations=1, want_active=1, want_succeeded=2, want_completed="0,1", want_indexes={2},
                      want_patches=3), id="indexed job repeated completed index"),
    pytest.param(Case(8, 20, indexed=True, indexed_pods=[
        ("0", "Running"), ("2", "Succeeded"), ("3", "Pending"), ("4", "Succeeded"), ("5", "Succeeded"),
        ("7", "Succeeded"), ("8", "Succeeded"), ("9", "Succeeded")],
        want_creations=6, want_active=8, want_succeeded=6, want_completed="2,4,5,7-9",
        want_indexes={1, 6, 10, 11, 12, 13}, want_patches=6), id="indexed job some running and completed pods"),
    pytest.param(Case(3, 4, indexed=True, indexed_pods=[("0", "Failed"), ("1", "Pending"), ("2", "Failed")],
                      want_creations=2, want_active=3, want_failed=2, want_indexes={0, 2}, want_patches=2),
                 id="indexed job some failed pods"),
    pytest.param(Case(2, 5, indexed=True, active=1, succeeded=1, failed=1, indexed_pods=[
        ("invalid", "Running"), ("invalid", "Succeeded"), ("invalid", "Failed"), ("invalid", "Pending"),
        ("0", "Succeeded"), ("1", "Running"), ("2", "Running")],
        want_deletions=3, want_active=2, want_succeeded=1, want_completed="0", want_patches=8, want_terminating=3),
        id="indexed job some pods without index"),
    pytest.param(Case(5, 5, indexed=True, succeeded=1, failed=1, indexed_pods=[
        ("invalid", "Running"), ("0", "Succeeded"), ("1", "Running"), ("2", "Running"), ("2", "Pending")],
        want_deletions=2, want_active=2, want_succeeded=1, want_completed="0", want_patches=5, want_terminating=2),
        id="indexed job repeated indexes"),
    pytest.param(Case(2, 5, indexed=True, indexed_pods=[
        ("0", "Succeeded"), ("5", "Running"), ("6", "Succeeded"), ("7", "Pending"), ("8", "Failed")],
        want_succeeded=1, want_deletions=2, want_completed="0", want_patches=5, want_terminating=2),
        id="indexed job with indexes outside of range"),
    pytest.param(Case(2, 4, suspend=True, active=2, want_deletions=2, want_conditions=[SUSPENDED], want_patches=2,
                      want_terminating=2), id="suspending a job with satisfied expectations"),
    pytest.param(Case(2, 4, suspend=True, active=2, ready=2, want_deletions=2, want_conditions=[SUSPENDED],
                      want_patches=2, want_terminating=2),
                 id="count ready pods when suspending a job with satisfied expectations"),
    pytest.param(Case(2, 4, suspend=True, active=3, expect_creations_before=-1, want_active=3),
                 id="suspending a job with unsatisfied expectations"),
    pytest.param(Case(2, 4, suspend=True, active=3, ready=3, expect_creations_before=-1, want_active=3,
                      want_ready=3), id="count ready pods when suspending a job with unsatisfied expectations"),
    pytest.param(Case(2, 4, was_suspended=True, want_creations=2, want_active=2, want_conditions=[RESUMED]),
                 id="resuming a suspended job"),
    pytest.param(Case(2, 4, suspend=True, deleting=True, active=2, want_active=2, want_patches=2),
                 id="suspending a deleted job"),
    pytest.param(Case(1, 1, active=1, ready=1, initial={"active": 1, "conditions": [
        {"type": "FailureTarget", "status": "False", "reason": "ConditionAddedManually", "message": "Testing"}]},
        want_active=1, want_ready=1,
        want_conditions=[("FailureTarget", "False", "ConditionAddedManually", "Testing")]),
        id="FailureTarget=False condition added manually is ignored"),
    pytest.param(Case(1, 1, active=1, ready=1, initial={"active": 1, "conditions": [
        {"type": "SuccessCriteriaMet", "status": "False", "reason": "ConditionAddedManually", "message": "Testing"}]},
        want_active=1, want_ready=1,
        want_conditions=[("SuccessCriteriaMet", "False", "ConditionAddedManually", "Testing")]),
        id="SuccessCriteriaMet=False condition added manually is ignored"),
]


def _conds(status: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    return [(c["type"], c["status"], c.get("reason", ""), c.get("message", "")) for c in status.get("conditions", [])]


@pytest.mark.parametrize("tc", CASES)
async def test_controller_sync_job(tc: Case) -> None:
    client = RecordingClient(error=ServerError(500, "InternalError", "fake error") if tc.pod_error else None,
                             create_limit=tc.pod_limit)
    jm, client, clock = new_controller(client)
    job = new_job(tc.parallelism, tc.completions, tc.backoff_limit, "Indexed" if tc.indexed else None,
                  suspend=tc.suspend)
    if tc.pod_replacement_policy:
        job["spec"]["podReplacementPolicy"] = tc.pod_replacement_policy
    if tc.pod_failure_policy is not None:
        job["spec"]["podFailurePolicy"] = tc.pod_failure_policy
    now = clock.now()
    if tc.initial is not None:
        job["status"] = {"startTime": format_time(now), **tc.initial}
    key = key_of(job)
    if tc.backoff_failures is not None:
        jm.pod_backoff_store.update(BackoffRecord(key, tc.backoff_failures, now))
    if tc.expect_creations_before < 0:
        jm.expectations.expect_deletions(key, -tc.expect_creations_before)
    elif tc.expect_creations_before > 0:
        jm.expectations.expect_creations(key, tc.expect_creations_before)
    if tc.was_suspended:
        job["status"].setdefault("conditions", []).append(
            {"type": "Suspended", "status": "True", "reason": "JobSuspended", "message": "Job suspended"})
    if tc.deleting:
        job["metadata"]["deletionTimestamp"] = format_time(now)
    cache(jm.job_informer, job)
    pods = [build_pod(job, phase="Pending", terminated=True) for _ in range(tc.pending)]
    pods += [build_pod(job, phase="Running", ready=i < tc.ready, terminated=True) for i in range(tc.active)]
    pods += [build_pod(job, phase="Succeeded") for _ in range(tc.succeeded)]
    pods += [build_pod(job, phase="Failed") for _ in range(tc.failed)]
    pods += [build_pod(job, phase="Running", deleted=now, terminated=True) for _ in range(tc.terminating)]
    pods += [build_pod(job, phase=phase, index=ix) for ix, phase in tc.indexed_pods]
    cache(jm.pod_informer, *pods)

    if tc.pod_error or tc.pod_limit:
        with pytest.raises(ApiError):  # the pod control's error
            await jm.sync(key)
    else:
        await jm.sync(key)

    assert len(client.creates) == tc.want_creations
    created_indexes = set()
    for pod in client.creates:
        ref = pod["metadata"]["ownerReferences"][0]
        assert (ref["apiVersion"], ref["kind"], ref["name"], ref["uid"], ref["controller"]) == (
            "batch/v1", "Job", "foobar", "uid-foobar", True)
        assert "batch.kubernetes.io/job-tracking" in pod["metadata"]["finalizers"]
        if tc.indexed:
            ix = pod["metadata"]["annotations"][INDEX]
            created_indexes.add(int(ix))
            assert pod["metadata"]["labels"][INDEX] == ix
            assert pod["spec"]["hostname"] == f"foobar-{ix}"
            assert pod["metadata"]["generateName"] == f"foobar-{ix}-"
        else:
            assert pod["metadata"]["generateName"] == "foobar-"
            assert "hostname" not in pod["spec"]
    assert created_indexes == tc.want_indexes
    assert len(client.deletes) == tc.want_deletions
    assert len(client.patches) == tc.want_patches

    status = client.status_updates[-1]["status"] if client.status_updates else job["status"]
    assert status.get("active", 0) == tc.want_active
    assert status.get("ready") == tc.want_ready
    assert status.get("succeeded", 0) == tc.want_succeeded
    assert status.get("completedIndexes", "") == tc.want_completed
    assert status.get("failed", 0) == tc.want_failed
    assert status.get("terminating") == tc.want_terminating
    assert _conds(status) == tc.want_conditions
    if tc.suspend:
        assert "startTime" not in status
    else:
        assert status.get("startTime")
    if tc.pod_limit:
        assert client.create_calls <= 1 + 2 + 4 + 8  # slow start stopped at the first failing batch


PAST_DEADLINE = [
    pytest.param(dict(parallelism=1, completions=1, deadline=10, started=15, active=1),
                 dict(deletions=1, failed=1, conditions=[DEADLINE]),
                 id="activeDeadlineSeconds less than single pod execution"),
    pytest.param(dict(parallelism=1, completions=2, deadline=10, started=15, active=1, succeeded=1),
                 dict(deletions=1, succeeded=1, failed=1, conditions=[DEADLINE]),
                 id="activeDeadlineSeconds bigger than single pod execution"),
    pytest.param(dict(parallelism=1, completions=1, deadline=10, started=10),
                 dict(conditions=[DEADLINE, DEADLINE_FAILED]),
                 id="activeDeadlineSeconds times-out before any pod starts"),
    pytest.param(dict(parallelism=1, completions=1, deadline=1, started=10, failed=1, backoff_limit=0),
                 dict(failed=1, conditions=[BLE, BLE_FAILED]), id="activeDeadlineSeconds with backofflimit reach"),
    pytest.param(dict(parallelism=1, completions=2, deadline=10, started=15, suspend=True),
                 dict(conditions=[SUSPENDED]), id="activeDeadlineSeconds is not triggered when Job is suspended"),
]


@pytest.mark.parametrize(("setup", "want"), PAST_DEADLINE)
async def test_sync_job_past_deadline(setup: dict[str, Any], want: dict[str, Any]) -> None:
    jm, client, clock = new_controller()
    job = new_job(setup["parallelism"], setup["completions"], setup.get("backoff_limit", 6),
                  activeDeadlineSeconds=setup["deadline"], suspend=setup.get("suspend", False))
    job["status"] = {"startTime": format_time(clock.now() - setup["started"])}
    cache(jm.job_informer, job)
    pods = [build_pod(job, phase="Running", terminated=True) for _ in range(setup.get("active", 0))]
    pods += [build_pod(job, phase="Succeeded") for _ in range(setup.get("succeeded", 0))]
    pods += [build_pod(job, phase="Failed") for _ in range(setup.get("failed", 0))]
    cache(jm.pod_informer, *pods)
    await jm.sync(key_of(job))
    assert client.creates == []
    assert len(client.deletes) == want.get("deletions", 0)
    status = client.status_updates[-1]["status"]
    assert status.get("active", 0) == 0
    assert status.get("succeeded", 0) == want.get("succeeded", 0)
    assert status.get("failed", 0) == want.get("failed", 0)
    assert status.get("startTime")
    assert _conds(status) == want["conditions"]


async def test_active_deadline_requeues_at_the_deadline() -> None:
    jm, _, clock = new_controller()
    job = new_job(1, 1, activeDeadlineSeconds=30)
    job["status"] = {"startTime": format_time(clock.now() - 10)}
    cache(jm.job_informer, job)
    result = await jm.sync(key_of(job))
    assert result is not None
    assert result.requeue_after == pytest.approx(20.0)


async def test_single_job_failed_condition() -> None:
    jm, client, clock = new_controller()
    job = new_job(1, 1, activeDeadlineSeconds=10)
    job["status"] = {"startTime": format_time(clock.now() - 15), "conditions": [
        {"type": "Failed", "status": "False", "reason": "DeadlineExceeded",
         "message": "Job was active longer than specified deadline"}]}
    cache(jm.job_informer, job)
    await jm.sync(key_of(job))
    assert client.deletes == []
    failed = [c for c in client.status_updates[-1]["status"]["conditions"] if c["type"] == "Failed"]
    assert len(failed) == 1
    assert failed[0]["status"] == "True"


async def test_sync_job_complete_is_left_alone() -> None:
    jm, client, _ = new_controller()
    job = new_job(1, 1)
    job["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    cache(jm.job_informer, job)
    await jm.sync(key_of(job))
    assert client.status_updates == []
    assert client.creates == []


async def test_sync_job_deleted() -> None:
    jm, client, _ = new_controller()
    await jm.sync("default/foobar")
    assert client.creates == []
    assert client.deletes == []
    assert client.status_updates == []


@pytest.mark.parametrize(("managed_by", "touched"), [
    pytest.param("custom-managed-by", False, id="custom value: the status is unchanged"),
    pytest.param("kubernetes.io/job-controller", True, id="well-known value: the status is updated"),
    pytest.param(None, True, id="no managedBy: the status is updated"),
])
async def test_sync_job_when_managed_by(managed_by: str | None, touched: bool) -> None:
    jm, client, clock = new_controller()
    job = new_job(2, 2)
    if managed_by:
        job["spec"]["managedBy"] = managed_by
    job["status"] = {"active": 1, "ready": 1, "startTime": format_time(clock.now())}
    cache(jm.job_informer, job)
    await jm.sync(key_of(job))
    if not touched:
        assert client.status_updates == []
        assert client.creates == []
        return
    status = client.status_updates[-1]["status"]
    assert status == {"active": 2, "ready": 0, "terminating": 0, "startTime": job["status"]["startTime"],
                      "uncountedTerminatedPods": {}}


async def test_unknown_completion_mode_is_skipped_with_an_event() -> None:
    jm, client, _ = new_controller()
    job = new_job(1, 1, mode="Bogus")
    cache(jm.job_informer, job)
    await jm.sync(key_of(job))
    assert client.creates == []
    assert client.status_updates == []


async def test_a_sync_walks_its_own_pods_and_the_namespace_orphans_only() -> None:
    # Another Job's 100 pods share the namespace: the sync never looks at them (upstream's FilterPodsByOwner),
    # yet still adopts a matching orphan.
    jm, client, _ = new_controller()
    job = new_job(2, 2)
    other = new_job(100, 100, name="other")
    other["spec"]["selector"] = {"matchLabels": {"foo": "bar"}}  # the same labels: only references tell them apart
    orphan = build_pod(None, name="orphan")
    orphan["metadata"]["labels"] = {"foo": "bar"}
    cache(jm.job_informer, job, other)
    client.objects[("jobs", "foobar")] = job  # the live check before adopting
    cache(jm.pod_informer, build_pod(job, name="mine-0"), build_pod(job, name="mine-1"),
          *(build_pod(other, name=f"theirs-{i}") for i in range(100)), orphan)
    with StoreWalks() as walks:
        await jm.sync(key_of(job))
    assert walks.by_caller["controller_manager.controllerutil.owned:owned_or_orphaned"] == 3
    assert {name for name, _ in client.patches} == {"orphan"}  # adopted; the other Job's pods untouched
