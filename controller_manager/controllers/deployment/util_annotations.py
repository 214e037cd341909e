"""The annotations the Deployment controller keeps on Deployments and ReplicaSets (``deployment_util.go``).

Guarantees:
- Keys are upstream's, byte for byte: ``deployment.kubernetes.io/{revision,revision-history,desired-replicas,
  max-replicas}``; ``kubernetes.io/change-cause`` is an ordinary annotation and so is copied to ReplicaSets
  (``kubectl rollout history`` reads it there).
- :data:`ANNOTATIONS_TO_SKIP` is upstream's list of Deployment annotations a ReplicaSet never inherits (and a
  rollback never overwrites): last-applied-configuration, the four replica/revision keys, and the deprecated
  rollback request.
- Revisions parse as ``strconv.ParseInt(v, 10, 64)`` does (optional sign, ASCII digits, int64 range); the
  replica annotations as ``strconv.ParseUint(v, 10, 32)`` capped at MaxInt32. Failures raise ``ValueError``
  with Go's wording (the ``..._verbose``/tolerant callers turn them into "not present").
- Revision-history trimming matches ``SetNewReplicaSetAnnotations``: the oldest entries are dropped until the
  comma-joined history fits the character limit (2000 in the controller); if it cannot fit, nothing is appended.
- No argument is mutated: setters return ``(new_object, changed)``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import structlog

from controller_manager.api.meta import meta
from controller_manager.controllers.deployment.util_strategy import deployment_replicas, max_surge

__all__ = [
    "ANNOTATIONS_TO_SKIP",
    "CHANGE_CAUSE_ANNOTATION",
    "DEPRECATED_ROLLBACK_TO_ANNOTATION",
    "DESIRED_REPLICAS_ANNOTATION",
    "LAST_APPLIED_CONFIG_ANNOTATION",
    "MAX_REPLICAS_ANNOTATION",
    "MAX_REV_HISTORY_LENGTH_IN_CHARS",
    "REVISION_ANNOTATION",
    "REVISION_HISTORY_ANNOTATION",
    "copy_deployment_annotations_to_replica_set",
    "get_desired_replicas_annotation",
    "get_max_replicas_annotation",
    "get_non_negative_int32_from_annotation",
    "get_skipped_annotations",
    "last_revision",
    "max_revision",
    "replicas_annotations_need_update",
    "revision",
    "set_deployment_annotations_to",
    "set_deployment_revision",
    "set_new_replica_set_annotations",
    "set_replicas_annotations",
    "skip_copy_annotation",
]

Obj = Mapping[str, Any]

_log = structlog.get_logger("controller_manager.controllers.deployment")

REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
REVISION_HISTORY_ANNOTATION = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS_ANNOTATION = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS_ANNOTATION = "deployment.kubernetes.io/max-replicas"
CHANGE_CAUSE_ANNOTATION = "kubernetes.io/change-cause"
LAST_APPLIED_CONFIG_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"
# apps.DeprecatedRollbackTo: how the extensions/v1beta1 spec.rollbackTo field round-trips through apps/v1.
DEPRECATED_ROLLBACK_TO_ANNOTATION = "deprecated.deployment.rollback.to"

# sync.go's maxRevHistoryLengthInChars: the revision-history annotation never grows past this.
MAX_REV_HISTORY_LENGTH_IN_CHARS = 2000

ANNOTATIONS_TO_SKIP: frozenset[str] = frozenset({
    LAST_APPLIED_CONFIG_ANNOTATION,
    REVISION_ANNOTATION,
    REVISION_HISTORY_ANNOTATION,
    DESIRED_REPLICAS_ANNOTATION,
    MAX_REPLICAS_ANNOTATION,
    DEPRECATED_ROLLBACK_TO_ANNOTATION,
})

_INT32_MAX = 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_UINT32_MAX = 2**32 - 1
_SIGNED = re.compile(r"[+-]?[0-9]+")
_UNSIGNED = re.compile(r"[0-9]+")


def _annotations(obj: Obj) -> Mapping[str, str]:
    value = meta(obj).get("annotations")
    return value if isinstance(value, Mapping) else {}


def _with_annotations(obj: Obj, annotations: dict[str, str]) -> dict[str, Any]:
    """A shallow copy of ``obj`` whose metadata (copied too) carries ``annotations``."""
    return {**obj, "metadata": {**meta(obj), "annotations": annotations}}


def _parse_int64(text: str) -> int:
    if not _SIGNED.fullmatch(text):
        raise ValueError(f'strconv.ParseInt: parsing "{text}": invalid syntax')
    value = int(text)
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f'strconv.ParseInt: parsing "{text}": value out of range')
    return value


def skip_copy_annotation(key: str) -> bool:
    """True for the annotations a ReplicaSet never inherits from its Deployment."""
    return key in ANNOTATIONS_TO_SKIP


# --- revisions -------------------------------------------------------------------------------------


def revision(obj: Obj) -> int:
    """The object's revision annotation as an int (0 when absent); ValueError when it does not parse."""
    value = _annotations(obj).get(REVISION_ANNOTATION)
    if value is None:
        return 0
    return _parse_int64(str(value))


