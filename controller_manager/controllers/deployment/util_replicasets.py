"""Which ReplicaSets belong to which Deployment revision (``deployment_util.go``, ``pkg/util/labels``).

Guarantees:
- :func:`equal_ignore_hash` compares two pod templates as ``apiequality.Semantic.DeepEqual`` does on the typed
  objects, after removing the ``pod-template-hash`` label from both: an absent field equals an explicit null,
  ``""``, ``{}`` or ``[]`` (Go decodes all of them to the zero value) except inside maps (a label with an
  empty value is still a label), resource quantities compare by value (``"1000m"`` equals ``"1"``), list order
  matters. ``false`` and ``0`` are kept: without the schema they cannot be told from pointer fields.
  The new ReplicaSet is found this way, never by recomputing the hash (the hash input differs across
  versions and recomputing it would roll every Deployment).
- :func:`find_new_replica_set` returns the *oldest* ReplicaSet whose template matches (ties on creation time
  broken by name), so duplicates left by old bugs resolve deterministically.
- :func:`find_old_replica_sets` returns ``(required, all)``: every other ReplicaSet, oldest first, and those
  of them with ``spec.replicas`` != 0.
- Label helpers return new dicts; the inputs are never mutated.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

import orjson

from controller_manager.api import selectors
from controller_manager.api.jsonbytes import kept
from controller_manager.api.meta import deep_copy, meta, parse_time
from controller_manager.api.quantity import parse_quantity
from controller_manager.controllers.deployment.util_annotations import revision
from controller_manager.controllers.deployment.util_strategy import replica_set_replicas
from controller_manager.controllerutil.controller_utils import (
    filter_active_replica_sets,
    replica_sets_by_creation_timestamp,
    replica_sets_by_size_newer,
    replica_sets_by_size_older,
)

__all__ = [
    "DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY",
    "add_label_to_selector",
    "clone_and_add_label",
    "clone_selector_and_add_label",
    "equal_ignore_hash",
    "filter_active_replica_sets",
    "find_active_or_latest",
    "find_new_replica_set",
    "find_old_replica_sets",
    "get_deployments_for_replica_set",
    "replica_sets_by_creation_timestamp",
    "replica_sets_by_revision",
    "replica_sets_by_size_newer",
    "replica_sets_by_size_older",
    "set_from_replica_set_template",
]

Obj = Mapping[str, Any]

# apps.DefaultDeploymentUniqueLabelKey: added to a ReplicaSet's selector, template and pods.
DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY = "pod-template-hash"

# Keys whose values are maps of resource quantities (limits/requests, pod overhead) or a single quantity.
_QUANTITY_MAPS = frozenset({"limits", "requests", "overhead"})
_QUANTITY_VALUES = frozenset({"sizeLimit"})
# Go maps (not structs) in a pod template: an entry with an empty value is still an entry.
_STRING_MAPS = frozenset({"labels", "annotations", "nodeSelector", "volumeAttributes", "options"})


def _quantity(value: Any) -> Any:
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        try:
            return parse_quantity(value)
        except ValueError:
            return value
    return value


def _is_zero(value: Any) -> bool:
    return value is None or (isinstance(value, str | dict | list) and not value)


def _normalize(value: Any, key: str = "") -> Any:
    """A comparable form of a JSON value in which Go-equal encodings coincide (see the module docstring)."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if k in _QUANTITY_MAPS and isinstance(v, Mapping):
                normalized: Any = {qk: _quantity(qv) for qk, qv in v.items()}
            elif k in _STRING_MAPS and isinstance(v, Mapping):
                normalized = dict(v)
            elif k in _QUANTITY_VALUES:
                normalized = _quantity(v)
            else:
                normalized = _normalize(v, k)
            if not _is_zero(normalized):
                out[k] = normalized
        return out
    if isinstance(value, list | tuple):
        return [_normalize(item, key) for item in value]
    if isinstance(value, Decimal):
        return value
    return value


# Normalized templates by their JSON bytes: a Deployment sync compares the same few templates several times
# (scaling check, rollout, status), and the normalization walk is the expensive part. Equal bytes mean equal
# input, hence equal output; entries are never mutated (only compared). Cleared when full (a working set is small).
# A kept key is an exact-size copy of orjson's output (api.jsonbytes): 1,024 of orjson's own results held ~16 MiB,
# which the calm chaos soak saw as the leader's RSS rising.
_NORMALIZED_CACHE_SIZE = 1024
_normalized_cache: dict[bytes, Any] = {}


def _template_without_hash(template: Obj | None) -> Any:
    try:
        key = orjson.dumps(template)
    except TypeError:  # not plain JSON (orjson.JSONEncodeError is a TypeError): no caching
        return _compute_template_without_hash(template)
    cached = _normalized_cache.get(key)
    if cached is None:
        if len(_normalized_cache) >= _NORMALIZED_CACHE_SIZE:
            _normalized_cache.clear()
        cached = _normalized_cache[kept(key)] = _compute_template_without_hash(template)
    return cached


def _compute_template_without_hash(template: Obj | None) -> Any:
    normalized = _normalize(template or {})
    labels = (normalized.get("metadata") or {}).get("labels")
    if isinstance(labels, dict):
        labels.pop(DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY, None)
        if not labels:
            normalized["metadata"].pop("labels")
            if not normalized["metadata"]:
                normalized.pop("metadata")
    return normalized


def equal_ignore_hash(template1: Obj | None, template2: Obj | None) -> bool:
    """Whether two pod templates are semantically equal once their pod-template-hash labels are ignored."""
    return bool(_template_without_hash(template1) == _template_without_hash(template2))


def _template(obj: Obj | None) -> Obj | None:
    spec = obj.get("spec") if obj is not None else None
    return spec.get("template") if isinstance(spec, Mapping) else None


