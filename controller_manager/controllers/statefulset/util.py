"""StatefulSet identity, storage and pod predicates (``stateful_set_utils.go``), as pure functions on API dicts.

Guarantees:
- A pod's parent and ordinal come from its name alone (``<parent>-<ordinal>``, the ordinal a non-negative int32);
  anything else has ordinal -1 and no parent. ``spec.ordinals.start`` shifts the ordinal range
  ``[start, start + replicas)``.
- :func:`new_stateful_set_pod` builds a pod from the template (never mutating it) named ``<set>-<ordinal>``, with
  the labels ``statefulset.kubernetes.io/pod-name`` and ``apps.kubernetes.io/pod-index``, ``spec.hostname`` and
  ``spec.subdomain`` (the set's ``serviceName``), one ``persistentVolumeClaim`` volume per volumeClaimTemplate
  (``<claim>-<set>-<ordinal>``, replacing a template volume of the same name) and the controller reference.
- :func:`new_versioned_stateful_set_pod` picks the current or the update revision for an ordinal as upstream does
  (below the partition: current), and labels the pod ``controller-revision-hash: <revision name>``.
- Predicates read missing fields as Go's zero values; "available" is ``podutil.IsPodAvailable`` at ``now``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from controller_manager.api.intstr import scaled_value
from controller_manager.api.meta import deep_copy, is_being_deleted, meta
from controller_manager.api.pods import POD_FAILED, POD_PENDING, POD_RUNNING, POD_SUCCEEDED, is_pod_available
from controller_manager.api.pods import is_pod_ready as _is_pod_ready
from controller_manager.api.resources import STATEFULSETS
from controller_manager.controllerutil.controller_ref import new_controller_ref
from controller_manager.controllerutil.pod_control import pod_from_template

__all__ = [
    "MAX_INT32",
    "ON_DELETE",
    "ORDERED_READY",
    "PARALLEL",
    "POD_INDEX_LABEL",
    "REVISION_LABEL",
    "ROLLING_UPDATE",
    "STATEFUL_SET_POD_NAME_LABEL",
    "allows_burst",
    "get_end_ordinal",
    "get_max_unavailable",
    "get_ordinal",
    "get_parent_name_and_ordinal",
    "get_persistent_volume_claim_name",
    "get_persistent_volume_claims",
    "get_pod_name",
    "get_pod_revision",
    "get_start_ordinal",
    "identity_matches",
    "init_identity",
    "is_created",
    "is_failed",
    "is_member_of",
    "is_pending",
    "is_running_and_available",
    "is_running_and_ready",
    "is_succeeded",
    "is_terminating",
    "is_unavailable",
    "min_ready_seconds",
    "new_stateful_set_pod",
    "new_versioned_stateful_set_pod",
    "pod_in_ordinal_range",
    "replicas",
    "storage_matches",
    "update_identity",
    "update_storage",
]

Obj = Mapping[str, Any]

STATEFUL_SET_POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
REVISION_LABEL = "controller-revision-hash"  # apps.StatefulSetRevisionLabel: holds the revision's *name*

ORDERED_READY = "OrderedReady"
PARALLEL = "Parallel"
ROLLING_UPDATE = "RollingUpdate"
ON_DELETE = "OnDelete"

MAX_INT32 = 2**31 - 1

_POD_NAME = re.compile(r"(.*)-([0-9]+)")


def _spec(obj: Obj) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


# --- identity ------------------------------------------------------------------------------------


def get_parent_name_and_ordinal(pod: Obj) -> tuple[str, int]:
    """(parent set name, ordinal) from the pod's name; ("", -1) when it has none."""
    match = _POD_NAME.fullmatch(str(meta(pod).get("name") or ""))
    if match is None:
        return "", -1
    value = int(match.group(2))
    # ParseInt(..., 32): an out-of-range ordinal is no ordinal, but the parent still counts.
    return match.group(1), value if value <= MAX_INT32 else -1


def get_ordinal(pod: Obj) -> int:
    return get_parent_name_and_ordinal(pod)[1]


def replicas(sts: Obj) -> int:
    """``spec.replicas`` (the API server defaults it to 1)."""
    return _int(_spec(sts).get("replicas"), 1)


def min_ready_seconds(sts: Obj) -> int:
    return _int(_spec(sts).get("minReadySeconds"))


def get_start_ordinal(sts: Obj) -> int:
    ordinals = _spec(sts).get("ordinals")
    return _int(ordinals.get("start")) if isinstance(ordinals, Mapping) else 0


