"""The PersistentVolume binder's decisions (``pkg/controller/volume/persistentvolume/pv_controller.go``), apart from
informers and queues so that upstream's test tables can drive :meth:`Binder.sync_claim` and
:meth:`Binder.sync_volume` against a fake API.

Guarantees, as upstream:
- The binding is two-way: ``volume.spec.claimRef`` (with the claim's UID) is written first, then the volume's
  phase ``Bound``, then the claim's ``spec.volumeName`` with ``pv.kubernetes.io/bind-completed`` (and
  ``pv.kubernetes.io/bound-by-controller`` on whichever side the controller chose), then the claim's status
  (``Bound``, the volume's access modes, its capacity when the claim becomes Bound, its volume attributes
  class). Any step that fails leaves the rest to the next sync, which finishes it.
- An unbound claim without ``spec.volumeName`` gets the volume pre-bound to it, else the smallest Available
  volume that fits (:func:`~.helpers.find_matching_volume`); a delay-binding (WaitForFirstConsumer) claim only
  a pre-bound one. With none: a claim without a class gets the default StorageClass (retroactive assignment);
  a delay-binding claim not yet given a node by the scheduler gets a ``WaitForFirstConsumer`` event (or
  ``WaitForPodScheduled`` naming its unscheduled pods); a claim with a class is provisioned (external
  provisioners: the ``volume.kubernetes.io/storage-provisioner`` annotations and an ``ExternalProvisioning``
  event, then wait); otherwise ``FailedBinding`` "no persistent volumes available for this claim and no storage
  class is set". Pending claims stay Pending (status reset).
- A claim asking for a volume by name binds it if it fits (``VolumeMismatch`` Warning otherwise) or is
  pre-bound to it; if the volume is bound elsewhere the claim stays Pending with ``FailedBinding``.
- A bound claim whose volume is gone or bound to someone else becomes ``Lost`` (``ClaimLost``/``ClaimMisbound``).
- A volume is ``Available`` when unbound or only pre-bound, ``Bound`` when its claim points back, ``Released``
  when its claim is gone; then its reclaim policy runs: Retain keeps it, Delete deletes it through an in-tree
  plugin or waits for the external deleter (CSI and externally provisioned volumes), Recycle is refused
  (``VolumeFailedRecycle`` "No recycler plugin found for the volume!"), an unknown policy fails the volume.
  A volume the controller bound to a claim that went elsewhere is unbound again.
- Reclaim and provisioning run as named background operations (one per volume/claim at a time) with
  exponential backoff after a failure (500 ms doubling to 2 m 2 s), as upstream's goroutinemap.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from controller_manager.api.meta import deep_copy, meta
from controller_manager.api.quantity import parse_quantity
from controller_manager.api.resources import PERSISTENTVOLUMECLAIMS, PERSISTENTVOLUMES, Resource
from controller_manager.client.errors import AlreadyExists, ApiError, NotFound
from controller_manager.clock import Clock

from .helpers import (
    ANN_BETA_STORAGE_PROVISIONER,
    ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER,
    ANN_DYNAMICALLY_PROVISIONED,
    ANN_MIGRATED_TO,
    ANN_PRE_RESIZE_CAPACITY,
    ANN_SELECTED_NODE,
    ANN_STORAGE_PROVISIONER,
    CSI_MIGRATED_PLUGINS,
    PV_DELETION_IN_TREE_PROTECTION_FINALIZER,
    PV_DELETION_PROTECTION_FINALIZER,
    ClassLookupError,
    SelectorError,
    annotations_of,
    check_volume_satisfies_claim,
    claim_class,
    claim_has_class,
    claim_key,
    claim_phase,
    claim_ref,
    claim_ref_key,
    claim_reference,
    default_class,
    find_best_match_for_claim,
    has_annotation,
    is_delay_binding_mode,
    is_delay_binding_provisioning,
    is_pod_terminated,
    is_volume_bound_to_claim,
    name_of,
    reclaim_policy,
    spec,
    status,
    uid_of,
    volume_mode_mismatches,
    volume_name_of_claim,
    volume_phase,
)
from .metrics import NOT_AVAILABLE, OperationTimestamps, record_retroactive_storage_class
from .plugins import PluginError, PluginManager, ProvisionOptions, VolumePlugin

Obj = Mapping[str, Any]

COMPONENT = "persistentvolume-controller"

# pkg/controller/volume/events
FAILED_BINDING = "FailedBinding"
VOLUME_MISMATCH = "VolumeMismatch"
VOLUME_FAILED_RECYCLE = "VolumeFailedRecycle"
VOLUME_FAILED_DELETE = "VolumeFailedDelete"
VOLUME_DELETE = "VolumeDelete"
EXTERNAL_PROVISIONING = "ExternalProvisioning"
PROVISIONING_FAILED = "ProvisioningFailed"
PROVISIONING_SUCCEEDED = "ProvisioningSucceeded"
PROVISIONING_CLEANUP_FAILED = "ProvisioningCleanupFailed"
CREATE_PROVISIONED_PV_RETRIES = 5  # createProvisionedPVRetryCount
CREATE_PROVISIONED_PV_INTERVAL = 10.0  # createProvisionedPVInterval
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
WAIT_FOR_POD_SCHEDULED = "WaitForPodScheduled"

BACKOFF_INITIAL = 0.5  # goroutinemap/exponentialbackoff: initialDurationBeforeRetry
BACKOFF_MAX = 122.0  # maxDurationBeforeRetry: 2m2s


class Client(Protocol):
    """The API calls the binder makes (a subset of :class:`~controller_manager.client.ApiClient`)."""

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]: ...

    async def update(self, res: Resource, obj: Mapping[str, Any]) -> dict[str, Any]: ...

    async def update_status(self, res: Resource, obj: Mapping[str, Any]) -> dict[str, Any]: ...

    async def delete(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]: ...

    async def create(self, res: Resource, obj: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]: ...


class Recorder(Protocol):
    def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str, *,
              resource: Resource | None = None) -> None: ...


class BindError(Exception):
    """A sync that cannot go on (upstream returns an error; the next sync retries)."""


def _resource_version(obj: Obj) -> int:
    try:
        return int(meta(obj).get("resourceVersion") or 0)
    except (TypeError, ValueError):
        return 0


@dataclass
class Operations:
    """``goroutinemap`` with exponential backoff: one running operation per name; after a failure the name is
    refused until its backoff has passed (doubling each failure in a row, reset by a success)."""

    clock: Clock
    log: Any
    running: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    failures: dict[str, tuple[float, float]] = field(default_factory=dict)  # name -> (last failure, backoff)

    def run(self, name: str, operation: Callable[[], Awaitable[None]]) -> bool:
        if name in self.running:
            self.log.debug("Operation is already running, skipping", operation=name)
            return False
        failed = self.failures.get(name)
        if failed is not None and self.clock.monotonic() < failed[0] + failed[1]:
            self.log.debug("Operation postponed due to exponential backoff", operation=name)
            return False

        async def wrapped() -> None:
            try:
                await operation()
            except asyncio.CancelledError:
                raise
            except Exception as err:
                previous = self.failures.get(name)
                backoff = BACKOFF_INITIAL if previous is None else min(previous[1] * 2, BACKOFF_MAX)
                self.failures[name] = (self.clock.monotonic(), backoff)
                self.log.info("Operation failed", operation=name, error=str(err), retry_after=backoff)
            else:
                self.failures.pop(name, None)
            finally:
                self.running.pop(name, None)

        self.running[name] = asyncio.get_running_loop().create_task(wrapped(), name=f"pv-operation:{name}")
        return True

    async def wait_idle(self) -> None:
        while self.running:
            await asyncio.gather(*list(self.running.values()), return_exceptions=True)

    def cancel_all(self) -> None:
        for task in self.running.values():
            task.cancel()


class Binder:
    """``PersistentVolumeController``'s sync logic over its own caches of volumes and claims.

    ``volumes``/``claims`` are the controller's caches (name -> volume, ``namespace/name`` -> claim): updated by
    informer events and by what this controller writes, never older than what it has seen.
    ``get_class(name)``/``list_classes()`` read StorageClasses, ``informer_claim(key)`` the claim informer,
    ``pods_for_claim(key)`` the pods using a claim, ``enqueue_claim(key)`` asks for a claim sync."""

    def __init__(self, client: Client, recorder: Recorder, clock: Clock, log: Any, *,
                 get_class: Callable[[str], Obj | None], list_classes: Callable[[], Sequence[Obj]],
                 informer_claim: Callable[[str], Obj | None] = lambda key: None,
                 pods_for_claim: Callable[[str], Sequence[Obj]] = lambda key: (),
                 enqueue_claim: Callable[[str], None] = lambda key: None,
                 get_node: Callable[[str], Obj | None] = lambda name: None,
                 plugins: Sequence[VolumePlugin] = (), enable_dynamic_provisioning: bool = True) -> None:
        self.client = client
        self.recorder = recorder
        self.clock = clock
        self.log = log
        self.get_class = get_class
        self.list_classes = list_classes
        self.informer_claim = informer_claim
        self.pods_for_claim = pods_for_claim
        self.enqueue_claim = enqueue_claim
        self.get_node = get_node
        self.create_provisioned_pv_retries = CREATE_PROVISIONED_PV_RETRIES
        self.create_provisioned_pv_interval = CREATE_PROVISIONED_PV_INTERVAL
        self.plugins = PluginManager(plugins)
        self.enable_dynamic_provisioning = enable_dynamic_provisioning
        self.volumes: dict[str, Obj] = {}
        self.claims: dict[str, Obj] = {}
        self.operations = Operations(clock, log)
        self.timestamps = OperationTimestamps(clock.monotonic)  # provision/delete start, for the latency metric
        # Tests: called with an operation's name just before it is scheduled (upstream's preOperationHook).
        self.pre_operation_hook: Callable[[str], Awaitable[None]] | None = None

    # --- the caches (storeObjectUpdate) ----------------------------------------------------------------

    def store_volume(self, volume: Obj) -> bool:
        """Cache ``volume`` unless the cache holds a newer version; True if it was cached."""
        return _store(self.volumes, name_of(volume), volume)

    def store_claim(self, claim: Obj) -> bool:
        return _store(self.claims, claim_key(claim), claim)

    # --- claims ----------------------------------------------------------------------------------------

    async def sync_claim(self, claim: Obj) -> None:
        """``syncClaim``: raises :class:`BindError` or an ApiError when the next sync must retry."""
        claim = await self._update_claim_migration_annotations(claim)
        if not has_annotation(claim, ANN_BIND_COMPLETED):
            await self._sync_unbound_claim(claim)
        else:
            await self._sync_bound_claim(claim)

    async def _sync_unbound_claim(self, claim: Obj) -> None:
        wanted = volume_name_of_claim(claim)
        if not wanted:
            try:
                delay_binding = is_delay_binding_mode(claim, self.get_class)
            except ClassLookupError as err:
                raise BindError(str(err)) from err
            try:
                volume = find_best_match_for_claim(claim, self.volumes.values(), delay_binding=delay_binding)
            except SelectorError as err:
                raise BindError(f'error finding PV for claim "{claim_key(claim)}": {err}') from err
            if volume is not None:
                try:
                    await self.bind(volume, claim)
                except Exception:
                    self.timestamps.record(claim_key(claim), failed=True)
                    raise
                # A provisioned claim is bound: the end of its provision operation.
                self.timestamps.record(claim_key(claim), failed=False)
                return
            try:
                assigned = await self._assign_default_storage_class(claim)
            except ApiError as err:
                record_retroactive_storage_class(False)
                raise BindError(f'can\'t update PersistentVolumeClaim["{claim_key(claim)}"]: {err}') from err
            if assigned:
                record_retroactive_storage_class(True)
                return
            if delay_binding and not is_delay_binding_provisioning(claim):
                self._event_for_unbound_delay_binding_claim(claim)
            elif claim_class(claim) != "":
                await self.provision_claim(claim)
                return
            else:
                self.recorder.event(claim, "Normal", FAILED_BINDING,
                                    "no persistent volumes available for this claim and no storage class is set")
            await self.update_claim_status(claim, "Pending", None)
            return

        volume = self.volumes.get(wanted)
        if volume is None:
            # The claim asks for a volume that does not exist (yet): Pending, retried by the next sync.
            await self.update_claim_status(claim, "Pending", None)
            return
        if claim_ref(volume) is None:
            mismatch = check_volume_satisfies_claim(volume, claim)
            if mismatch is not None:
                self.recorder.event(claim, "Warning", VOLUME_MISMATCH,
                                    f'Cannot bind to requested volume "{name_of(volume)}": {mismatch}')
                await self.update_claim_status(claim, "Pending", None)
                return
            await self.bind(volume, claim)
            return
        if is_volume_bound_to_claim(volume, claim):
            await self.bind(volume, claim)  # finish the binding: the claim's UID goes into the claimRef
            return
        message = f'volume "{name_of(volume)}" already bound to a different claim.'
        self.recorder.event(claim, "Warning", FAILED_BINDING, message)
        if not has_annotation(claim, ANN_BOUND_BY_CONTROLLER):
            await self.update_claim_status(claim, "Pending", None)  # the user asked for it: wait
            return
        ref = claim_ref(volume) or {}
        raise BindError(f'invalid binding of claim "{claim_key(claim)}" to volume "{wanted}": volume already '
                        f'claimed by "{claim_ref_key(ref)}"')

    def _event_for_unbound_delay_binding_claim(self, claim: Obj) -> None:
        pods = sorted(name_of(p) for p in self.pods_for_claim(claim_key(claim))
                      if not is_pod_terminated(p) and not spec(p).get("nodeName"))
        reason, message = WAIT_FOR_FIRST_CONSUMER, "waiting for first consumer to be created before binding"
        if len(pods) > 1:
            reason, message = WAIT_FOR_POD_SCHEDULED, f"waiting for pods {','.join(pods)} to be scheduled"
        elif pods:
            reason, message = WAIT_FOR_POD_SCHEDULED, f"waiting for pod {pods[0]} to be scheduled"
        self.recorder.event(claim, "Normal", reason, message)

    async def _sync_bound_claim(self, claim: Obj) -> None:
        wanted = volume_name_of_claim(claim)
        if not wanted:
            await self._update_claim_status_with_event(
                claim, "Lost", None, "Warning", "ClaimLost",
                "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!")
            return
        volume = self.volumes.get(wanted)
        if volume is None:
            await self._update_claim_status_with_event(
                claim, "Lost", None, "Warning", "ClaimLost",
                "Bound claim has lost its PersistentVolume. Data on the volume is lost!")
            return
        ref = claim_ref(volume)
        if ref is None or (ref.get("uid") or "") == uid_of(claim):
            # Unbound volume (or a volume update not seen yet), or all is well: bind() fixes or confirms it.
            await self.bind(volume, claim)
            return
        await self._update_claim_status_with_event(
            claim, "Lost", None, "Warning", "ClaimMisbound",
            "Two claims are bound to the same volume, this one is bound incorrectly")

    # --- volumes ---------------------------------------------------------------------------------------

    async def sync_volume(self, volume: Obj) -> None:
        """``syncVolume``."""
        volume = await self._update_volume_migration_annotations_and_finalizers(volume)
        ref = claim_ref(volume)
        if ref is None or not ref.get("uid"):
            # Unused, or only pre-bound to a claim that has not bound yet (its claim sync does that).
            await self.update_volume_phase(volume, "Available", "")
            return
        key = claim_ref_key(ref)
        claim = self.claims.get(key)
        if claim is None and volume_phase(volume) not in ("Released", "Failed"):
            # An external provisioner or the scheduler may have bound it to a claim this cache has not seen:
            # ask the informer, then the API server, before releasing the volume.
            claim = self.informer_claim(key)
            if claim is None:
                claim = await self._get_claim(ref)
        if claim is not None and uid_of(claim) != (ref.get("uid") or ""):
            # The cached claim may be older than the claimRef: the API server has the newest.
            claim = await self._get_claim(ref)
            if claim is not None and uid_of(claim) != (ref.get("uid") or ""):
                claim = None  # a new claim with the same name: the one bound is gone

        if claim is None:
            if volume_phase(volume) not in ("Released", "Failed"):
                self.log.info("Volume is released and reclaim policy will be executed", volume=name_of(volume),
                              reclaim_policy=reclaim_policy(volume))
                volume = await self.update_volume_phase(volume, "Released", "")
            await self.reclaim_volume(volume)
            return
        if not volume_name_of_claim(claim):
            if volume_mode_mismatches(spec(claim), spec(volume)):
                self.recorder.event(volume, "Warning", VOLUME_MISMATCH,
                                    "Cannot bind PersistentVolume to requested PersistentVolumeClaim "
                                    f'"{name_of(claim)}" due to incompatible volumeMode.')
                self.recorder.event(claim, "Warning", VOLUME_MISMATCH,
                                    f'Cannot bind PersistentVolume "{name_of(volume)}" to requested '
                                    "PersistentVolumeClaim due to incompatible volumeMode.")
                return
            # Bound (by the controller, a provisioner, or the user) and the claim not yet: its sync finishes it.
            self.enqueue_claim(claim_key(claim))
            return
        if volume_name_of_claim(claim) == name_of(volume):
            await self.update_volume_phase(volume, "Bound", "")
            return
        # The claim went to another volume.
        if has_annotation(volume, ANN_DYNAMICALLY_PROVISIONED) and reclaim_policy(volume) == "Delete":
            # Provisioned for this claim and not needed: released and deleted.
            if volume_phase(volume) not in ("Released", "Failed"):
                volume = await self.update_volume_phase(volume, "Released", "")
            await self.reclaim_volume(volume)
            return
        # Controller-bound: roll back; user-bound: keep the pre-binding, clear only the UID.
        await self.unbind_volume(volume)

    async def _get_claim(self, ref: Mapping[str, Any]) -> Obj | None:
        try:
            return await self.client.get(PERSISTENTVOLUMECLAIMS, str(ref.get("name") or ""),
                                         str(ref.get("namespace") or ""))
        except NotFound:
            return None

    # --- writes ----------------------------------------------------------------------------------------

    async def update_claim_status(self, claim: Obj, phase: str, volume: Obj | None) -> Obj:
        """``updateClaimStatus``: the phase, and the volume's access modes, capacity (only when the claim becomes
        Bound) and volume attributes class; or, without a volume, those reset. Written only if changed."""
        clone = deep_copy(dict(claim))
        st = clone.setdefault("status", {})
        dirty = False
        if claim_phase(claim) != phase:
            st["phase"] = phase
            dirty = True
        if volume is None:
            for key in ("accessModes", "capacity", "currentVolumeAttributesClassName"):
                if st.get(key) is not None:
                    st.pop(key)
                    dirty = True
        else:
            modes = spec(volume).get("accessModes")
            if st.get("accessModes") != modes:
                if modes is None:
                    st.pop("accessModes", None)
                else:
                    st["accessModes"] = deep_copy(modes)
                dirty = True
            vac = spec(volume).get("volumeAttributesClassName")
            if st.get("currentVolumeAttributesClassName") != vac:
                if vac is None:
                    st.pop("currentVolumeAttributesClassName", None)
                else:
                    st["currentVolumeAttributesClassName"] = vac
                dirty = True
            if claim_phase(claim) != phase:
                capacity = spec(volume).get("capacity") or {}
                if "storage" not in capacity:
                    raise BindError(f'PersistentVolume "{name_of(volume)}" is without a storage capacity')
                current = (status(claim).get("capacity") or {}).get("storage")
                pre_resize = annotations_of(volume).get(ANN_PRE_RESIZE_CAPACITY)
                if pre_resize is not None:
                    st["capacity"] = {**(st.get("capacity") or {}), "storage": pre_resize}
                    dirty = True
                elif current is None or _quantity_differs(capacity["storage"], current):
                    st["capacity"] = deep_copy(dict(capacity))
                    dirty = True
        if not dirty:
            return claim
        updated = await self.client.update_status(PERSISTENTVOLUMECLAIMS, clone)
        self.store_claim(updated)
        self.log.info("Claim entered phase", pvc=claim_key(claim), phase=phase)
        return updated

    async def _update_claim_status_with_event(self, claim: Obj, phase: str, volume: Obj | None, event_type: str,
                                              reason: str, message: str) -> Obj:
        if claim_phase(claim) == phase:
            return claim
        updated = await self.update_claim_status(claim, phase, volume)
        self.recorder.event(updated, event_type, reason, message)
        return updated

    async def update_volume_phase(self, volume: Obj, phase: str, message: str) -> Obj:
        """``updateVolumePhase``: written only if the phase changes (the message goes with it)."""
        if volume_phase(volume) == phase:
            return volume
        clone = deep_copy(dict(volume))
        st = clone.setdefault("status", {})
        st["phase"] = phase
        if message:
            st["message"] = message
        else:
            st.pop("message", None)
        updated = await self.client.update_status(PERSISTENTVOLUMES, clone)
        self.store_volume(updated)
        self.log.info("Volume entered phase", volume=name_of(volume), phase=phase)
        return updated

    async def _update_volume_phase_with_event(self, volume: Obj, phase: str, event_type: str, reason: str,
                                              message: str) -> Obj:
        if volume_phase(volume) == phase:
            return volume
        updated = await self.update_volume_phase(volume, phase, message)
        self.recorder.event(updated, event_type, reason, message)
        return updated

    async def _assign_default_storage_class(self, claim: Obj) -> bool:
        """Retroactive default StorageClass: a claim with no class at all gets the default one, if any."""
        if claim_has_class(claim):
            return False
        chosen = default_class(self.list_classes())
        if chosen is None:
            return False
        clone = deep_copy(dict(claim))
        clone.setdefault("spec", {})["storageClassName"] = name_of(chosen)
        await self.client.update(PERSISTENTVOLUMECLAIMS, clone)
        self.log.info("Successfully assigned StorageClass to PersistentVolumeClaim", pvc=claim_key(claim),
                      storage_class=name_of(chosen))
        return True

    async def bind(self, volume: Obj, claim: Obj) -> None:
        """``bind``: the volume's claimRef, its phase, the claim's volumeName, its status; volume first."""
        volume = await self._bind_volume_to_claim(volume, claim)
        volume = await self.update_volume_phase(volume, "Bound", "")
        claim = await self._bind_claim_to_volume(claim, volume)
        await self.update_claim_status(claim, "Bound", volume)

    async def _bind_volume_to_claim(self, volume: Obj, claim: Obj) -> Obj:
        """``GetBindVolumeToClaim`` + save: claimRef to this claim (with its UID); bound-by-controller unless the
        volume was pre-bound to the claim."""
        clone = deep_copy(dict(volume))
        dirty = False
        set_by_controller = not is_volume_bound_to_claim(volume, claim)
        ref = claim_ref(volume)
        if (ref is None or ref.get("name") != name_of(claim) or ref.get("namespace") != meta(claim).get("namespace")
                or (ref.get("uid") or "") != uid_of(claim)):
            clone.setdefault("spec", {})["claimRef"] = claim_reference(claim)
            dirty = True
        if set_by_controller and not has_annotation(clone, ANN_BOUND_BY_CONTROLLER):
            clone.setdefault("metadata", {}).setdefault("annotations", {})[ANN_BOUND_BY_CONTROLLER] = "yes"
            dirty = True
        if not dirty:
            return volume
        self.log.info("Claim bound to volume", pvc=claim_key(claim), volume=name_of(volume))
        updated = await self.client.update(PERSISTENTVOLUMES, clone)
        self.store_volume(updated)
        return updated

    async def _bind_claim_to_volume(self, claim: Obj, volume: Obj) -> Obj:
        clone = deep_copy(dict(claim))
        dirty = False
        anns = clone.setdefault("metadata", {}).setdefault("annotations", {})
        if volume_name_of_claim(claim) != name_of(volume):
            clone.setdefault("spec", {})["volumeName"] = name_of(volume)
            anns.setdefault(ANN_BOUND_BY_CONTROLLER, "yes")
            dirty = True
        if ANN_BIND_COMPLETED not in anns:
            anns[ANN_BIND_COMPLETED] = "yes"
            dirty = True
        if not dirty:
            return claim
        self.log.info("Volume bound to claim", pvc=claim_key(claim), volume=name_of(volume))
        updated = await self.client.update(PERSISTENTVOLUMECLAIMS, clone)
        self.store_claim(updated)
        return updated

    async def unbind_volume(self, volume: Obj) -> None:
        """``unbindVolume``: a controller binding is removed (claimRef and annotation); a user's pre-binding keeps
        its claimRef without the UID. The volume becomes Available."""
        clone = deep_copy(dict(volume))
        if has_annotation(volume, ANN_BOUND_BY_CONTROLLER):
            clone.setdefault("spec", {}).pop("claimRef", None)
            anns = clone["metadata"]["annotations"]
            anns.pop(ANN_BOUND_BY_CONTROLLER, None)
            if not anns:
                clone["metadata"].pop("annotations")
        else:
            ref = dict(clone["spec"]["claimRef"])
            ref.pop("uid", None)
            clone["spec"]["claimRef"] = ref
        updated = await self.client.update(PERSISTENTVOLUMES, clone)
        self.store_volume(updated)
        await self.update_volume_phase(updated, "Available", "")

    # --- reclaim ---------------------------------------------------------------------------------------

    async def reclaim_volume(self, volume: Obj) -> None:
        """``reclaimVolume``: run the volume's reclaim policy (nothing for a volume migrated to CSI)."""
        if annotations_of(volume).get(ANN_MIGRATED_TO):
            return
        policy = reclaim_policy(volume)
        if policy == "Retain":
            return
        if policy == "Recycle":
            await self._schedule(f"recycle-{name_of(volume)}[{uid_of(volume)}]",
                                 lambda: self._recycle_volume_operation(volume))
            return
        if policy == "Delete":
            self.timestamps.add_if_not_exist(name_of(volume), self._provisioner_name_of(volume), "delete")

            async def delete() -> None:
                try:
                    await self._delete_volume_operation(volume)
                except Exception:
                    self.timestamps.record(name_of(volume), failed=True)
                    raise

            await self._schedule(f"delete-{name_of(volume)}[{uid_of(volume)}]", delete)
            return
        await self._update_volume_phase_with_event(volume, "Failed", "Warning", "VolumeUnknownReclaimPolicy",
                                                   "Volume has unrecognized PersistentVolumeReclaimPolicy")

    async def _schedule(self, name: str, operation: Callable[[], Awaitable[None]]) -> None:
        if self.pre_operation_hook is not None:
            await self.pre_operation_hook(name)
        self.operations.run(name, operation)

    async def _fresh_volume(self, volume: Obj) -> Obj | None:
        try:
            return await self.client.get(PERSISTENTVOLUMES, name_of(volume))
        except NotFound:
            return None
        except Exception as err:
            self.log.info("Error reading persistent volume", volume=name_of(volume), error=str(err))
            return None

    async def _recycle_volume_operation(self, volume: Obj) -> None:
        """``recycleVolumeOperation`` with no recycler plugin: in use -> an event; else Failed."""
        fresh = await self._fresh_volume(volume)
        if fresh is None or not self.is_volume_released(fresh):
            return
        pods = self._pods_using(volume)
        ref = claim_ref(volume) or {}
        if pods and claim_ref_key(ref) not in self.claims:
            self.recorder.event(volume, "Normal", VOLUME_FAILED_RECYCLE, f"Volume is used by pods: {','.join(pods)}")
            return
        await self._update_volume_phase_with_event(fresh, "Failed", "Warning", VOLUME_FAILED_RECYCLE,
                                                   "No recycler plugin found for the volume!")

    def _pods_using(self, volume: Obj) -> list[str]:
        ref = claim_ref(volume)
        if ref is None:
            return []
        return sorted({f"{meta(p).get('namespace')}/{name_of(p)}" for p in self.pods_for_claim(claim_ref_key(ref))
                       if not is_pod_terminated(p)})

    async def _delete_volume_operation(self, volume: Obj) -> None:
        """``deleteVolumeOperation``: with the newest volume, if still released, delete it through its plugin,
        or leave it to the external deleter; a failure marks it Failed (retried with backoff)."""
        fresh = await self._fresh_volume(volume)
        if fresh is None or not self.is_volume_released(fresh):
            return
        try:
            plugin = self._find_deletable_plugin(volume)
            if plugin is None:
                self.log.info("External deleter for volume requested, ignoring", volume=name_of(volume))
                return
            await plugin.delete(volume)
        except PluginError as err:
            await self._update_volume_phase_with_event(volume, "Failed", "Warning", VOLUME_FAILED_DELETE, str(err))
            raise
        self.log.info("Volume deleted", volume=name_of(volume))
        await self._remove_deletion_protection_finalizer(volume)
        try:
            await self.client.delete(PERSISTENTVOLUMES, name_of(volume))
        except NotFound:
            pass
        except Exception as err:
            self.log.info("Failed to delete volume from database", volume=name_of(volume), error=str(err))

    async def _remove_deletion_protection_finalizer(self, volume: Obj) -> None:
        fresh = await self.client.get(PERSISTENTVOLUMES, name_of(volume))
        finalizers = list(meta(fresh).get("finalizers") or ())
        if PV_DELETION_IN_TREE_PROTECTION_FINALIZER not in finalizers:
            return
        clone = deep_copy(dict(fresh))
        clone["metadata"]["finalizers"] = [f for f in finalizers if f != PV_DELETION_IN_TREE_PROTECTION_FINALIZER]
        self.store_volume(await self.client.update(PERSISTENTVOLUMES, clone))

    def _find_deletable_plugin(self, volume: Obj) -> VolumePlugin | None:
        """``findDeletablePlugin``: the plugin that provisioned it, None for an external deleter (a provisioner
        outside ``kubernetes.io/``, CSI migration, a CSI volume), else the plugin supporting its spec."""
        provisioner = annotations_of(volume).get(ANN_DYNAMICALLY_PROVISIONED)
        if provisioner:
            try:
                return self.plugins.deletable_by_name(provisioner)
            except PluginError:
                if not provisioner.startswith("kubernetes.io/"):
                    return None
                raise
        if has_annotation(volume, ANN_MIGRATED_TO) or spec(volume).get("csi") is not None:
            return None
        try:
            return self.plugins.deletable_by_spec(volume)
        except PluginError as err:
            raise PluginError(f'error getting deleter volume plugin for volume "{name_of(volume)}": {err}') from err

    def _provisioner_name_of(self, volume: Obj) -> str:
        """``getProvisionerNameFromVolume``: the deleting plugin, else the class's (CSI) provisioner, else N/A."""
        try:
            plugin = self._find_deletable_plugin(volume)
        except PluginError:
            return NOT_AVAILABLE
        if plugin is not None:
            return plugin.name
        storage_class = self.get_class(str(spec(volume).get("storageClassName") or ""))
        if storage_class is None:
            return NOT_AVAILABLE
        provisioner = str(storage_class.get("provisioner") or "")
        return CSI_MIGRATED_PLUGINS.get(provisioner, provisioner)

    def plugin_name_for_metrics(self, volume: Obj) -> str:
        """The in-tree plugin supporting ``volume`` (``FindPluginBySpec``), else N/A."""
        names = [p.name for p in self.plugins.plugins if p.can_support(volume)]
        return names[0] if len(names) == 1 else NOT_AVAILABLE

    def is_volume_released(self, volume: Obj) -> bool:
        """``isVolumeReleased``: bound (with a UID) to a claim that is gone or bound to another volume."""
        ref = claim_ref(volume)
        if ref is None or not ref.get("uid"):
            return False
        claim = self.claims.get(claim_ref_key(ref))
        if claim is not None and uid_of(claim) == ref.get("uid"):
            bound_to = volume_name_of_claim(claim)
            return bool(bound_to) and bound_to != name_of(volume)
        return True

    # --- provisioning ----------------------------------------------------------------------------------

    async def provision_claim(self, claim: Obj) -> None:
        """``provisionClaim``: an external provisioner is asked (annotations + event) by a background operation."""
        if not self.enable_dynamic_provisioning:
            return
        class_name = claim_class(claim)
        storage_class = self.get_class(class_name)
        if storage_class is None:
            message = f'storageclass.storage.k8s.io "{class_name}" not found'
            self.recorder.event(claim, "Warning", PROVISIONING_FAILED, message)
            self.log.error("Error finding provisioning plugin for claim", pvc=claim_key(claim), error=message)
            return
        provisioner = str(storage_class.get("provisioner") or "")
        key = claim_key(claim)
        plugin: VolumePlugin | None = None
        if provisioner.startswith("kubernetes.io/") and provisioner not in CSI_MIGRATED_PLUGINS:
            # An in-tree provisioner (host-path, only with --enable-hostpath-provisioner).
            try:
                plugin = self.plugins.provisionable_by_name(provisioner)
            except PluginError as err:
                self.recorder.event(claim, "Warning", PROVISIONING_FAILED, str(err))
                self.log.error("Error finding provisioning plugin for claim", pvc=key, error=str(err))
                return
        in_tree = plugin

        async def provision() -> None:
            name = in_tree.name if in_tree is not None else CSI_MIGRATED_PLUGINS.get(provisioner, provisioner)
            self.timestamps.add_if_not_exist(key, name, "provision")
            try:
                if in_tree is None:
                    await self._provision_claim_operation_external(claim, storage_class)
                else:
                    await self._provision_claim_operation(claim, in_tree, storage_class)
            except Exception:
                self.timestamps.record(key, failed=True)
                raise

        await self._schedule(f"provision-{key}[{uid_of(claim)}]", provision)

    async def _provision_claim_operation(self, claim: Obj, plugin: VolumePlugin, storage_class: Obj) -> None:
        """``provisionClaimOperation``: an in-tree plugin makes the volume; its PV is created bound to the claim
        (the claim's sync then completes the binding)."""
        key = claim_key(claim)
        if plugin.name != "kubernetes.io/csi" and spec(claim).get("dataSource") is not None:
            message = (f'plugin "{plugin.name}" is not a CSI plugin. Only CSI plugin can provision a claim with a '
                       "datasource")
            self.recorder.event(claim, "Warning", PROVISIONING_FAILED, message)
            raise BindError(message)
        claim = await self.set_claim_provisioner(claim, str(storage_class.get("provisioner") or ""))
        pv_name = f"pvc-{uid_of(claim)}"
        try:
            await self.client.get(PERSISTENTVOLUMES, pv_name)
        except NotFound:
            pass
        else:
            return  # provisioned already (a previous operation, or another controller)
        options = ProvisionOptions(
            reclaim_policy=str(storage_class.get("reclaimPolicy") or "Delete"),
            mount_options=list(storage_class.get("mountOptions") or ()), pv_name=pv_name, claim=claim,
            parameters=dict(storage_class.get("parameters") or {}))
        class_name = name_of(storage_class)
        if options.mount_options and not plugin.supports_mount_options():
            self.recorder.event(claim, "Warning", PROVISIONING_FAILED,
                                "Mount options are not supported by the provisioner but StorageClass "
                                f'"{class_name}" has mount options [{" ".join(options.mount_options)}]')
            raise BindError(f"provisioner \"{plugin.name}\" doesn't support mount options")
        try:
            provisioner = plugin.new_provisioner(options)
        except PluginError as err:
            self.recorder.event(claim, "Warning", PROVISIONING_FAILED, f"Failed to create provisioner: {err}")
            raise
        selected_node = None
        node_name = annotations_of(claim).get(ANN_SELECTED_NODE)
        if node_name is not None:
            selected_node = self.get_node(node_name)
            if selected_node is None:
                message = f'Failed to get target node: node "{node_name}" not found'
                self.recorder.event(claim, "Warning", PROVISIONING_FAILED, message)
                raise BindError(message)
        try:
            volume = await provisioner.provision(selected_node, storage_class.get("allowedTopologies"))
        except PluginError as err:
            await self._reschedule_provisioning(claim)
            self.recorder.event(claim, "Warning", PROVISIONING_FAILED,
                                f'Failed to provision volume with StorageClass "{class_name}": {err}')
            raise
        metadata = volume.setdefault("metadata", {})
        metadata.setdefault("name", pv_name)
        volume.setdefault("spec", {})["claimRef"] = claim_reference(claim)
        volume.setdefault("status", {})["phase"] = "Bound"
        if claim_class(claim):
            volume["spec"]["storageClassName"] = claim_class(claim)
        else:
            volume["spec"].pop("storageClassName", None)
        anns = metadata.setdefault("annotations", {})
        anns[ANN_BOUND_BY_CONTROLLER] = "yes"
        anns[ANN_DYNAMICALLY_PROVISIONED] = plugin.name
        if volume["spec"].get("persistentVolumeReclaimPolicy") == "Delete":
            metadata["finalizers"] = [PV_DELETION_IN_TREE_PROTECTION_FINALIZER]
        error: Exception | None = None
        for attempt in range(self.create_provisioned_pv_retries):
            try:
                created = await self.client.create(PERSISTENTVOLUMES, volume)
            except AlreadyExists:
                error = None
                break
            except Exception as err:
                error = err
                self.log.info("Failed to save volume for claim", pvc=key, volume=metadata["name"], error=str(err))
                if attempt + 1 < self.create_provisioned_pv_retries and self.create_provisioned_pv_interval > 0:
                    await self.clock.sleep(self.create_provisioned_pv_interval)
                continue
            self.store_volume(created)
            error = None
            break
        if error is None:
            self.recorder.event(claim, "Normal", PROVISIONING_SUCCEEDED,
                                f"Successfully provisioned volume {metadata['name']} using {plugin.name}")
            return
        self.recorder.event(claim, "Warning", PROVISIONING_FAILED,
                            f"Error creating provisioned PV object for claim {key}: {error}. Deleting the volume.")
        # The storage asset has no PV object: its plugin deletes it (upstream stops at the first failure).
        delete_error: Exception | None = None
        try:
            deleter = self._find_deletable_plugin(volume)
            if deleter is not None:
                await deleter.delete(volume)
        except PluginError as err:
            delete_error = err
        if delete_error is not None:
            self.recorder.event(claim, "Warning", PROVISIONING_CLEANUP_FAILED,
                                f"Error cleaning provisioned volume for claim {key}: {delete_error}. Please delete "
                                "manually.")

    async def _reschedule_provisioning(self, claim: Obj) -> None:
        """``rescheduleProvisioning``: the scheduler's selected node is removed so it can choose again."""
        if ANN_SELECTED_NODE not in annotations_of(claim):
            return
        clone = deep_copy(dict(claim))
        del clone["metadata"]["annotations"][ANN_SELECTED_NODE]
        try:
            updated = await self.client.update(PERSISTENTVOLUMECLAIMS, clone)
        except ApiError as err:
            self.log.info("Failed to delete annotation selected-node for PersistentVolumeClaim", pvc=claim_key(claim),
                          error=str(err))
            return
        self.store_claim(updated)

    async def _provision_claim_operation_external(self, claim: Obj, storage_class: Obj) -> None:
        provisioner = str(storage_class.get("provisioner") or "")
        provisioner = CSI_MIGRATED_PLUGINS.get(provisioner, provisioner)
        try:
            claim = await self.set_claim_provisioner(claim, provisioner)
        except Exception as err:
            self.recorder.event(claim, "Warning", PROVISIONING_FAILED, f"Error saving claim: {err}")
            raise
        self.recorder.event(
            claim, "Normal", EXTERNAL_PROVISIONING,
            f"Waiting for a volume to be created either by the external provisioner '{provisioner}' or manually by "
            "the system administrator. If volume creation is delayed, please verify that the provisioner is "
            "running and correctly registered.")

    async def set_claim_provisioner(self, claim: Obj, provisioner: str) -> Obj:
        """``setClaimProvisioner``: both storage-provisioner annotations (and migrated-to when it applies)."""
        if annotations_of(claim).get(ANN_STORAGE_PROVISIONER) == provisioner:
            return claim
        clone = deep_copy(dict(claim))
        anns = clone.setdefault("metadata", {}).setdefault("annotations", {})
        anns[ANN_BETA_STORAGE_PROVISIONER] = provisioner
        anns[ANN_STORAGE_PROVISIONER] = provisioner
        _update_migration_annotations(anns, claim=True)
        updated = await self.client.update(PERSISTENTVOLUMECLAIMS, clone)
        self.store_claim(updated)
        return updated

    # --- CSI migration and finalizers -------------------------------------------------------------------

    async def _update_claim_migration_annotations(self, claim: Obj) -> Obj:
        anns = dict(annotations_of(claim))
        if not _update_migration_annotations(anns, claim=True):
            return claim
        clone = deep_copy(dict(claim))
        clone["metadata"]["annotations"] = anns
        updated = await self.client.update(PERSISTENTVOLUMECLAIMS, clone)
        self.store_claim(updated)
        return updated

    async def _update_volume_migration_annotations_and_finalizers(self, volume: Obj) -> Obj:
        anns = dict(annotations_of(volume))
        ann_modified = _update_migration_annotations(anns, claim=False)
        finalizers, fin_modified = _modify_deletion_finalizers(volume)
        if not ann_modified and not fin_modified:
            return volume
        clone = deep_copy(dict(volume))
        clone["metadata"]["annotations"] = anns
        if fin_modified:
            if finalizers:
                clone["metadata"]["finalizers"] = finalizers
            else:
                clone["metadata"].pop("finalizers", None)
        updated = await self.client.update(PERSISTENTVOLUMES, clone)
        self.store_volume(updated)
        return updated


