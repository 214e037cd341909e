"""DRA CEL device selectors compiled at validation, through the API: DeviceClasses, ResourceClaims and
ResourceClaimTemplates answer 422 with the compile error, the type error, the length or the cost limit, as
``pkg/apis/resource/validation`` (its CEL-* table cases) and ``dynamic-resource-allocation/cel`` (compile_test.go)
have them; valid selectors are stored."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.api.resources import DEVICECLASSES
from controller_manager.sim.apiserver import ApiServer, codec
from tests.sim.apiserver.conftest import Client

DRA = "/apis/resource.k8s.io/v1"
CLAIMS = f"{DRA}/namespaces/default/resourceclaims"
EXPENSIVE = ("[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(x, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(y, [1, 2, 3, 4, 5, 6, 7, 8, "
             "9, 10].all(z, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z2, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z3, [1, 2, 3, "
             "4, 5, 6, 7, 8, 9, 10].all(z4, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z5, int('1'.find('[0-9]*')) < "
             "100)))))))")


def _selectors(*expressions: str) -> list[dict[str, Any]]:
    return [{"cel": {"expression": e}} for e in expressions]


def _claim(name: str, *expressions: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
            "spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}},
                {"name": "gpu-2", "exactly": {"deviceClassName": "gpu.example.com",
                                              "selectors": _selectors(*expressions)}}]}}}


def _device_class(name: str, *expressions: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": _selectors(*expressions)}}


def _causes(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["field"], c["message"]) for c in body["details"]["causes"]]


CLAIM_SELECTOR = "spec.devices.requests[1].exactly.selectors"


async def test_claim_compile_error_as_upstream_table(client: Client) -> None:
    """CEL-compile-errors: a good selector, then a bad one (a map indexed by a bool)."""
    status, err = await client.post(CLAIMS, _claim("bad", 'device.driver == "dra.example.com"',
                                                   "device.attributes[true].someBoolean"))
    assert status == 422, err
    assert _causes(err) == [(
        f"{CLAIM_SELECTOR}[1].cel.expression",
        'Invalid value: "device.attributes[true].someBoolean": compilation failed: ERROR: <input>:1:18: found no '
        "matching overload for '_[_]' applied to '(map(string, map(string, any)), bool)'\n"
        " | device.attributes[true].someBoolean\n"
        " | .................^")]
    assert err["message"].startswith('ResourceClaim.resource.k8s.io "bad" is invalid: ')


async def test_claim_length_and_cost_limits_as_upstream_table(client: Client) -> None:
    """CEL-length: an expression of exactly 10 KiB is fine, one byte more is too long; CEL-cost: nested
    comprehensions over the limit."""
    expression = 'device.driver == ""'
    fits = expression.replace('""', '"' + "x" * (10 * 1024 - len(expression)) + '"')
    too_long = expression.replace('""', '"' + "x" * (10 * 1024 - len(expression) + 1) + '"')
    status, err = await client.post(CLAIMS, _claim("long", fits, too_long))
    assert status == 422, err
    assert _causes(err) == [(f"{CLAIM_SELECTOR}[1].cel.expression", "Too long: may not be more than 10240 bytes")]
    status, err = await client.post(CLAIMS, _claim("costly", EXPENSIVE))
    assert status == 422, err
    assert _causes(err) == [(f"{CLAIM_SELECTOR}[0].cel.expression", "Forbidden: too complex, exceeds cost limit")]
    status, created = await client.post(CLAIMS, _claim("fits", fits))
    assert status == 201, created


@pytest.mark.parametrize(("expression", "message"), [
    ("?!", 'Invalid value: "?!": compilation failed: ERROR: <input>:1:1: Syntax error: mismatched input\n | ?!\n | ^'),
    ("device.driver ==", 'Invalid value: "device.driver ==": compilation failed: ERROR: <input>:1:17: Syntax error: '
                         "mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', "
                         "NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n | device.driver ==\n"
                         " | ................^"),
    ("1", 'Invalid value: "1": must evaluate to bool or the unknown type, not int'),
    ("device.driver", 'Invalid value: "device.driver": must evaluate to bool or the unknown type, not string'),
    ('device.capacity["dra.example.com"]', 'Invalid value: "device.capacity[\\"dra.example.com\\"]": must evaluate '
                                           "to bool or the unknown type, not map(string, kubernetes.Quantity)"),
    ("device.foo == 1", 'Invalid value: "device.foo == 1": compilation failed: ERROR: <input>:1:7: undefined field '
                        "'foo'\n | device.foo == 1\n | ......^"),
    ("dev.driver == ''", "Invalid value: \"dev.driver == ''\": compilation failed: ERROR: <input>:1:1: undeclared "
                         "reference to 'dev' (in container '')\n | dev.driver == ''\n | ^"),
    # DRAListTypeAttributes is off in 1.37: no includes() for new expressions
    ('device.attributes["dra.example.com"].attr.includes("fish")',
     'Invalid value: "device.attributes[\\"dra.example.com\\"].attr.includes(\\"fish\\")": compilation failed: '
     "ERROR: <input>:1:51: undeclared reference to 'includes' (in container '')\n"
     ' | device.attributes["dra.example.com"].attr.includes("fish")\n'
     " | ..................................................^"),
])
async def test_device_class_selector_errors(client: Client, expression: str, message: str) -> None:
    status, err = await client.post(f"{DRA}/deviceclasses", _device_class("bad", 'device.driver == "a"', expression))
    assert status == 422, err
    assert _causes(err) == [("spec.selectors[1].cel.expression", message)]


def _compile_error(expression: str, column: int, message: str) -> str:
    """The field error's text for a one-line expression cel-go refuses at ``column`` (1-based)."""
    escaped = expression.replace("\\", "\\\\").replace('"', '\\"')
    return (f'Invalid value: "{escaped}": compilation failed: ERROR: <input>:1:{column}: {message}\n'
            f" | {expression}\n | {'.' * (column - 1)}^")


