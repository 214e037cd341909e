"""YAML bodies read and written as the real server's YAML serializer does."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller_manager.sim.apiserver.yamlbody import YAMLError, json_value_to_yaml, yaml_to_json_value

BOMB = b"""a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


@pytest.mark.parametrize(("text", "value"), [
    pytest.param(b"a: 1\nb: two\n", {"a": 1, "b": "two"}, id="map"),
    pytest.param(b"on: yes\noff: no\n", {"true": True, "false": False}, id="yaml-1.1-booleans-and-keys"),
    pytest.param(b"1: a\n2.5: b\n", {"1": "a", "2.5": "b"}, id="number-keys"),
    pytest.param(b"replicas: 1.0\n", {"replicas": 1}, id="whole-float-is-int"),
    pytest.param(b"ratio: 0.5\n", {"ratio": 0.5}, id="float"),
    pytest.param(b"when: 2024-01-02\n", {"when": "2024-01-02T00:00:00Z"}, id="date"),
    pytest.param(b"x: ~\ny: null\n", {"x": None, "y": None}, id="nulls"),
    pytest.param(b"a: 1\n---\nb: 2\n", {"a": 1}, id="first-document"),
    pytest.param(b"", None, id="empty"),
    pytest.param(b"base: &b {x: 1}\nuse: *b\n", {"base": {"x": 1}, "use": {"x": 1}}, id="small-alias"),
])
def test_yaml_to_json(text: bytes, value: Any) -> None:
    assert yaml_to_json_value(text) == value


def test_a_billion_laughs_is_refused_before_it_is_expanded() -> None:
    with pytest.raises(YAMLError, match=r"^yaml: document contains excessive aliasing$"):
        yaml_to_json_value(BOMB)


@pytest.mark.parametrize("text", [
    pytest.param(b"a: [1, 2", id="unclosed-flow"),
    pytest.param(b"a: b: c", id="mapping-in-scalar"),
    pytest.param(b"\t- x", id="tab"),
])
def test_malformed_yaml_is_an_error_with_yamls_words(text: bytes) -> None:
    with pytest.raises(YAMLError, match=r"^yaml: "):
        yaml_to_json_value(text)


def test_deep_nesting_is_refused() -> None:
    with pytest.raises(YAMLError):
        yaml_to_json_value(b"[" * 20_000 + b"]" * 20_000)


def test_written_yaml_sorts_keys_and_does_not_indent_sequences() -> None:
    assert json_value_to_yaml({"b": [1, "yes"], "a": {"c": None, "d": "1"}}) == (
        b"a:\n  c: null\n  d: '1'\nb:\n- 1\n- 'yes'\n")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20)


@given(json_values)
def test_written_yaml_reads_back_as_the_same_json(value: Any) -> None:
    assert yaml_to_json_value(json_value_to_yaml(value)) == value
