"""Two-phase counting of finished pods: job_controller_test.go's TestTrackJobStatusAndRemoveFinalizers and
TestGetNewFinishedPods (rows for today's default feature gates)."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.api.pods import count_terminating_pods, filter_active_pods
from controller_manager.client.errors import ServerError
from controller_manager.controllers.job.context import (
    SyncJobCtx,
    Uncounted,
    get_new_finished_pods,
    pods_with_delayed_deletion_per_index,
)
from controller_manager.controllers.job.indexed import calculate_failed_indexes, parse_indexes
from controller_manager.controllers.job.status import track_job_status_and_remove_finalizers
from controller_manager.controllers.job.util import new_condition

from .fakes import RecordingClient, build_pod, new_controller

NOW = 1_700_000_000.0
COMPLETE = new_condition("Complete", "True", "", "", NOW)
SCM = new_condition("SuccessCriteriaMet", "True", "", "", NOW - 60)
FAILED = new_condition("Failed", "True", "", "", NOW)
FAILURE_TARGET = new_condition("FailureTarget", "True", "", "", NOW)
MOCK = ServerError(500, "InternalError", "mock error")


def pod(uid: str | None = None, phase: str = "Running", **kw: Any) -> dict[str, Any]:
    return build_pod(None, uid=uid, phase=phase, **kw)


def job(spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": "j", "namespace": "default", "uid": "uid-j", **meta}, "spec": spec or {},
            "status": status or {}}


def norm(status: dict[str, Any]) -> dict[str, Any]:
    """The parts upstream compares, in wire form (zero counters omitted), condition times dropped."""
    out = {k: v for k, v in status.items() if k not in ("conditions", "completionTime")}
    if status.get("conditions"):
        out["conditions"] = [c["type"] for c in status["conditions"]]
    if "completionTime" in status:
        out["completionTime"] = True
    return out


def u(succeeded: list[str] | None = None, failed: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if succeeded:
        out["succeeded"] = succeeded
    if failed:
        out["failed"] = failed
    return out


INDEXED = {"completionMode": "Indexed"}

CASES = [
    pytest.param(dict(), [], 0, id="no updates"),
    pytest.param(dict(job=job(status={"active": 1}), needs_flush=True),
                 [{"uncountedTerminatedPods": {}, "active": 1}], 0, id="new active"),
    pytest.param(dict(pods=[pod("a", "Succeeded"), pod("b", "Failed"), pod("c", "Succeeded", deleted=NOW),
                            pod("d", "Failed", deleted=NOW), pod("e", "Pending", deleted=NOW), pod(phase="Pending"),
                            pod()]),
                 [{"uncountedTerminatedPods": u(["a", "c"], ["b", "d", "e"])},
                  {"uncountedTerminatedPods": {}, "succeeded": 2, "failed": 3}], 5, id="track finished pods"),
    pytest.param(dict(job=job(status={"active": 1, "succeeded": 2, "failed": 3,
                                      "uncountedTerminatedPods": u(["a", "e"], ["b", "f"])}),
                      pods=[pod("e", "Succeeded", finalizer=False), pod(phase="Failed", finalizer=False),
                            pod(phase="Pending", finalizer=False), pod("a", "Succeeded"), pod("b", "Failed"),
                            pod("c", "Succeeded"), pod("d", "Failed")]),
                 [{"uncountedTerminatedPods": u(["a", "c"], ["b", "d"]), "active": 1, "succeeded": 3, "failed": 4},
                  {"uncountedTerminatedPods": {}, "active": 1, "succeeded": 5, "failed": 6}], 4,
                 id="past and new finished pods"),
    pytest.param(dict(job=job(status={"succeeded": 2, "failed": 3,
                                      "uncountedTerminatedPods": u(["a", "g"], ["b", "h"])}),
                      expected_rm={"c", "d", "g", "h"},
                      pods=[pod("a", "Succeeded"), pod("b", "Failed"), pod("c", "Succeeded"), pod("d", "Failed"),
                            pod("e", "Succeeded"), pod("f", "Failed"), pod("g", "Succeeded"), pod("h", "Failed")]),
                 [{"uncountedTerminatedPods": u(["a", "e"], ["b", "f"]), "succeeded": 3, "failed": 4},
                  {"uncountedTerminatedPods": {}, "succeeded": 5, "failed": 6}], 4, id="expecting removed finalizers"),
    pytest.param(dict(pods=[pod("a", "Succeeded"), pod("b", "Failed"), pod("c", "Pending")], finished=SCM),
                 [{"uncountedTerminatedPods": u(["a"], ["b"]), "conditions": ["SuccessCriteriaMet"]},
                  {"uncountedTerminatedPods": {}, "succeeded": 1, "failed": 1,
                   "conditions": ["SuccessCriteriaMet", "Complete"], "completionTime": True}], 3,
                 id="succeeding job by JobSuccessPolicy"),
    pytest.param(dict(pods=[pod("a", "Succeeded"), pod("b", "Failed")], finished=COMPLETE),
                 [{"uncountedTerminatedPods": u(["a"], ["b"])},
                  {"uncountedTerminatedPods": {}, "succeeded": 1, "failed": 1, "conditions": ["Complete"],
                   "completionTime": True}], 2, id="completing job"),
    pytest.param(dict(pods=[pod("a", "Succeeded"), pod("b", "Failed"), pod("c", "Running")], finished=FAILED),
                 [{"uncountedTerminatedPods": u(["a"], ["b", "c"])},
                  {"uncountedTerminatedPods": {}, "succeeded": 1, "failed": 2, "conditions": ["Failed"]}], 3,
                 id="failing job"),
    pytest.param(dict(job=job(status={"active": 1}, deletionTimestamp="2023-01-01T00:00:00Z"),
                      pods=[pod("a", "Succeeded"), pod("b", "Failed"), pod(phase="Running")]),
                 [{"uncountedTerminatedPods": u(["a"], ["b"]), "active": 1},
                  {"uncountedTerminatedPods": {}, "active": 1, "succeeded": 1, "failed": 1}], 3, id="deleted job"),
    pytest.param(dict(pods=[pod("a", "Succeeded"), pod("b", "Failed")], status_error=True),
                 [{"uncountedTerminatedPods": u(["a"], ["b"])}], 0, id="status update error"),
    pytest.param(dict(pods=[pod("a", "Succeeded"), pod("b", "Failed")], pod_error=True),
                 [{"uncountedTerminatedPods": u(["a"], ["b"])}], 2, id="pod patch errors"),
    pytest.param(dict(job=job(status={"uncountedTerminatedPods": u(["a"], ["b"])}), pod_error=True,
                      pods=[pod("a", "Succeeded", finalizer=False), pod("c", "Succeeded"), pod("d", "Failed")]),
                 [{"uncountedTerminatedPods": u(["c"], ["d"]), "succeeded": 1, "failed": 1}], 2,
                 id="pod patch errors with partial success"),
    pytest.param(dict(job=job({**INDEXED, "completions": 6}, {"active": 1}),
                      pods=[pod(phase="Succeeded", index="1"), pod(phase="Succeeded", index="3"),
                            pod(phase="Succeeded", index="3"), pod(phase="Running", index="5"),
                            pod(phase="Succeeded")]),
                 [{"active": 1, "succeeded": 2, "completedIndexes": "1,3", "uncountedTerminatedPods": {}}], 4,
                 id="indexed job new successful pods"),
    pytest.param(dict(job=job({**INDEXED, "completions": 2, "parallelism": 2},
                              {"active": 2, "succeeded": 1, "completedIndexes": "3"}),
                      pods=[pod(phase="Running", index="0"), pod(phase="Running", index="1")]),
                 [{"active": 2, "uncountedTerminatedPods": {}}], 0,
                 id="indexed job prev successful pods outside current completions index range"),
    pytest.param(dict(job=job({**INDEXED, "completions": 2, "parallelism": 2},
                              {"active": 2, "succeeded": 1, "completedIndexes": "3"}),
                      pods=[pod(phase="Running", index="0"), pod(phase="Succeeded", index="1")]),
                 [{"active": 2, "succeeded": 1, "completedIndexes": "1", "uncountedTerminatedPods": {}}], 1,
                 id="indexed job prev successful pods outside range with new succeeded pods in range"),
    pytest.param(dict(job=job({**INDEXED, "completions": 6}, {"active": 1}),
                      pods=[pod("a", "Failed", index="1"), pod("b", "Failed", index="3"),
                            pod("c", "Failed", index="3"), pod("d", "Running", index="5"), pod(phase="Failed")]),
                 [{"active": 1, "uncountedTerminatedPods": u(failed=["a", "b", "c"])},
                  {"active": 1, "failed": 3, "uncountedTerminatedPods": {}}], 4, id="indexed job new failed pods"),
    pytest.param(dict(job=job({**INDEXED, "completions": 7},
                              {"failed": 2, "succeeded": 5, "completedIndexes": "0-2,4,6,7"}),
                      pods=[pod(phase="Succeeded", index="0", finalizer=False),
                            pod(phase="Failed", index="1", finalizer=False), pod(phase="Succeeded", index="1"),
                            pod(phase="Succeeded", index="3"), pod("a", "Failed", index="2"),
                            pod("b", "Failed", index="5")]),
                 [{"succeeded": 6, "failed": 2, "completedIndexes": "0-4,6",
                   "uncountedTerminatedPods": u(failed=["a", "b"])},
                  {"succeeded": 6, "failed": 4, "completedIndexes": "0-4,6", "uncountedTerminatedPods": {}}], 4,
                 id="indexed job past and new pods"),
    pytest.param(dict(job=job(status={"uncountedTerminatedPods": u(failed=["a", "b"])}),
                      pods=[*(pod(str(i), "Succeeded") for i in range(500)), pod("b", "Failed")]),
                 [{"uncountedTerminatedPods": u([str(i) for i in range(499)], ["b"]), "failed": 1},
                  {"uncountedTerminatedPods": u(failed=["b"]), "succeeded": 499, "failed": 1}], 499,
                 id="too many finished"),
    pytest.param(dict(job=job({**INDEXED, "completions": 501}),
                      pods=[pod(str(i), "Succeeded", index=str(i)) for i in range(501)]),
                 [{"uncountedTerminatedPods": {}, "completedIndexes": "0-499", "succeeded": 500}], 500,
                 id="too many indexed finished"),
    pytest.param(dict(job=job({"completions": 2, "parallelism": 2}, {"uncountedTerminatedPods": u(failed=["a", "b"])}),
                      pods=[pod("a", "Failed"), pod("b", "Succeeded")], finished=FAILED),
                 [{"uncountedTerminatedPods": {}, "failed": 2, "conditions": ["Failed"]}], 2,
                 id="pod flips from failed to succeeded"),
    pytest.param(dict(job=job({"completions": 1, "parallelism": 1}, {"uncountedTerminatedPods": u(failed=["a"])}),
                      pods=[pod("a", "Failed")], finished=FAILED),
                 [{"uncountedTerminatedPods": {}, "failed": 1, "conditions": ["Failed"]}], 1,
                 id="pod is terminal; JobFailed condition is set"),
    pytest.param(dict(job=job({"completions": 1, "parallelism": 1},
                              {"uncountedTerminatedPods": u(failed=["a"]), "conditions": [FAILURE_TARGET]}),
                      pods=[pod("a", "Running", deleted=NOW, finalizer=False)], finished=FAILED),
                 [{"uncountedTerminatedPods": {}, "failed": 1, "conditions": ["FailureTarget"]}], 0,
                 id="pod is terminating; counted as failed, but the JobFailed condition is delayed"),
    pytest.param(dict(job=job({"completions": 1, "parallelism": 1},
                              {"uncountedTerminatedPods": u(["b"], ["a"]), "conditions": [SCM]}),
                      pods=[pod("a", "Running", deleted=NOW, finalizer=False)], finished=COMPLETE),
                 [{"uncountedTerminatedPods": {}, "succeeded": 1, "failed": 1, "conditions": ["SuccessCriteriaMet"]}],
                 0, id="pod is terminating; JobSuccessCriteriaMet, but JobComplete condition is delayed"),
    pytest.param(dict(job=job({**INDEXED, "completions": 6, "backoffLimitPerIndex": 1}),
                      pods=[pod("a", "Failed", failure_count="0", index="1")]),
                 [{"uncountedTerminatedPods": {}, "failedIndexes": ""}], 0,
                 id="indexed job with a failed pod with delayed finalizer removal; the pod is not counted"),
    pytest.param(dict(job=job({**INDEXED, "completions": 6, "backoffLimitPerIndex": 1}, {"active": 1}),
                      pods=[pod("a1", "Failed", failure_count="0", index="1"),
                            pod("a2", "Running", failure_count="1", index="1")]),
                 [{"active": 1, "uncountedTerminatedPods": u(failed=["a1"]), "failedIndexes": ""},
                  {"active": 1, "failed": 1, "uncountedTerminatedPods": {}, "failedIndexes": ""}], 1,
                 id="indexed job with a failed pod which is recreated by a running pod; the pod is counted"),
    pytest.param(dict(job=job({**INDEXED, "completions": 6, "backoffLimitPerIndex": 1}),
                      pods=[pod("a", "Failed", failure_count="1", index="1")]),
                 [{"failedIndexes": "1", "uncountedTerminatedPods": u(failed=["a"])},
                  {"failed": 1, "failedIndexes": "1", "uncountedTerminatedPods": {}}], 1,
                 id="indexed job with a failed pod for a failed index; the pod is counted"),
]


@pytest.mark.parametrize(("tc", "want_updates", "want_rm"), CASES)
async def test_track_job_status_and_remove_finalizers(tc: dict[str, Any], want_updates: list[dict[str, Any]],
                                                      want_rm: int) -> None:
    client = RecordingClient(error=MOCK if tc.get("pod_error") else None,
                             status_error=MOCK if tc.get("status_error") else None)
    jm, client, _ = new_controller(client, now=NOW)
    the_job = tc.get("job") or job()
    the_job["status"].setdefault("uncountedTerminatedPods", {})
    pods = tc.get("pods", [])
    ctx = SyncJobCtx(job=the_job, pods=pods, active_pods=filter_active_pods(pods),
                     uncounted=Uncounted.of(the_job["status"]["uncountedTerminatedPods"]),
                     expected_rm_finalizers=tc.get("expected_rm", set()),
                     finished_condition=dict(tc["finished"]) if "finished" in tc else None,
                     terminating=count_terminating_pods(pods))
    spec = the_job["spec"]
    if spec.get("completionMode") == "Indexed":
        ctx.succeeded_indexes = parse_indexes(the_job["status"].get("completedIndexes"), spec["completions"])
        if spec.get("backoffLimitPerIndex") is not None:
            ctx.failed_indexes = calculate_failed_indexes(the_job, pods)
            ctx.pods_with_delayed_deletion_per_index = pods_with_delayed_deletion_per_index(ctx)
    if tc.get("pod_error") or tc.get("status_error"):
        with pytest.raises(ServerError):
            await track_job_status_and_remove_finalizers(jm, ctx, tc.get("needs_flush", False))
    else:
        await track_job_status_and_remove_finalizers(jm, ctx, tc.get("needs_flush", False))
    assert [norm(s["status"]) for s in client.status_updates] == want_updates
    assert len(client.patches) == want_rm


NEW_FINISHED = [
    pytest.param({"succeeded": 2, "failed": 1}, set(),
                 [pod("a", "Succeeded", finalizer=False), pod("b", "Succeeded"), pod("c", "Succeeded"),
                  pod("d", "Failed", finalizer=False), pod("e", "Failed"), pod("f", "Running", finalizer=False)],
                 4, 2, id="some counted"),
    pytest.param({"succeeded": 1, "failed": 1, "uncountedTerminatedPods": u(["a", "c"], ["e", "f"])}, set(),
                 [pod("a", "Succeeded", finalizer=False), pod("b", "Succeeded", finalizer=False),
                  pod("c", "Succeeded"), pod("d", "Succeeded"), pod("e", "Failed", finalizer=False),
                  pod("f", "Failed"), pod("g", "Failed")], 4, 4, id="some uncounted"),
    pytest.param({"succeeded": 2, "failed": 2, "uncountedTerminatedPods": u(["a"], ["d"])}, {"b", "f"},
                 [pod("a", "Succeeded", finalizer=False), pod("b", "Succeeded"), pod("c", "Succeeded"),
                  pod("d", "Failed", finalizer=False), pod("e", "Failed"), pod("f", "Failed"), pod("g", "Failed")],
                 4, 5, id="with expected removed finalizers"),
    pytest.param({"succeeded": 1, "failed": 1}, set(),
                 [pod("a", "Succeeded", deleted=NOW), pod("b", "Failed", deleted=NOW),
                  pod("c", "Running", deleted=NOW), pod("d", "Pending", deleted=NOW),
                  pod("e", "Running", deleted=NOW, finalizer=False),
                  pod("f", "Pending", deleted=NOW, finalizer=False)], 2, 4, id="deleted pods"),
]


@pytest.mark.parametrize(("status", "expected_rm", "pods", "want_succeeded", "want_failed"), NEW_FINISHED)
def test_get_new_finished_pods(status: dict[str, Any], expected_rm: set[str], pods: list[dict[str, Any]],
                               want_succeeded: int, want_failed: int) -> None:
    the_job = job(status=status)
    uncounted = Uncounted.of(status.get("uncountedTerminatedPods"))
    ctx = SyncJobCtx(job=the_job, pods=pods, uncounted=uncounted, expected_rm_finalizers=expected_rm)
    succeeded, failed = get_new_finished_pods(ctx)
    assert len(succeeded) + status["succeeded"] + len(uncounted.succeeded) == want_succeeded
    assert len(failed) + status["failed"] + len(uncounted.failed) == want_failed