# What kube-apiserver's type checker refuses (cel-go's overload resolution, with an attribute's value typed any).
TYPE_ERRORS = [
    ("device.driver == 1", 15, "found no matching overload for '_==_' applied to '(string, int)'"),
    ('device.allowMultipleAllocations == "true"', 33,
     "found no matching overload for '_==_' applied to '(bool, string)'"),
    ('device.capacity["dra.example.com"].memory > 1', 43,
     "found no matching overload for '_>_' applied to '(kubernetes.Quantity, int)'"),
    ('device.capacity["dra.example.com"].memory.isGreaterThan(semver("1.0.0"))', 56,
     "found no matching overload for 'isGreaterThan' applied to 'kubernetes.Quantity.(kubernetes.Semver)'"),
    ("device.driver.matches(1)", 22, "found no matching overload for 'matches' applied to 'string.(int)'"),
    ('device.driver + 1 == "a"', 15, "found no matching overload for '_+_' applied to '(string, int)'"),
    ("1 in device.attributes", 3,
     "found no matching overload for '@in' applied to '(int, map(string, map(string, any)))'"),
    ("!device.driver", 1, "found no matching overload for '!_' applied to '(string)'"),
    ("device.driver.x", 14, "type 'string' does not support field selection"),
    ("has(device.name)", 4, "undefined field 'name'"),
    ('device.driver == "a" && 1', 25, "expected type 'bool' but found 'int'"),
    ("device.attributes.all(domain, domain.size())", 42, "expected type 'bool' but found 'int'"),
    ('device.attributes["dra.example.com"].models.exists(m, m == "a")', 37,
     "expression of type 'any' cannot be range of a comprehension (must be list, map, or dynamic)"),
    ('device.driver in ["a", 1]', 24, "expected type 'string' but found 'int'"),
    ("device.attributes.exists(1, true)", 26, "argument must be a simple name"),
    ('device.driver.matches("[a-")', 23, "invalid matches argument"),
    ('device.driver == null', 15, "found no matching overload for '_==_' applied to '(string, null)'"),
]


