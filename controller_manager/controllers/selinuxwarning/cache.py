"""The volumes every pod uses, with the SELinux label and change policy each pod would mount them with
(``selinuxwarning/cache``).

Guarantees:
- :meth:`VolumeCache.add_volume` records (volume, pod) with its label, policy and CSI driver and returns the
  conflicts the addition makes, each twice (one per pod, for an event on each): a ``SELinuxChangePolicy``
  conflict when the pods' policies differ, a ``SELinuxLabel`` one when their labels conflict
  (:func:`~.translator.conflicts`). Re-adding a pod with the same label and policy reports nothing.
- :meth:`VolumeCache.delete_pod` forgets a pod everywhere; a volume no pod uses is dropped.
- :meth:`VolumeCache.pods_for_csi_driver` lists the pods using volumes of a driver (re-checked when its
  CSIDriver's ``seLinuxMount`` changes); :meth:`VolumeCache.all_conflicts` lists every current conflict once per
  ordered pair of pods (the metric).
- :meth:`Conflict.event_message` is upstream's text: it names the other pod only when both share a namespace.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from .translator import conflicts

__all__ = ["Conflict", "PodKey", "VolumeCache"]

PodKey = tuple[str, str]  # (namespace, name)

CHANGE_POLICY = "SELinuxChangePolicy"
LABEL = "SELinuxLabel"


@dataclass(frozen=True, slots=True)
class Conflict:
    property_name: str  # also the "property" label of the metric
    event_reason: str
    pod: PodKey  # the pod the event goes to
    property_value: str
    other_pod: PodKey
    other_property_value: str

    def event_message(self) -> str:
        value, other = f'"{self.property_value}"', f'"{self.other_property_value}"'
        tail = "If both pods land on the same node, only one of them may access the volume."
        if self.pod[0] == self.other_pod[0]:
            return (f"{self.property_name} {value} conflicts with pod {self.other_pod[1]} that uses the same volume "
                    f"as this pod with {self.property_name} {other}. {tail}")
        # Another namespace: name neither it nor the pod.
        return (f"{self.property_name}{value} conflicts with another pod that uses the same volume as this pod with "
                f"a different {self.property_name}. {tail}")


@dataclass(frozen=True, slots=True)
class _PodInfo:
    label: str
    change_policy: str


@dataclass(slots=True)
class _UsedVolume:
    csi_driver: str
    pods: dict[PodKey, _PodInfo] = field(default_factory=dict)


def _pair(prop: str, pod: PodKey, value: str, other: PodKey, other_value: str) -> Conflict:
    return Conflict(prop, f"{prop}Conflict", pod, value, other, other_value)


class VolumeCache:
    def __init__(self) -> None:
        self._volumes: dict[str, _UsedVolume] = {}

    def add_volume(self, volume: str, pod: PodKey, label: str, change_policy: str, csi_driver: str) -> list[Conflict]:
        used = self._volumes.get(volume)
        info = _PodInfo(label, change_policy)
        if used is None:
            self._volumes[volume] = _UsedVolume(csi_driver, {pod: info})
            return []
        if used.pods.get(pod) == info:
            return []  # reported when it was added
        used.pods[pod] = info
        out: list[Conflict] = []
        for other, other_info in used.pods.items():
            if other_info.change_policy != change_policy:
                out += [_pair(CHANGE_POLICY, pod, change_policy, other, other_info.change_policy),
                        _pair(CHANGE_POLICY, other, other_info.change_policy, pod, change_policy)]
            if conflicts(other_info.label, label):
                out += [_pair(LABEL, pod, label, other, other_info.label),
                        _pair(LABEL, other, other_info.label, pod, label)]
        return out

    def delete_pod(self, pod: PodKey) -> None:
        for name in list(self._volumes):
            used = self._volumes[name]
            used.pods.pop(pod, None)
            if not used.pods:
                del self._volumes[name]

    def pods_for_csi_driver(self, driver: str) -> list[PodKey]:
        return [pod for used in self._volumes.values() if used.csi_driver == driver for pod in used.pods]

    def all_conflicts(self) -> Iterator[Conflict]:
        for used in self._volumes.values():
            for pod, info in used.pods.items():
                for other, other_info in used.pods.items():
                    if pod == other:
                        continue
                    if info.change_policy != other_info.change_policy:
                        yield _pair(CHANGE_POLICY, pod, info.change_policy, other, other_info.change_policy)
                    if conflicts(info.label, other_info.label):
                        yield _pair(LABEL, pod, info.label, other, other_info.label)

    def __len__(self) -> int:
        return len(self._volumes)
