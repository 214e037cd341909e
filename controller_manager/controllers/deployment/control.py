"""What the Deployment rollout code acts through: one :class:`DeploymentControl` per controller.

Upstream's rollout logic is a set of ``DeploymentController`` methods (``sync.go``, ``rolling.go``, ...). Here
they are functions of ``dc``, this bundle of what they act through: the client, the event recorder, the clock
and the ReplicaSet cache. The controller builds one; tests build one over fakes.

Guarantees:
- Nothing is edited in place: neither the cached Deployment nor its ReplicaSets. A step that changes the
  Deployment builds a new object (new status, new annotations) and, once it is written, returns the
  Deployment as it now is: the object written, carrying the server's new ``resourceVersion`` (and, for spec
  writes, ``generation``), so a second write in the same sync is not refused as stale. The caller goes on
  with what was returned. ReplicaSet writes likewise send a new object and return the server's answer.
- Events about a Deployment name it as ``apps/v1 Deployment`` even when the cached object lacks type meta.
- Read-your-own-writes (beyond upstream, see the controller): with a consistency store, every Deployment write
  (status or spec) and every ReplicaSet create or update is recorded, by the resourceVersion the server
  answered, under the Deployment's key (a ReplicaSet's under its controlling Deployment's, from its controller
  reference), so the Deployment's next sync waits until the caches show them; ReplicaSet writes are also
  told to ``replica_set_written`` (the shared informer, for the ReplicaSet controller to wait on).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from controller_manager.api.meta import controller_ref, meta
from controller_manager.api.resources import DEPLOYMENTS, REPLICASETS, Resource
from controller_manager.clock import Clock
from controller_manager.controllerutil.consistency import ConsistencyStore

__all__ = ["ApiWriter", "DeploymentControl", "EventSink", "Obj", "status_of", "with_status"]

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
    consistency: ConsistencyStore | None = None
    # Told of every ReplicaSet written (the shared informer's ``wrote``): the ReplicaSet controller then waits
    # for the cache to show it before writing that ReplicaSet's status.
    replica_set_written: Callable[[Obj], None] | None = None

    def now(self) -> float:
        return self.clock.now()

    def event(self, d: Obj, type: str, reason: str, message: str) -> None:
        self.recorder.event(d, type, reason, message, resource=DEPLOYMENTS)

    async def update_deployment_status(self, d: Obj) -> Obj:
        """Write ``d``'s status through ``/status``; returns ``d`` with the server's new resourceVersion."""
        written = await self.client.update_status(DEPLOYMENTS, _typed(d, DEPLOYMENTS))
        self._wrote(d, DEPLOYMENTS, written)
        return _following(d, written, ("resourceVersion",))

    async def update_deployment(self, d: Obj) -> Obj:
        """Write ``d`` (spec and metadata); returns ``d`` with the server's new resourceVersion and generation."""
        written = await self.client.update(DEPLOYMENTS, _typed(d, DEPLOYMENTS))
        self._wrote(d, DEPLOYMENTS, written)
        return _following(d, written, ("resourceVersion", "generation"))

    async def create_replica_set(self, d: Obj, rs: Obj, namespace: str) -> dict[str, Any]:
        created = await self.client.create(REPLICASETS, _typed(rs, REPLICASETS), namespace)
        self._wrote(d, REPLICASETS, created)
        if self.replica_set_written is not None:
            self.replica_set_written(created)
        return created

    async def update_replica_set(self, rs: Obj) -> dict[str, Any]:
        written = await self.client.update(REPLICASETS, _typed(rs, REPLICASETS))
        ref = controller_ref(written)
        if self.consistency is not None and ref is not None and ref.get("kind") == DEPLOYMENTS.kind:
            # Recorded under the Deployment that controls it (the one whose sync wrote it).
            self.consistency.wrote_at(f"{meta(written).get('namespace')}/{ref.get('name')}", str(ref.get("uid") or ""),
                                      REPLICASETS.plural, str(meta(written).get("resourceVersion") or ""))
        if self.replica_set_written is not None:
            self.replica_set_written(written)
        return written

    def _wrote(self, d: Obj, res: Resource, written: Obj) -> None:
        if self.consistency is not None:
            self.consistency.record(d, res.plural, written)


def _typed(obj: Obj, res: Resource) -> dict[str, Any]:
    """The object with apiVersion/kind (list items from the cache may lack them)."""
    out = dict(obj)
    out.setdefault("apiVersion", res.api_version)
    out.setdefault("kind", res.kind)
    return out


def _following(d: Obj, written: Obj, fields: tuple[str, ...]) -> Obj:
    """``d`` with the metadata ``fields`` the server answered (those it did not answer stay as they were)."""
    answered = {key: value for key in fields if (value := meta(written).get(key)) is not None}
    if not answered:
        return d
    return {**d, "metadata": {**meta(d), **answered}}


def status_of(obj: Obj | None) -> Mapping[str, Any]:
    status = obj.get("status") if obj is not None else None
    return status if isinstance(status, Mapping) else {}


def with_status(d: Obj, status: Obj) -> Obj:
    """A new Deployment: ``d`` with ``status`` (``d`` itself is left as it is)."""
    return {**d, "status": status}
