"""A recording stand-in for ApiClient and EventRecorder, for unit tests of client-facing helpers."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from controller_manager.api.resources import Resource


@dataclass
class Call:
    verb: str
    resource: str
    name: str
    namespace: str | None
    body: Any = None
    options: dict[str, Any] = field(default_factory=dict)


class FakeClient:
    """Records every call; ``errors[(verb, name)]`` makes that call raise; ``objects`` answers gets."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.errors: dict[tuple[str, str], BaseException] = {}
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self._names = itertools.count(1)

    def _fail(self, verb: str, name: str) -> None:
        err = self.errors.get((verb, name))
        if err is not None:
            raise err

    def of(self, verb: str) -> list[Call]:
        return [c for c in self.calls if c.verb == verb]

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        self.calls.append(Call("get", res.plural, name, namespace))
        self._fail("get", name)
        return self.objects[(res.plural, name)]

    async def create(self, res: Resource, obj: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]:
        meta = dict(obj.get("metadata") or {})
        self.calls.append(Call("create", res.plural, meta.get("name") or meta.get("generateName", ""), namespace,
                               obj))
        self._fail("create", meta.get("generateName", ""))
        if not meta.get("name"):
            meta["name"] = f"{meta.get('generateName', '')}x{next(self._names)}"
        meta["namespace"] = namespace
        meta["uid"] = f"uid-{meta['name']}"
        return {**obj, "metadata": meta}

    async def patch(self, res: Resource, name: str, patch: Any, namespace: str | None = None, *,
                    patch_type: str = "merge", subresource: str | None = None) -> dict[str, Any]:
        self.calls.append(Call("patch", res.plural, name, namespace, patch, {"patch_type": patch_type}))
        self._fail("patch", name)
        return {"metadata": {"name": name, "namespace": namespace, "patched": True}}

    async def delete(self, res: Resource, name: str, namespace: str | None = None, *,
                     uid: str | None = None, **options: Any) -> dict[str, Any]:
        self.calls.append(Call("delete", res.plural, name, namespace, None, {"uid": uid, **options}))
        self._fail("delete", name)
        return {"kind": "Status", "status": "Success"}


class FakeRecorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str]] = []
        self.resources: list[Resource | None] = []

    def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str, *,
              resource: Resource | None = None) -> None:
        self.events.append((obj["metadata"]["name"], type, reason, message))
        self.resources.append(resource)


class SimClient:
    """ApiClient's verbs over an in-process kube-sim ApiServer (no HTTP): real API semantics for unit tests."""

    def __init__(self, api: Any) -> None:
        self.api = api

    @staticmethod
    def _raise(err: Any) -> None:
        from controller_manager.client.errors import error_from_status

        raise error_from_status(err.status) from None

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        from controller_manager.sim.apiserver.errors import StatusError

        try:
            return dict(self.api.get(res, namespace, name))
        except StatusError as err:
            self._raise(err)
            raise

    async def create(self, res: Resource, obj: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]:
        from controller_manager.sim.apiserver.errors import StatusError

        try:
            return dict(self.api.create(res, dict(obj), namespace))
        except StatusError as err:
            self._raise(err)
            raise

    async def patch(self, res: Resource, name: str, patch: Any, namespace: str | None = None, *,
                    patch_type: str = "merge", subresource: str | None = None) -> dict[str, Any]:
        from controller_manager.sim.apiserver.errors import StatusError

        try:
            return dict(self.api.patch(res, namespace, name, patch, patch_type, subresource=subresource))
        except StatusError as err:
            self._raise(err)
            raise

    async def delete(self, res: Resource, name: str, namespace: str | None = None, *,
                     uid: str | None = None, **options: Any) -> dict[str, Any]:
        from controller_manager.sim.apiserver.errors import StatusError

        try:
            return dict(self.api.delete(res, namespace, name, preconditions={"uid": uid} if uid else None))
        except StatusError as err:
            self._raise(err)
            raise
