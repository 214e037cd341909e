"""JSON values written as YAML the way sigs.k8s.io/yaml's JSONToYAML writes them (go-yaml v2's encoder and
its libyaml-derived emitter), which is what the real server answers to ``Accept: application/yaml``.

Guarantees (go-yaml v2's encode.go, emitterc.go and sorter.go, for the values JSON has):
- Block style, two-space indentation, a sequence inside a mapping not indented, ``{}`` and ``[]`` for empty
  collections; map keys in go-yaml's order (letters after other characters, runs of digits compared as
  numbers: ``a2`` before ``a10``).
- Numbers as go-yaml reads the server's JSON then prints them: integers as integers (beyond uint64 as a
  float), floats as ``strconv.FormatFloat(f, 'g', -1, 64)`` (``1.5``, ``1e+06``, ``1e-07``).
- A string is plain unless YAML would read it as something else (``"yes"``, ``"1"``, ``""``, ``"null"``,
  ``"1:20"``, timestamps: double-quoted) or the emitter's analysis forbids it (then single-quoted, or
  double-quoted with escapes where single quotes cannot carry it); strings with a line break are literal
  blocks (``|``, ``|-``, ``|+``, with an indentation hint when they start with a space) unless they hold
  what a block cannot (trailing spaces, tabs, non-printable characters). Lines are folded at spaces past
  column 80 as go-yaml v2 folds them; keys longer than 128 bytes or spanning lines are written ``? key``.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from controller_manager.sim.apiserver.yamlresolve import INT, STR, format_g, is_base60_float, json_float_text, resolve

__all__ = ["dump"]

_PLAIN, _SINGLE, _DOUBLE, _LITERAL = "plain", "single", "double", "literal"
_BREAKS = "\r\n\x85\u2028\u2029"
_INT64_MIN, _INT64_MAX, _UINT64_MAX = -(2**63), 2**63 - 1, 2**64 - 1
_ESCAPES = {"\0": "0", "\a": "a", "\b": "b", "\t": "t", "\n": "n", "\v": "v", "\f": "f", "\r": "r", "\x1b": "e",
            '"': '"', "\\": "\\", "\x85": "N", "\xa0": "_", "\u2028": "L", "\u2029": "P"}


def _printable(ch: str) -> bool:
    # libyaml's is_printable, read off its UTF-8 byte tests: no tab, CR, NEL, BOM or astral characters.
    c = ord(ch)
    return c == 0x0A or 0x20 <= c <= 0x7E or 0xA0 <= c <= 0xD7FF or (0xE000 <= c <= 0xFFFD and c != 0xFEFF)


def _blank(text: str, i: int) -> bool:
    return i < len(text) and text[i] in " \t"


def _blankz(text: str, i: int) -> bool:
    return i >= len(text) or text[i] in " \t\0" or text[i] in _BREAKS


_BORING = re.compile(r"[A-Za-z0-9_/()=+][A-Za-z0-9_./()=+-]*")  # no indicator, space, break or special


@functools.lru_cache(maxsize=4096)
def _analyze(text: str) -> _Analysis:
    return _Analysis(text)


class _Analysis:
    """yaml_emitter_analyze_scalar: which styles can carry a text."""

    __slots__ = ("block", "block_plain", "flow_plain", "multiline", "single")

    def __init__(self, text: str) -> None:
        if not text:
            self.multiline, self.flow_plain, self.block_plain, self.single, self.block = False, False, True, True, False
            return
        if _BORING.fullmatch(text):
            self.multiline, self.flow_plain, self.block_plain, self.single, self.block = False, True, True, True, True
            return
        block_ind = flow_ind = line_breaks = special = False
        leading_space = leading_break = trailing_space = trailing_break = break_space = space_break = False
        previous_space = previous_break = False
        if text.startswith("---") or text.startswith("..."):
            block_ind = flow_ind = True
        preceded_by_ws = True
        n = len(text)
        for i, ch in enumerate(text):
            followed_by_ws = i + 1 >= n or _blank(text, i + 1)
            if i == 0:
                if ch in "#,[]{}&*!|>'\"%@`":
                    flow_ind = block_ind = True
                elif ch in "?:":
                    flow_ind = True
                    block_ind = block_ind or followed_by_ws
                elif ch == "-" and followed_by_ws:
                    flow_ind = block_ind = True
            elif ch in ",?[]{}":
                flow_ind = True
            elif ch == ":":
                flow_ind = True
                block_ind = block_ind or followed_by_ws
            elif ch == "#" and preceded_by_ws:
                flow_ind = block_ind = True
            if not _printable(ch):
                special = True
            if ch == " ":
                leading_space = leading_space or i == 0
                trailing_space = trailing_space or i + 1 == n
                break_space = break_space or previous_break
                previous_space, previous_break = True, False
            elif ch in _BREAKS:
                line_breaks = True
                leading_break = leading_break or i == 0
                trailing_break = trailing_break or i + 1 == n
                space_break = space_break or previous_space
                previous_space, previous_break = False, True
            else:
                previous_space = previous_break = False
            preceded_by_ws = _blankz(text, i)
        self.multiline = line_breaks
        self.flow_plain = self.block_plain = self.single = self.block = True
        if leading_space or leading_break or trailing_space or trailing_break:
            self.flow_plain = self.block_plain = False
        if trailing_space:
            self.block = False
        if break_space:
            self.flow_plain = self.block_plain = self.single = False
        if space_break or special:
            self.flow_plain = self.block_plain = self.single = self.block = False
        if line_breaks:
            self.flow_plain = self.block_plain = False
        if flow_ind:
            self.flow_plain = False
        if block_ind:
            self.block_plain = False


def _go_key_less(a: str, b: str) -> bool:
    """go-yaml v2's keyList.Less for two string keys."""
    for i in range(min(len(a), len(b))):
        if a[i] == b[i]:
            continue
        a_letter, b_letter = a[i].isalpha(), b[i].isalpha()
        if a_letter and b_letter:
            return a[i] < b[i]
        if a_letter or b_letter:
            return b_letter
        an = bn = 0
        if a[i] == "0" or b[i] == "0":
            for j in range(i - 1, -1, -1):
                if not a[j].isdecimal():
                    break
                if a[j] != "0":
                    an = bn = 1
                    break
        ai, bi = i, i
        while ai < len(a) and a[ai].isdecimal():
            an = _wrap64(an * 10 + ord(a[ai]) - 48)
            ai += 1
        while bi < len(b) and b[bi].isdecimal():
            bn = _wrap64(bn * 10 + ord(b[bi]) - 48)
            bi += 1
        if an != bn:
            return an < bn
        if ai != bi:
            return ai < bi
        return a[i] < b[i]
    return len(a) < len(b)


