"""The CEL type checker on its own: cel-go's checker_test.go cases that need no protobuf messages (their
expected issue texts, positions and output types), and the base environment's literal validators."""

from __future__ import annotations

import pytest

from controller_manager.sim.apiserver import cel_checker, cel_syntax
from controller_manager.sim.apiserver.crd import cel

ENV = cel_checker.Environment(
    {"x": cel_checker.parse_type("list(int)"), "m": cel_checker.parse_type("map(string, dyn)"),
     "s": cel_checker.STRING},
    {}, cel_checker.library(cel_checker.STANDARD, cel_checker.KUBERNETES))


def _check(expression: str) -> str:
    """The output type (cel-go's Type.String()) or the issues text."""
    try:
        return cel_checker.check(cel.parse_expression(expression), expression, ENV).declared()
    except cel_checker.CheckError as e:
        return cel_checker.issues_text(expression, e.issues)


@pytest.mark.parametrize(("expression", "issue"), [
    ("foo", "1:1: undeclared reference to 'foo' (in container '')"),
    ("x[1u]", "1:2: found no matching overload for '_[_]' applied to '(list(int), uint)'"),
    ("1 + y", "1:5: undeclared reference to 'y' (in container '')"),
    ("[].map(x, [].map(y, x in y && y in x))", "1:33: found no matching overload for '@in' applied to "
                                              "'(list(dyn), dyn)'"),
    ("Msg{}", "1:4: undeclared reference to 'Msg' (in container '')"),
    ("fun()", "1:4: undeclared reference to 'fun' (in container '')"),
    ("'string'.fun()", "1:13: undeclared reference to 'fun' (in container '')"),
    ("[].length", "1:3: type 'list(_var0)' does not support field selection"),
    # cel-python's true/false tokens carry no position: found in the text
    ("s == '' || true == 1", "1:17: found no matching overload for '_==_' applied to '(bool, int)'"),
    ("1 == 1.0", "1:3: found no matching overload for '_==_' applied to '(int, double)'"),
    ("x.indexOf('a') > 0", "1:10: found no matching overload for 'indexOf' applied to 'list(int).(string)'"),
    ("[1, 2].all(i, i > 0) ? 1 : 'a'", "1:22: found no matching overload for '_?_:_' applied to "
                                       "'(bool, int, string)'"),
    ("[1].exists(1, true)", "1:12: argument must be a simple name"),
    ("namespace == s.package", "1:1: reserved identifier: namespace"),
    ("cel.bind(a.b, 1, 2)", "1:11: cel.bind() variable names must be simple identifiers"),
    ("has(s.y)", "1:4: type 'string' does not support field selection"),
    ("[1, 'A'].size() > 0", "1:5: expected type 'int' but found 'string'"),
    ("duration('1x') > duration('1s')", "1:10: invalid duration argument"),
    ("timestamp('2020-13-01T00:00:00Z') == timestamp(0)", "1:11: invalid timestamp argument"),
    ("s.matches('[')", "1:11: invalid matches argument"),
    # RE2, not Python's re: no lookaround, backreferences or \\Z
    ("s.matches('(?<=a)b')", "1:11: invalid matches argument"),
    ("s.matches('(a)\\\\1')", "1:11: invalid matches argument"),
    ("s.matches('a\\\\Z')", "1:11: invalid matches argument"),
    # optional syntax
    ("s.?a", "1:2: type 'string' does not support field selection"),
    ("[?1].size() > 0", "1:3: expected type 'optional_type(int)' but found 'int'"),
    ("x[?'a']", "1:2: found no matching overload for '_[?_]' applied to '(list(int), string)'"),
    ("optional.of(1).orValue('a')", "1:23: found no matching overload for 'orValue' applied to "
                                    "'optional_type(int).(string)'"),
    ("optional.of(1).optMap(1, 2)", "1:23: optMap() variable name must be a simple identifier"),
    ("f(1, ?s)", "1:6: Syntax error: extraneous input '?' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', "
                 "'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}"),
])
def test_issues_as_cel_go_reports_them(expression: str, issue: str) -> None:
    line, column, message = issue.split(":", 2)
    assert _check(expression) == (f"ERROR: <input>:{line}:{column}:{message}\n | {expression}\n"
                                  f" | {'.' * (int(column) - 1)}^")