def _revisions(replica_sets: Iterable[Obj | None]) -> Iterable[int]:
    for rs in replica_sets:
        if rs is None:
            continue
        try:
            yield revision(rs)
        except ValueError as err:
            # Upstream skips such ReplicaSets when reconciling revisions rather than failing the sync.
            _log.debug("skipping replica set with unparsable revision", replicaset=meta(rs).get("name"), error=str(err))


def max_revision(replica_sets: Iterable[Obj | None]) -> int:
    """The highest revision among the ReplicaSets (0 if none has one)."""
    highest = 0
    for value in _revisions(replica_sets):
        highest = max(highest, value)
    return highest


def last_revision(replica_sets: Iterable[Obj | None]) -> int:
    """The second-highest revision (the one a rollback without a target goes back to)."""
    highest, second = 0, 0
    for value in _revisions(replica_sets):
        if value >= highest:
            highest, second = value, highest
        elif value > second:
            second = value
    return second


def set_deployment_revision(deployment: Obj, rev: str) -> tuple[dict[str, Any], bool]:
    """The Deployment with its revision annotation set to ``rev``, and whether that changed it."""
    annotations = dict(_annotations(deployment))
    # A missing annotation reads as "" (a Go map miss), so setting "" on a bare Deployment changes nothing.
    if annotations.get(REVISION_ANNOTATION, "") == rev:
        return dict(deployment), False
    annotations[REVISION_ANNOTATION] = rev
    return _with_annotations(deployment, annotations), True


# --- copying Deployment annotations to ReplicaSets ---------------------------------------------------


def _copy_into(deployment: Obj, annotations: dict[str, str]) -> bool:
    changed = False
    for key, value in _annotations(deployment).items():
        # The revision is decided on the ReplicaSet and copied back to the Deployment, never the other way:
        # a Deployment's revision may be stale if its last update failed.
        if skip_copy_annotation(key) or annotations.get(key, "") == value:
            continue
        annotations[key] = value
        changed = True
    return changed


def copy_deployment_annotations_to_replica_set(deployment: Obj, rs: Obj) -> tuple[dict[str, Any], bool]:
    """The ReplicaSet with every non-skipped Deployment annotation copied onto it, and whether any changed."""
    annotations = dict(_annotations(rs))
    changed = _copy_into(deployment, annotations)
    return _with_annotations(rs, annotations), changed


def get_skipped_annotations(annotations: Mapping[str, str] | None) -> dict[str, str]:
    """Only the annotations :func:`skip_copy_annotation` protects."""
    return {k: v for k, v in (annotations or {}).items() if skip_copy_annotation(k)}


def set_deployment_annotations_to(deployment: Obj, rollback_to_rs: Obj) -> dict[str, Any]:
    """The Deployment wearing the ReplicaSet's annotations (a rollback), keeping its own protected ones."""
    annotations = get_skipped_annotations(_annotations(deployment))
    for key, value in _annotations(rollback_to_rs).items():
        if not skip_copy_annotation(key):
            annotations[key] = value
    return _with_annotations(deployment, annotations)


def _blen(text: str) -> int:
    # Go's len() counts bytes; the limit is on the stored annotation's size.
    return len(text.encode())


def _appended_history(history: str, old_revision: str, limit: int) -> str | None:
    """The history with ``old_revision`` appended, oldest entries dropped to fit ``limit``; None if it can't fit."""
    entries = history.split(",")
    if not entries[0]:
        return old_revision
    total = _blen(history) + _blen(old_revision) + 1
    start = 0
    while total > limit and start < len(entries):
        total -= _blen(entries[start]) + 1
        start += 1
    if total > limit:
        return None
    return ",".join([*entries[start:], old_revision])