def _update_migration_annotations(anns: dict[str, Any], *, claim: bool) -> bool:
    """``updateMigrationAnnotations``: ``pv.kubernetes.io/migrated-to`` follows the provisioner's CSI migration."""
    if not anns:
        return False
    key = ANN_STORAGE_PROVISIONER if claim else ANN_DYNAMICALLY_PROVISIONED
    provisioner = anns.get(key)
    if provisioner is None and claim:
        provisioner = anns.get(ANN_BETA_STORAGE_PROVISIONER)
    if provisioner is None:
        return False
    migrated_to = anns.get(ANN_MIGRATED_TO, "")
    driver = CSI_MIGRATED_PLUGINS.get(str(provisioner))
    if driver is not None:
        if migrated_to != driver:
            anns[ANN_MIGRATED_TO] = driver
            return True
        return False
    if migrated_to:
        del anns[ANN_MIGRATED_TO]
        return True
    return False


def _modify_deletion_finalizers(volume: Obj) -> tuple[list[str], bool]:
    """``modifyDeletionFinalizers`` (HonorPVReclaimPolicy): for volumes provisioned by an in-tree plugin, the
    in-tree finalizer follows the reclaim policy and the external one is removed; migrated plugins lose the
    in-tree one; other volumes are left alone."""
    current = list(meta(volume).get("finalizers") or ())
    provisioner = annotations_of(volume).get(ANN_DYNAMICALLY_PROVISIONED)
    if provisioner is None:
        return current, False
    out = list(current)
    modified = False
    if provisioner in CSI_MIGRATED_PLUGINS:
        if PV_DELETION_IN_TREE_PROTECTION_FINALIZER in out:
            out = [f for f in out if f != PV_DELETION_IN_TREE_PROTECTION_FINALIZER]
            modified = True
        return out, modified
    if not provisioner.startswith("kubernetes.io/"):
        return current, False
    policy = reclaim_policy(volume)
    if policy == "Delete" and PV_DELETION_IN_TREE_PROTECTION_FINALIZER not in out:
        out.append(PV_DELETION_IN_TREE_PROTECTION_FINALIZER)
        modified = True
    elif policy in ("Retain", "Recycle") and PV_DELETION_IN_TREE_PROTECTION_FINALIZER in out:
        out = [f for f in out if f != PV_DELETION_IN_TREE_PROTECTION_FINALIZER]
        modified = True
    if PV_DELETION_PROTECTION_FINALIZER in out:
        out = [f for f in out if f != PV_DELETION_PROTECTION_FINALIZER]
        modified = True
    return out, modified


def _quantity_differs(a: Any, b: Any) -> bool:
    try:
        return parse_quantity(a) != parse_quantity(b)
    except ValueError:
        return True


def _store(cache: dict[str, Obj], key: str, obj: Obj) -> bool:
    old = cache.get(key)
    if old is not None and _resource_version(old) > _resource_version(obj):
        return False
    cache[key] = obj
    return True


__all__ = ["COMPONENT", "BindError", "Binder", "Client", "Operations", "Recorder"]