def _wrap64(n: int) -> int:
    return (n + 2**63) % 2**64 - 2**63


def _key_cmp(a: str, b: str) -> int:
    return -1 if _go_key_less(a, b) else 1 if _go_key_less(b, a) else 0


_sort_key = functools.cmp_to_key(_key_cmp)


def _number_text(value: int | float) -> str:
    """A JSON number as go-yaml reads the server's JSON text for it and prints it back."""
    text = str(value) if isinstance(value, int) else json_float_text(value)
    tag, number = resolve("", text)
    if tag == INT:
        return str(number)
    return format_g(float(number))


class _Emitter:
    """The parts of go-yaml v2's emitter that JSON values reach (no anchors, tags or flow content)."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.column = 0
        self.indent = -1
        self.indents: list[int] = []
        self.whitespace = True
        self.indention = True
        self.simple_key_context = False
        self.mapping_context = False
        self.best_width = 80
        self.best_indent = 2

    # --- low-level writes ---------------------------------------------------------------------------

    def put(self, text: str) -> None:
        self.out.append(text)
        self.column += len(text)

    def put_break(self) -> None:
        self.out.append("\n")
        self.column = 0

    def write_break(self, ch: str) -> None:
        if ch == "\n":
            self.put_break()
        else:
            self.out.append(ch)
            self.column = 0

    def write_indent(self) -> None:
        indent = max(self.indent, 0)
        if not self.indention or self.column > indent or (self.column == indent and not self.whitespace):
            self.put_break()
        if self.column < indent:
            self.put(" " * (indent - self.column))
        self.whitespace = True
        self.indention = True

    def write_indicator(self, indicator: str, need_whitespace: bool, is_whitespace: bool, is_indention: bool) -> None:
        if need_whitespace and not self.whitespace:
            self.put(" ")
        self.put(indicator)
        self.whitespace = is_whitespace
        self.indention = self.indention and is_indention

    def increase_indent(self, flow: bool, indentless: bool) -> None:
        self.indents.append(self.indent)
        if self.indent < 0:
            self.indent = self.best_indent if flow else 0
        elif not indentless:
            self.indent += self.best_indent

    # --- nodes -------------------------------------------------------------------------------------

    def node(self, value: Any, *, mapping: bool = False, simple_key: bool = False) -> None:
        self.mapping_context = mapping
        self.simple_key_context = simple_key
        if isinstance(value, dict):
            if not value:
                self.write_indicator("{", True, True, False)
                self.write_indicator("}", False, False, False)
            else:
                self.block_mapping(value)
        elif isinstance(value, list):
            if not value:
                self.write_indicator("[", True, True, False)
                self.write_indicator("]", False, False, False)
            else:
                self.block_sequence(value)
        elif value is None:
            self.scalar("null", _PLAIN)
        elif isinstance(value, bool):
            self.scalar("true" if value else "false", _PLAIN)
        elif isinstance(value, int | float):
            self.scalar(_number_text(value), _PLAIN)
        else:
            self.scalar(*_string_style(str(value)))

    def block_sequence(self, items: list[Any]) -> None:
        self.increase_indent(False, self.mapping_context and not self.indention)
        for item in items:
            self.write_indent()
            self.write_indicator("-", True, False, True)
            self.node(item)
        self.indent = self.indents.pop()

    def block_mapping(self, mapping: dict[str, Any]) -> None:
        self.increase_indent(False, False)
        for key in sorted(mapping, key=_sort_key):
            value = mapping[key]
            self.write_indent()
            # yaml_emitter_check_simple_key: one line and at most 128 bytes, else "? key".
            if not _analyze(key).multiline and len(key.encode()) <= 128:
                self.node(key, mapping=True, simple_key=True)
                self.write_indicator(":", False, False, False)
            else:
                self.write_indicator("?", True, False, True)
                self.node(key, mapping=True)
                self.write_indent()
                self.write_indicator(":", True, False, True)
            self.node(value, mapping=True)
        self.indent = self.indents.pop()

    def scalar(self, text: str, requested: str) -> None:
        analysis = _analyze(text)
        style = requested
        if self.simple_key_context and analysis.multiline:
            style = _DOUBLE
        if style == _PLAIN:
            if not analysis.block_plain:
                style = _SINGLE
            if not text and self.simple_key_context:
                style = _SINGLE
        if style == _SINGLE and not analysis.single:
            style = _DOUBLE
        if style == _LITERAL and (not analysis.block or self.simple_key_context):
            style = _DOUBLE
        self.increase_indent(True, False)
        allow_breaks = not self.simple_key_context
        if style == _PLAIN:
            self.write_plain(text, allow_breaks)
        elif style == _SINGLE:
            self.write_single(text, allow_breaks)
        elif style == _DOUBLE:
            self.write_double(text, allow_breaks)
        else:
            self.write_literal(text)
        self.indent = self.indents.pop()

    # --- scalar writers ------------------------------------------------------------------------------

    def _fits(self, text: str, allow_breaks: bool) -> bool:
        """No space of ``text`` would be reached past the fold column: it can be written in one piece."""
        return not allow_breaks or " " not in text or self.column + text.rindex(" ") <= self.best_width

    def write_plain(self, text: str, allow_breaks: bool) -> None:
        if not self.whitespace:
            self.put(" ")
        if self._fits(text, allow_breaks):  # plain style never holds a line break
            self.put(text)
            self.whitespace = self.indention = False
            return
        spaces = breaks = False
        for i, ch in enumerate(text):
            if ch == " ":
                if allow_breaks and not spaces and self.column > self.best_width and text[i + 1: i + 2] != " ":
                    self.write_indent()
                else:
                    self.put(ch)
                spaces = True
            elif ch in _BREAKS:
                if not breaks and ch == "\n":
                    self.put_break()
                self.write_break(ch)
                self.indention = True
                breaks = True
            else:
                if breaks:
                    self.write_indent()
                self.put(ch)
                self.indention = False
                spaces = breaks = False
        self.whitespace = False
        self.indention = False

    def write_single(self, text: str, allow_breaks: bool) -> None:
        self.write_indicator("'", True, False, False)
        if "'" not in text and not any(b in text for b in _BREAKS) and self._fits(text, allow_breaks):
            self.put(text)
            self.write_indicator("'", False, False, False)
            self.whitespace = self.indention = False
            return
        spaces = breaks = False
        last = len(text) - 1
        for i, ch in enumerate(text):
            if ch == " ":
                if allow_breaks and not spaces and self.column > self.best_width and 0 < i < last \
                        and text[i + 1] != " ":
                    self.write_indent()
                else:
                    self.put(ch)
                spaces = True
            elif ch in _BREAKS:
                if not breaks and ch == "\n":
                    self.put_break()
                self.write_break(ch)
                self.indention = True
                breaks = True
            else:
                if breaks:
                    self.write_indent()
                self.put("''" if ch == "'" else ch)
                self.indention = False
                spaces = breaks = False
        self.write_indicator("'", False, False, False)
        self.whitespace = False
        self.indention = False

    def write_double(self, text: str, allow_breaks: bool) -> None:
        spaces = False
        self.write_indicator('"', True, False, False)
        bom = text.startswith("\ufeff")  # libyaml's is_bom looks at the text's start, whatever the position
        last = len(text) - 1
        for i, ch in enumerate(text):
            if not _printable(ch) or bom or ch in _BREAKS or ch in '"\\':
                code = ord(ch)
                escape = _ESCAPES.get(ch)
                if escape is None:
                    escape = f"x{code:02X}" if code <= 0xFF else f"u{code:04X}" if code <= 0xFFFF else f"U{code:08X}"
                self.put("\\" + escape)
                spaces = False
            elif ch == " ":
                if allow_breaks and not spaces and self.column > self.best_width and 0 < i < last:
                    self.write_indent()
                    if text[i + 1] == " ":
                        self.put("\\")
                else:
                    self.put(ch)
                spaces = True
            else:
                self.put(ch)
                spaces = False
        self.write_indicator('"', False, False, False)
        self.whitespace = False
        self.indention = False

    def write_literal(self, text: str) -> None:
        self.write_indicator("|", True, False, False)
        if text and (text[0] == " " or text[0] in _BREAKS):
            self.write_indicator(str(self.best_indent), False, False, False)
        if not text or text[-1] not in _BREAKS:
            self.write_indicator("-", False, False, False)
        elif len(text) == 1 or text[-2] in _BREAKS:
            self.write_indicator("+", False, False, False)
        self.put_break()
        self.indention = True
        self.whitespace = True
        breaks = True
        for ch in text:
            if ch in _BREAKS:
                self.write_break(ch)
                self.indention = True
                breaks = True
            else:
                if breaks:
                    self.write_indent()
                self.put(ch)
                self.indention = False
                breaks = False


@functools.lru_cache(maxsize=4096)
def _string_style(text: str) -> tuple[str, str]:
    """go-yaml's encoder: the style it asks the emitter for a string."""
    tag, _ = resolve("", text)
    if "\n" in text:
        return text, _LITERAL
    if tag == STR and not is_base60_float(text):
        return text, _PLAIN
    return text, _DOUBLE


def dump(value: Any) -> str:
    """``sigs.k8s.io/yaml.JSONToYAML`` of a JSON value."""
    emitter = _Emitter()
    emitter.node(value)
    emitter.indent = -1
    emitter.write_indent()  # the document end
    return "".join(emitter.out)
