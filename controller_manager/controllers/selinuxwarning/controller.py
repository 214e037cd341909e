"""The SELinux warning controller (kube-controller-manager's ``selinux-warning-controller``, off by default;
``pkg/controller/volume/selinuxwarning``).

It writes nothing but Events: it warns that two pods *might* use one volume with different SELinux labels or
SELinux change policies, which would let only one of them access it on a shared node.

Guarantees:
- Every pod not in a terminal phase has each of its mounted volumes recorded in a :class:`~.cache.VolumeCache`
  under the volume's unique name, with the label it would be mounted with and its change policy. Volumes
  resolve through the claim and PV caches as the attach/detach controller resolves them (an unbound claim, a
  missing PV: the error is returned and the pod retried with backoff); only CSI persistent volumes are recorded.
  Other volumes cannot conflict: the in-tree plugins of a PV support no SELinux mount (their pods count as
  ``Recursive`` with no label), and an inline CSI volume is unique to its pod.
- The label: the container's ``securityContext.seLinuxOptions``, else the pod's, of every container mounting the
  volume, as :func:`~.translator.file_label` joins them; two different labels in one pod are a Warning
  ``MultipleSELinuxLabels`` ("Volume "<name>" is mounted twice with different SELinux labels inside this pod"),
  for a volume of any kind that resolved, and that volume is skipped. The label is dropped (``""``) when the
  pod's ``seLinuxChangePolicy`` is ``Recursive`` or the driver does not mount with ``-o context`` (no CSIDriver,
  or ``spec.seLinuxMount`` not true).
- The policy: the pod's ``seLinuxChangePolicy`` (default ``MountOption``), ``Recursive`` when the driver does not
  support SELinux mounts or the label is empty.
- Each new conflict is a Normal event on both pods (reasons ``SELinuxChangePolicyConflict`` /
  ``SELinuxLabelConflict``, message from :meth:`~.cache.Conflict.event_message`), from ``selinux_warning``;
  reporting stops at a pod that is gone.
- Re-checks: a pod when added, deleted, or entering Succeeded/Failed (then it is forgotten); the pods using a
  claim when it binds (its ``volumeName`` set or changed) or a PV's ``claimRef`` gets a uid; the pods using a
  CSI driver's volumes when its CSIDriver appears, changes ``seLinuxMount``, or goes while it said true.
- Metric ``selinux_warning_controller_selinux_volume_conflict`` (gauge 1 per conflicting ordered pair of pods,
  labels property, pod1_namespace, pod1_name, pod1_value, pod2_namespace, pod2_name, pod2_value), from the caches
  at scrape time.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from prometheus_client import REGISTRY
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from controller_manager.api.meta import key_of, meta, split_key
from controller_manager.api.resources import CSIDRIVERS, PERSISTENTVOLUMECLAIMS, PERSISTENTVOLUMES, PODS
from controller_manager.api.volumes import POD_PVC_INDEX, pod_pvc_index
from controller_manager.client.errors import NotFound
from controller_manager.controllerutil.volumespec import SpecError, VolumeSpec, create_volume_spec
from controller_manager.runtime.controller import Controller, ControllerContext, Result
from controller_manager.runtime.informers import Added, Deleted, Event, Updated

from .cache import Conflict, PodKey, VolumeCache
from .translator import file_label

__all__ = ["SELinuxWarningController", "mount_labels"]

Obj = Mapping[str, Any]

RECURSIVE = "Recursive"
MOUNT_OPTION = "MountOption"
MULTIPLE_LABELS = "MultipleSELinuxLabels"
CONTAINER_FIELDS = ("initContainers", "containers", "ephemeralContainers")


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def mount_labels(pod: Obj) -> dict[str, list[Mapping[str, Any]]]:
    """Volume name -> the effective ``seLinuxOptions`` of each container mounting it (those with any): the
    container's own, else the pod's (``GetPodVolumeNames`` collecting SELinux options). Every mounted volume is a
    key, in mount order."""
    spec = _dict(pod.get("spec"))
    pod_options = _dict(spec.get("securityContext")).get("seLinuxOptions")
    out: dict[str, list[Mapping[str, Any]]] = {}
    for field in CONTAINER_FIELDS:
        for container in spec.get(field) or ():
            options = _dict(_dict(container).get("securityContext")).get("seLinuxOptions")
            effective = options if isinstance(options, Mapping) else pod_options
            for mount in _dict(container).get("volumeMounts") or ():
                labels = out.setdefault(str(_dict(mount).get("name", "")), [])
                if isinstance(effective, Mapping):
                    labels.append(effective)
    return out


def _selinux_mount(driver: Obj | None) -> bool:
    return _dict((driver or {}).get("spec")).get("seLinuxMount") is True


class _Conflicts(Collector):
    """``selinux_warning_controller_selinux_volume_conflict`` over the running controllers' caches."""

    caches: ClassVar[weakref.WeakSet[VolumeCache]] = weakref.WeakSet()

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "selinux_warning_controller_selinux_volume_conflict", "Conflict between two Pods using the same volume",
            labels=["property", "pod1_namespace", "pod1_name", "pod1_value", "pod2_namespace", "pod2_name",
                    "pod2_value"])
        for cache in list(self.caches):
            for c in cache.all_conflicts():
                family.add_metric([c.property_name, c.pod[0], c.pod[1], c.property_value, c.other_pod[0],
                                   c.other_pod[1], c.other_property_value], 1.0)
        yield family


