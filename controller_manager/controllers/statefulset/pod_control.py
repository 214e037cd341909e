"""Creating, fixing and deleting a StatefulSet's pods and their PVCs (``stateful_pod_control.go``).

Guarantees:
- Events are upstream's, on the set: ``SuccessfulCreate`` "create Pod web-0 in StatefulSet web successful" /
  ``FailedCreate`` "create Pod web-0 in StatefulSet web failed error: <err>" (likewise ``update`` and ``delete``),
  and for claims ``SuccessfulCreate`` "create Claim data-web-0 Pod web-0 in StatefulSet web success" /
  ``FailedCreate`` "create Claim data-web-0 for Pod web-0 in StatefulSet web failed error: <err>".
- A pod's claims are created (those missing from the PVC cache) before the pod; a claim being deleted blocks the
  pod. AlreadyExists on the pod is raised without an event (a stale cache, not a failure).
- Claims get the ownerReferences ``persistentVolumeClaimRetentionPolicy`` asks for (see :mod:`.retention`), by
  an update of the cached claim (resourceVersion-checked).
- Fixing a pod's identity patches its labels only. Cached pods lack ``spec.volumes`` (the informer projection
  drops them, and a pod's volumes are immutable anyway), so a pod's storage is repaired the only way that can
  succeed: by creating its missing claims. A projected pod is never written back whole.
- Deleted pods are remembered by UID until the cache shows them terminating or gone, so a sync on a stale cache
  does not delete the same pod twice.
- Read-your-own-writes (upstream's StaleControllerConsistencyStatefulSet): with a consistency store, the
  resourceVersion of every pod and claim this writes (creates, identity patches, retention ownerReference
  updates) is recorded under the set, so its next sync waits until the pod and claim caches show them. Deletes
  are not recorded (upstream's do not return the object).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import structlog

from controller_manager.api.meta import is_being_deleted, meta
from controller_manager.api.resources import PERSISTENTVOLUMECLAIMS, PODS, STATEFULSETS
from controller_manager.client import ApiClient
from controller_manager.client.errors import AlreadyExists, ApiError
from controller_manager.controllerutil.consistency import ConsistencyStore
from controller_manager.runtime.events import EventRecorder

from .retention import (
    RETAIN,
    has_stale_owner_ref,
    has_unexpected_controller,
    is_claim_owner_up_to_date,
    retention_policy,
    updated_claim_owner_refs,
)
from .util import (
    get_ordinal,
    get_persistent_volume_claim_name,
    get_persistent_volume_claims,
    identity_matches,
    update_identity,
)

__all__ = ["ClaimLister", "StatefulPodControl", "aggregate"]

Obj = Mapping[str, Any]
ClaimLister = Callable[[str, str], Obj | None]  # (namespace, name) -> cached PVC

_log = structlog.get_logger("controller_manager.controllers.statefulset.pod_control")


class AggregateError(Exception):
    """Several failures at once (``utilerrors.NewAggregate``)."""

    def __init__(self, errors: Sequence[BaseException]) -> None:
        self.errors = list(errors)
        text = str(errors[0]) if len(errors) == 1 else "[" + ", ".join(map(str, errors)) + "]"
        super().__init__(text)


def aggregate(errors: Sequence[BaseException]) -> BaseException | None:
    if not errors:
        return None
    return errors[0] if len(errors) == 1 else AggregateError(errors)


def _title(verb: str) -> str:
    return verb[:1].upper() + verb[1:]


class StatefulPodControl:
    """Pod and PVC writes on behalf of the StatefulSet controller."""

    def __init__(self, client: ApiClient, recorder: EventRecorder, claims: ClaimLister,
                 consistency: ConsistencyStore | None = None) -> None:
        self._client = client
        self._recorder = recorder
        self._claims = claims
        self._consistency = consistency
        self.deleting: set[str] = set()  # UIDs deleted that the cache may not show as terminating yet

    def _wrote(self, sts: Obj, resource: str, written: Obj) -> None:
        if self._consistency is not None:
            self._consistency.record(sts, resource, written)

    # --- events -----------------------------------------------------------------------------------

    def record_pod_event(self, verb: str, sts: Obj, pod: Obj, err: BaseException | None) -> None:
        pod_name, set_name = meta(pod).get("name", ""), meta(sts).get("name", "")
        if err is None:
            self._recorder.event(sts, "Normal", f"Successful{_title(verb)}",
                                 f"{verb.lower()} Pod {pod_name} in StatefulSet {set_name} successful",
                                 resource=STATEFULSETS)
        else:
            self._recorder.event(sts, "Warning", f"Failed{_title(verb)}",
                                 f"{verb.lower()} Pod {pod_name} in StatefulSet {set_name} failed error: {err}",
                                 resource=STATEFULSETS)

    def record_claim_event(self, verb: str, sts: Obj, pod: Obj, claim: Obj, err: BaseException | None) -> None:
        pod_name, set_name, claim_name = meta(pod).get("name", ""), meta(sts).get("name", ""), meta(claim).get("name")
        if err is None:
            self._recorder.event(sts, "Normal", f"Successful{_title(verb)}",
                                 f"{verb.lower()} Claim {claim_name} Pod {pod_name} in StatefulSet {set_name} success",
                                 resource=STATEFULSETS)
        else:
            self._recorder.event(sts, "Warning", f"Failed{_title(verb)}",
                                 f"{verb.lower()} Claim {claim_name} for Pod {pod_name} in StatefulSet {set_name} "
                                 f"failed error: {err}", resource=STATEFULSETS)

    # --- pods -------------------------------------------------------------------------------------

    async def create_stateful_pod(self, sts: Obj, pod: Obj) -> None:
        """``CreateStatefulPod``: its claims, then the pod, then the claims' retention ownerReferences."""
        err = await self.create_persistent_volume_claims(sts, pod)
        if err is not None:
            self.record_pod_event("create", sts, pod, err)
            raise err
        try:
            created = await self._client.create(PODS, pod, str(meta(sts).get("namespace") or ""))
        except AlreadyExists:
            raise  # a stale cache; the next sync sees the pod
        except ApiError as create_err:
            self.record_pod_event("create", sts, pod, create_err)
            raise
        self._wrote(sts, PODS.plural, created)
        try:
            await self.update_pod_claim_for_retention_policy(sts, created)
        except Exception as policy_err:
            self.record_pod_event("update", sts, pod, policy_err)
            raise
        self.record_pod_event("create", sts, pod, None)

    async def update_stateful_pod(self, sts: Obj, pod: Obj) -> None:
        """``UpdateStatefulPod``: fix identity labels, missing claims and claim ownership of one pod."""
        consistent = True
        labels: dict[str, str] | None = None
        if not identity_matches(sts, pod):
            fixed: dict[str, Any] = {"metadata": dict(meta(pod))}
            update_identity(sts, fixed)
            labels = dict(fixed["metadata"]["labels"])
            consistent = False
        if not self.claims_exist(sts, pod):
            consistent = False
            err = await self.create_persistent_volume_claims(sts, pod)
            if err is not None:
                self.record_pod_event("update", sts, pod, err)
                raise err
        try:
            match = self.claims_match_retention_policy(sts, pod)
            if not match:
                await self.update_pod_claim_for_retention_policy(sts, pod)
                consistent = False
        except Exception as err:
            self.record_pod_event("update", sts, pod, err)
            raise
        if consistent:
            return
        error: Exception | None = None
        if labels is not None:
            try:
                patched = await self._client.patch(PODS, str(meta(pod).get("name")),
                                                   {"metadata": {"labels": labels}}, meta(pod).get("namespace"),
                                                   patch_type="strategic")
                self._wrote(sts, PODS.plural, patched)
            except ApiError as err:
                error = err
        self.record_pod_event("update", sts, pod, error)
        if error is not None:
            raise error

    async def delete_stateful_pod(self, sts: Obj, pod: Obj) -> None:
        uid = meta(pod).get("uid")
        try:
            await self._client.delete(PODS, str(meta(pod).get("name")), meta(pod).get("namespace"),
                                      uid=uid if isinstance(uid, str) and uid else None)
        except ApiError as err:
            self.record_pod_event("delete", sts, pod, err)
            raise
        if isinstance(uid, str) and uid:
            self.deleting.add(uid)
        self.record_pod_event("delete", sts, pod, None)

    def is_deleting(self, pod: Obj) -> bool:
        """Terminating, or deleted by us while the cache still shows it alive."""
        return is_being_deleted(pod) or meta(pod).get("uid") in self.deleting

    def forget_deletion(self, pod: Obj) -> None:
        self.deleting.discard(str(meta(pod).get("uid") or ""))

    # --- claims -----------------------------------------------------------------------------------

    def claims_exist(self, sts: Obj, pod: Obj) -> bool:
        """Every claim the pod needs is in the cache (what storage repair can still achieve)."""
        return all(self._claims(str(meta(c).get("namespace") or ""), str(meta(c).get("name"))) is not None
                   for c in get_persistent_volume_claims(sts, pod).values())

    async def create_persistent_volume_claims(self, sts: Obj, pod: Obj) -> BaseException | None:
        """``createPersistentVolumeClaims``: create the missing ones; the aggregate failure, if any."""
        errors: list[BaseException] = []
        for claim in get_persistent_volume_claims(sts, pod).values():
            namespace, name = str(meta(claim).get("namespace") or ""), str(meta(claim).get("name"))
            existing = self._claims(namespace, name)
            if existing is None:
                try:
                    created = await self._client.create(PERSISTENTVOLUMECLAIMS, claim, namespace)
                except ApiError as err:
                    errors.append(RuntimeError(f"failed to create PVC {name}: {err}"))
                    if not isinstance(err, AlreadyExists):
                        self.record_claim_event("create", sts, pod, claim, err)
                    continue
                self._wrote(sts, PERSISTENTVOLUMECLAIMS.plural, created)
                self.record_claim_event("create", sts, pod, claim, None)
            elif is_being_deleted(existing):
                errors.append(RuntimeError(f"pvc {name} is being deleted"))
        return aggregate(errors)

    async def create_missing_persistent_volume_claims(self, sts: Obj, pod: Obj) -> None:
        err = await self.create_persistent_volume_claims(sts, pod)
        if err is not None:
            raise err
        try:
            await self.update_pod_claim_for_retention_policy(sts, pod)
        except Exception as policy_err:
            self.record_pod_event("update", sts, pod, policy_err)
            raise

    def _pod_claims(self, sts: Obj, pod: Obj) -> list[tuple[str, Obj | None]]:
        ordinal = get_ordinal(pod)
        namespace = str(meta(sts).get("namespace") or "")
        out: list[tuple[str, Obj | None]] = []
        for template in (sts.get("spec") or {}).get("volumeClaimTemplates") or ():
            name = get_persistent_volume_claim_name(sts, template, ordinal)
            out.append((name, self._claims(namespace, name)))
        return out

    def claims_match_retention_policy(self, sts: Obj, pod: Obj) -> bool:
        """``ClaimsMatchRetentionPolicy``; a missing claim is picked up by a later sync."""
        return all(claim is None or is_claim_owner_up_to_date(claim, sts, pod)
                   for _, claim in self._pod_claims(sts, pod))

    async def update_pod_claim_for_retention_policy(self, sts: Obj, pod: Obj) -> None:
        for name, claim in self._pod_claims(sts, pod):
            if claim is None:
                continue  # created later; fixed then
            if has_unexpected_controller(claim, sts, pod):
                self._recorder.event(sts, "Warning", "ConflictingController",
                                     f"PersistentVolumeClaim {name} has a conflicting OwnerReference that acts as a "
                                     "manging controller, the retention policy is ignored for this claim",
                                     resource=STATEFULSETS)
            if is_claim_owner_up_to_date(claim, sts, pod):
                continue
            refs = updated_claim_owner_refs(claim, sts, pod)
            metadata = dict(meta(claim))
            if refs:
                metadata["ownerReferences"] = refs
            else:
                metadata.pop("ownerReferences", None)
            try:
                updated = await self._client.update(PERSISTENTVOLUMECLAIMS, {**claim, "metadata": metadata})
            except ApiError as err:
                raise RuntimeError(f"could not update claim {name} for delete policy ownerRefs: {err}") from err
            self._wrote(sts, PERSISTENTVOLUMECLAIMS.plural, updated)

    def pod_claim_is_stale(self, sts: Obj, pod: Obj) -> bool:
        """``PodClaimIsStale``: under WhenScaled=Delete, a claim still owned by an earlier pod of that name."""
        if retention_policy(sts)[1] == RETAIN:
            return False
        for claim in get_persistent_volume_claims(sts, pod).values():
            existing = self._claims(str(meta(claim).get("namespace") or ""), str(meta(claim).get("name")))
            if existing is not None and has_stale_owner_ref(existing, pod, PODS):
                return True
        return False

