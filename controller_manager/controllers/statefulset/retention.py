"""PVC ownership under ``persistentVolumeClaimRetentionPolicy`` (the claim half of ``stateful_set_utils.go``).

Guarantees (pure functions on API dicts; inputs are never mutated):
- The policy defaults to Retain/Retain. The owner references a claim should carry from us:
  Retain/Retain none; WhenDeleted=Delete the set's (while its pod is in range); WhenScaled=Delete the pod's once
  the pod is scaled down (out of range). Both are controller references (``controller: true``,
  ``blockOwnerDeletion: true``), which the garbage collector then follows.
- A claim whose reference to the set or pod names it but with another UID (a stale reference from a deleted
  namesake) is left alone. A claim controlled by someone else is left alone too, except that our own references
  are scrubbed from it (and a ``ConflictingController`` Warning is recorded by the caller).
- :func:`updated_claim_owner_refs` returns the claim's new ownerReferences; :func:`is_claim_owner_up_to_date`
  tells whether they need changing at all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from controller_manager.api.meta import meta
from controller_manager.api.resources import PODS, STATEFULSETS, Resource

from .util import pod_in_ordinal_range

__all__ = [
    "DELETE",
    "RETAIN",
    "has_owner_ref",
    "has_stale_owner_ref",
    "has_unexpected_controller",
    "is_claim_owner_up_to_date",
    "retention_policy",
    "updated_claim_owner_refs",
]

Obj = Mapping[str, Any]
Ref = Mapping[str, Any]

RETAIN = "Retain"
DELETE = "Delete"


def retention_policy(sts: Obj) -> tuple[str, str]:
    """(whenDeleted, whenScaled), Retain where unset."""
    policy = (sts.get("spec") or {}).get("persistentVolumeClaimRetentionPolicy") or {}
    return str(policy.get("whenDeleted") or RETAIN), str(policy.get("whenScaled") or RETAIN)


def _refs(obj: Obj) -> list[Ref]:
    return [r for r in meta(obj).get("ownerReferences") or () if isinstance(r, Mapping)]


def _matches_ref(ref: Ref, obj: Obj, resource: Resource) -> bool:
    """The reference names ``obj`` by group/version, kind and name (not by UID)."""
    return (ref.get("apiVersion") == resource.api_version and ref.get("kind") == resource.kind
            and ref.get("name") == meta(obj).get("name"))


def has_owner_ref(target: Obj, owner: Obj) -> bool:
    uid = meta(owner).get("uid")
    return any(r.get("uid") == uid for r in _refs(target))


def has_stale_owner_ref(target: Obj, obj: Obj, resource: Resource) -> bool:
    """The first reference naming ``obj`` carries another UID (``obj`` was deleted and recreated)."""
    for ref in _refs(target):
        if _matches_ref(ref, obj, resource):
            return ref.get("uid") != meta(obj).get("uid")
    return False


def has_unexpected_controller(claim: Obj, sts: Obj, pod: Obj) -> bool:
    """Under a non-Retain policy, the claim is controlled by something other than the set or pod."""
    if retention_policy(sts) == (RETAIN, RETAIN):
        return False  # nothing of ours to manage: others may control the claim
    for ref in _refs(claim):
        if _matches_ref(ref, sts, STATEFULSETS):
            if ref.get("uid") != meta(sts).get("uid"):
                return True  # orphaned by a namesake: leave it to the garbage collector
            continue
        if _matches_ref(ref, pod, PODS):
            if ref.get("uid") != meta(pod).get("uid"):
                return True
            continue
        if ref.get("controller") is True:
            return True
    return False


def _has_non_controller_owner(claim: Obj, sts: Obj, pod: Obj) -> bool:
    uids = {meta(sts).get("uid"), meta(pod).get("uid")}
    return any(r.get("uid") in uids and r.get("controller") is not True for r in _refs(claim))


def is_claim_owner_up_to_date(claim: Obj, sts: Obj, pod: Obj) -> bool:
    """``isClaimOwnerUpToDate``: the claim's references agree with the policy (or must not be touched)."""
    if has_stale_owner_ref(claim, sts, STATEFULSETS) or has_stale_owner_ref(claim, pod, PODS):
        return True
    if has_unexpected_controller(claim, sts, pod):
        # Our references must go; otherwise nothing to add on top of someone else's controller.
        return not (has_owner_ref(claim, sts) or has_owner_ref(claim, pod))
    if _has_non_controller_owner(claim, sts, pod):
        return False
    when_deleted, when_scaled = retention_policy(sts)
    set_ref, pod_ref = has_owner_ref(claim, sts), has_owner_ref(claim, pod)
    scaled_down = not pod_in_ordinal_range(pod, sts)
    if when_scaled == RETAIN and when_deleted == DELETE:
        return set_ref and not pod_ref
    if when_scaled == DELETE and when_deleted == RETAIN:
        return not set_ref and scaled_down == pod_ref
    if when_scaled == DELETE and when_deleted == DELETE:
        return scaled_down != set_ref and scaled_down == pod_ref
    # Retain/Retain, and any unknown policy (treated as Retain).
    return not (set_ref or pod_ref)


def _controller_ref(owner: Obj, resource: Resource) -> dict[str, Any]:
    return {"apiVersion": resource.api_version, "kind": resource.kind, "name": meta(owner).get("name", ""),
            "uid": meta(owner).get("uid", ""), "controller": True, "blockOwnerDeletion": True}


def _add_controller_ref(refs: list[Ref], owner: Obj, resource: Resource) -> list[Ref]:
    if any(r.get("uid") == meta(owner).get("uid") for r in refs):
        return refs
    return [*refs, _controller_ref(owner, resource)]


def _remove(refs: Sequence[Ref], predicate: Callable[[Ref], bool]) -> list[Ref]:
    return [r for r in refs if not predicate(r)]


def updated_claim_owner_refs(claim: Obj, sts: Obj, pod: Obj) -> list[Ref]:
    """``updateClaimOwnerRefForSetAndPod``: the claim's ownerReferences as the policy wants them."""
    unexpected = has_unexpected_controller(claim, sts, pod)
    refs = _remove(_refs(claim), lambda r: _matches_ref(r, sts, STATEFULSETS) or _matches_ref(r, pod, PODS))
    if unexpected:
        return refs
    when_deleted, when_scaled = retention_policy(sts)
    scaled_down = not pod_in_ordinal_range(pod, sts)
    if when_scaled == RETAIN and when_deleted == DELETE:
        refs = _add_controller_ref(refs, sts, STATEFULSETS)
    elif when_scaled == DELETE and when_deleted == RETAIN:
        if scaled_down:
            refs = _add_controller_ref(refs, pod, PODS)
    elif when_scaled == DELETE and when_deleted == DELETE:
        refs = _add_controller_ref(refs, pod, PODS) if scaled_down else _add_controller_ref(refs, sts, STATEFULSETS)
    return refs