REGISTRY.register(_Conflicts())


class SELinuxWarningController(Controller):
    name: ClassVar[str] = "selinux-warning-controller"
    alias: ClassVar[str] = "selinux-warning-controller"  # upstream gives it no alias
    enabled_by_default: ClassVar[bool] = False
    queue_name: ClassVar[str | None] = "selinux_warning"
    default_workers: ClassVar[int] = 1

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.recorder = ctx.events.recorder("selinux_warning")
        self.pod_informer = ctx.informers.informer(PODS, indexers={POD_PVC_INDEX: pod_pvc_index})
        self.pvc_informer = ctx.informers.informer(PERSISTENTVOLUMECLAIMS)
        self.pv_informer = ctx.informers.informer(PERSISTENTVOLUMES)
        self.driver_informer = ctx.informers.informer(CSIDRIVERS)
        self.pod_informer.add_handler(self._on_pod)
        self.pvc_informer.add_handler(self._on_pvc)
        self.pv_informer.add_handler(self._on_pv)
        self.driver_informer.add_handler(self._on_driver)
        self.cache = VolumeCache()
        _Conflicts.caches.add(self.cache)

    # --- event handlers ----------------------------------------------------------------------------------

    def _on_pod(self, event: Event) -> None:
        if isinstance(event, Updated):
            # The relevant spec is immutable: only a pod reaching its final phase (volumes unmounted) matters.
            old, new = _dict(event.old.get("status")).get("phase"), _dict(event.new.get("status")).get("phase")
            if old == new or new not in ("Succeeded", "Failed"):
                return
            self.queue.add(key_of(event.new))
            return
        self.queue.add(key_of(event.obj))

    def _enqueue_claim_users(self, namespace: str, name: str) -> None:
        for pod in self.pod_informer.store.by_index(POD_PVC_INDEX, f"{namespace}/{name}"):
            self.queue.add(key_of(pod))

    def _on_pvc(self, event: Event) -> None:
        if isinstance(event, Deleted):
            return
        if isinstance(event, Added):
            pvc = event.obj
            if not _dict(pvc.get("spec")).get("volumeName"):
                return  # not bound
        else:
            pvc = event.new
            if _dict(event.old.get("spec")).get("volumeName") == _dict(pvc.get("spec")).get("volumeName"):
                return
        self._enqueue_claim_users(str(meta(pvc).get("namespace", "")), str(meta(pvc).get("name", "")))

    def _on_pv(self, event: Event) -> None:
        if isinstance(event, Deleted):
            return
        pv = event.obj if isinstance(event, Added) else event.new
        ref = _dict(pv.get("spec")).get("claimRef")
        if not isinstance(ref, Mapping) or not ref.get("uid"):
            return  # unbound, or the binding is incomplete
        if isinstance(event, Updated):
            old_ref = _dict(event.old.get("spec")).get("claimRef")
            if isinstance(old_ref, Mapping) and old_ref.get("uid") == ref.get("uid"):
                return
        self._enqueue_claim_users(str(ref.get("namespace", "")), str(ref.get("name", "")))

    def _on_driver(self, event: Event) -> None:
        if isinstance(event, Updated):
            if _selinux_mount(event.old) == _selinux_mount(event.new):
                return
            driver = event.new
        elif isinstance(event, Deleted):
            if not _selinux_mount(event.obj):
                return  # a missing CSIDriver reads as seLinuxMount false: nothing changes
            driver = event.obj
        else:
            driver = event.obj
        for namespace, name in self.cache.pods_for_csi_driver(str(meta(driver).get("name", ""))):
            self.queue.add(f"{namespace}/{name}")

    # --- sync --------------------------------------------------------------------------------------------

    async def sync(self, key: str) -> Result | None:
        namespace, name = split_key(key)
        pod_key: PodKey = (namespace, name)
        pod = self.pod_informer.store.get(key)
        if pod is not None and _dict(pod.get("status")).get("phase") not in ("Succeeded", "Failed") \
                and _projected(pod):
            # The shared pod cache keeps no container volumeMounts nor container securityContexts (see
            # runtime/informers/transform.py), which the labels come from: the pod as the API server has it.
            try:
                pod = await self.ctx.client.get(PODS, name, namespace)
            except NotFound:
                pod = None
        if pod is None or _dict(pod.get("status")).get("phase") in ("Succeeded", "Failed"):
            # Gone, or finished (the kubelet unmounts its volumes): it uses them no more.
            self.cache.delete_pod(pod_key)
            return None
        self._sync_pod(pod, pod_key)
        return None

    def _sync_pod(self, pod: Obj, pod_key: PodKey) -> None:
        errors: list[str] = []
        specs: dict[str, VolumeSpec | None] = {}  # the volumes that resolved; None: not a CSI persistent one
        pvcs, pvs = self.pvc_informer.store, self.pv_informer.store
        for volume in _dict(pod.get("spec")).get("volumes") or ():
            try:
                specs[str(volume.get("name", ""))] = create_volume_spec(volume, pod, pvcs, pvs)
            except SpecError as err:
                errors.append(str(err))  # often a claim or volume not there yet
        security = _dict(_dict(pod.get("spec")).get("securityContext"))
        pod_policy = str(security.get("seLinuxChangePolicy") or MOUNT_OPTION)
        for mount, options in mount_labels(pod).items():
            if mount not in specs:
                continue  # failed above
            labels = {file_label(o) for o in options}
            if len(labels) > 1:  # any kind of volume
                self.recorder.event(pod, "Warning", MULTIPLE_LABELS,
                                    f'Volume "{mount}" is mounted twice with different SELinux labels inside this pod',
                                    resource=PODS)
                errors.append(f"multiple SELinux labels found: {','.join(sorted(labels))}")
                continue
            spec = specs[mount]
            if spec is None:
                continue  # no conflict possible (see the guarantees)
            supported = _selinux_mount(self.driver_informer.store.get(spec.driver))
            label = next(iter(labels), "")
            if pod_policy == RECURSIVE or not supported:
                label = ""  # mounted without -o context
            policy = pod_policy
            if not supported or not label:
                policy = RECURSIVE
            self._report(self.cache.add_volume(spec.unique_name, pod_key, label, policy, spec.driver))
        if errors:
            raise RuntimeError("; ".join(errors))

    def _report(self, conflicts: list[Conflict]) -> None:
        for conflict in conflicts:
            pod = self.pod_informer.store.get(f"{conflict.pod[0]}/{conflict.pod[1]}")
            if pod is None:
                return  # a conflict resolved by the pod's deletion is not worth reporting
            self.recorder.event(pod, "Normal", conflict.event_reason, conflict.event_message(), resource=PODS)


def _projected(pod: Obj) -> bool:
    """Whether a cached pod with volumes came through the cache's projection, which drops every container's
    volumeMounts (a pod given whole, as tests give them, has its mounts)."""
    spec = _dict(pod.get("spec"))
    if not spec.get("volumes"):
        return False
    containers = [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]
    return not any(isinstance(c, dict) and "volumeMounts" in c for c in containers)
