"""Label selectors: upstream's labels/selector_test.go and metav1 helpers_test.go tables."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller_manager.api.selectors import (
    EVERYTHING,
    NOTHING,
    InvalidSelector,
    Requirement,
    Selector,
    from_label_selector,
    from_set,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_label_key,
    is_label_value,
    parse,
)


@pytest.mark.parametrize(
    "text",
    ["x=a,y=b,z=c", "", "x!=a,y=b", "x=", "x= ", "x=,z= ", "x= ,z= ", "!x", "x>1", "x>1,z<5"],
)
def test_parse_good_strings_restring(text: str) -> None:
    assert str(parse(text)) == text.replace(" ", "")


@pytest.mark.parametrize("text", ["x=a||y=b", "x==a==b", "!x=a", "x<a"])
def test_parse_bad_strings(text: str) -> None:
    with pytest.raises(InvalidSelector):
        parse(text)


def test_deterministic_parse() -> None:
    assert str(parse("x=a,a=x")) == str(parse("a=x,x=a")) == "a=x,x=a"


@pytest.mark.parametrize(
    ("selector", "labels", "want"),
    [
        pytest.param("", {"x": "y"}, True, id="empty"),
        pytest.param("x=y", {"x": "y"}, True, id="eq"),
        pytest.param("x=y,z=w", {"x": "y", "z": "w"}, True, id="eq-eq"),
        pytest.param("x!=y,z!=w", {"x": "z", "z": "a"}, True, id="neq-neq"),
        pytest.param("notin=in", {"notin": "in"}, True, id="keywords-as-exact"),
        pytest.param("x", {"x": "z"}, True, id="exists"),
        pytest.param("!x", {"y": "z"}, True, id="not-exists"),
        pytest.param("x>1", {"x": "2"}, True, id="gt"),
        pytest.param("x<1", {"x": "0"}, True, id="lt"),
        pytest.param("x=z", {}, False, id="eq-missing"),
        pytest.param("x=y", {"x": "z"}, False, id="eq-other"),
        pytest.param("x=y,z=w", {"x": "w", "z": "w"}, False, id="eq-eq-miss"),
        pytest.param("x!=y,z!=w", {"x": "z", "z": "w"}, False, id="neq-miss"),
        pytest.param("x", {"y": "z"}, False, id="exists-miss"),
        pytest.param("!x", {"x": "z"}, False, id="not-exists-miss"),
        pytest.param("x>1", {"x": "0"}, False, id="gt-miss"),
        pytest.param("x<1", {"x": "2"}, False, id="lt-miss"),
        pytest.param("foo=bar", {"foo": "bar", "baz": "blah"}, True, id="set-1"),
        pytest.param("baz=blah", {"foo": "bar", "baz": "blah"}, True, id="set-2"),
        pytest.param("foo=bar,baz=blah", {"foo": "bar", "baz": "blah"}, True, id="set-3"),
        pytest.param("foo=blah", {"foo": "bar", "baz": "blah"}, False, id="set-4"),
        pytest.param("baz=bar", {"foo": "bar", "baz": "blah"}, False, id="set-5"),
        pytest.param("foo=bar,foobar=bar,baz=blah", {"foo": "bar", "baz": "blah"}, False, id="set-6"),
        pytest.param("x in (a,b)", {"x": "b"}, True, id="in"),
        pytest.param("x notin (a,b)", {}, True, id="notin-missing"),
        pytest.param("x notin (a,b)", {"x": "a"}, False, id="notin-hit"),
        pytest.param("z>1", {"z": "v2"}, False, id="gt-non-int"),
    ],
)
def test_selector_matches(selector: str, labels: dict[str, str], want: bool) -> None:
    assert parse(selector).matches(labels) is want


@pytest.mark.parametrize(
    ("selector", "want"),
    [({}, True), ({"foo": "bar"}, True), ({"baz": "blah"}, True), ({"foo": "bar", "baz": "blah"}, True),
     ({"foo": "=blah"}, False), ({"foo": "bar", "foobar": "bar"}, False)],
)
def test_set_matches(selector: dict[str, str], want: bool) -> None:
    assert from_set(selector).matches({"foo": "bar", "baz": "blah"}) is want


def test_everything_nothing_and_empty_sets() -> None:
    assert EVERYTHING.matches({"x": "y"})
    assert EVERYTHING.is_empty()
    assert not NOTHING.matches({})
    assert not NOTHING.is_empty()
    assert str(NOTHING) == ""
    assert from_set(None).is_empty()
    assert from_set({}).is_empty()
    assert from_set({"b": "2", "a": "1"}) == parse("a=1,b=2")


def _req(key: str, op: str, *vals: str) -> Requirement:
    return Requirement.new(key, op, sorted(set(vals)))


@pytest.mark.parametrize(
    ("text", "want"),
    [
        pytest.param("", (), id="empty"),
        pytest.param("\rx", (_req("x", "exists"),), id="cr"),
        pytest.param("this-is-a-dns.domain.com/key-with-dash",
                     (_req("this-is-a-dns.domain.com/key-with-dash", "exists"),), id="prefixed"),
        pytest.param("this-is-another-dns.domain.com/key-with-dash in (so,what)",
                     (_req("this-is-another-dns.domain.com/key-with-dash", "in", "so", "what"),), id="prefixed-in"),
        pytest.param("0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
                     (_req("0.1.2.domain/99", "notin", "10.10.100.1", "tick.tack.clock"),), id="notin-dots"),
        pytest.param("foo  in\t (abc)", (_req("foo", "in", "abc"),), id="tabs"),
        pytest.param("x notin\n (abc)", (_req("x", "notin", "abc"),), id="newline"),
        pytest.param("x  notin\t\t\t(abc,def)", (_req("x", "notin", "abc", "def"),), id="many-tabs"),
        pytest.param("x in (abc,def)", (_req("x", "in", "abc", "def"),), id="in"),
        pytest.param("x in (abc,)", (_req("x", "in", "abc", ""),), id="trailing-comma"),
        pytest.param("x in ()", (_req("x", "in", ""),), id="empty-parens"),
        pytest.param("x notin (abc,def),bar,z in (),w",
                     (_req("bar", "exists"), _req("w", "exists"), _req("x", "notin", "abc", "def"),
                      _req("z", "in", "")), id="mixed-sorted"),
        pytest.param("x=a", (_req("x", "=", "a"),), id="eq"),
        pytest.param("x>1", (_req("x", "gt", "1"),), id="gt"),
        pytest.param("x<7", (_req("x", "lt", "7"),), id="lt"),
        pytest.param("x=a,y!=b", (_req("x", "=", "a"), _req("y", "!=", "b")), id="eq-neq"),
        pytest.param("x=a,y!=b,z in (h,i,j)",
                     (_req("x", "=", "a"), _req("y", "!=", "b"), _req("z", "in", "h", "i", "j")), id="three"),
        pytest.param("x notin ( )", (_req("x", "notin", ""),), id="blank-parens"),
        pytest.param("x notin (, a)", (_req("x", "notin", "", "a"),), id="leading-comma"),
        pytest.param("a ", (_req("a", "exists"),), id="trailing-space"),
        pytest.param("a in (x,y,notin, z,in)", (_req("a", "in", "in", "notin", "x", "y", "z"),),
                     id="keywords-as-values"),
    ],
)
def test_set_selector_parser_valid(text: str, want: tuple[Requirement, ...]) -> None:
    assert parse(text) == Selector(want)


@pytest.mark.parametrize(
    "text",
    ["x=a||y=b", ",x,y", "x nott in (y)", "a in (xyz),", "a in (xyz)b notin ()", "a in (xyz abc)",
     "a notin(", "a (", "(", "x in (a", "x=a=b", "=a", "x!", "x in a", "a" * 254],
)
def test_set_selector_parser_invalid(text: str) -> None:
    with pytest.raises(InvalidSelector):
        parse(text)


def test_invalid_key_and_value_messages() -> None:
    with pytest.raises(InvalidSelector, match="name part must consist of alphanumeric characters"):
        parse("-x=a")
    with pytest.raises(InvalidSelector, match="a valid label must be an empty string"):
        parse("x=-a")
    with pytest.raises(InvalidSelector, match="must be no more than 63 bytes"):
        parse("x=" + "a" * 64)
    with pytest.raises(InvalidSelector, match="expected: ',' or 'end of string'"):
        parse("!x=a")


@pytest.mark.parametrize(
    ("key", "op", "vals", "ok"),
    [
        ("x", "in", (), False), ("x", "notin", (), False), ("x", "in", ("foo",), True),
        ("x", "notin", ("foo",), True), ("x", "exists", (), True), ("x", "!", (), True),
        ("1foo", "in", ("bar",), True), ("1234", "in", ("bar",), True), ("y", "gt", ("1",), True),
        ("z", "lt", ("6",), True), ("foo", "gt", ("bar",), False), ("barz", "lt", ("blah",), False),
        ("a" * 254, "exists", (), False), ("x", "=", ("a", "b"), False), ("x", "exists", ("a",), False),
        ("x", "bogus", ("a",), False),
    ],
)
def test_requirement_constructor(key: str, op: str, vals: tuple[str, ...], ok: bool) -> None:
    if ok:
        Requirement.new(key, op, vals)
    else:
        with pytest.raises(InvalidSelector):
            Requirement.new(key, op, vals)


@pytest.mark.parametrize(
    ("reqs", "want"),
    [
        ((_req("x", "in", "abc", "def"), _req("y", "notin", "jkl"), _req("z", "exists")),
         "x in (abc,def),y notin (jkl),z"),
        ((_req("x", "notin", "abc", "def"), _req("y", "!=", "jkl"), _req("z", "!")), "x notin (abc,def),y!=jkl,!z"),
        ((_req("x", "notin", "abc"), _req("y", "in", "jkl", "mno"), _req("z", "notin", "")),
         "x notin (abc),y in (jkl,mno),z notin ()"),
        ((_req("x", "=", "abc"), _req("y", "==", "jkl"), _req("z", "!=", "a"), _req("z", "exists")),
         "x=abc,y==jkl,z!=a,z"),
        ((_req("x", "gt", "2"), _req("y", "lt", "8"), _req("z", "exists")), "x>2,y<8,z"),
    ],
)
def test_to_string(reqs: tuple[Requirement, ...], want: str) -> None:
    assert str(Selector(reqs)) == want


def test_string_sorts_values_without_reordering_requirement() -> None:
    req = Requirement.new("x", "in", ["b", "a"])
    assert req.values == ("b", "a")
    assert str(req) == "x in (a,b)"


def test_add_sorts_by_key() -> None:
    sel = EVERYTHING.add(Requirement.new("key2", "=", ["v2"])).add(Requirement.new("key", "in", ["v"]))
    assert str(sel) == "key in (v),key2=v2"
    assert NOTHING.add(Requirement.new("a", "exists")) is NOTHING


def test_requires_exact_match() -> None:
    sel = parse("a=1,b in (2),c in (3,4),d!=5")
    assert sel.requires_exact_match("a") == "1"
    assert sel.requires_exact_match("b") == "2"
    assert sel.requires_exact_match("c") is None
    assert sel.requires_exact_match("d") is None
    assert sel.requires_exact_match("zz") is None


@pytest.mark.parametrize(
    ("ls", "want"),
    [
        pytest.param(None, NOTHING, id="nil"),
        pytest.param({}, EVERYTHING, id="empty"),
        pytest.param({"matchLabels": {}, "matchExpressions": []}, EVERYTHING, id="empty-lists"),
        pytest.param({"matchLabels": {"foo": "bar"},
                      "matchExpressions": [{"key": "baz", "operator": "In", "values": ["qux", "norf"]}]},
                     "baz in (norf,qux),foo=bar", id="labels-and-in"),
        pytest.param({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["x"]},
                                           {"key": "b", "operator": "Exists"},
                                           {"key": "c", "operator": "DoesNotExist"}]},
                     "a notin (x),b,!c", id="expressions"),
        pytest.param({"matchLabels": {"b": "1", "a": "2"}}, "a=2,b=1", id="labels-sorted"),
    ],
)
def test_label_selector_as_selector(ls: dict[str, Any] | None, want: Selector | str) -> None:
    got = from_label_selector(ls)
    if isinstance(want, Selector):
        assert got == want
    else:
        assert str(got) == want


@pytest.mark.parametrize(
    ("ls", "message"),
    [
        pytest.param({"matchExpressions": [{"key": "foo", "operator": "In"}]}, "can't be empty", id="in-no-values"),
        pytest.param({"matchExpressions": [{"key": "foo", "operator": "NotIn", "values": []}]}, "can't be empty",
                     id="notin-no-values"),
        pytest.param({"matchExpressions": [{"key": "foo", "operator": "Exists", "values": ["bar"]}]},
                     "values set must be empty", id="exists-with-values"),
        pytest.param({"matchExpressions": [{"key": "foo", "operator": "DoesNotExist", "values": ["bar"]}]},
                     "values set must be empty", id="dne-with-values"),
        pytest.param({"matchExpressions": [{"key": "foo", "operator": "Gt", "values": ["1"]}]},
                     '"Gt" is not a valid label selector operator', id="gt-operator"),
        pytest.param({"matchLabels": {"foo": "bad value"}}, "a valid label must be", id="bad-value"),
        pytest.param({"matchLabels": {"/foo": "x"}}, "prefix part must be non-empty", id="bad-key"),
    ],
)
def test_label_selector_as_selector_invalid(ls: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidSelector, match=message):
        from_label_selector(ls)


def test_selectors_are_hashable_and_immutable() -> None:
    assert hash(parse("a=b")) == hash(parse("a==b".replace("==", "=")))
    with pytest.raises(AttributeError):
        parse("a=b").nothing = True  # type: ignore[misc]


@pytest.mark.parametrize(
    ("fn", "value", "ok"),
    [
        (is_label_key, "example.com/MyName", True), (is_label_key, "a/b/c", False), (is_label_key, "", False),
        (is_label_key, "Example.com/x", False), (is_label_value, "", True), (is_label_value, "a_b.c-d", True),
        (is_label_value, "a\n", False), (is_dns1123_label, "my-name", True), (is_dns1123_label, "a.b", False),
        (is_dns1123_subdomain, "a.b", True), (is_dns1123_subdomain, "A", False),
        (is_dns1123_subdomain, "a" * 254, False),
    ],
)
def test_name_syntax(fn: Any, value: str, ok: bool) -> None:
    assert (fn(value) == []) is ok


def test_dns1123_label_dots_message() -> None:
    assert is_dns1123_label("a.b") == ["must not contain dots"]


_KEYS = st.sampled_from(["a", "b", "app", "tier"])
_VALUES = st.sampled_from(["", "x", "y", "1", "7"])


@st.composite
def _requirement(draw: st.DrawFn) -> Requirement:
    op = draw(st.sampled_from(["=", "==", "in", "!=", "notin", "exists", "!", "gt", "lt"]))
    key = draw(_KEYS)
    if op in ("exists", "!"):
        return Requirement.new(key, op)
    if op in ("gt", "lt"):
        return Requirement.new(key, op, [draw(st.sampled_from(["1", "5"]))])
    if op in ("in", "notin"):
        return Requirement.new(key, op, draw(st.lists(_VALUES, min_size=1, max_size=3, unique=True)))
    return Requirement.new(key, op, [draw(_VALUES)])


@given(
    reqs=st.lists(_requirement(), max_size=3),
    labels=st.none() | st.dictionaries(_KEYS, _VALUES, max_size=4),
)
def test_selector_matches_is_the_and_of_its_requirements(reqs: list[Requirement],
                                                          labels: dict[str, str] | None) -> None:
    # Equality-only selectors take a shortcut; every selector must still mean exactly its requirements.
    selector = EVERYTHING.add(*reqs)
    assert selector.matches(labels) == all(r.matches(labels or {}) for r in reqs)
