"""Field sets: FieldsV1 encoding as upstream writes it, path strings, and set algebra invariants."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller_manager.sim.apiserver.fieldmanager import typed
from controller_manager.sim.apiserver.fieldmanager.fieldpath import (
    Set,
    field,
    from_fields_v1,
    key_element,
    parse_element,
    path_string,
    value_element,
)

# A FieldsV1 as kube-apiserver writes it: elements sorted f < k < v < i, "." first for an owned parent.
PORTS: dict[str, Any] = {'k:{"containerPort":80,"protocol":"TCP"}': {".": {}, "f:containerPort": {}}}
DEPLOYMENT_FIELDS = {
    "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
    "f:spec": {
        "f:replicas": {},
        "f:template": {"f:spec": {"f:containers": {'k:{"name":"nginx"}': {".": {}, "f:image": {}, "f:name": {},
                                                                          "f:ports": PORTS}}}},
    },
    "f:finalizers": {".": {}, 'v:"a"': {}, 'v:"b"': {}},
}


def test_fields_v1_round_trip_keeps_upstream_order() -> None:
    s = from_fields_v1(DEPLOYMENT_FIELDS)
    assert orjson.dumps(s.to_fields_v1()) == orjson.dumps({
        "f:finalizers": DEPLOYMENT_FIELDS["f:finalizers"],
        "f:metadata": DEPLOYMENT_FIELDS["f:metadata"],
        "f:spec": DEPLOYMENT_FIELDS["f:spec"],
    })


@pytest.mark.parametrize(("elements", "text"), [
    ((field("spec"), field("replicas")), ".spec.replicas"),
    ((field("spec"), field("containers"), key_element([("name", "nginx")])), '.spec.containers[name="nginx"]'),
    ((field("ports"), key_element([("protocol", "TCP"), ("containerPort", 80)])),
     '.ports[containerPort=80,protocol="TCP"]'),
    ((field("finalizers"), value_element("a")), '.finalizers[="a"]'),
    ((field("list"), ("i", 3)), ".list[3]"),
])
def test_path_strings(elements: tuple[Any, ...], text: str) -> None:
    assert path_string(elements) == text


def test_element_text_round_trip() -> None:
    for text in ('f:a.b', 'k:{"name":"x","port":8}', 'v:1', 'v:"s"', 'v:true', 'i:4'):
        pe = parse_element(text)
        assert f"{pe[0]}:{pe[1]}" == text
    assert key_element([("b", 2.0), ("a", "x")]) == ("k", '{"a":"x","b":2}')


def test_difference_only_cancels_exact_members() -> None:
    parent = Set.of((field("a"),))
    child = Set.of((field("a"), field("b")))
    assert parent.difference(child) == parent
    assert child.difference(parent) == child
    assert parent.union(child).difference(parent) == child


names = st.sampled_from(["a", "b", "c"])
paths = st.lists(names.map(field), min_size=1, max_size=3).map(tuple)
sets = st.lists(paths, max_size=6).map(lambda ps: Set.of(*ps))


@given(sets, sets, sets)
def test_set_algebra(a: Set, b: Set, c: Set) -> None:
    assert a.union(b) == b.union(a)
    assert a.intersection(b) == b.intersection(a)
    assert a.union(b).union(c) == a.union(b.union(c))
    assert a.difference(a).empty()
    assert a.union(b).difference(b).union(a.intersection(b)) == a
    assert set(a.union(b).paths()) == set(a.paths()) | set(b.paths())
    assert set(a.intersection(b).paths()) == set(a.paths()) & set(b.paths())
    assert set(a.difference(b).paths()) == set(a.paths()) - set(b.paths())


@given(sets)
def test_fields_v1_round_trip(a: Set) -> None:
    assert from_fields_v1(orjson.loads(orjson.dumps(a.to_fields_v1()))) == a


@given(sets, sets)
def test_recursive_difference_drops_what_is_at_or_under_the_other(a: Set, b: Set) -> None:
    gone = set(b.paths())
    rest = typed.recursive_difference(a, b)
    assert set(rest.paths()) == {p for p in a.paths() if not any(p[:i] in gone for i in range(1, len(p) + 1))}
    if rest == a:
        assert rest is a  # (kept, not copied, when nothing goes)
