"""The in-tree volume plugins the binder can ask to delete a volume (``pkg/volume``'s plugin manager as the
PersistentVolume controller uses it).

kube-controller-manager probes the host-path and NFS plugins for the PV controller (every other in-tree plugin
was removed or migrated to CSI). Of those only host-path deletes: it removes the directory of a volume under
``/tmp/`` on the controller manager's own file system and refuses any other path. It also provisions, with
``--enable-hostpath-provisioner`` (for single-node testing, as upstream): a directory
``/tmp/hostpath_pv/<uuid>`` on the controller manager's host, as a hostPath volume of the claim's size and access
modes; without the flag its provisioner reports "provisioning in volume plugin ... is disabled".

Recycling (the deprecated ``Recycle`` policy, a scrubber pod per volume) is not offered by this port: every
volume gets upstream's "no recycler plugin" answer.

Errors carry upstream's messages: ``no volume plugin matched`` (nothing supports the volume),
``no volume plugin matched name: <name>``, ``no deletable volume plugin matched``.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .helpers import spec

Obj = Mapping[str, Any]


class PluginError(Exception):
    """A plugin could not be found or failed; ``str()`` is upstream's message."""


@dataclass
class ProvisionOptions:
    """``volume.VolumeOptions`` for a provisioner."""

    reclaim_policy: str
    pv_name: str
    claim: Obj
    mount_options: list[str] = field(default_factory=list)
    parameters: dict[str, str] = field(default_factory=dict)


class Provisioner(Protocol):
    async def provision(self, selected_node: Obj | None, allowed_topologies: Any) -> dict[str, Any]: ...


class VolumePlugin(Protocol):
    name: str

    def can_support(self, volume: Obj) -> bool: ...

    def deletable(self) -> bool: ...

    async def delete(self, volume: Obj) -> None: ...

    def provisionable(self) -> bool: ...

    def supports_mount_options(self) -> bool: ...

    def new_provisioner(self, options: ProvisionOptions) -> Provisioner: ...


class HostPathPlugin:
    """``kubernetes.io/host-path``: deletes ``/tmp/...`` directories, nothing else; provisions only when enabled."""

    name = "kubernetes.io/host-path"
    _allowed = re.compile(r"/tmp/.+")

    def __init__(self, provisioning_enabled: bool = False) -> None:
        self.provisioning_enabled = provisioning_enabled

    def provisionable(self) -> bool:
        return True

    def supports_mount_options(self) -> bool:
        return False

    def new_provisioner(self, options: ProvisionOptions) -> Provisioner:
        if not self.provisioning_enabled:
            raise PluginError(f'provisioning in volume plugin "{self.name}" is disabled')
        return _HostPathProvisioner(options)

    def can_support(self, volume: Obj) -> bool:
        return isinstance(spec(volume).get("hostPath"), Mapping)

    def deletable(self) -> bool:
        return True

    async def delete(self, volume: Obj) -> None:
        source = spec(volume).get("hostPath")
        if not isinstance(source, Mapping):
            raise PluginError("spec.PersistentVolumeSource.HostPath is nil")
        path = str(source.get("path") or "")
        if not self._allowed.search(path):
            raise PluginError(f"host_path deleter only supports /tmp/.+ but received provided {path}")
        await asyncio.to_thread(shutil.rmtree, path, True)


class _HostPathProvisioner:
    def __init__(self, options: ProvisionOptions) -> None:
        self.options = options

    async def provision(self, selected_node: Obj | None, allowed_topologies: Any) -> dict[str, Any]:
        claim_spec = spec(self.options.claim)
        if claim_spec.get("volumeMode") == "Block":
            raise PluginError("kubernetes.io/host-path does not support block volume provisioning")
        path = f"/tmp/hostpath_pv/{uuid.uuid4()}"
        requests = (claim_spec.get("resources") or {}).get("requests") or {}
        volume: dict[str, Any] = {
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": self.options.pv_name,
                         "annotations": {"kubernetes.io/createdby": "hostpath-dynamic-provisioner"}},
            "spec": {"persistentVolumeReclaimPolicy": self.options.reclaim_policy,
                     "accessModes": list(claim_spec.get("accessModes") or ("ReadWriteOnce",)),
                     "capacity": {"storage": requests.get("storage", "0")},
                     "hostPath": {"path": path}},
        }
        try:
            await asyncio.to_thread(os.makedirs, path, 0o750, True)
        except OSError as err:
            raise PluginError(str(err)) from err
        return volume


class NFSPlugin:
    """``kubernetes.io/nfs``: supports NFS volumes, deletes and provisions none."""

    name = "kubernetes.io/nfs"

    def provisionable(self) -> bool:
        return False

    def supports_mount_options(self) -> bool:
        return True

    def new_provisioner(self, options: ProvisionOptions) -> Provisioner:
        raise PluginError("no provisionable volume plugin matched")

    def can_support(self, volume: Obj) -> bool:
        return isinstance(spec(volume).get("nfs"), Mapping)

    def deletable(self) -> bool:
        return False

    async def delete(self, volume: Obj) -> None:
        raise PluginError("no deletable volume plugin matched")


def default_plugins(enable_hostpath_provisioner: bool = False) -> list[VolumePlugin]:
    return [HostPathPlugin(enable_hostpath_provisioner), NFSPlugin()]


class PluginManager:
    """``VolumePluginMgr``'s lookups by name and by spec."""

    def __init__(self, plugins: Sequence[VolumePlugin]) -> None:
        self.plugins = list(plugins)

    def by_name(self, name: str) -> VolumePlugin:
        matches = [p for p in self.plugins if p.name == name]
        if not matches:
            raise PluginError(f"no volume plugin matched name: {name}")
        return matches[0]

    def deletable_by_name(self, name: str) -> VolumePlugin:
        plugin = self.by_name(name)
        if not plugin.deletable():
            raise PluginError("no deletable volume plugin matched")
        return plugin

    def provisionable_by_name(self, name: str) -> VolumePlugin:
        plugin = self.by_name(name)
        if not plugin.provisionable():
            raise PluginError("no provisionable volume plugin matched")
        return plugin

    def deletable_by_spec(self, volume: Obj) -> VolumePlugin:
        matches = [p for p in self.plugins if p.can_support(volume)]
        if not matches:
            raise PluginError("no volume plugin matched")
        if len(matches) > 1:
            names = ",".join(p.name for p in matches)
            raise PluginError(f"multiple volume plugins matched: {names}")
        if not matches[0].deletable():
            raise PluginError("no deletable volume plugin matched")
        return matches[0]
