"""The namespace conditions the deleter maintains, as upstream's ``deletion/status_condition_utils.go``.

Guarantees:
- Exactly five condition types are owned here (:data:`CONDITION_TYPES`), in upstream's order. After
  :meth:`NamespaceConditionUpdater.update` every one of them is present on the status: the failure
  recorded during this pass (``status: "True"``, a failure reason and message), or else its "ok"
  variant (``status: "False"``, :data:`OK_REASONS` / :data:`OK_MESSAGES`). Conditions of other types
  are left alone, in place.
- An existing condition keeps its position; it is rewritten only when status, reason or message
  differ, and its ``lastTransitionTime`` moves only when the status flips. New conditions are appended.
- Messages are upstream's, byte for byte (including ``"pods. has 1 resource instances"`` for the core
  group), and lists inside them are sorted so repeated passes write the same text.
- Pure: conditions are plain dicts; the functions return new lists and never mutate their inputs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller_manager.api.meta import format_time

__all__ = [
    "CONDITION_TYPES",
    "CONTENT_FAILURE",
    "CONTENT_REMAINING",
    "DISCOVERY_FAILURE",
    "FINALIZERS_REMAINING",
    "GV_PARSING_FAILURE",
    "OK_MESSAGES",
    "OK_REASONS",
    "ContentTotals",
    "GroupDiscoveryFailed",
    "NamespaceConditionUpdater",
    "get_condition",
    "new_successful_condition",
    "update_conditions",
]

Condition = dict[str, Any]

DISCOVERY_FAILURE = "NamespaceDeletionDiscoveryFailure"
GV_PARSING_FAILURE = "NamespaceDeletionGroupVersionParsingFailure"
CONTENT_FAILURE = "NamespaceDeletionContentFailure"
CONTENT_REMAINING = "NamespaceContentRemaining"
FINALIZERS_REMAINING = "NamespaceFinalizersRemaining"

CONDITION_TYPES: tuple[str, ...] = (
    DISCOVERY_FAILURE,
    GV_PARSING_FAILURE,
    CONTENT_FAILURE,
    CONTENT_REMAINING,
    FINALIZERS_REMAINING,
)

OK_MESSAGES: Mapping[str, str] = {
    DISCOVERY_FAILURE: "All resources successfully discovered",
    GV_PARSING_FAILURE: "All legacy kube types successfully parsed",
    CONTENT_FAILURE: "All content successfully deleted, may be waiting on finalization",
    CONTENT_REMAINING: "All content successfully removed",
    FINALIZERS_REMAINING: "All content successfully removed",
}

OK_REASONS: Mapping[str, str] = {
    DISCOVERY_FAILURE: "ResourcesDiscovered",
    GV_PARSING_FAILURE: "ParsedGroupVersions",
    CONTENT_FAILURE: "ContentDeleted",
    CONTENT_REMAINING: "ContentRemoved",
    FINALIZERS_REMAINING: "ContentRemoved",
}


class GroupDiscoveryFailed(Exception):
    """Some group/versions could not be discovered (client-go's ``ErrGroupDiscoveryFailed``)."""

    def __init__(self, groups: Mapping[str, BaseException]) -> None:
        self.groups = dict(groups)
        parts = sorted(f"{gv}: {err}" for gv, err in self.groups.items())
        super().__init__(f"unable to retrieve the complete list of server APIs: {', '.join(parts)}")


@dataclass
class ContentTotals:
    """What is left in a namespace after one deletion pass (upstream's ``allGVRDeletionMetadata``).

    ``remaining`` maps a resource, as ``(group, resource)``, to how many instances remain;
    ``finalizers`` maps each finalizer to how many remaining instances carry it.
    """

    remaining: dict[tuple[str, str], int] = field(default_factory=dict)
    finalizers: dict[str, int] = field(default_factory=dict)


def _condition(type_: str, status: str, reason: str, message: str, now: float) -> Condition:
    return {"type": type_, "status": status, "lastTransitionTime": format_time(now), "reason": reason,
            "message": message}


def new_successful_condition(type_: str, now: float) -> Condition:
    """The "ok" variant of an owned condition type: status False with upstream's reason and message."""
    return _condition(type_, "False", OK_REASONS[type_], OK_MESSAGES[type_], now)


def get_condition(conditions: Sequence[Mapping[str, Any]] | None, type_: str) -> Mapping[str, Any] | None:
    for c in conditions or ():
        if c.get("type") == type_:
            return c
    return None


def update_conditions(current: Sequence[Mapping[str, Any]] | None, new_conditions: Sequence[Condition],
                      now: float) -> tuple[list[Condition], bool]:
    """The status conditions after this pass, and whether they changed (upstream's ``updateConditions``)."""
    result: list[Condition] = [dict(c) for c in current or ()]
    changed = False
    for type_ in CONDITION_TYPES:
        new = get_condition(new_conditions, type_) or new_successful_condition(type_, now)
        index = next((i for i, c in enumerate(result) if c.get("type") == type_), None)
        if index is None:
            result.append(dict(new))
            changed = True
            continue
        old = result[index]
        if (old.get("status"), old.get("message"), old.get("reason")) == (
                new.get("status"), new.get("message"), new.get("reason")):
            continue
        updated = dict(old)
        if old.get("status") != new.get("status"):
            updated["lastTransitionTime"] = format_time(now)
        updated.update(type=type_, status=new.get("status"), reason=new.get("reason"), message=new.get("message"))
        result[index] = updated
        changed = True
    return result, changed


class NamespaceConditionUpdater:
    """Collects what went wrong during one deletion pass and turns it into status conditions."""

    def __init__(self, now: float) -> None:
        self.now = now
        self.new_conditions: list[Condition] = []
        self.delete_content_errors: list[BaseException] = []

    def process_group_version_err(self, err: BaseException) -> None:
        self.new_conditions.append(_condition(GV_PARSING_FAILURE, "True", "GroupVersionParsingFailed", str(err),
                                              self.now))

    def process_discover_resources_err(self, err: BaseException) -> None:
        if isinstance(err, GroupDiscoveryFailed):
            message = f"Discovery failed for some groups, {len(err.groups)} failing: {err}"
        else:
            message = str(err)
        self.new_conditions.append(_condition(DISCOVERY_FAILURE, "True", "DiscoveryFailed", message, self.now))

    def process_content_totals(self, totals: ContentTotals) -> None:
        if totals.remaining:
            resources = sorted(f"{resource}.{group} has {n} resource instances"
                               for (group, resource), n in totals.remaining.items() if n)
            self.new_conditions.append(_condition(
                CONTENT_REMAINING, "True", "SomeResourcesRemain",
                f"Some resources are remaining: {', '.join(resources)}", self.now))
        if totals.finalizers:
            finalizers = sorted(f"{finalizer} in {n} resource instances"
                                for finalizer, n in totals.finalizers.items() if n)
            self.new_conditions.append(_condition(
                FINALIZERS_REMAINING, "True", "SomeFinalizerRemain",
                f"Some finalizers are remaining: {', '.join(finalizers)}", self.now))

    def process_delete_content_err(self, err: BaseException) -> None:
        self.delete_content_errors.append(err)

    def update(self, conditions: Sequence[Mapping[str, Any]] | None) -> tuple[list[Condition], bool]:
        """The namespace's new conditions from everything processed, and whether they changed."""
        if get_condition(self.new_conditions, CONTENT_FAILURE) is None and self.delete_content_errors:
            messages = sorted(str(e) for e in self.delete_content_errors)
            self.new_conditions.append(_condition(
                CONTENT_FAILURE, "True", "ContentDeletionFailed",
                f"Failed to delete all resource types, {len(messages)} remaining: {', '.join(messages)}", self.now))
        return update_conditions(conditions, self.new_conditions, self.now)
