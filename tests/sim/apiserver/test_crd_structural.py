"""Unit tables and invariants of custom resource pruning, defaulting and validation (crd/structural)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller_manager.sim.apiserver.crd import structural

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {"type": "object", "properties": {
            "a": {"type": "string", "default": "x"},
            "n": {"type": "object", "properties": {"b": {"type": "integer", "default": 2}}, "default": {}},
            "m": {"type": "object", "additionalProperties": {"type": "string"}},
            "l": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "nullable": {"type": "string", "nullable": True},
        }},
    },
}

json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=3),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                               st.sampled_from(["a", "b", "k", "n", "m", "l", "free", "zz"]), inner, max_size=3),
                           max_leaves=12)
bodies = st.fixed_dictionaries({"apiVersion": st.just("g.example.com/v1"), "kind": st.just("K"),
                                "metadata": st.fixed_dictionaries({"name": st.just("x")}),
                                "spec": st.dictionaries(st.sampled_from(["a", "n", "m", "l", "free", "zz"]),
                                                        json_values, max_size=4)})


@given(bodies)
def test_pruning_is_idempotent_and_reports_what_it_dropped(body: dict[str, Any]) -> None:
    pruned, unknown = structural.prune(SCHEMA, body)
    again, none = structural.prune(SCHEMA, pruned)
    assert (again, none) == (pruned, [])
    assert bool(unknown) == (pruned != body)


@given(bodies)
def test_defaulting_is_idempotent(body: dict[str, Any]) -> None:
    once = structural.default(SCHEMA, structural.prune(SCHEMA, body)[0])
    assert structural.default(SCHEMA, once) == once


@pytest.mark.parametrize(("spec", "pruned", "unknown"), [
    ({"a": "y", "zz": 1}, {"a": "y"}, ["spec.zz"]),
    ({"m": {"p": "q"}}, {"m": {"p": "q"}}, []),
    ({"l": [{"k": "v", "j": 1}]}, {"l": [{"k": "v"}]}, ["spec.l[0].j"]),
    ({"free": {"any": {"thing": 1}}}, {"free": {"any": {"thing": 1}}}, []),
])
def test_prune_table(spec: dict[str, Any], pruned: dict[str, Any], unknown: list[str]) -> None:
    out, found = structural.prune(SCHEMA, {"spec": spec})
    assert (out["spec"], found) == (pruned, unknown)


@pytest.mark.parametrize(("spec", "defaulted"), [
    ({}, {"a": "x", "n": {"b": 2}}),
    ({"a": None, "n": {"b": 5}}, {"a": "x", "n": {"b": 5}}),
    ({"nullable": None}, {"a": "x", "n": {"b": 2}, "nullable": None}),
])
def test_default_table(spec: dict[str, Any], defaulted: dict[str, Any]) -> None:
    assert structural.default(SCHEMA, {"spec": spec})["spec"] == defaulted
