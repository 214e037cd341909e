"""Field selectors: upstream's fields/selector_test.go tables."""

from __future__ import annotations

import pytest

from controller_manager.api.fields import (
    escape_value,
    parse_field_selector,
    split_term,
    split_terms,
    unescape_value,
)
from controller_manager.api.selectors import InvalidSelector


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("a", ["a"]),
        ("a=avalue", ["a=avalue"]),
        ("a=avalue,b=bvalue", ["a=avalue", "b=bvalue"]),
        ("a=avalue,b==bvalue,c!=cvalue", ["a=avalue", "b==bvalue", "c!=cvalue"]),
        ("", []),
        ("a=a,", ["a=a", ""]),
        (",a=a", ["", "a=a"]),
        (r"k=\,,k2=v2", [r"k=\,", "k2=v2"]),
        (r"k=\\,k2=v2", [r"k=\\", "k2=v2"]),
        (r"k=\\\,,k2=v2", [r"k=\\\,", "k2=v2"]),
        (r"k=\a\b\ ".strip(), [r"k=\a\b\ ".strip()]),
        ("k=\\", ["k=\\"]),
        ("함=수,목=록", ["함=수", "목=록"]),
    ],
)
def test_split_terms(text: str, terms: list[str]) -> None:
    assert split_terms(text) == terms


@pytest.mark.parametrize(
    ("term", "want"),
    [
        ("a=value", ("a", "=", "value")),
        ("b==value", ("b", "==", "value")),
        ("c!=value", ("c", "!=", "value")),
        ("", None),
        ("a", None),
        (r"k=\,", ("k", "=", r"\,")),
        (r"k=\=", ("k", "=", r"\=")),
        ("k=\\\\\\a\\b\\=\\,\\", ("k", "=", "\\\\\\a\\b\\=\\,\\")),
        ("함=수", ("함", "=", "수")),
    ],
)
def test_split_term(term: str, want: tuple[str, str, str] | None) -> None:
    assert split_term(term) == want


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [("", ""), ("a", "a"), ("=", r"\="), (",", r"\,"), ("\\", "\\\\"), ("\\=\\,\\", "\\\\\\=\\\\\\,\\\\")],
)
def test_escape_round_trip(raw: str, escaped: str) -> None:
    assert escape_value(raw) == escaped
    assert unescape_value(escaped) == raw


@pytest.mark.parametrize("value", ["\\", "\\\\\\", "\\a"])
def test_invalid_escape_sequences(value: str) -> None:
    with pytest.raises(InvalidSelector, match="invalid escape sequence"):
        unescape_value(value)


def test_unescaped_rune_message() -> None:
    with pytest.raises(InvalidSelector, match="unescaped character in value: 61"):
        unescape_value("a=b")


@pytest.mark.parametrize("text", ["x=a,y=b,z=c", "", "x!=a,y=b", r"x=a||y\=b", r"x=a\=\=b"])
def test_parse_good_strings(text: str) -> None:
    assert str(parse_field_selector(text)) == text


@pytest.mark.parametrize("text", ["x=a||y=b", "x==a==b", "x=a,b", "x in (a)", "x in (a,b,c)", "x"])
def test_parse_bad_strings(text: str) -> None:
    with pytest.raises(InvalidSelector):
        parse_field_selector(text)


def test_deterministic_parse_and_double_equals_restrings() -> None:
    assert str(parse_field_selector("x=a,a=x")) == str(parse_field_selector("a=x,x=a"))
    assert str(parse_field_selector("a==b")) == "a=b"


FIELDS = {"foo": "bar", "baz": "blah", "complex": "=value\\,\\"}


@pytest.mark.parametrize(
    ("selector", "fields", "want"),
    [
        ("", {"x": "y"}, True),
        ("x=y", {"x": "y"}, True),
        ("x=y,z=w", {"x": "y", "z": "w"}, True),
        ("x!=y,z!=w", {"x": "z", "z": "a"}, True),
        ("notin=in", {"notin": "in"}, True),
        ("x=y", {"x": "z"}, False),
        ("x=y,z=w", {"x": "w", "z": "w"}, False),
        ("x!=y,z!=w", {"x": "z", "z": "w"}, False),
        ("foo=bar", FIELDS, True),
        ("baz=blah", FIELDS, True),
        ("foo=bar,baz=blah", FIELDS, True),
        ("foo=bar,baz=blah,complex=\\=value\\\\\\,\\\\", FIELDS, True),
        ("foo=blah", FIELDS, False),
        ("baz=bar", FIELDS, False),
        ("foo=bar,foobar=bar,baz=blah", FIELDS, False),
        ("missing=", {}, True),
        ("missing!=", {}, False),
    ],
)
def test_selector_matches(selector: str, fields: dict[str, str], want: bool) -> None:
    sel = parse_field_selector(selector)
    assert sel.matches(fields.get) is want
    assert sel.matches_set(fields) is want


def test_requires_exact_match_and_empty() -> None:
    sel = parse_field_selector("spec.nodeName=n1,status.phase!=Failed")
    assert sel.requires_exact_match("spec.nodeName") == "n1"
    assert sel.requires_exact_match("status.phase") is None
    assert not sel.is_empty()
    assert parse_field_selector("").is_empty()
    assert parse_field_selector(",").is_empty()
