"""YAML bodies read and written as the real server's YAML serializer does (sigs.k8s.io/yaml over go-yaml v2).
Tables from go-yaml v2's decode_test.go, encode_test.go and limit_test.go where they apply to JSON values."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller_manager.sim.apiserver.yamlbody import YAMLError, decode, json_value_to_yaml, yaml_to_json_value
from controller_manager.sim.apiserver.yamlresolve import format_g, json_float_text

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

# --- reading --------------------------------------------------------------------------------------------

READ = [
    # go-yaml v2 decode_test.go (into interface{}), as JSON.
    ("v: hi", {"v": "hi"}), ("v: true", {"v": True}), ("v: 10", {"v": 10}), ("v: 0b10", {"v": 2}),
    ("v: 0xA", {"v": 10}), ("v: 0.1", {"v": 0.1}), ("v: .1", {"v": 0.1}), ("v: -10", {"v": -10}),
    ("v: -.1", {"v": -0.1}), ("canonical: 6.8523e+5", {"canonical": 685230}),
    ("expo: 685.230_15e+03", {"expo": 685230.15}), ("fixed: 685_230.15", {"fixed": 685230.15}),
    ("canonical: y", {"canonical": True}), ("answer: NO", {"answer": False}), ("logical: True", {"logical": True}),
    ("option: on", {"option": True}), ("canonical: 685230", {"canonical": 685230}),
    ("decimal: +685_230", {"decimal": 685230}), ("octal: 02472256", {"octal": 685230}),
    ("hexa: 0x_0A_74_AE", {"hexa": 685230}), ("bin: 0b1010_0111_0100_1010_1110", {"bin": 685230}),
    ("bin: -0b101010", {"bin": -42}),
    ("bin: -0b1000000000000000000000000000000000000000000000000000000000000000", {"bin": -(2**63)}),
    ("empty:", {"empty": None}), ("canonical: ~", {"canonical": None}), ("english: null", {"english": None}),
    ("seq: [A,B]", {"seq": ["A", "B"]}), ("seq: [A,1,C]", {"seq": ["A", 1, "C"]}),
    ("seq:\n - A\n - B", {"seq": ["A", "B"]}), ("a: {b: c}", {"a": {"b": "c"}}),
    ("a: 'null'", {"a": "null"}), ("a: \"1\"", {"a": "1"}), ("a: !!str 1", {"a": "1"}),
    ("a: !!float 1", {"a": 1}), ("a: !!binary aGVsbG8=", {"a": "hello"}),
    ("a: 1:20", {"a": "1:20"}),  # no sexagesimal numbers in go-yaml v2
    ("a: 1e3", {"a": 1000}), ("a: 08", {"a": 8}), ("a: 0o17", {"a": 15}), ("a: 1e999", {"a": "1e999"}),
    ("a: 1.5e300", {"a": 1.5e300}), ("a: 1e21", {"a": 1e21}), ("a: 18446744073709551615", {"a": 2**64 - 1}),
    ("a: 2024-01-02", {"a": "2024-01-02"}),  # timestamps stay text
    ("a: 2024-01-02T03:04:05Z", {"a": "2024-01-02T03:04:05Z"}),
    ("a: yes\nb: Off\nc: n", {"a": True, "b": False, "c": False}),
    # Keys as sigs.k8s.io/yaml writes them: ints, float32 'g', booleans.
    ("1: a\n2.5: b\n0.1: c\n1e6: d\ntrue: e\non: f", {"1": "a", "2.5": "b", "0.1": "c", "1e+06": "d",
                                                     "true": "f"}),
    ("1.1234567891: x", {"1.1234568": "x"}), (".inf: x\n-.inf: z", {".inf": "x", "-.inf": "z"}),
    ("x: 1\ny: 2\nn: 3", {"x": 1, "true": 2, "false": 3}),  # go-yaml v2 reads y and n as booleans, keys too
    # Merge keys, applied in document order as go-yaml v2 does.
    ("base: &b {x: 1, z: 2}\nobj:\n  <<: *b\n  x: 3", {"base": {"x": 1, "z": 2}, "obj": {"x": 3, "z": 2}}),
    ("base: &b {x: 1, z: 2}\nobj:\n  x: 3\n  <<: *b", {"base": {"x": 1, "z": 2}, "obj": {"x": 1, "z": 2}}),
    ("a: &a {x: 1}\nb: &b {x: 2, z: 2}\nobj:\n  <<: [*a, *b]", {"a": {"x": 1}, "b": {"x": 2, "z": 2},
                                                              "obj": {"x": 1, "z": 2}}),
    ("a: 1\na: 2", {"a": 2}),  # a repeated key: the last wins
    ("a: 1\n---\nb: 2\n", {"a": 1}), ("", None), ("# only a comment\n", None),
    ("base: &b {x: 1}\nuse: *b\n", {"base": {"x": 1}, "use": {"x": 1}}),
    ("a: &x 1\na2: &x 2\nb: *x", {"a": 1, "a2": 2, "b": 2}),  # an anchor may be redefined
]


@pytest.mark.parametrize(("text", "value"), [pytest.param(t, v, id=t[:40]) for t, v in READ])
def test_read(text: str, value: Any) -> None:
    assert yaml_to_json_value(text.encode()) == value


@pytest.mark.parametrize(("text", "message"), [
    pytest.param("a: [1, 2", "yaml: line 1: did not find expected ',' or ']'", id="unclosed-flow"),
    pytest.param("a: b: c", "yaml: mapping values are not allowed in this context", id="mapping-in-scalar"),
    pytest.param("a: 1\nb: c: d", "yaml: line 2: mapping values are not allowed in this context",
                 id="scanner-error-line"),
    pytest.param("a: *x", "yaml: unknown anchor 'x' referenced", id="unknown-anchor"),
    pytest.param("a: &a [*a]", "yaml: anchor 'a' value contains itself", id="self-alias"),
    pytest.param("a: !!int abc", "yaml: cannot decode !!str `abc` as a !!int", id="bad-tag"),
    pytest.param("a: !!binary $$$", "yaml: !!binary value contains invalid base64 data", id="bad-binary"),
    pytest.param("? [a]\n: b", 'yaml: invalid map key: []interface {}{"a"}', id="list-key"),
    pytest.param("a:\n  <<: 1", "yaml: map merge requires map or sequence of maps as the value", id="bad-merge"),
    pytest.param("a: .nan", "json: unsupported value: NaN", id="nan"),
    pytest.param("a: .inf", "json: unsupported value: +Inf", id="inf"),
    pytest.param("~: a", 'unsupported map key of type: <nil>, key: <nil>, value: "a"', id="null-key"),
    pytest.param("18446744073709551615: a", 'unsupported map key of type: uint64, key: 0xffffffffffffffff, '
                 'value: "a"', id="uint64-key"),
    pytest.param("a: \x01", "yaml: control characters are not allowed", id="control-character"),
])
def test_errors_have_go_yamls_words(text: str, message: str) -> None:
    with pytest.raises(YAMLError) as e:
        yaml_to_json_value(text.encode())
    assert str(e.value) == message


def test_a_billion_laughs_is_refused_before_it_is_expanded() -> None:
    with pytest.raises(YAMLError, match=r"^yaml: document contains excessive aliasing$"):
        yaml_to_json_value(BOMB)


def test_limits_from_go_yaml() -> None:
    # limit_test.go's cases, scaled down where the answer does not depend on the size.
    aliased = b"{a: &a [{a}" + b",{a}" * 2_000 + b"], b: &b [*a" + b",*a" * 99 + b"]}"
    with pytest.raises(YAMLError, match=r"^yaml: document contains excessive aliasing$"):
        yaml_to_json_value(aliased)
    for deep in (b"[" * 20_000, b"x: " + b"{" * 20_000, b"- " * 20_000):
        with pytest.raises(YAMLError, match=r"^yaml: exceeded max depth of 10000$"):
            yaml_to_json_value(deep)
    nested = b"[" * 900 + b"1" + b"]" * 900  # deep but allowed
    value = yaml_to_json_value(nested)
    for _ in range(899):
        value = value[0]
    assert value == [1]
    assert len(yaml_to_json_value(b"a: &a [{a}" + b",{a}" * 2_000 + b"]\nb: [*a, *a]")["b"]) == 2


def test_repeated_keys_are_strict_errors_with_their_lines() -> None:
    value, strict = decode(b"a: 1\nb:\n  c: 1\n  c: 2\na: 3\n")
    assert value == {"a": 3, "b": {"c": 2}}
    assert strict == ['yaml: unmarshal errors:\n  line 4: key "c" already set in map\n'
                      '  line 5: key "a" already set in map']
    assert decode(b"a: 1\n")[1] == []


# --- writing ----------------------------------------------------------------------------------------------

WRITE = [
    # go-yaml v2 encode_test.go (the JSON-expressible cases).
    (None, "null\n"), ({}, "{}\n"), ({"v": "hi"}, "v: hi\n"), ({"v": "true"}, 'v: "true"\n'),
    ({"v": "false"}, 'v: "false"\n'), ({"v": True}, "v: true\n"), ({"v": False}, "v: false\n"),
    ({"v": 10}, "v: 10\n"), ({"v": -10}, "v: -10\n"), ({"v": 4294967296}, "v: 4294967296\n"),
    ({"v": "10"}, 'v: "10"\n'), ({"v": 0.1}, "v: 0.1\n"), ({"v": -0.1}, "v: -0.1\n"), ({"v": None}, "v: null\n"),
    ({"v": ""}, 'v: ""\n'), ({"v": ["A", "B"]}, "v:\n- A\n- B\n"), ({"v": ["A", "B\nC"]}, "v:\n- A\n- |-\n  B\n  C\n"),
    ({"v": ["A", 1, {"B": [2, 3]}]}, "v:\n- A\n- 1\n- B:\n  - 2\n  - 3\n"), ({"a": {"b": "c"}}, "a:\n  b: c\n"),
    ({"a": "-"}, "a: '-'\n"), ({"a": "<foo>"}, "a: <foo>\n"), ({"a": "1:1"}, 'a: "1:1"\n'),
    ({"a": "\x00"}, 'a: "\\0"\n'),
    ({"a": "你好"}, "a: 你好\n"), ({"a": "2015-02-24T18:19:39Z"}, 'a: "2015-02-24T18:19:39Z"\n'),
    ({"a": "b: c"}, "a: 'b: c'\n"), ({"a": "Hello #comment"}, "a: 'Hello #comment'\n"),
    ({"a": "你好 #comment"}, "a: '你好 #comment'\n"), ({"a": 5}, "a: 5\n"), ({"a": 100.5}, "a: 100.5\n"),
    # TestLineWrapping (v2 keeps folding at 80 columns).
    ({"a": "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 1234567890 abcdefghijklmnopqrstuvwxyz "
           "ABCDEFGHIJKLMNOPQRSTUVWXYZ 1234567890 "},
     "a: 'abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 1234567890 abcdefghijklmnopqrstuvwxyz\n"
     "  ABCDEFGHIJKLMNOPQRSTUVWXYZ 1234567890 '\n"),
    # Quoting: what YAML 1.1 would read as something else, and what plain style cannot carry.
    ({"a": "yes", "b": "y", "c": "on", "d": "null", "e": "~", "f": "1.5", "g": "0x1F", "h": "1e3", "i": ".inf"},
     'a: "yes"\nb: "y"\nc: "on"\nd: "null"\ne: "~"\nf: "1.5"\ng: "0x1F"\nh: "1e3"\ni: ".inf"\n'),
    ({"n": 1, "y": 2, "no": 3}, '"n": 1\n"no": 3\n"y": 2\n'),
    ({"a": " lead", "b": "trail ", "c": "tab\there", "d": "🚀", "e": "it's", "f": "#x", "g": "a #b", "h": "a#b"},
     "a: ' lead'\nb: 'trail '\nc: \"tab\\there\"\nd: \"\\U0001F680\"\ne: it's\nf: '#x'\ng: 'a #b'\nh: a#b\n"),
    # Multi-line strings: literal blocks, with hints; double quotes where a block cannot carry them.
    ({"a": "x\ny\n"}, "a: |\n  x\n  y\n"), ({"a": "x\n\n"}, "a: |+\n  x\n\n"), ({"a": "\n"}, "a: |2+\n\n"),
    ({"a": " x\ny"}, "a: |2-\n   x\n  y\n"), ({"a": "x \ny"}, 'a: "x \\ny"\n'), ({"a": "x\n y"}, "a: |-\n  x\n   y\n"),
    ({"a": "x\ty\nz"}, 'a: "x\\ty\\nz"\n'), ({"a\nb": 1}, '? |-\n  a\n  b\n: 1\n'),
    # Keys in go-yaml's order: digit runs compared as numbers, other characters before letters.
    ({"a10": 1, "a2": 2, "a1": 3, "b": 4, "A": 5, "_x": 6, "a": 7}, "_x: 6\nA: 5\na: 7\na1: 3\na2: 2\na10: 1\nb: 4\n"),
    # Numbers as go-yaml reads the server's JSON and prints it back.
    ({"a": 1e21, "b": 1.5e-7, "c": 1234567.5, "d": 2**64 - 1, "e": 2**64, "f": 100.0, "g": -0.0},
     "a: 1e+21\nb: 1.5e-07\nc: 1.2345675e+06\nd: 18446744073709551615\ne: 1.8446744073709552e+19\nf: 100\ng: 0\n"),
    # Nesting and empties.
    ({"a": [[1, 2], {"x": 1, "y": [1]}], "b": [], "c": {}},
     "a:\n- - 1\n  - 2\n- x: 1\n  \"y\":\n  - 1\nb: []\nc: {}\n"),
    ("x" * 40 + " " + "y" * 50, "x" * 40 + " " + "y" * 50 + "\n"), ("x" * 85 + " y", "x" * 85 + "\n  y\n"),
    ({"k" * 129: 1}, "? " + "k" * 129 + "\n: 1\n"), ({"k" * 128: 1}, "k" * 128 + ": 1\n"),
    ({"a": "w " * 50}, "a: 'w w w w w w w w w w w w w w w w w w w w w w w w w w w w w w w w w w w w w w w\n"
                       "  w w w w w w w w w w w '\n"),
    ({"a": "long " * 20 + "\u00a0"},
     "a: long long long long long long long long long long long long long long long long\n"
     "  long long long long \u00a0\n"),
]


@pytest.mark.parametrize(("value", "text"), [pytest.param(v, t, id=repr(v)[:40]) for v, t in WRITE])
def test_write(value: Any, text: str) -> None:
    assert json_value_to_yaml(value).decode() == text


@pytest.mark.parametrize(("number", "text"), [
    (1.0, "1"), (0.1, "0.1"), (1e6, "1e+06"), (999999.0, "999999"), (1e-5, "1e-05"), (0.0001, "0.0001"),
    (1234567.0, "1.234567e+06"), (1e21, "1e+21"), (-2.5, "-2.5"), (float("inf"), "+Inf"), (float("nan"), "NaN"),
])
def test_format_g(number: float, text: str) -> None:
    assert format_g(number) == text


@pytest.mark.parametrize(("number", "text"), [
    (1.0, "1"), (1e6, "1000000"), (1e20, "100000000000000000000"), (1e21, "1e+21"), (1e-6, "0.000001"),
    (1e-7, "1e-7"), (1.5e-10, "1.5e-10"), (-0.0, "-0"),
])
def test_json_float_text(number: float, text: str) -> None:
    assert json_float_text(number) == text


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=30)
    | st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not math.isfinite(f) or f != int(f)),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20)


@given(json_values)
def test_written_yaml_reads_back_as_the_same_json(value: Any) -> None:
    assert yaml_to_json_value(json_value_to_yaml(value)) == value
