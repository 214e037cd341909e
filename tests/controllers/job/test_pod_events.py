"""Which pod updates the Job controller can ignore without looking further (updatePod would do nothing)."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.controllers.job.controller import _nothing_for_jobs


def _pod(**meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns", "resourceVersion": "1", **meta}, "status": {}}


RS_REF = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": True}]
JOB_REF = [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "j", "controller": True}]


@pytest.mark.parametrize(("old", "new", "ignored"), [
    pytest.param(_pod(ownerReferences=RS_REF), _pod(ownerReferences=RS_REF), True, id="another controller's pod"),
    pytest.param(_pod(), _pod(), True, id="orphan, nothing changed"),
    pytest.param(_pod(ownerReferences=JOB_REF), _pod(ownerReferences=JOB_REF), False, id="a Job's pod"),
    pytest.param(_pod(labels={"a": "1"}), _pod(labels={"a": "2"}), False, id="labels changed: may be adopted"),
    pytest.param(_pod(), _pod(ownerReferences=RS_REF), False, id="owner changed"),
    pytest.param(_pod(ownerReferences=RS_REF, finalizers=["batch.kubernetes.io/job-tracking"]),
                 _pod(ownerReferences=RS_REF, finalizers=["batch.kubernetes.io/job-tracking"]), False,
                 id="tracking finalizer: the orphan path and the metric look"),
    pytest.param(_pod(ownerReferences=RS_REF), _pod(ownerReferences=RS_REF, deletionTimestamp="2026-01-01T00:00:00Z"),
                 False, id="being deleted"),
])
def test_ignorable_updates(old: dict[str, Any], new: dict[str, Any], ignored: bool) -> None:
    assert _nothing_for_jobs(old, new) is ignored