@pytest.mark.parametrize(("expression", "column", "message"), TYPE_ERRORS)
async def test_selectors_that_do_not_type_check(client: Client, expression: str, column: int, message: str) -> None:
    status, err = await client.post(f"{DRA}/deviceclasses", _device_class("bad", expression))
    assert status == 422, err
    assert _causes(err) == [("spec.selectors[0].cel.expression", _compile_error(expression, column, message))]


async def test_a_type_error_on_a_later_line_is_placed_on_it(client: Client) -> None:
    expression = 'device.driver == "a" &&\n  device.attributes["x"].y > 0 &&\n  device.driver.size() == "4"'
    status, err = await client.post(CLAIMS, _claim("lines", expression))
    assert status == 422, err
    assert _causes(err) == [(f"{CLAIM_SELECTOR}[0].cel.expression", (
        'Invalid value: "device.driver == \\"a\\" &&\\n  device.attributes[\\"x\\"].y > 0 &&\\n  '
        'device.driver.size() == \\"4\\"": compilation failed: ERROR: <input>:3:24: found no matching overload '
        "for '_==_' applied to '(int, string)'\n"
        ' |   device.driver.size() == "4"\n'
        " | .......................^"))]


@pytest.mark.parametrize(("expression", "result"), [
    ("dyn(true)", "dyn"),
    ('device.attributes["dra.example.com"]', "map(string, google.protobuf.Any)"),
    ('device.attributes.map(d, d + "/")', "list(string)"),
    ("cel.bind(n, device.driver.size(), n)", "int"),
])
async def test_a_result_of_another_type_is_refused(client: Client, expression: str, result: str) -> None:
    status, err = await client.post(f"{DRA}/deviceclasses", _device_class("bad", expression))
    assert status == 422, err
    escaped = expression.replace('"', '\\"')
    assert _causes(err) == [("spec.selectors[0].cel.expression",
                             f'Invalid value: "{escaped}": must evaluate to bool or the unknown type, not {result}')]


# compile_test.go's expressions that compile (their match outcomes are the scheduler's, which kube-sim has not).
VALID = [
    "true", "false",
    '"dra.example.com" in device.attributes',
    'device.driver == "dra.example.com"',
    'device.attributes["dra.example.com"].name',
    'device.attributes["dra.example.com"]["name"]',
    'cel.bind(dra, device.attributes["dra.example.com"], dra.name)',
    'device.attributes["dra.example.com"].name > 0',
    'device.attributes["dra.example.com"].name == "fish"',
    'device.attributes["dra.example.com"].names.size() == 2',
    'device.attributes["dra.example.com"].name.isGreaterThan(semver("0.0.1"))',
    'device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))',
    '!("name" in device.capacity["dra.example.com"]) || '
    'device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))',
    'device.attributes.exists_one(x, x == "dra.example.com")',
    'device.capacity["dra.example.com"].exists_one(x, x == "memory")',
    'device.attributes["dra.example.com"].services.split("example").size() >= 2',
    'device.attributes["dra.example.com"].services.matches("[^a]?sym")',
    "device.allowMultipleAllocations == true",
    'device.attributes["dra.example.com"].name.isGreaterThan(semver("v0.0.1", true)) && isSemver("v1.0.0", true)',
    'device.attributes["no-such-domain"].noSuchAttr.isGreaterThan(quantity("0"))',
    'device.attributes["no-such-domain"]["noSuchAttr"].isGreaterThan(quantity("0"))',
    '"name" in device.capacity["dra.example.com"] && '
    'device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))',
    # an attribute's value is typed any: it compares, indexes and calls as dyn
    'device.attributes["dra.example.com"].y == 1',
    'device.attributes["dra.example.com"].y == "a" || device.attributes["dra.example.com"].y.startsWith("a")',
    'device.attributes["dra.example.com"]["y"].z.size() > quantity("1").asInteger()',
    'cel.bind(d, device.attributes["dra.example.com"], d.a ? d.b : d.c)',
    'device.attributes.exists(domain, domain.endsWith(".example.com") && device.attributes[domain].size() > 0)',
    'device.capacity["dra.example.com"].memory.compareTo(quantity("1Gi")) >= 0',
    'device.attributes.all(domain, kind, kind.size() < 32)',
    '[1, 2].map(i, i * 2).filter(j, j > 2).size() == 1 && type(device.driver) == string',
    'device.driver.split(".").size() > 1 && device.driver.lowerAscii() in ["a", "b"]',
    'isIP(device.driver) || cidr("10.0.0.0/8").containsIP("10.1.2.3") || url("https://a").getHost() == "a"',
    '\ndevice.capacity["dra.example.com"].quantity.isGreaterThan(quantity("1Ki")) &&\n'
    'device.attributes["dra.example.com"].bool &&\ndevice.attributes["dra.example.com"]["int"] > 0\n',
]


