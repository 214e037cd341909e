"""In-memory stand-ins for the reconciler's collaborators: an API client that keeps VolumeAttachments and
Nodes (its simulated external-attacher marks attachments attached at once, or fails them), a recorder."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from controller_manager.api.resources import NODES, VOLUMEATTACHMENTS, Resource
from controller_manager.client.errors import AlreadyExists, NotFound, ServerError
from controller_manager.clock import FakeClock
from controller_manager.controllers.attachdetach.cache import ActualStateOfWorld, DesiredStateOfWorld, VolumeSpec
from controller_manager.controllers.attachdetach.operations import OperationExecutor
from controller_manager.controllers.attachdetach.reconciler import Reconciler
from controller_manager.controllers.attachdetach.statusupdater import NodeStatusUpdater

DRIVER = "csi.example.com"


class Log:
    def __getattr__(self, _: str) -> Any:
        return lambda *args, **kwargs: None


@dataclass
class Recorder:
    events: list[tuple[str, str, str, str]] = field(default_factory=list)  # (pod, type, reason, message)

    def event(self, obj: Mapping[str, Any], event_type: str, reason: str, message: str) -> None:
        m = obj.get("metadata") or {}
        self.events.append((f"{m.get('namespace')}/{m.get('name')}", event_type, reason, message))


@dataclass
class FakeClient:
    attachments: dict[str, dict[str, Any]] = field(default_factory=dict)
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)  # (verb, name) in order
    attach_error: str | None = None  # the attacher reports this instead of attaching
    fail_node_patch: bool = False
    fail_delete: bool = False
    rv: int = 1

    async def create(self, res: Resource, body: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]:
        assert res is VOLUMEATTACHMENTS
        name = body["metadata"]["name"]
        self.calls.append(("create", name))
        if name in self.attachments:
            raise AlreadyExists(409, "AlreadyExists", f'volumeattachments "{name}" already exists')
        obj = copy.deepcopy(dict(body))
        obj["status"] = ({"attached": False, "attachError": {"message": self.attach_error}} if self.attach_error
                         else {"attached": True})
        self.attachments[name] = obj
        return obj

    async def delete(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        assert res is VOLUMEATTACHMENTS
        self.calls.append(("delete", name))
        if self.fail_delete:
            raise ServerError(500, "InternalError", "etcd is down")
        if name not in self.attachments:
            raise NotFound(404, "NotFound", f'volumeattachments "{name}" not found')
        return self.attachments.pop(name)

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        store = self.nodes if res is NODES else self.attachments
        if name not in store:
            raise NotFound(404, "NotFound", f'"{name}" not found')
        return copy.deepcopy(store[name])

    async def patch(self, res: Resource, name: str, patch: Mapping[str, Any], namespace: str | None = None, *,
                    patch_type: str = "merge", subresource: str | None = None) -> dict[str, Any]:
        assert res is NODES
        assert subresource == "status"
        assert patch_type == "strategic"
        self.calls.append(("patch-node", name))
        if self.fail_node_patch:
            raise ServerError(500, "InternalError", "etcd is down")
        node = self.nodes[name]
        value = patch["status"]["volumesAttached"]
        if value is None:
            node["status"].pop("volumesAttached", None)
        else:
            node["status"]["volumesAttached"] = value
        self.rv += 1
        node["metadata"]["resourceVersion"] = str(self.rv)
        return copy.deepcopy(node)


def node(name: str, *, ready: bool = True, taints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1",
                         "annotations": {"volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
            "spec": {"taints": taints or []},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def pod(name: str, namespace: str = "ns1") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"}}


def spec(name: str = "volume-name", *, modes: tuple[str, ...] = ("ReadWriteOnce",)) -> VolumeSpec:
    return VolumeSpec(name=name, driver=DRIVER, volume_handle=f"handle-{name}", access_modes=modes)


@dataclass
class World:
    clock: FakeClock
    client: FakeClient
    recorder: Recorder
    dsw: DesiredStateOfWorld
    asw: ActualStateOfWorld
    executor: OperationExecutor
    reconciler: Reconciler

    async def step(self, times: int = 3) -> None:
        """Reconcile, let started operations finish, repeat."""
        for _ in range(times):
            await self.reconciler.step()
            for _ in range(5):
                await asyncio.sleep(0)

    def add_node(self, obj: dict[str, Any]) -> None:
        self.client.nodes[obj["metadata"]["name"]] = obj
        self.dsw.add_node(obj["metadata"]["name"])


def world(*, max_wait: float = 0.05, sync_period: float = 6000.0, disable_force_detach: bool = False,
          **client: Any) -> World:
    clock = FakeClock()
    fake = FakeClient(**client)
    recorder = Recorder()
    dsw, asw = DesiredStateOfWorld(), ActualStateOfWorld()
    executor = OperationExecutor(fake, clock, recorder, fake.attachments, Log())
    updater = NodeStatusUpdater(fake, fake.nodes, asw, Log())
    reconciler = Reconciler(clock=clock, loop_period=0.0, max_wait_for_unmount=max_wait, sync_period=sync_period,
                            disable_sync=False, disable_force_detach_on_timeout=disable_force_detach, dsw=dsw,
                            asw=asw, executor=executor, status_updater=updater, nodes=fake.nodes, recorder=recorder,
                            log=Log())
    return World(clock, fake, recorder, dsw, asw, executor, reconciler)