def find_new_replica_set(deployment: Obj, replica_sets: Iterable[Obj | None]) -> Obj | None:
    """The oldest ReplicaSet whose template equals the Deployment's (ignoring the hash label), or None."""
    wanted = _template_without_hash(_template(deployment))
    for rs in replica_sets_by_creation_timestamp(rs for rs in replica_sets if rs is not None):
        if _template_without_hash(_template(rs)) == wanted:
            return rs
    return None


def _uid(obj: Obj) -> Any:
    return meta(obj).get("uid")


def find_old_replica_sets(deployment: Obj, replica_sets: Iterable[Obj | None]) -> tuple[list[Obj], list[Obj]]:
    """``(required_old, all_old)``: the ReplicaSets other than the new one (oldest first); ``required_old``
    keeps only those with pods wanted (``spec.replicas`` != 0)."""
    ordered = replica_sets_by_creation_timestamp(rs for rs in replica_sets if rs is not None)
    new_rs = find_new_replica_set(deployment, ordered)
    required: list[Obj] = []
    everything: list[Obj] = []
    for rs in ordered:
        if new_rs is not None and _uid(rs) == _uid(new_rs):
            continue
        everything.append(rs)
        if replica_set_replicas(rs) != 0:
            required.append(rs)
    return required, everything


def find_active_or_latest(new_rs: Obj | None, old_rss: Sequence[Obj]) -> Obj | None:
    """The only ReplicaSet with pods wanted, or the newest one if none has any; None if several have pods
    (then they are scaled proportionally)."""
    if new_rs is None and not old_rss:
        return None
    newest_first = list(reversed(replica_sets_by_creation_timestamp(old_rss)))
    active = filter_active_replica_sets([*newest_first, new_rs])
    if not active:
        return new_rs if new_rs is not None else newest_first[0]
    if len(active) == 1:
        return active[0]
    return None


def _age_key(rs: Obj) -> tuple[float, str]:
    created = parse_time(meta(rs).get("creationTimestamp"))
    return (created if created is not None else -math.inf, str(meta(rs).get("name", "")))


def _revision_cmp(a: Obj, b: Obj) -> int:
    try:
        rev_a, rev_b = revision(a), revision(b)
    except ValueError:
        rev_a = rev_b = 0
    if rev_a != rev_b:
        return -1 if rev_a < rev_b else 1
    age_a, age_b = _age_key(a), _age_key(b)
    return -1 if age_a < age_b else (1 if age_a > age_b else 0)


def replica_sets_by_revision(replica_sets: Iterable[Obj]) -> list[Obj]:
    """Lowest revision first; equal or unparsable revisions fall back to creation order (ReplicaSetsByRevision)."""
    return sorted(replica_sets, key=functools.cmp_to_key(_revision_cmp))


def set_from_replica_set_template(deployment: Obj, template: Obj) -> dict[str, Any]:
    """The Deployment with the ReplicaSet's template (minus the pod-template-hash label): a rollback."""
    new_template = deep_copy(dict(template))
    metadata = dict(new_template.get("metadata") or {})
    labels = dict(metadata.get("labels") or {})
    labels.pop(DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY, None)
    metadata["labels"] = labels
    new_template["metadata"] = metadata
    return {**deployment, "spec": {**(deployment.get("spec") or {}), "template": new_template}}


def _go_map(labels: Mapping[str, str]) -> str:
    """Go's ``%v`` of a map[string]string (keys sorted)."""
    return "map[" + " ".join(f"{k}:{v}" for k, v in sorted(labels.items())) + "]"


def get_deployments_for_replica_set(deployments: Iterable[Obj], rs: Obj) -> list[Obj]:
    """The Deployments (of the ReplicaSet's namespace) whose selector matches its labels.

    LookupError with client-go's message when there are none. A Deployment with an empty or invalid
    selector matches nothing.
    """
    rs_meta = meta(rs)
    labels = rs_meta.get("labels") or {}
    name, namespace = rs_meta.get("name", ""), rs_meta.get("namespace", "")
    if not labels:
        raise LookupError(f"no deployments found for ReplicaSet {name} because it has no labels")
    found: list[Obj] = []
    for deployment in deployments:
        if meta(deployment).get("namespace", "") != namespace:
            continue
        try:
            selector = selectors.from_label_selector((deployment.get("spec") or {}).get("selector"))
        except ValueError:
            continue
        if selector.nothing or selector.is_empty() or not selector.matches(labels):
            continue
        found.append(deployment)
    if not found:
        raise LookupError(
            f"could not find deployments set for ReplicaSet {name} in namespace {namespace} "
            f"with labels: {_go_map(labels)}"
        )
    return found


# --- labels (pkg/util/labels) ------------------------------------------------------------------------


def clone_and_add_label(labels: Mapping[str, str] | None, key: str, value: str) -> dict[str, str]:
    """A copy of ``labels`` with ``key=value`` (an empty key adds nothing)."""
    cloned = dict(labels or {})
    if key:
        cloned[key] = value
    return cloned


def clone_selector_and_add_label(selector: Obj | None, key: str, value: str) -> dict[str, Any] | None:
    """A deep copy of a LabelSelector with ``key=value`` added to matchLabels (None stays None)."""
    if selector is None:
        return None
    cloned = deep_copy(dict(selector))
    if key:
        cloned["matchLabels"] = {**(cloned.get("matchLabels") or {}), key: value}
    return cloned


def add_label_to_selector(selector: Obj | None, key: str, value: str) -> dict[str, Any]:
    """A LabelSelector (new if None) with ``key=value`` in matchLabels."""
    if selector is None:
        selector = {}
    return {**selector, "matchLabels": {**(selector.get("matchLabels") or {}), key: value}}
