"""The JSON body parser's C fast path answers exactly as the duplicate-recording parser does.

Bodies are parsed first in C (msgspec), then proved free of repeated keys by counting members in the body and
in its re-encoding; anything the count cannot vouch for goes to the recording parser. These properties
compare both on arbitrary JSON texts with repeated keys, escaped quotes and backslashes, colons in strings,
whitespace, and numbers of every form.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from controller_manager.sim.apiserver import codec, gojson

_KEYS = st.sampled_from(["a", "b", "k:", "\\u003a", "\u003a", ':"', "x\\", 'q"', "", "é", "a b", '\\"', ":"])
_STRINGS = st.one_of(_KEYS, st.text(max_size=6), st.sampled_from(['":', '\\":', "2026-01-01T00:00:00Z", "1e3"]))
_NUMBERS = st.one_of(st.integers(min_value=-(2**70), max_value=2**70),
                     st.sampled_from(["1e3", "1.500", "-0.0", "0.5", "1E-2", "12345678901234567890123", "1e400"]))


def _text(draw: st.DrawFn, depth: int) -> str:
    kind = draw(st.integers(0, 5 if depth < 3 else 2))
    if kind == 0:
        if draw(st.integers(0, 4)) == 0:
            return draw(st.sampled_from(['"\\u003a"', '"a\\u003Ab"', '"\\\\u003a"']))  # colons spelled as escapes
        return json.dumps(draw(_STRINGS), ensure_ascii=draw(st.booleans()))
    if kind == 1:
        number = draw(_NUMBERS)
        return str(number)
    if kind == 2:
        return draw(st.sampled_from(["true", "false", "null"]))
    if kind == 3:
        items = [_text(draw, depth + 1) for _ in range(draw(st.integers(0, 3)))]
        return "[" + ",".join(items) + "]"
    members = []
    for _ in range(draw(st.integers(0, 4))):
        key = json.dumps(draw(_KEYS), ensure_ascii=draw(st.booleans()))
        colon = draw(st.sampled_from([":", ": ", " :", "\n:"]))
        members.append(key + colon + _text(draw, depth + 1))
    if members and draw(st.booleans()):
        members.append(members[draw(st.integers(0, len(members) - 1))].replace(":", ":", 1))  # a repeated key
    return "{" + ",".join(members) + "}"


@st.composite
def json_bodies(draw: st.DrawFn) -> bytes:
    return _text(draw, 0).encode()


def _recording(raw: bytes, parse_float: Any = None) -> Any:
    try:
        return gojson._parse_recording_duplicates(raw, parse_float)
    except (ValueError, UnicodeDecodeError) as e:
        return type(e)


def _fast(raw: bytes, parse_float: Any = None) -> Any:
    try:
        return gojson.parse_json_strict(raw, parse_float)
    except (ValueError, UnicodeDecodeError) as e:
        return type(e)


def _same(a: Any, b: Any) -> bool:
    """Equal values of equal types all the way down (True is not 1, 1.0 is not 1), with equal duplicates."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        if getattr(a, "duplicates", None) != getattr(b, "duplicates", None):
            return False
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and a != a:
        return b != b
    if type(a) is gojson.JSONNumber:
        return a.text == b.text and float(a) == float(b)
    return bool(a == b)


@settings(max_examples=400, deadline=None)
@given(json_bodies())
def test_fast_parse_answers_as_the_recording_parser(raw: bytes) -> None:
    assert _same(_fast(raw), _recording(raw)), raw


@settings(max_examples=200, deadline=None)
@given(json_bodies())
def test_fast_parse_keeps_number_texts_as_the_recording_parser(raw: bytes) -> None:
    assert _same(_fast(raw, codec.number_text), _recording(raw, codec.number_text)), raw


def test_a_repeated_key_is_recorded_whatever_path_the_body_takes() -> None:
    for raw in (b'{"a":1,"a":2}', b'{"a":{"b":1,"b":1}}', b'{"s":"x\\":","a":1,"a":1}', b'{"a":":","a":":"}'):
        value = gojson.parse_json_strict(raw)
        assert isinstance(value, gojson._DuplicateKeys), raw


def test_bodies_without_repeats_are_plain_dicts() -> None:
    for raw in (b'{"a":":","b":"\\"","c":{"d":"\\\\"}}', b'{"image":"r:5000/a:1.2.3","t":"2026-01-01T00:00:00Z"}'):
        value = gojson.parse_json_strict(raw)
        assert type(value) is dict
        assert value == json.loads(raw)
