"""A StatefulSet's status: counting replicas and writing ``/status`` (``updateStatus``, ``completeRollingUpdate``,
``inconsistentStatus`` and ``stateful_set_status_updater.go``).

Guarantees:
- :func:`count_replicas` counts created pods (replicas), running and ready ones (readyReplicas), of those the ones
  available for minReadySeconds (availableReplicas), and among created, non-terminating pods those labelled with
  the current / update revision (currentReplicas / updatedReplicas).
- :func:`complete_rolling_update`: under RollingUpdate, once spec.replicas pods exist, are updated and ready, the
  update revision becomes the current one.
- The status is written only when it differs from the set's in a field upstream compares (observedGeneration
  moving forward, the replica counts, the revisions); it replaces the whole status, as upstream does. A conflict
  is retried on a fresh read, a bounded number of times. A written status's resourceVersion is recorded in the
  consistency store, if one is given, under the set (read-your-own-writes: the next sync waits to see it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from controller_manager.api.meta import meta
from controller_manager.api.resources import STATEFULSETS
from controller_manager.client import ApiClient
from controller_manager.client.errors import Conflict
from controller_manager.controllerutil.consistency import ConsistencyStore

from .util import (
    ROLLING_UPDATE,
    get_pod_revision,
    is_created,
    is_running_and_available,
    is_running_and_ready,
    is_terminating,
    replicas,
)

__all__ = ["StatefulSetStatus", "StatusUpdater", "complete_rolling_update", "count_replicas", "inconsistent_status"]

Obj = Mapping[str, Any]

STATUS_UPDATE_RETRIES = 5  # retry.DefaultRetry's steps


@dataclass
class StatefulSetStatus:
    """The status a sync computed (``apps.StatefulSetStatus`` without conditions)."""

    observed_generation: int = 0
    replicas: int = 0
    ready_replicas: int = 0
    current_replicas: int = 0
    updated_replicas: int = 0
    available_replicas: int = 0
    current_revision: str = ""
    update_revision: str = ""
    collision_count: int = 0

    def as_dict(self) -> dict[str, Any]:
        """The API's JSON: omitempty fields left out when zero, as Go encodes them."""
        out: dict[str, Any] = {}
        if self.observed_generation:
            out["observedGeneration"] = self.observed_generation
        out["replicas"] = self.replicas
        for key, value in (("readyReplicas", self.ready_replicas), ("currentReplicas", self.current_replicas),
                           ("updatedReplicas", self.updated_replicas), ("currentRevision", self.current_revision),
                           ("updateRevision", self.update_revision)):
            if value:
                out[key] = value
        out["collisionCount"] = self.collision_count
        out["availableReplicas"] = self.available_replicas
        return out


def count_replicas(status: StatefulSetStatus, min_ready: int, now: float, current_revision: str,
                   update_revision: str, *pod_lists: Iterable[Obj | None]) -> None:
    """``updateStatus``: recount ``status``'s replica fields over ``pod_lists`` (None entries are skipped)."""
    status.replicas = status.ready_replicas = status.available_replicas = 0
    status.current_replicas = status.updated_replicas = 0
    for pods in pod_lists:
        for pod in pods:
            if pod is None:
                continue
            created = is_created(pod)
            if created:
                status.replicas += 1
            if is_running_and_ready(pod):
                status.ready_replicas += 1
                if is_running_and_available(pod, min_ready, now):
                    status.available_replicas += 1
            if created and not is_terminating(pod):
                revision = get_pod_revision(pod)
                if revision == current_revision:
                    status.current_replicas += 1
                if revision == update_revision:
                    status.updated_replicas += 1


def complete_rolling_update(sts: Obj, status: StatefulSetStatus) -> None:
    strategy = ((sts.get("spec") or {}).get("updateStrategy") or {}).get("type")
    want = replicas(sts)
    if strategy == ROLLING_UPDATE and status.updated_replicas == want and status.ready_replicas == want \
            and status.replicas == want:
        status.current_replicas = status.updated_replicas
        status.current_revision = status.update_revision


def _int(status: Mapping[str, Any], key: str) -> int:
    value = status.get(key)
    return value if isinstance(value, int) else 0


def inconsistent_status(sts: Obj, status: StatefulSetStatus) -> bool:
    """The computed status differs from the set's in a field upstream compares."""
    old = sts.get("status") or {}
    return (status.observed_generation > _int(old, "observedGeneration")
            or status.replicas != _int(old, "replicas")
            or status.current_replicas != _int(old, "currentReplicas")
            or status.ready_replicas != _int(old, "readyReplicas")
            or status.updated_replicas != _int(old, "updatedReplicas")
            or status.current_revision != str(old.get("currentRevision") or "")
            or status.available_replicas != _int(old, "availableReplicas")
            or status.update_revision != str(old.get("updateRevision") or ""))


class StatusUpdater:
    """Writes a StatefulSet's status (``realStatefulSetStatusUpdater``)."""

    def __init__(self, client: ApiClient, consistency: ConsistencyStore | None = None) -> None:
        self._client = client
        self._consistency = consistency

    async def update(self, sts: Obj, status: StatefulSetStatus) -> None:
        current: Obj = sts
        for attempt in range(STATUS_UPDATE_RETRIES):
            try:
                written = await self._client.update_status(STATEFULSETS, {**current, "status": status.as_dict()})
                if self._consistency is not None:
                    self._consistency.record(sts, STATEFULSETS.plural, written)
                return
            except Conflict:
                if attempt == STATUS_UPDATE_RETRIES - 1:
                    raise
                # Another writer won the race: write ours over its latest version.
                current = await self._client.get(STATEFULSETS, str(meta(sts).get("name")), meta(sts).get("namespace"))