def get_end_ordinal(sts: Obj) -> int:
    """The last ordinal in range (inclusive); below the start when there are no replicas."""
    return get_start_ordinal(sts) + replicas(sts) - 1


def pod_in_ordinal_range(pod: Obj, sts: Obj) -> bool:
    ordinal = get_ordinal(pod)
    return get_start_ordinal(sts) <= ordinal <= get_end_ordinal(sts)


def get_pod_name(sts: Obj, ordinal: int) -> str:
    return f"{meta(sts).get('name', '')}-{ordinal}"


def get_persistent_volume_claim_name(sts: Obj, claim: Obj, ordinal: int) -> str:
    return f"{meta(claim).get('name', '')}-{meta(sts).get('name', '')}-{ordinal}"


def is_member_of(sts: Obj, pod: Obj) -> bool:
    return get_parent_name_and_ordinal(pod)[0] == meta(sts).get("name")


def identity_matches(sts: Obj, pod: Obj) -> bool:
    """The pod's name, namespace and pod-name label are those of a member of ``sts``."""
    parent, ordinal = get_parent_name_and_ordinal(pod)
    pm = meta(pod)
    return (ordinal >= 0 and parent == meta(sts).get("name") and pm.get("name") == get_pod_name(sts, ordinal)
            and pm.get("namespace") == meta(sts).get("namespace")
            and (pm.get("labels") or {}).get(STATEFUL_SET_POD_NAME_LABEL) == pm.get("name"))


def update_identity(sts: Obj, pod: dict[str, Any]) -> None:
    """Give ``pod`` (a private dict) the name, namespace and identity labels of its ordinal."""
    ordinal = get_ordinal(pod)
    metadata = dict(pod.get("metadata") or {})
    metadata["name"] = get_pod_name(sts, ordinal)
    metadata["namespace"] = meta(sts).get("namespace")
    labels = dict(metadata.get("labels") or {})
    labels[STATEFUL_SET_POD_NAME_LABEL] = metadata["name"]
    labels[POD_INDEX_LABEL] = str(ordinal)  # PodIndexLabel is GA
    metadata["labels"] = labels
    pod["metadata"] = metadata


def init_identity(sts: Obj, pod: dict[str, Any]) -> None:
    """:func:`update_identity` plus hostname and subdomain, which are immutable after creation."""
    update_identity(sts, pod)
    spec = dict(pod.get("spec") or {})
    spec["hostname"] = pod["metadata"]["name"]
    service = _spec(sts).get("serviceName")
    if service:
        spec["subdomain"] = service
    else:
        spec.pop("subdomain", None)
    pod["spec"] = spec


# --- storage -------------------------------------------------------------------------------------


def _claim_templates(sts: Obj) -> list[Mapping[str, Any]]:
    templates = _spec(sts).get("volumeClaimTemplates") or []
    return [t for t in templates if isinstance(t, Mapping)]


def storage_matches(sts: Obj, pod: Obj) -> bool:
    """Each volumeClaimTemplate is a pod volume of that name using the pod's own claim."""
    ordinal = get_ordinal(pod)
    if ordinal < 0:
        return False
    volumes = {v.get("name"): v for v in _spec(pod).get("volumes") or () if isinstance(v, Mapping)}
    for claim in _claim_templates(sts):
        volume = volumes.get(meta(claim).get("name"))
        source = volume.get("persistentVolumeClaim") if volume is not None else None
        if not isinstance(source, Mapping) or source.get("claimName") != get_persistent_volume_claim_name(
                sts, claim, ordinal):
            return False
    return True


def get_persistent_volume_claims(sts: Obj, pod: Obj) -> dict[str, dict[str, Any]]:
    """The pod's claims by template name, each a new PVC built from its template."""
    ordinal = get_ordinal(pod)
    selector = _spec(sts).get("selector")
    match_labels = (selector.get("matchLabels") if isinstance(selector, Mapping) else None) or {}
    claims: dict[str, dict[str, Any]] = {}
    for template in _claim_templates(sts):
        claim = deep_copy(dict(template))
        claim.pop("status", None)  # the API server ignores it on create
        metadata = dict(claim.get("metadata") or {})
        metadata["name"] = get_persistent_volume_claim_name(sts, template, ordinal)
        metadata["namespace"] = meta(sts).get("namespace")
        metadata["labels"] = {**(metadata.get("labels") or {}), **match_labels}
        claim["metadata"] = metadata
        claims[str(meta(template).get("name") or "")] = claim
    return claims


