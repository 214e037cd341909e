"""The attach/detach controller's two caches (``pkg/controller/volume/attachdetach/cache``).

Guarantees:
- :class:`VolumeSpec` (:mod:`controller_manager.controllerutil.volumespec`) is what the controller knows of a
  volume.
- :class:`DesiredStateOfWorld`: managed nodes -> volumes to attach -> the pods scheduled there that use them.
  Adding a pod to an unmanaged node is an error; deleting a node that still has volumes is an error; a volume
  whose last pod goes is no longer desired.
- :class:`ActualStateOfWorld`: volume -> the nodes it is (or may be: ``attached_confirmed`` False, an
  uncertain attachment) attached to, with whether the node reports it mounted (assumed True until the node's
  ``volumesInUse`` says otherwise) and when a detach was first wanted; plus per node the volumes to report in
  ``node.status.volumesAttached`` and whether the node's status needs an update. Only confirmed attachments are
  reported.
Messages of the errors are upstream's.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller_manager.controllerutil.volumespec import VolumeSpec

__all__ = ["ActualStateOfWorld", "AttachState", "AttachedVolume", "DesiredStateOfWorld", "StateError",
           "VolumeSpec", "VolumeToAttach"]

Pod = Mapping[str, Any]


class StateError(Exception):
    pass


@dataclass(slots=True)
class VolumeToAttach:
    volume_name: str
    spec: VolumeSpec
    node_name: str
    scheduled_pods: list[Pod]
    multi_attach_error_reported: bool = False

    def message(self, prefix: str, suffix: str) -> str:
        """``GenerateMsg``'s simple message: ``<prefix> for volume "<spec name>" <suffix>``."""
        return f'{prefix} for volume "{self.spec.name}" {suffix}'


@dataclass(slots=True)
class _DesiredVolume:
    spec: VolumeSpec
    pods: dict[str, Pod] = field(default_factory=dict)  # unique pod name (uid) -> pod
    multi_attach_error_reported: bool = False


class DesiredStateOfWorld:
    def __init__(self) -> None:
        self._nodes: dict[str, dict[str, _DesiredVolume]] = {}

    def add_node(self, node_name: str) -> None:
        self._nodes.setdefault(node_name, {})

    def delete_node(self, node_name: str) -> None:
        volumes = self._nodes.get(node_name)
        if volumes is None:
            return
        if volumes:
            raise StateError(f'failed to delete node "{node_name}" from list of nodes managed by attach/detach '
                             f"controller--the node still contains {len(volumes)} volumes in its list of volumes "
                             "to attach")
        del self._nodes[node_name]

    def add_pod(self, pod_name: str, pod: Pod, spec: VolumeSpec, node_name: str) -> str:
        volumes = self._nodes.get(node_name)
        if volumes is None:
            raise StateError(f'no node with the name "{node_name}" exists in the list of managed nodes')
        name = spec.unique_name
        volume = volumes.get(name)
        if volume is None:
            volume = volumes[name] = _DesiredVolume(spec)
        volume.pods.setdefault(pod_name, pod)
        return name

    def delete_pod(self, pod_name: str, volume_name: str, node_name: str) -> None:
        volumes = self._nodes.get(node_name)
        volume = volumes.get(volume_name) if volumes is not None else None
        if volumes is None or volume is None or pod_name not in volume.pods:
            return
        del volume.pods[pod_name]
        if not volume.pods:
            del volumes[volume_name]

    def node_exists(self, node_name: str) -> bool:
        return node_name in self._nodes

    def volume_exists(self, volume_name: str, node_name: str) -> bool:
        return volume_name in self._nodes.get(node_name, {})

    def set_multi_attach_error(self, volume_name: str, node_name: str) -> None:
        volume = self._nodes.get(node_name, {}).get(volume_name)
        if volume is not None:
            volume.multi_attach_error_reported = True

    def volumes_to_attach(self) -> list[VolumeToAttach]:
        return [VolumeToAttach(name, volume.spec, node, list(volume.pods.values()), volume.multi_attach_error_reported)
                for node, volumes in sorted(self._nodes.items()) for name, volume in sorted(volumes.items())]

    def pods_to_add(self) -> list[tuple[str, Pod, str, str]]:
        """``(pod name, pod, volume name, node name)`` for every pod in the cache."""
        return [(pod_name, pod, name, node) for node, volumes in self._nodes.items()
                for name, volume in volumes.items() for pod_name, pod in volume.pods.items()]

    def volume_pods_on_nodes(self, node_names: Iterable[str], volume_name: str) -> list[Pod]:
        out: list[Pod] = []
        for node in node_names:
            volume = self._nodes.get(node, {}).get(volume_name)
            if volume is not None:
                out.extend(volume.pods.values())
        return out