def set_new_replica_set_annotations(
    deployment: Obj,
    new_rs: Obj,
    new_revision: str,
    exists: bool,
    rev_history_limit_in_chars: int = MAX_REV_HISTORY_LENGTH_IN_CHARS,
) -> tuple[dict[str, Any], bool]:
    """The new ReplicaSet with the Deployment's annotations, revision ``new_revision`` and, when it is about to
    be created (``exists`` false), the desired/max replicas annotations; and whether its annotations changed.

    A ReplicaSet that already had an older revision is being rolled back to: its old revision moves into the
    revision-history annotation. Its revision never goes down. As upstream, an unparsable revision on either
    side aborts with ``changed`` false (the copied annotations are still on the returned object).
    """
    annotations = dict(_annotations(new_rs))
    changed = _copy_into(deployment, annotations)
    name = meta(new_rs).get("name")

    had_revision = REVISION_ANNOTATION in annotations
    old_revision = annotations.get(REVISION_ANNOTATION, "")
    try:
        old_revision_int = _parse_int64(old_revision)
    except ValueError as err:
        if old_revision != "":
            _log.warning("replica set revision is not an int", replicaset=name, error=str(err))
            return _with_annotations(new_rs, annotations), False
        old_revision_int = 0
    try:
        new_revision_int = _parse_int64(new_revision)
    except ValueError as err:
        _log.warning("new replica set revision is not an int", replicaset=name, error=str(err))
        return _with_annotations(new_rs, annotations), False

    if old_revision_int < new_revision_int:
        annotations[REVISION_ANNOTATION] = new_revision
        changed = True
        _log.debug("updating replica set revision", replicaset=name, revision=new_revision)
        if had_revision:
            history = _appended_history(
                annotations.get(REVISION_HISTORY_ANNOTATION, ""), old_revision, rev_history_limit_in_chars
            )
            if history is None:
                _log.warning("not appending revision: history length limit reached", limit=rev_history_limit_in_chars)
            else:
                annotations[REVISION_HISTORY_ANNOTATION] = history

    updated = _with_annotations(new_rs, annotations)
    if not exists:
        desired = deployment_replicas(deployment)
        updated, replicas_changed = set_replicas_annotations(updated, desired, desired + max_surge(deployment))
        changed = changed or replicas_changed
    return updated, changed


# --- desired / max replicas --------------------------------------------------------------------------


def get_non_negative_int32_from_annotation(rs: Obj, key: str) -> tuple[int, bool]:
    """``(value, True)`` for a valid non-negative int32 annotation, ``(0, False)`` when it is absent.

    ValueError (with ``invalid syntax`` / ``out of range`` wording) when present but not a valid value.
    """
    value = _annotations(rs).get(key)
    if value is None:
        return 0, False
    text = str(value)
    if not _UNSIGNED.fullmatch(text):
        raise ValueError(f'strconv.ParseUint: parsing "{text}": invalid syntax')
    number = int(text)
    if number > _UINT32_MAX:
        raise ValueError(f'strconv.ParseUint: parsing "{text}": value out of range')
    if number > _INT32_MAX:
        raise ValueError(f"value {number} is out of range (higher than {_INT32_MAX})")
    return number, True


def _non_negative_int32_verbose(rs: Obj, key: str) -> tuple[int, bool]:
    try:
        return get_non_negative_int32_from_annotation(rs, key)
    except ValueError as err:
        _log.debug("cannot parse annotation", replicaset=meta(rs).get("name"), annotation=key, error=str(err))
        return 0, False


def get_desired_replicas_annotation(rs: Obj) -> tuple[int, bool]:
    """The ReplicaSet's desired-replicas annotation; ``(0, False)`` if absent or invalid."""
    return _non_negative_int32_verbose(rs, DESIRED_REPLICAS_ANNOTATION)


def get_max_replicas_annotation(rs: Obj) -> tuple[int, bool]:
    """The ReplicaSet's max-replicas annotation; ``(0, False)`` if absent or invalid."""
    return _non_negative_int32_verbose(rs, MAX_REPLICAS_ANNOTATION)


def set_replicas_annotations(rs: Obj, desired_replicas: int, max_replicas: int) -> tuple[dict[str, Any], bool]:
    """The ReplicaSet with desired-replicas and max-replicas set, and whether either changed."""
    annotations = dict(_annotations(rs))
    changed = False
    for key, number in ((DESIRED_REPLICAS_ANNOTATION, desired_replicas), (MAX_REPLICAS_ANNOTATION, max_replicas)):
        text = str(number)
        if annotations.get(key) != text:
            annotations[key] = text
            changed = True
    return _with_annotations(rs, annotations), changed


def replicas_annotations_need_update(rs: Obj, desired_replicas: int, max_replicas: int) -> bool:
    """Whether :func:`set_replicas_annotations` would change the ReplicaSet."""
    annotations = _annotations(rs)
    return (
        annotations.get(DESIRED_REPLICAS_ANNOTATION) != str(desired_replicas)
        or annotations.get(MAX_REPLICAS_ANNOTATION) != str(max_replicas)
    )
