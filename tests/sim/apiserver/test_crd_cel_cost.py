"""The cost estimate of CRD validation rules against apiextensions-apiserver's TestCostEstimation figures (the
estimate for a schema without size limits, then with ``maxItems``/``maxProperties``/``maxLength`` set), and the
CRD-write refusal of a rule certain to exceed the budget."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.sim.apiserver.crd import cel
from tests.sim.apiserver.conftest import Client
from tests.sim.apiserver.test_crd import CRDS
from tests.sim.apiserver.test_crd_cel import SPEC_PATH, crd_with_rules

Obj = dict[str, Any]
_FORMATS = {"duration": ("string", "duration"), "date": ("string", "date"), "date-time": ("string", "date-time")}


def _scalar(kind: str) -> Obj:
    if kind == "int-or-string":
        return {"x-kubernetes-int-or-string": True}
    if kind in _FORMATS:
        return {"type": _FORMATS[kind][0], "format": _FORMATS[kind][1]}
    return {"type": kind}


def _limit(schema: Obj, key: str, limit: int | None) -> Obj:
    return {**schema, key: limit} if limit is not None else schema


def array_of(kind: str) -> Any:
    return lambda limit: _limit({"type": "array", "items": _scalar(kind)}, "maxItems", limit)


def map_of(kind: str) -> Any:
    return lambda limit: _limit({"type": "object", "additionalProperties": _scalar(kind)}, "maxProperties", limit)


def string(limit: int | None) -> Obj:
    return _limit({"type": "string"}, "maxLength", limit)


def objects(limit: int | None) -> Obj:
    item = {"type": "object", "required": ["required"],
            "properties": {"required": {"type": "string"}, "optional": {"type": "string"}}}
    return _limit({"type": "array", "items": item}, "maxItems", limit)


def nested_strings(limit: int | None) -> Obj:
    return _limit({"type": "object", "additionalProperties": string(limit)}, "maxProperties", limit)


def nested_all_max(limit: int | None) -> Obj:
    inner = _limit({"type": "object", "required": ["required"],
                    "properties": {"required": {"type": "string"}, "optional": {"type": "string"}}},
                   "maxProperties", limit)
    return _limit({"type": "array", "items": _limit({"type": "object", "additionalProperties": inner},
                                                      "maxProperties", limit)}, "maxItems", limit)


def sorted_strings(limit: int | None) -> Obj:
    return _limit({"type": "array", "items": string(limit)}, "maxItems", limit)


@pytest.mark.parametrize(("schema", "rule", "unbounded", "limit", "bounded"), [
    (array_of("number"), "self.all(x, true)", 4718591, 10, 32),
    (array_of("string"), "self.all(x, true)", 3145727, 20, 62),
    (array_of("boolean"), "self.all(x, true)", 1887437, 5, 17),
    (objects, "self.all(x, true)", 555128, 50, 152),
    (map_of("number"), "self.all(x, true)", 1348169, 10, 32),
    (map_of("string"), "self.all(x, true)", 1179647, 3, 11),
    (string, "self.contains('test')", 314574, 10, 5),
    (string, "self.startsWith('test')", 2, 15, 2),
    (string, 'size(self + "hello") > size("hello")', 314578, 4, 7),
    (array_of("number"), "self[1] == 0.0", 2, 5000, 2),
    (array_of("string"), "self[1] == self[1]", 314577, 8, 314577),
    (array_of("number"), "self.all(x, self.all(y, true))", None, 10, 352),
    (array_of("number"), "self.all(x, self.all(y, self.all(z, true)))", None, 10, 3552),
    (string, 'self.matches("x")', 314574, 50, 22),
    (string, '"".matches("(((((((((())))))))))[0-9]")', 7, 10, 7),
    (string, 'self.matches("")', 1, 100, 1),
    (nested_strings, "self.all(x, x.contains(self[x]))", 2752507, 10, 72),
    (string, 'self == "x"', 2, 0, 1),
    (array_of("number"), "self.all(x, x == 0.0)", 6291454, 3 * 1024 * 2048, 25165826),
    (nested_all_max, 'self.all(x, x["y"].required == "z")', 7340027, 10, 72),
    (array_of("int-or-string"), "self.all(x, true)", 4718591, 10, 32),
    (array_of("int-or-string"), "self[0] == 5", 3, 10, 3),
    (array_of("duration"), "self.all(x, true)", 2359295, 5, 17),
    (array_of("duration"), "self[0].getHours() == 2", 4, 525, 4),
    (array_of("date"), "self.all(x, true)", 725936, 15, 47),
    (array_of("date-time"), "self.all(x, true)", 428963, 25, 77),
    (map_of("duration"), "self.all(x, true)", 1048577, 5, 17),
    (map_of("date"), "self.all(x, true)", 524288, 10, 32),
    (map_of("date-time"), "self.all(x, true)", 349526, 25, 77),
    (string, "self.find('[0-9]+') == ''", 629147, 10, 11),
    (string, "self.lowerAscii() == 'lower!'", 314575, 10, 6),
    (sorted_strings, "self.isSorted() == true", 329854432052, 10, 52),
    (map_of("integer"), "oldSelf.size() == self.size()", 5, 10, 5),
])
def test_cost_estimates_match_upstreams(schema: Any, rule: str, unbounded: int | None, limit: int,
                                        bounded: int) -> None:
    estimate = cel.compile_rule(rule, schema(None)).cost
    assert estimate.exact
    cost = estimate.cost
    if unbounded is None:
        assert cost is not None
        assert cost > 100_000_000  # upstream: exceeds the limit
    else:
        assert cost == unbounded
    assert cel.compile_rule(rule, schema(limit)).cost.cost == bounded


async def test_rules_over_the_budget_are_refused_with_the_schema_total(client: Client) -> None:
    """Rules far over the budget (unbounded lists of unbounded strings; a string conversion's unknown size in a
    messageExpression, as upstream estimates it) are refused, then the schema's total: each of the most expensive
    "contributed", and the schema is over its own budget."""
    body = crd_with_rules([{"rule": "self.tags.all(t, t.matches('^[a-z]+$'))"},
                           {"rule": "!has(self.bounded) || self.bounded.all(t, t.matches('^[a-z]+$'))"},
                           {"rule": "self.replicas >= 0", "messageExpression": "'replicas: ' + string(self.replicas)"}],
                          extra_props={"bounded": {"type": "array", "maxItems": 10,
                                                   "items": {"type": "string", "maxLength": 64}},
                                       "tags": {"type": "array", "items": {"type": "string"}}})
    code, status = await client.post(CRDS, body)
    assert code == 422, status
    hint = ("(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and "
            "strings are declared)")
    rules = f"{SPEC_PATH}.x-kubernetes-validations"
    contributed = "Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"
    assert [f'{c["field"]}: {c["message"]}' for c in status["details"]["causes"]] == [
        f"{rules}[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x {hint}",
        f"{rules}[2].messageExpression: Forbidden: estimated messageExpression cost exceeds budget by factor of more "
        f"than 100x {hint}",
        f"{rules}[2].messageExpression: {contributed}",
        f"{rules}[0].rule: {contributed}",
        "spec.validation.openAPIV3Schema: Forbidden: x-kubernetes-validations estimated rule cost total for "
        f"entire OpenAPIv3 schema exceeds budget by factor of more than 100x {hint}"]


@pytest.mark.parametrize(("max_length", "rule", "factor"), [
    # each item's rule runs for as many items as fit in a request: 3 MiB / len('{},') = 1048576 times
    (64, "self.name.matches('^[a-z]+$')", "5.7x"),  # (ceil(257 * 0.1) * ceil(8 * 0.25) + 2) * 1048576
    (25, "self.name.matches('x')", "1.363149x"),  # (ceil(101 * 0.1) * 1 + 2) * 1048576: under 1.5, six decimals
    (10, "self.name.matches('x')", None),  # (ceil(41 * 0.1) * 1 + 2) * 1048576 = 7340032: within the budget
])
async def test_rule_cost_times_its_cardinality_is_checked(client: Client, max_length: int, rule: str,
                                                          factor: str | None) -> None:
    body = crd_with_rules([], extra_props={"entries": {"type": "array", "items": {
        "type": "object", "properties": {"name": {"type": "string", "maxLength": max_length}},
        "x-kubernetes-validations": [{"rule": rule}]}}})
    code, status = await client.post(CRDS, body)
    if factor is None:
        assert code == 201, status
        return
    assert code == 422, status
    assert [f'{c["field"]}: {c["message"]}' for c in status["details"]["causes"]] == [
        f"{SPEC_PATH}.properties[entries].items.x-kubernetes-validations[0].rule: Forbidden: estimated rule cost "
        f"exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, maxProperties, and "
        "maxLength where arrays, maps, and strings are declared)"]


async def test_the_schema_total_is_limited_even_when_each_rule_is_within_budget(client: Client) -> None:
    # each rule: 2 + 1 + 1572863 elements * 5 = 7864318, within 10,000,000; thirteen of them: 102236134
    body = crd_with_rules([{"rule": f"self.numbers.all(x, x > {n})"} for n in range(13)],
                          extra_props={"numbers": {"type": "array", "items": {"type": "integer"}}})
    code, status = await client.post(CRDS, body)
    assert code == 422, status
    contributed = "Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"
    assert [f'{c["field"]}: {c["message"]}' for c in status["details"]["causes"]] == [
        *(f"{SPEC_PATH}.x-kubernetes-validations[{i}].rule: {contributed}" for i in range(4)),
        "spec.validation.openAPIV3Schema: Forbidden: x-kubernetes-validations estimated rule cost total for "
        "entire OpenAPIv3 schema exceeds budget by factor of 1.022361x (try simplifying the rule, or adding maxItems, "
        "maxProperties, and maxLength where arrays, maps, and strings are declared)"]
    code, body = await client.post(CRDS, crd_with_rules(
        [{"rule": f"self.numbers.all(x, x > {n})"} for n in range(12)],
        extra_props={"numbers": {"type": "array", "items": {"type": "integer"}}}))
    assert code == 201, body  # twelve: 94371816