class AttachState(enum.Enum):
    ATTACHED = "Attached"
    UNCERTAIN = "Uncertain"
    DETACHED = "Detached"


@dataclass(frozen=True, slots=True)
class AttachedVolume:
    volume_name: str
    spec: VolumeSpec | None
    node_name: str
    mounted_by_node: bool
    detach_requested_time: float | None
    attached_confirmed: bool


@dataclass(slots=True)
class _AttachedTo:
    mounted_by_node: bool = True  # assumed mounted until the node's volumesInUse says otherwise
    attached_confirmed: bool = False
    detach_requested_time: float | None = None


@dataclass(slots=True)
class _ActualVolume:
    spec: VolumeSpec | None
    device_path: str
    nodes: dict[str, _AttachedTo] = field(default_factory=dict)


@dataclass(slots=True)
class _NodeReport:
    update_needed: bool = True
    volumes: set[str] = field(default_factory=set)


class ActualStateOfWorld:
    def __init__(self) -> None:
        self._volumes: dict[str, _ActualVolume] = {}
        self._reports: dict[str, _NodeReport] = {}

    # --- attach / detach bookkeeping

    def _add_volume_node(self, volume_name: str, spec: VolumeSpec | None, node_name: str, device_path: str,
                         attached: bool) -> str:
        if not volume_name:
            if spec is None:
                raise StateError("volumeSpec cannot be nil if volumeName is empty")
            volume_name = spec.unique_name
        volume = self._volumes.get(volume_name)
        if volume is None:
            volume = self._volumes[volume_name] = _ActualVolume(spec, device_path)
        else:
            volume.spec, volume.device_path = spec, device_path
        node = volume.nodes.get(node_name)
        if node is None:
            volume.nodes[node_name] = _AttachedTo(attached_confirmed=attached)
        else:
            node.attached_confirmed = attached
        if attached:
            self.add_volume_to_report_as_attached(volume_name, node_name)
        return volume_name

    def mark_volume_as_attached(self, volume_name: str, spec: VolumeSpec | None, node_name: str,
                                device_path: str = "") -> str:
        return self._add_volume_node(volume_name, spec, node_name, device_path, True)

    def mark_volume_as_uncertain(self, volume_name: str, spec: VolumeSpec | None, node_name: str) -> str:
        return self._add_volume_node(volume_name, spec, node_name, "", False)

    def mark_volume_as_detached(self, volume_name: str, node_name: str) -> None:
        volume = self._volumes.get(volume_name)
        if volume is None:
            return
        volume.nodes.pop(node_name, None)
        if not volume.nodes:
            del self._volumes[volume_name]
        with contextlib.suppress(StateError):
            self.remove_volume_from_report_as_attached(volume_name, node_name)

    def _node(self, volume_name: str, node_name: str) -> _AttachedTo:
        volume = self._volumes.get(volume_name)
        node = volume.nodes.get(node_name) if volume is not None else None
        if node is None:
            raise StateError(f'volume {volume_name} is no longer attached to the node "{node_name}"')
        return node

    def set_volumes_mounted_by_node(self, volume_names: Iterable[str], node_name: str) -> None:
        mounted = set(volume_names)
        for name, volume in self._volumes.items():
            node = volume.nodes.get(node_name)
            if node is not None:
                node.mounted_by_node = name in mounted

    def set_detach_request_time(self, volume_name: str, node_name: str, now: float) -> float:
        """Seconds since the detach was first wanted (now, the first time)."""
        node = self._node(volume_name, node_name)
        if node.detach_requested_time is None:
            node.detach_requested_time = now
        return now - node.detach_requested_time

    def reset_detach_request_time(self, volume_name: str, node_name: str) -> None:
        with contextlib.suppress(StateError):
            self._node(volume_name, node_name).detach_requested_time = None

    # --- reports for node.status.volumesAttached

    def add_volume_to_report_as_attached(self, volume_name: str, node_name: str) -> None:
        volume = self._volumes.get(volume_name)
        if volume is None or node_name not in volume.nodes:
            return  # no longer attached
        report = self._reports.setdefault(node_name, _NodeReport())
        if volume_name not in report.volumes:
            report.volumes.add(volume_name)
            report.update_needed = True

    def remove_volume_from_report_as_attached(self, volume_name: str, node_name: str) -> None:
        report = self._reports.get(node_name)
        if report is None or volume_name not in report.volumes:
            raise StateError(f'volume "{volume_name}" does not exist in volumesToReportAsAttached list or node '
                             f'"{node_name}" does not exist in nodesToUpdateStatusFor list')
        report.volumes.discard(volume_name)
        report.update_needed = True

    def set_node_status_update_needed(self, node_name: str) -> None:
        report = self._reports.get(node_name)
        if report is not None:
            report.update_needed = True

    def remove_node_from_attach_update_status(self, node_name: str) -> None:
        self._reports.pop(node_name, None)

    def _report(self, report: _NodeReport) -> list[dict[str, str]]:
        return [{"name": name, "devicePath": self._volumes[name].device_path if name in self._volumes else ""}
                for name in sorted(report.volumes)]

    def volumes_to_report_attached(self) -> dict[str, list[dict[str, str]]]:
        """Nodes whose status needs an update -> their ``volumesAttached``; the flags are cleared."""
        out = {}
        for node, report in self._reports.items():
            if report.update_needed:
                out[node] = self._report(report)
            report.update_needed = False
        return out

    def volumes_to_report_attached_for_node(self, node_name: str) -> tuple[bool, list[dict[str, str]]]:
        report = self._reports.get(node_name)
        if report is None or not report.update_needed:
            return False, []
        report.update_needed = False
        return True, self._report(report)

    # --- reads

    def get_attach_state(self, volume_name: str, node_name: str) -> AttachState:
        node = self._volumes.get(volume_name, _ActualVolume(None, "")).nodes.get(node_name)
        if node is None:
            return AttachState.DETACHED
        return AttachState.ATTACHED if node.attached_confirmed else AttachState.UNCERTAIN

    def volume_node_exists(self, volume_name: str, node_name: str) -> bool:
        return self.get_attach_state(volume_name, node_name) is AttachState.ATTACHED

    def attached_volumes(self) -> list[AttachedVolume]:
        return [AttachedVolume(name, volume.spec, node_name, node.mounted_by_node, node.detach_requested_time,
                               node.attached_confirmed)
                for name, volume in sorted(self._volumes.items()) for node_name, node in sorted(volume.nodes.items())]

    def attached_volumes_for_node(self, node_name: str) -> list[AttachedVolume]:
        return [v for v in self.attached_volumes() if v.node_name == node_name]

    def attached_volumes_per_node(self) -> dict[str, list[AttachedVolume]]:
        """Confirmed attachments, by node."""
        out: dict[str, list[AttachedVolume]] = {}
        for volume in self.attached_volumes():
            if volume.attached_confirmed:
                out.setdefault(volume.node_name, []).append(volume)
        return out

    def nodes_for_attached_volume(self, volume_name: str) -> list[str]:
        volume = self._volumes.get(volume_name)
        if volume is None:
            return []
        return sorted(node for node, attached in volume.nodes.items() if attached.attached_confirmed)
