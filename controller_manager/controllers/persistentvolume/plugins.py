"""The in-tree volume plugins the binder can ask to delete a volume (``pkg/volume``'s plugin manager as the
PersistentVolume controller uses it).

kube-controller-manager probes the host-path and NFS plugins for the PV controller (every other in-tree plugin
was removed or migrated to CSI). Of those only host-path deletes: it removes the directory of a volume under
``/tmp/`` on the controller manager's own file system and refuses any other path. Recycling (the deprecated
``Recycle`` policy, a scrubber pod per volume) is not offered by this port: every volume gets upstream's "no
recycler plugin" answer.

Errors carry upstream's messages: ``no volume plugin matched`` (nothing supports the volume),
``no volume plugin matched name: <name>``, ``no deletable volume plugin matched``.
"""

from __future__ import annotations

import asyncio
import re
import shutil
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from .helpers import spec

Obj = Mapping[str, Any]


class PluginError(Exception):
    """A plugin could not be found or failed; ``str()`` is upstream's message."""


class VolumePlugin(Protocol):
    name: str

    def can_support(self, volume: Obj) -> bool: ...

    def deletable(self) -> bool: ...

    async def delete(self, volume: Obj) -> None: ...


class HostPathPlugin:
    """``kubernetes.io/host-path``: deletes ``/tmp/...`` directories, nothing else."""

    name = "kubernetes.io/host-path"
    _allowed = re.compile(r"/tmp/.+")

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


class NFSPlugin:
    """``kubernetes.io/nfs``: supports NFS volumes, deletes none."""

    name = "kubernetes.io/nfs"

    def can_support(self, volume: Obj) -> bool:
        return isinstance(spec(volume).get("nfs"), Mapping)

    def deletable(self) -> bool:
        return False

    async def delete(self, volume: Obj) -> None:
        raise PluginError("no deletable volume plugin matched")


def default_plugins() -> list[VolumePlugin]:
    return [HostPathPlugin(), NFSPlugin()]


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
