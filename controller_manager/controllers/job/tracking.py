"""Which pods' tracking-finalizer removals a Job still waits to see (``tracking_utils.go``).

After the controller patches the ``batch.kubernetes.io/job-tracking`` finalizer off a finished pod, the
informer may still show the pod with the finalizer for a while. Counting it again from that stale view would
count it twice, so the UIDs are remembered here until the pod is seen without the finalizer (or gone).

Guarantees: expectations only grow through :meth:`expect_finalizers_removed` and shrink through
:meth:`finalizer_removal_observed` (per Job key, by pod UID); :meth:`expected_uids` returns a copy.
Single-threaded asyncio: no locks.
"""

from __future__ import annotations

from collections.abc import Iterable

import structlog

_log = structlog.get_logger("controller_manager.job.tracking")


class UIDTrackingExpectations:
    def __init__(self) -> None:
        self._uids: dict[str, set[str]] = {}

    def expected_uids(self, job_key: str) -> set[str]:
        return set(self._uids.get(job_key, ()))

    def expect_finalizers_removed(self, job_key: str, uids: Iterable[str]) -> None:
        uids = list(uids)
        _log.debug("expecting tracking finalizers removed", key=job_key, pod_uids=uids)
        self._uids.setdefault(job_key, set()).update(uids)

    def finalizer_removal_observed(self, job_key: str, uid: str) -> None:
        uids = self._uids.get(job_key)
        if uids is not None and uid in uids:
            _log.debug("observed tracking finalizer removed", key=job_key, pod_uid=uid)
            uids.discard(uid)

    def delete_expectations(self, job_key: str) -> None:
        self._uids.pop(job_key, None)
