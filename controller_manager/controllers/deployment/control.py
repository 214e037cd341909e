"""What the Deployment rollout code acts through: one :class:`DeploymentControl` per controller.

Upstream's rollout logic is a set of ``DeploymentController`` methods (``sync.go``, ``rolling.go``, ...). Here
they are functions of ``dc``, this bundle: the client, the event recorder, the clock, the ReplicaSet cache
and the queue's rate-limited re-add. The controller builds one; tests build one over fakes.

Guarantees:
- The rollout functions work on a *working copy* of the Deployment (a deep copy taken by the controller at
  the start of a sync; the cache is never mutated) and update it in place as upstream updates its pointer:
  after a successful write, the copy carries the server's new ``resourceVersion`` (so a second write in the
  same sync is not refused as stale) and, for ``/status`` writes, the status that was written.
- ReplicaSets are never mutated: scaling builds a new dict and returns the server's answer.
- Events about a Deployment name it as ``apps/v1 Deployment`` even when the cached object lacks type meta.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from controller_manager.api.meta import deep_copy, meta
from controller_manager.api.resources import DEPLOYMENTS, REPLICASETS, Resource
from controller_manager.clock import Clock

__all__ = ["ApiWriter", "DeploymentControl", "EventSink", "Obj", "replace", "status_of"]

Obj = Mapping[str, Any]


class ApiWriter(Protocol):
    """The part of :class:`~controller_manager.client.ApiClient` the rollout code uses."""

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]: ...

    async def create(self, res: Resource, obj: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]: ...

    async def update(self, res: Resource, obj: Mapping[str, Any]) -> dict[str, Any]: ...

    async def update_status(self, res: Resource, obj: Mapping[str, Any]) -> dict[str, Any]: ...

    async def delete(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]: ...


class EventSink(Protocol):
    """The part of :class:`~controller_manager.runtime.events.EventRecorder` the rollout code uses."""

    def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str, *,
              resource: Resource | None = None) -> None: ...


@dataclass
class DeploymentControl:
    """The controller's hands: client writes, events, time, the ReplicaSet cache, rate-limited requeues."""

    client: ApiWriter
    recorder: EventSink
    clock: Clock
    rs_lister: Callable[[str, str], Obj | None]  # cached ReplicaSet by (namespace, name)
    log: Any = field(default_factory=lambda: structlog.get_logger("controller_manager.controllers.deployment"))

    def now(self) -> float:
        return self.clock.now()

    def event(self, d: Obj, type: str, reason: str, message: str) -> None:
        self.recorder.event(d, type, reason, message, resource=DEPLOYMENTS)

    async def update_deployment_status(self, d: dict[str, Any]) -> None:
        """Write ``d``'s status through ``/status``; ``d`` then carries the new resourceVersion."""
        written = await self.client.update_status(DEPLOYMENTS, _typed(d, DEPLOYMENTS))
        _adopt_version(d, written)

    async def update_deployment(self, d: dict[str, Any]) -> None:
        """Write ``d`` (spec and metadata); ``d`` then carries the new resourceVersion and generation."""
        written = await self.client.update(DEPLOYMENTS, _typed(d, DEPLOYMENTS))
        _adopt_version(d, written)
        generation = meta(written).get("generation")
        if generation is not None:
            d["metadata"]["generation"] = generation

    async def update_replica_set(self, rs: Obj) -> dict[str, Any]:
        return await self.client.update(REPLICASETS, _typed(rs, REPLICASETS))


def _typed(obj: Obj, res: Resource) -> dict[str, Any]:
    """The object with apiVersion/kind (list items from the cache may lack them)."""
    out = dict(obj)
    out.setdefault("apiVersion", res.api_version)
    out.setdefault("kind", res.kind)
    return out


def _adopt_version(d: dict[str, Any], written: Obj) -> None:
    rv = meta(written).get("resourceVersion")
    if rv is not None:
        d.setdefault("metadata", {})["resourceVersion"] = rv


def status_of(obj: Obj | None) -> Mapping[str, Any]:
    status = obj.get("status") if obj is not None else None
    return status if isinstance(status, Mapping) else {}


def replace(d: dict[str, Any], new: Obj) -> None:
    """Make the working copy ``d`` become ``new`` (a util function's returned copy of it)."""
    fresh = deep_copy(dict(new))
    d.clear()
    d.update(fresh)
