"""Matching an Indexed Job's succeeded indexes against its ``successPolicy`` (``success_policy.go``).

Guarantees of :func:`match_success_policy`: rules are tried in order; a rule with ``succeededIndexes`` matches
when every listed index (below completions) succeeded, or at least ``succeededCount`` of them did; a rule with
only ``succeededCount`` matches when that many indexes succeeded. An unparsable or empty index list makes the
rule skip. The message names the first matching rule: ``"Matched rules at index <i>"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .indexed import Intervals, parse_indexes


def match_succeeded_indexes_rule(rule_indexes: Intervals, succeeded: Intervals, succeeded_count: int | None) -> bool:
    contains = 0
    r = s = 0
    rules, done = rule_indexes.ranges, succeeded.ranges
    while r < len(rules) and s < len(done):
        overlap = min(rules[r][1], done[s][1]) - max(rules[r][0], done[s][0]) + 1
        if overlap > 0:
            contains += overlap
        if done[s][1] < rules[r][1]:
            s += 1
        elif done[s][1] > rules[r][1]:
            r += 1
        else:
            s += 1
            r += 1
    return contains == rule_indexes.total() or (succeeded_count is not None and contains >= succeeded_count)


def match_success_policy(policy: Mapping[str, Any] | None, completions: int, succeeded: Intervals
                         ) -> tuple[str, bool]:
    if policy is None or not succeeded:
        return "", False
    for index, rule in enumerate(policy.get("rules") or ()):
        if not isinstance(rule, Mapping):
            continue
        count = rule.get("succeededCount")
        count = count if isinstance(count, int) and not isinstance(count, bool) else None
        text = rule.get("succeededIndexes")
        if isinstance(text, str):
            required = parse_indexes(text, completions)
            if not required:
                continue
            if match_succeeded_indexes_rule(required, succeeded, count):
                return f"Matched rules at index {index}", True
        elif count is not None and succeeded.total() >= count:
            return f"Matched rules at index {index}", True
    return "", False
