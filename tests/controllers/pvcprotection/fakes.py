"""An in-memory API for the storage controllers' unit tests, recording what they ask of it as upstream's fake
clientset records actions (failed ones included), with upstream's reactors: a verb on a resource that fails its
first N calls."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from controller_manager.api.meta import key_of
from controller_manager.api.resources import Resource
from controller_manager.client.errors import AlreadyExists, Forbidden, NotFound
from controller_manager.clock import FakeClock
from controller_manager.runtime.controller import Controller, ControllerContext
from controller_manager.runtime.informers import SharedInformerFactory

Obj = dict[str, Any]


@dataclass(frozen=True)
class Action:
    verb: str  # get, list, create, update, update/status
    resource: str
    namespace: str
    obj: Obj | None = None


@dataclass
class Recorded:
    events: list[tuple[str, str, str, str]] = field(default_factory=list)  # (object name, type, reason, message)

    def recorder(self, component: str) -> Recorded:
        return self

    def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str, **_: Any) -> None:
        self.events.append((str((obj.get("metadata") or {}).get("name", "")), type, reason, message))


@dataclass
class FakeApi:
    objects: dict[tuple[str, str], Obj] = field(default_factory=dict)
    actions: list[Action] = field(default_factory=list)
    failures: dict[tuple[str, str], int] = field(default_factory=dict)  # (verb, resource) -> calls left to fail
    _rv: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def put(self, res: Resource, obj: Mapping[str, Any]) -> Obj:
        stored = copy.deepcopy(dict(obj))
        stored.setdefault("metadata", {})["resourceVersion"] = str(next(self._rv))
        self.objects[(res.plural, key_of(stored))] = stored
        return stored

    def fail(self, verb: str, resource: str, times: int) -> None:
        self.failures[(verb, resource)] = times

    def _act(self, verb: str, res: Resource, namespace: str | None, obj: Mapping[str, Any] | None = None) -> None:
        self.actions.append(Action(verb, res.plural, namespace or "", copy.deepcopy(dict(obj)) if obj else None))
        left = self.failures.get((verb, res.plural), 0)
        if left:
            self.failures[(verb, res.plural)] = left - 1
            raise Forbidden(403, "Forbidden", f'{res.plural} is forbidden: Mock error')

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> Obj:
        self._act("get", res, namespace)
        key = f"{namespace}/{name}" if namespace else name
        obj = self.objects.get((res.plural, key))
        if obj is None:
            raise NotFound(404, "NotFound", f'{res.plural} "{name}" not found')
        return copy.deepcopy(obj)

    async def list_all(self, res: Resource, namespace: str | None = None, **_: Any) -> tuple[list[Obj], str]:
        self._act("list", res, namespace)
        items = [copy.deepcopy(o) for (plural, _key), o in self.objects.items()
                 if plural == res.plural and (not namespace or (o.get("metadata") or {}).get("namespace") == namespace)]
        return items, "1"

    async def create(self, res: Resource, obj: Mapping[str, Any], namespace: str | None = None) -> Obj:
        body = copy.deepcopy(dict(obj))
        if namespace:
            body.setdefault("metadata", {})["namespace"] = namespace
        self._act("create", res, namespace, body)
        if (res.plural, key_of(body)) in self.objects:
            name = body["metadata"]["name"]
            raise AlreadyExists(409, "AlreadyExists", f'{res.plural} "{name}" already exists')
        return self.put(res, body)

    async def update(self, res: Resource, obj: Mapping[str, Any]) -> Obj:
        self._act("update", res, (obj.get("metadata") or {}).get("namespace"), obj)
        return self.put(res, obj)

    async def update_status(self, res: Resource, obj: Mapping[str, Any]) -> Obj:
        self._act("update/status", res, (obj.get("metadata") or {}).get("namespace"), obj)
        return self.put(res, obj)

    async def patch(self, res: Resource, name: str, patch: Mapping[str, Any], namespace: str | None = None, *,
                    patch_type: str = "merge", subresource: str | None = None) -> Obj:
        """Applies only what the controllers patch: metadata annotations (a None value removes one)."""
        self._act("patch" if subresource is None else f"patch/{subresource}", res, namespace, patch)
        key = f"{namespace}/{name}" if namespace else name
        current = self.objects.get((res.plural, key))
        if current is None:
            raise NotFound(404, "NotFound", f'{res.plural} "{name}" not found')
        updated = copy.deepcopy(current)
        annotations = updated["metadata"].setdefault("annotations", {})
        for k, v in ((patch.get("metadata") or {}).get("annotations") or {}).items():
            if v is None:
                annotations.pop(k, None)
            else:
                annotations[k] = v
        return self.put(res, updated)

    def writes(self) -> list[Action]:
        return [a for a in self.actions if a.verb not in ("get", "list")]


def build(kind: type[Controller], options: Mapping[str, Any] | None = None) -> tuple[Any, FakeApi, FakeClock, Recorded]:
    """A controller of ``kind`` on a FakeClock and a FakeApi; its informers are never run (tests fill them)."""
    clock = FakeClock()
    api = FakeApi()
    events = Recorded()
    factory = SharedInformerFactory(api, clock)  # type: ignore[arg-type]
    ctx = ControllerContext(client=api, informers=factory, clock=clock, events=events,  # type: ignore[arg-type]
                            options=dict(options or {}))
    return kind(ctx), api, clock, events


def cache(ctrl: Controller, res: Resource, *objs: Mapping[str, Any]) -> None:
    store = ctrl.ctx.informers.informer(res).store
    for obj in objs:
        store._put(key_of(obj), dict(obj))
