"""cel-go's wording of the commonest CEL syntax errors (its ANTLR lexer's and parser's messages), for expressions
cel-python's parser refuses.

cel-python's grammar says where it stopped, not what ANTLR would have said; this module re-lexes the text as
cel-go's lexer does and recognises three shapes whose cel-go report is certain:
- characters no token starts with (``$``, ``#``, a lone ``=``, ``|`` or ``&``, an unterminated string):
  ``token recognition error at: '<text>'`` (for ``=``, ``|`` and ``&``, the character after them is part of the
  failed token, as ANTLR reports it), the rest of the text parsed without them;
- a whole expression followed by more tokens that cannot continue it: ``extraneous input '<token>' expecting
  <EOF>`` when one token is left over, ``mismatched input '<token>' expecting <EOF>`` when more are;
- an expression cut short after a binary operator, ``?`` or ``:``: ``mismatched input '<EOF>' expecting {...}``
  (the tokens an operand may start with) at the end of the text.
:func:`syntax_issues` returns None for anything else (the caller keeps cel-python's position and a generic text).

:func:`optional_marks` finds the ``?`` of optional syntax (after ``.``, ``[``, ``{`` or ``,``: never the
conditional operator, which follows a whole operand); :func:`blank_marks` blanks them so cel-python's grammar,
which lacks them, parses the rest with every offset kept.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["blank_marks", "optional_marks", "syntax_issues"]

OPERAND_START = ("{'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, "
                 "BYTES, IDENTIFIER}")

_STRING = r"""[rR]?(?:'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\"|'(?:\\.|[^\\'\n\r])*'|"(?:\\.|[^\\"\n\r])*")"""
_TOKEN = re.compile("|".join((
    r"(?P<skip>[\t\n\r\f ]+|//[^\n]*)",
    rf"(?P<bytes>[bB]{_STRING})",
    rf"(?P<string>{_STRING})",
    r"(?P<number>(?:\d+\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\.\d+(?:[eE][+-]?\d+)?|0[xX][0-9a-fA-F]+[uU]?|\d+[uU]?))",
    r"(?P<ident>[_a-zA-Z][_a-zA-Z0-9]*)",
    r"(?P<operator>==|!=|<=|>=|&&|\|\||[<>!+\-*/%?:.,()\[\]{}])",
)))
_UNTERMINATED = re.compile(r"[bB]?[rR]?(?:'''|\"\"\"|'|\")")
_BINARY = frozenset({"==", "!=", "<", "<=", ">", ">=", "&&", "||", "+", "-", "*", "/", "%", "in", "?", ":"})
# Tokens after which a complete expression cannot go on: an operand's start (other than "-", "(", "[", "{" and
# ".", which extend the expression before them) or a closing bracket.
_CANNOT_CONTINUE = frozenset({"!", ")", "]", "}", ","})


@dataclass(frozen=True)
class _Token:
    start: int
    text: str
    kind: str


def _lex(text: str) -> tuple[list[_Token], list[tuple[int, str]]]:
    """cel-go's tokens of ``text`` and its lexer's errors (offset, message)."""
    tokens: list[_Token] = []
    errors: list[tuple[int, str]] = []
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is not None and match.lastgroup is not None:
            if match.lastgroup != "skip":
                tokens.append(_Token(position, match.group(), match.lastgroup))
            position = match.end()
            continue
        char = text[position]
        if char in "=|&":
            failed = text[position:position + 2]  # the partial operator and the character that ended it
        elif _UNTERMINATED.match(text, position):
            failed = text[position:]
        else:
            failed = char
        errors.append((position, f"Syntax error: token recognition error at: '{failed}'"))
        position += len(failed)
    return tokens, errors


def syntax_issues(text: str, stops_at: Callable[[str], int | None]) -> list[tuple[int, str]] | None:
    """cel-go's syntax errors for ``text`` (offset, message), when its shape is one this module knows.
    ``stops_at`` gives the offset where cel-python's parser stops on a text (None: it parses); it is called at
    most three times, whatever the text's length."""
    tokens, errors = _lex(text)
    # the text as the parser sees it: what the lexer dropped blanked out, positions kept
    kept = list(" " * len(text)) if errors else list(text)
    if errors:
        for token in tokens:
            kept[token.start:token.start + len(token.text)] = token.text
    seen = "".join(kept)
    eof = (len(text), f"Syntax error: mismatched input '<EOF>' expecting {OPERAND_START}")
    if not tokens:
        return [*errors, eof]
    stop = stops_at(seen)
    if stop is None:
        return errors or None
    last = tokens[-1]
    if last.text in _BINARY and stops_at(seen[:last.start]) is None:
        return [*errors, eof]
    # a whole expression, then a token that cannot go on with it (where cel-python stopped)
    index = next((i for i, token in enumerate(tokens) if token.start >= stop), None)
    if not index or stops_at(seen[:tokens[index].start]) is not None:
        return None
    extra = tokens[index]
    operand = extra.kind in ("ident", "number", "string", "bytes") and extra.text != "in"
    if not operand and extra.text not in _CANNOT_CONTINUE:
        return None
    how = "extraneous" if index == len(tokens) - 1 else "mismatched"
    return [*errors, (extra.start, f"Syntax error: {how} input '{extra.text}' expecting <EOF>")]


# The tokens after which a "?" is optional syntax (``x.?f``, ``x[?i]``, ``[?e]``, ``{?k: v}``), never the
# conditional operator (which follows a whole operand).
_BEFORE_OPTIONAL = frozenset({".", "[", "{", ","})


def optional_marks(text: str) -> frozenset[int]:
    """The offsets of the "?" that mark optional selections, indexes and literal entries (cel-go's optional
    syntax, which cel-python's grammar lacks: the caller blanks them out before parsing)."""
    tokens, _ = _lex(text)
    return frozenset(token.start for previous, token in itertools.pairwise(tokens)
                     if token.text == "?" and previous.text in _BEFORE_OPTIONAL)


def blank_marks(text: str, marks: frozenset[int]) -> str:
    """``text`` with the optional-syntax marks replaced by blanks (every other offset kept)."""
    if not marks:
        return text
    return "".join(" " if i in marks else char for i, char in enumerate(text))
