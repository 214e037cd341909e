"""An in-memory stand-in for ApiClient and a controller built on it, for the ReplicaSet controller's unit tests.

The controller gets a real SharedInformerFactory (never run: tests put objects in its caches by hand, as
upstream's tests add to the informers' indexers) and a :class:`RecordingClient` that records every write.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from controller_manager.api.meta import key_of
from controller_manager.api.resources import Resource
from controller_manager.client.errors import ApiError, Forbidden, NotFound, ServerError
from controller_manager.clock import FakeClock
from controller_manager.controllers.replicaset import BURST_REPLICAS, ReplicaSetController
from controller_manager.runtime.controller import ControllerContext
from controller_manager.runtime.events import EventBroadcaster
from controller_manager.runtime.informers import SharedInformer, SharedInformerFactory


@dataclass
class RecordingClient:
    """Records creates, deletes, patches and status updates; ``objects`` answers gets by (plural, name)."""

    create_limit: int | None = None  # creates beyond this many fail, like a quota (FakePodControl.CreateLimit)
    create_error: ApiError | None = None  # every create fails with this
    patch_error: ApiError | None = None
    status_error: ApiError | None = None
    objects: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    creates: list[dict[str, Any]] = field(default_factory=list)
    create_calls: int = 0
    deletes: list[tuple[str, str | None]] = field(default_factory=list)  # (name, uid precondition)
    patches: list[tuple[str, Any]] = field(default_factory=list)
    status_updates: list[dict[str, Any]] = field(default_factory=list)
    gets: list[str] = field(default_factory=list)
    _names: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def clear(self) -> None:
        """Forget the pod writes (status updates are kept: tests count them over several syncs)."""
        self.creates.clear()
        self.deletes.clear()
        self.patches.clear()
        self.create_calls = 0

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        self.gets.append(f"{res.plural}/{name}")
        obj = self.objects.get((res.plural, name))
        if obj is None:
            raise NotFound(404, "NotFound", f'{res.plural} "{name}" not found')
        return obj

    async def create(self, res: Resource, obj: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]:
        self.create_calls += 1
        if self.create_error is not None:
            raise self.create_error
        if self.create_limit is not None and len(self.creates) >= self.create_limit:
            raise Forbidden(403, "Forbidden", "exceeded quota")
        meta = dict(obj.get("metadata") or {})
        meta.setdefault("name", f"{meta.get('generateName', '')}{next(self._names)}")
        meta["namespace"] = namespace
        created = {**obj, "metadata": meta}
        self.creates.append(created)
        return created

    async def delete(self, res: Resource, name: str, namespace: str | None = None, *, uid: str | None = None,
                     **options: Any) -> dict[str, Any]:
        self.deletes.append((name, uid))
        return {"kind": "Status", "status": "Success"}

    async def patch(self, res: Resource, name: str, patch: Any, namespace: str | None = None, *,
                    patch_type: str = "merge", subresource: str | None = None) -> dict[str, Any]:
        self.patches.append((name, patch))
        if self.patch_error is not None:
            raise self.patch_error
        return {"metadata": {"name": name, "namespace": namespace, **patch["metadata"]}}

    async def update_status(self, res: Resource, obj: Mapping[str, Any]) -> dict[str, Any]:
        self.status_updates.append(dict(obj))
        if self.status_error is not None:
            raise self.status_error
        return dict(obj)


def fake_server_error(message: str = "fake error") -> ServerError:
    return ServerError(500, "InternalError", message)


def new_controller(client: RecordingClient | None = None, *, burst_replicas: int = BURST_REPLICAS
                   ) -> tuple[ReplicaSetController, RecordingClient, FakeClock]:
    client = client or RecordingClient()
    clock = FakeClock()
    factory = SharedInformerFactory(client, clock)  # type: ignore[arg-type]
    ctx = ControllerContext(client=client, informers=factory, clock=clock,  # type: ignore[arg-type]
                            events=EventBroadcaster(client, clock))
    return ReplicaSetController(ctx, burst_replicas=burst_replicas), client, clock


def cache(informer: SharedInformer, *objs: dict[str, Any]) -> None:
    """Put objects in an informer's cache without telling the handlers (upstream's ``GetIndexer().Add``)."""
    for obj in objs:
        informer.store._put(key_of(obj), obj)


def uncache(informer: SharedInformer, *objs: dict[str, Any]) -> None:
    for obj in objs:
        informer.store._remove(key_of(obj))


async def drain(controller: ReplicaSetController) -> list[str]:
    """Every key queued right now, in order (each taken and marked done, as a worker would)."""
    keys: list[str] = []
    queue = controller.queue
    while len(queue):
        key = await queue.get()
        if key is None:
            break
        queue.done(key)
        keys.append(key)
    return keys