def update_storage(sts: Obj, pod: dict[str, Any]) -> None:
    """Point ``pod``'s (a private dict) claim volumes at its own PVCs, keeping its other volumes."""
    claims = get_persistent_volume_claims(sts, pod)
    volumes: list[Any] = [{"name": name, "persistentVolumeClaim": {"claimName": meta(claim)["name"]}}
                          for name, claim in claims.items()]
    volumes += [v for v in _spec(pod).get("volumes") or () if not (isinstance(v, Mapping) and v.get("name") in claims)]
    pod["spec"] = {**(pod.get("spec") or {}), "volumes": volumes}


# --- pod predicates ------------------------------------------------------------------------------


def _phase(pod: Obj) -> str:
    status = pod.get("status")
    return str(status.get("phase") or "") if isinstance(status, Mapping) else ""


def is_running_and_ready(pod: Obj) -> bool:
    return _phase(pod) == POD_RUNNING and _is_pod_ready(pod)


def is_running_and_available(pod: Obj, min_ready: int, now: float) -> bool:
    return is_pod_available(pod, min_ready, now)


def is_created(pod: Obj) -> bool:
    """The API server has the pod (it always has a phase); a pod we only built has none."""
    return _phase(pod) != ""


def is_pending(pod: Obj) -> bool:
    return _phase(pod) == POD_PENDING


def is_failed(pod: Obj) -> bool:
    return _phase(pod) == POD_FAILED


def is_succeeded(pod: Obj) -> bool:
    return _phase(pod) == POD_SUCCEEDED


def is_terminating(pod: Obj) -> bool:
    return is_being_deleted(pod)


def is_unavailable(pod: Obj, min_ready: int, now: float) -> bool:
    return not is_running_and_available(pod, min_ready, now) or is_terminating(pod)


def allows_burst(sts: Obj) -> bool:
    return _spec(sts).get("podManagementPolicy") == PARALLEL


def get_pod_revision(pod: Obj) -> str:
    return str((meta(pod).get("labels") or {}).get(REVISION_LABEL) or "")


def get_max_unavailable(sts: Obj, replica_count: int) -> int:
    """``getStatefulSetMaxUnavailable``: maxUnavailable (default 1) scaled down, never below 1."""
    rolling = (_spec(sts).get("updateStrategy") or {}).get("rollingUpdate") or {}
    value = rolling.get("maxUnavailable")
    return max(1, scaled_value(1 if value is None else value, replica_count, False))


# --- building pods -------------------------------------------------------------------------------


def new_stateful_set_pod(sts: Obj, ordinal: int) -> dict[str, Any]:
    """A new pod for ordinal ``ordinal`` of ``sts`` (``newStatefulSetPod``)."""
    template = _spec(sts).get("template") or {}
    pod = pod_from_template(template, sts, new_controller_ref(sts, STATEFULSETS))
    metadata = pod["metadata"]
    metadata.pop("generateName", None)
    metadata["name"] = get_pod_name(sts, ordinal)
    init_identity(sts, pod)
    update_storage(sts, pod)
    return pod


def _partition(sts: Obj) -> int | None:
    """``rollingUpdate.partition`` (0 if rollingUpdate is set without one), None without rollingUpdate."""
    rolling = (_spec(sts).get("updateStrategy") or {}).get("rollingUpdate")
    if not isinstance(rolling, Mapping):
        return None
    return _int(rolling.get("partition"))


def new_versioned_stateful_set_pod(current_set: Obj, update_set: Obj, current_revision: str, update_revision: str,
                                   ordinal: int) -> dict[str, Any]:
    """A new pod at the revision its ordinal should have (``newVersionedStatefulSetPod``)."""
    strategy = (_spec(current_set).get("updateStrategy") or {}).get("type")
    partition = _partition(current_set)
    start = get_start_ordinal(current_set)
    current_replicas = _int((current_set.get("status") or {}).get("currentReplicas"))
    # Upstream's condition reads (rolling and no rollingUpdate and below currentReplicas) or (below partition).
    use_current = ((strategy == ROLLING_UPDATE and partition is None and ordinal < start + current_replicas)
                   or (partition is not None and ordinal < start + partition))
    pod = new_stateful_set_pod(current_set if use_current else update_set, ordinal)
    pod["metadata"]["labels"] = {**(pod["metadata"].get("labels") or {}),
                                 REVISION_LABEL: current_revision if use_current else update_revision}
    return pod


def sort_by_ordinal(pods: Sequence[Obj], *, descending: bool = False) -> list[Obj]:
    """Pods by ordinal (pods without one, -1, first; last when descending)."""
    return sorted(pods, key=get_ordinal, reverse=descending)
