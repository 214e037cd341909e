"""A fake clientset for the token controllers' tables: objects by (resource, namespace, name), every call
recorded as an action, as client-go's fake.Clientset records them."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from controller_manager.api.resources import Resource
from controller_manager.client.errors import ApiError, Conflict, NotFound

Obj = dict[str, Any]


@dataclass(frozen=True)
class Action:
    verb: str
    resource: str
    namespace: str
    name: str = ""
    obj: Any = None  # update: the object sent; patch: the patch; delete: its preconditions


@dataclass
class FakeClient:
    objects: dict[tuple[str, str, str], Obj] = field(default_factory=dict)
    actions: list[Action] = field(default_factory=list)
    fail: dict[tuple[str, str], ApiError] = field(default_factory=dict)  # (verb, resource) -> error

    def add(self, plural: str, obj: Obj) -> None:
        m = obj["metadata"]
        self.objects[(plural, m.get("namespace", ""), m["name"])] = copy.deepcopy(obj)

    def _check(self, verb: str, res: Resource) -> None:
        err = self.fail.get((verb, res.plural))
        if err is not None:
            raise err

    def _find(self, res: Resource, namespace: str, name: str) -> Obj:
        obj = self.objects.get((res.plural, namespace, name))
        if obj is None:
            raise NotFound(404, "NotFound", f'{res.plural} "{name}" not found')
        return obj

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> Obj:
        self.actions.append(Action("get", res.plural, namespace or "", name))
        self._check("get", res)
        return copy.deepcopy(self._find(res, namespace or "", name))

    async def update(self, res: Resource, obj: Obj) -> Obj:
        m = obj["metadata"]
        self.actions.append(Action("update", res.plural, m.get("namespace", ""), m["name"], copy.deepcopy(obj)))
        self._check("update", res)
        self._find(res, m.get("namespace", ""), m["name"])
        self.add(res.plural, obj)
        return copy.deepcopy(obj)

    async def patch(self, res: Resource, name: str, patch: Any, namespace: str | None = None, *,
                    patch_type: str = "merge", subresource: str | None = None) -> Obj:
        self.actions.append(Action("patch", res.plural, namespace or "", name, (patch_type, copy.deepcopy(patch))))
        self._check("patch", res)
        return copy.deepcopy(self._find(res, namespace or "", name))

    async def delete(self, res: Resource, name: str, namespace: str | None = None, *,
                     propagation_policy: str | None = None, grace_period_seconds: int | None = None,
                     uid: str | None = None, resource_version: str | None = None) -> Obj:
        preconditions = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v is not None}
        self.actions.append(Action("delete", res.plural, namespace or "", name, preconditions))
        self._check("delete", res)
        obj = self._find(res, namespace or "", name)
        if uid is not None and obj["metadata"].get("uid") != uid:
            raise Conflict(409, "Conflict", "Precondition failed: UID in precondition does not match")
        del self.objects[(res.plural, namespace or "", name)]
        return obj

    async def list_all(self, res: Resource, namespace: str | None = None, **_: Any) -> tuple[list[Obj], str]:
        self.actions.append(Action("list", res.plural, namespace or ""))
        items = [copy.deepcopy(o) for (plural, ns, _n), o in self.objects.items()
                 if plural == res.plural and (namespace is None or ns == namespace)]
        return items, "1"