async def test_valid_selectors_are_stored_in_classes_claims_and_templates(client: Client) -> None:
    status, created = await client.post(f"{DRA}/deviceclasses", _device_class("good", *VALID))
    assert status == 201, created
    assert [s["cel"]["expression"] for s in created["spec"]["selectors"]] == VALID
    status, created = await client.post(CLAIMS, _claim("good", *VALID))
    assert status == 201, created
    claim = _claim("tpl", "device.foo")
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "tpl"},
                "spec": {"spec": claim["spec"]}}
    status, err = await client.post(f"{DRA}/namespaces/default/resourceclaimtemplates", template)
    assert status == 422, err
    assert [c[0] for c in _causes(err)] == [f"spec.spec.{CLAIM_SELECTOR.removeprefix('spec.')}[0].cel.expression"]


async def test_an_update_compiles_the_selectors_it_keeps_as_stored_ones(api: ApiServer, client: Client) -> None:
    """A class written by a server with every DRA feature (here: straight into the store) keeps its includes()
    selector through updates (the stored-expressions environment); a new one is compiled for new expressions."""
    stored = 'device.attributes["dra.example.com"].models.includes("a100")'
    obj = {**_device_class("legacy", stored), "metadata": {
        "name": "legacy", "uid": "00000000-0000-0000-0000-0000000000aa", "generation": 1,
        "creationTimestamp": "2026-01-01T00:00:00Z"}}
    api.store_prepared(DEVICECLASSES, codec.normalize(DEVICECLASSES, obj))
    status, patched = await client.patch(f"{DRA}/deviceclasses/legacy", {"metadata": {"labels": {"a": "b"}}})
    assert status == 200, patched
    status, err = await client.patch(f"{DRA}/deviceclasses/legacy", {"spec": {"selectors": _selectors(
        stored, stored.replace("a100", "h100"))}})
    assert status == 422, err
    assert [(field, "undeclared reference to 'includes'" in message) for field, message in _causes(err)] == [
        ("spec.selectors[1].cel.expression", True)]


async def test_nesting_past_cel_gos_recursion_limit_is_refused_and_long_chains_are_not(client: Client) -> None:
    """cel-go's parser stops at 250 levels of one grammar rule (nested parentheses, a chain of + or of field
    selections); a chain of && is a loop in its grammar, however long."""
    too_deep = "(" * 250 + "true" + ")" * 250
    long_sum = " + ".join(["1"] * 300) + " > 0"
    for expression in (too_deep, long_sum):
        status, err = await client.post(f"{DRA}/deviceclasses", _device_class("deep", expression))
        assert status == 422, err
        assert _causes(err) == [("spec.selectors[0].cel.expression", f'Invalid value: "{expression}": compilation '
                                 "failed: ERROR: <input>:-1:0: expression recursion limit exceeded: 250")]
    fits = "(" * 249 + "true" + ")" * 249
    long_and = " && ".join(['device.driver != "x"'] * 400)
    status, created = await client.post(f"{DRA}/deviceclasses", _device_class("deep", fits, long_and))
    assert status == 201, created