@pytest.mark.parametrize(("expression", "output"), [
    ("1 <= 1.0 && 1u <= 1.0 && 1.0 <= 1 && 1.0 <= 1u && 1 <= 1u && 1u <= 1", "bool"),
    ("m.a.b.c", "dyn"),
    ("[]", "list(dyn)"),
    ("{}", "map(dyn, dyn)"),
    ("x.map(i, i * 2).filter(j, j > 2)", "list(int)"),
    ("{'a': 1}.transformMap(k, v, v + 1)", "map(string, int)"),
    ("x.all(i, v, v > i)", "bool"),
    ("cel.bind(n, x.size(), n + 1)", "int"),
    ("timestamp('2020-01-01T00:00:00Z') - duration('1h30m')", "google.protobuf.Timestamp"),
    ("optional.none().orValue(1) + 1", "int"),
    ("'%s %d'.format(['a', 1])", "string"),
    ("url('https://a').getQuery()", "map(string, list(string))"),
    ("true ? m.a : 1", "dyn"),
    ("type(1) == int", "bool"),
    ("format.dns1123Label().validate(s).hasValue()", "bool"),
    ("type(duration('1s')) == google.protobuf.Duration", "bool"),
    ("s.matches('(?i)^a+$') && s.matches('\\\\pL')", "bool"),
    ("x[?0]", "optional_type(int)"),
    ("m.?a.b", "optional_type(dyn)"),
    ("optional.of(m).a", "optional_type(dyn)"),
    ("{?'a': optional.of(1), 'b': 2}", "map(string, int)"),
    ("[?optional.none(), 1]", "list(int)"),
    ("optional.ofNonZeroValue(s).or(optional.of('x')).value()", "string"),
    ("optional.of(1).optMap(x, x + 1)", "optional_type(int)"),
    ("m.?a.optFlatMap(x, optional.of(size(s)))", "optional_type(int)"),
])
def test_output_types(expression: str, output: str) -> None:
    assert _check(expression) == output


def test_issues_are_sorted_by_position_and_placed_under_wide_characters() -> None:
    expression = "'é' == 1 || y"
    assert _check(expression) == (
        "ERROR: <input>:1:5: found no matching overload for '_==_' applied to '(string, int)'\n"
        " | 'é' == 1 || y\n | .\uff0e..^\n"
        "ERROR: <input>:1:13: undeclared reference to 'y' (in container '')\n"
        " | 'é' == 1 || y\n | .\uff0e..........^")


@pytest.mark.parametrize(("expression", "issues"), [
    # cel-go's parser_test.go
    ("a | b", ["1:3: Syntax error: token recognition error at: '| '",
               "1:5: Syntax error: extraneous input 'b' expecting <EOF>"]),
    ("1 + 2\n3 +", ["2:1: Syntax error: mismatched input '3' expecting <EOF>"]),
    ("1 + $", ["1:5: Syntax error: token recognition error at: '$'",
               f"1:6: Syntax error: mismatched input '<EOF>' expecting {cel_syntax.OPERAND_START}"]),
    ("device.driver ==", [f"1:17: Syntax error: mismatched input '<EOF>' expecting {cel_syntax.OPERAND_START}"]),
    ("a b c", ["1:3: Syntax error: mismatched input 'b' expecting <EOF>"]),
    ("a)", ["1:2: Syntax error: extraneous input ')' expecting <EOF>"]),
])
def test_syntax_errors_in_cel_go_words(expression: str, issues: list[str]) -> None:
    lines = expression.split("\n")
    expected = []
    for issue in issues:
        line, column, message = issue.split(":", 2)
        expected.append(f"ERROR: <input>:{line}:{column}:{message}\n | {lines[int(line) - 1]}\n"
                        f" | {'.' * (int(column) - 1)}^")
    with pytest.raises(cel.CELCompileError) as raised:
        cel.parse_expression(expression)
    assert str(raised.value) == "\n".join(expected)


def test_expressions_past_the_parser_size_limit_are_refused() -> None:
    expression = "1 == 1" + " " * 99_995
    assert _check(expression) == ("ERROR: <input>:-1:0: expression code point size exceeds limit: size: 100001, "
                                  "limit 100000")
    assert _check(expression[:-1]) == "bool"
