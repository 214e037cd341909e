"""The CronJob controller's writes, behind two small interfaces (upstream ``injection.go``) so its sync can be
tested against recording fakes exactly as upstream's tables do.

Guarantees:
- :class:`ApiJobControl` gets, creates and deletes Jobs through the API; deletes propagate in the
  background (the Job's pods go with it), as upstream's ``realJobControl.DeleteJob``.
- :class:`ApiCronJobControl` reads a CronJob live (bypassing the cache) and writes its status through
  ``/status`` with the resourceVersion it was read at, so a stale write is a Conflict and is retried.
- API errors propagate unchanged (typed :mod:`controller_manager.client.errors`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from controller_manager.api.resources import CRONJOBS, JOBS
from controller_manager.client import ApiClient

__all__ = ["ApiCronJobControl", "ApiJobControl", "CronJobControl", "JobControl"]


class JobControl(Protocol):
    async def get_job(self, namespace: str, name: str) -> dict[str, Any]: ...

    async def create_job(self, namespace: str, job: Mapping[str, Any]) -> dict[str, Any]: ...

    async def delete_job(self, namespace: str, name: str) -> None: ...


class CronJobControl(Protocol):
    async def get_cron_job(self, namespace: str, name: str) -> dict[str, Any]: ...

    async def update_status(self, cron_job: Mapping[str, Any]) -> dict[str, Any]: ...


class ApiJobControl:
    def __init__(self, client: ApiClient) -> None:
        self._client = client

    async def get_job(self, namespace: str, name: str) -> dict[str, Any]:
        return await self._client.get(JOBS, name, namespace)

    async def create_job(self, namespace: str, job: Mapping[str, Any]) -> dict[str, Any]:
        return await self._client.create(JOBS, job, namespace)

    async def delete_job(self, namespace: str, name: str) -> None:
        await self._client.delete(JOBS, name, namespace, propagation_policy="Background")


class ApiCronJobControl:
    def __init__(self, client: ApiClient) -> None:
        self._client = client

    async def get_cron_job(self, namespace: str, name: str) -> dict[str, Any]:
        return await self._client.get(CRONJOBS, name, namespace)

    async def update_status(self, cron_job: Mapping[str, Any]) -> dict[str, Any]:
        return await self._client.update_status(CRONJOBS, cron_job)
