"""``x-kubernetes-validations`` through the HTTP API: a CRD's rules are checked when it is written (422 at the
rule's path when one does not compile), and custom resources are validated by them on create and update,
with transition rules (``oldSelf``) and upstream's field errors."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tests.sim.apiserver.conftest import Client
from tests.sim.apiserver.test_crd import CRDS, CRONTABS, crd, crontab

SPEC_PATH = "spec.validation.openAPIV3Schema.properties[spec]"


def crd_with_rules(rules: list[dict[str, Any]], *, root_rules: list[dict[str, Any]] | None = None,
                   extra_props: dict[str, Any] | None = None) -> dict[str, Any]:
    body = crd()
    schema = body["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spec = schema["properties"]["spec"]
    spec["properties"].update({
        "minReplicas": {"type": "integer"},
        # sizes bounded, as upstream's cost estimate needs them for the list and regex rules below
        "tags": {"type": "array", "maxItems": 16, "items": {"type": "string", "maxLength": 64}},
        "ratio": {"type": "number"},
        "endpoint": {"type": "string", "maxLength": 256},
        "memory": {"type": "string", "maxLength": 64},
        **(extra_props or {})})
    spec["x-kubernetes-validations"] = rules
    if root_rules is not None:
        schema["x-kubernetes-validations"] = root_rules
    return body


async def _create_crd(client: Client, body: dict[str, Any]) -> None:
    code, status = await client.post(CRDS, body)
    assert code == 201, status


def _messages(status: dict[str, Any]) -> list[str]:
    return [f'{c["field"]}: {c["message"]}' for c in status["details"]["causes"]]


async def test_rules_refuse_and_admit_on_create(client: Client) -> None:
    await _create_crd(client, crd_with_rules([
        {"rule": "self.minReplicas <= self.replicas", "message": "replicas should be at least minReplicas"},
        {"rule": "self.tags.isSorted()", "reason": "FieldValueForbidden", "fieldPath": ".tags"},
        # (not string(self.ratio) concatenated: upstream estimates a conversion's size as unbounded)
        {"rule": "self.ratio < 2", "messageExpression": "'ratio %s is too high'.format([self.ratio])"},
    ]))
    code, status = await client.post(CRONTABS, crontab("a", replicas=2, minReplicas=3, tags=["b", "a"], ratio=3))
    assert code == 422, status
    assert status["message"] == (
        'CronTab.stable.example.com "a" is invalid: [spec: Invalid value: replicas should be at least minReplicas, '
        # (a double as cel-go writes it: 3, not 3.0)
        "spec.tags: Forbidden: failed rule: self.tags.isSorted(), spec: Invalid value: ratio 3 is too high]")
    assert [c["reason"] for c in status["details"]["causes"]] == ["FieldValueInvalid", "FieldValueForbidden",
                                                                  "FieldValueInvalid"]
    assert [c["field"] for c in status["details"]["causes"]] == ["spec", "spec.tags", "spec"]
    code, body = await client.post(CRONTABS, crontab("b", replicas=3, minReplicas=3, tags=["a", "b"], ratio=1.5))
    assert code == 201, body


async def test_scalar_rule_shows_the_value_and_root_rule_the_nil_path(client: Client) -> None:
    await _create_crd(client, crd_with_rules(
        [], root_rules=[{"rule": "self.metadata.name.startsWith('ok-')", "message": "name must start with ok-"}],
        extra_props={"image": {"type": "string", "x-kubernetes-validations": [
            {"rule": "self.endsWith(':latest') == false", "message": "no latest tags"}]}}))
    code, status = await client.post(CRONTABS, crontab("bad", image="nginx:latest"))
    assert code == 422, status
    assert _messages(status) == ["<nil>: Invalid value: name must start with ok-",
                                 'spec.image: Invalid value: "nginx:latest": no latest tags']
    code, body = await client.post(CRONTABS, crontab("ok-1", image="nginx:1.27"))
    assert code == 201, body


async def test_transition_rules_use_old_self_on_update_only(client: Client) -> None:
    await _create_crd(client, crd_with_rules([
        {"rule": "self.replicas >= oldSelf.replicas", "message": "replicas may not decrease"},
        {"rule": "!oldSelf.hasValue() || self.image == oldSelf.value().image", "optionalOldSelf": True,
         "message": "image is immutable", "reason": "FieldValueForbidden", "fieldPath": ".image"},
    ]))
    code, created = await client.post(CRONTABS, crontab("a", replicas=5, image="x"))
    assert code == 201, created  # oldSelf rules do not run on create
    shrunk = copy.deepcopy(created)
    shrunk["spec"].update(replicas=4, image="y")
    code, status = await client.put(f"{CRONTABS}/a", shrunk)
    assert code == 422, status
    assert _messages(status) == ["spec: Invalid value: replicas may not decrease",
                                 "spec.image: Forbidden: image is immutable"]
    code, body = await client.patch(f"{CRONTABS}/a", {"spec": {"replicas": 7}})
    assert code == 200, body


async def test_map_lists_correlate_old_items_by_key(client: Client) -> None:
    await _create_crd(client, crd_with_rules([], extra_props={"ports": {
        "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
        "items": {"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string"}, "port": {"type": "integer"}},
            "x-kubernetes-validations": [{"rule": "self.port == oldSelf.port", "message": "port is immutable"}]}}}))
    code, created = await client.post(CRONTABS, crontab("a", ports=[{"name": "http", "port": 80}]))
    assert code == 201, created
    changed = copy.deepcopy(created)
    changed["spec"]["ports"] = [{"name": "https", "port": 443}, {"name": "http", "port": 8080}]
    code, status = await client.put(f"{CRONTABS}/a", changed)
    assert code == 422, status
    assert _messages(status) == ["spec.ports[1]: Invalid value: port is immutable"]  # "https" is new: no oldSelf


async def test_library_functions(client: Client) -> None:
    await _create_crd(client, crd_with_rules([
        {"rule": "!has(self.endpoint) || url(self.endpoint).getScheme() == 'https'", "message": "https only"},
        {"rule": "!has(self.memory) || quantity(self.memory).isLessThan(quantity('1Gi'))", "message": "too much"},
        {"rule": "!has(self.tags) || (self.tags.all(t, t.matches('^[a-z]+$')) && self.tags.indexOf('x') == -1 "
                 "&& size(self.tags.filter(t, t.startsWith('a'))) <= 1)", "message": "bad tags"},
        {"rule": "!has(self.tags) || self.tags.map(t, size(t)).sum() < 10", "message": "tags too long"},
        {"rule": "!has(self.image) || self.image.split(':').size() == 2 && self.image.lowerAscii() == self.image",
         "message": "image needs a tag"},
    ]))
    code, status = await client.post(CRONTABS, crontab(
        "a", endpoint="http://example.com:8080/x", memory="2Gi", tags=["abc", "ab", "x"], image="Nginx"))
    assert code == 422, status
    assert _messages(status) == ["spec: Invalid value: https only", "spec: Invalid value: too much",
                                 "spec: Invalid value: bad tags", "spec: Invalid value: image needs a tag"]
    code, body = await client.post(CRONTABS, crontab(
        "b", endpoint="https://example.com/x", memory="512Mi", tags=["ab", "cd"], image="nginx:1"))
    assert code == 201, body


async def test_runtime_errors_and_blocking_schema_errors(client: Client) -> None:
    await _create_crd(client, crd_with_rules([{"rule": "self.replicas / (self.minReplicas - 1) > 0"}]))
    code, status = await client.post(CRONTABS, crontab("a", replicas=2, minReplicas=1))
    assert code == 422, status
    assert _messages(status) == ['spec: Invalid value: "object": division by zero evaluating rule: '
                                 "self.replicas / (self.minReplicas - 1) > 0"]
    code, status = await client.post(CRONTABS, crontab("b", replicas="two", minReplicas=1))
    assert code == 422, status
    assert _messages(status)[-1] == ("<nil>: Invalid value: null: some validation rules were not checked because "
                                     "the object was invalid; correct the existing errors to complete validation")


@pytest.mark.parametrize(("rule", "message"), [
    ({"rule": "self.replicas >"},
     'x-kubernetes-validations[0].rule: Invalid value: {"Rule":"self.replicas >","Message":"","MessageExpression":"",'
     '"Reason":null,"FieldPath":"","OptionalOldSelf":null}: compilation failed: ERROR: <input>:1:'),
    ({"rule": "self.nope == 1"},
     "x-kubernetes-validations[0].rule: Invalid value: {\"Rule\":\"self.nope == 1\",\"Message\":\"\","
     "\"MessageExpression\":\"\",\"Reason\":null,\"FieldPath\":\"\",\"OptionalOldSelf\":null}: compilation failed: "
     "ERROR: <input>:1:5: undefined field 'nope'\n | self.nope == 1\n | ....^"),
    ({"rule": "frobnicate(self.replicas)"},
     'x-kubernetes-validations[0].rule: Invalid value: {"Rule":"frobnicate(self.replicas)","Message":"",'
     '"MessageExpression":"","Reason":null,"FieldPath":"","OptionalOldSelf":null}: compilation failed: ERROR: '
     "<input>:1:11: undeclared reference to 'frobnicate' (in container '')"),
    ({"rule": " "}, "x-kubernetes-validations[0].rule: Required value: rule is not specified"),
    ({"rule": "self.replicas > 0", "reason": "Nope"},
     'x-kubernetes-validations[0].reason: Unsupported value: "Nope": supported values: "FieldValueDuplicate", '
     '"FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"'),
    ({"rule": "self.replicas > 0", "fieldPath": ".missing"},
     'x-kubernetes-validations[0].fieldPath: Invalid value: ".missing": must be a valid path'),
    ({"rule": "self.replicas > 0", "optionalOldSelf": True},
     "x-kubernetes-validations[0].optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule"),
    ({"rule": "self.replicas > 0", "message": "two\nlines"},
     'x-kubernetes-validations[0].message: Invalid value: "two\\nlines": must not contain line breaks'),
])
async def test_bad_rules_are_refused_with_the_crd(client: Client, rule: dict[str, Any], message: str) -> None:
    code, status = await client.post(CRDS, crd_with_rules([rule]))
    assert code == 422, status
    assert status["details"]["kind"] == "CustomResourceDefinition"
    assert f"{SPEC_PATH}.{message}" in status["message"], status["message"]
    assert (await client.get(f"{CRDS}/crontabs.stable.example.com"))[0] == 404


@pytest.mark.parametrize(("rule", "where", "detail"), [
    ({"rule": "self.replicas"}, "rule", "cel expression must evaluate to a bool"),
    ({"rule": "self.replicas + 1"}, "rule", "cel expression must evaluate to a bool"),
    ({"rule": "size(self.tags)"}, "rule", "cel expression must evaluate to a bool"),
    ({"rule": "self.replicas > 1", "messageExpression": "self.replicas > 2"}, "messageExpression",
     "messageExpression must evaluate to a string"),
    ({"rule": "self.replicas > 1", "messageExpression": "'x' +"}, "messageExpression",
     "messageExpression compilation failed: ERROR: <input>:1:"),
])
async def test_rules_of_the_wrong_result_type_are_refused(client: Client, rule: dict[str, Any], where: str,
                                                          detail: str) -> None:
    code, status = await client.post(CRDS, crd_with_rules([rule]))
    assert code == 422, status
    cause = status["details"]["causes"][0]
    assert cause["field"] == f"{SPEC_PATH}.x-kubernetes-validations[0].{where}"
    assert cause["message"].startswith('Invalid value: {"Rule":"'), cause
    assert f"}}: {detail}" in cause["message"], cause


async def test_bool_results_of_any_shape_compile(client: Client) -> None:
    await _create_crd(client, crd_with_rules([
        {"rule": "self.replicas > 5 ? self.image != '' : true"},
        {"rule": "has(self.image)", "messageExpression": "'image ' + (has(self.image) ? 'set' : 'unset')"},
        {"rule": "!(self.replicas in [3, 4])"},
    ]))
    code, status = await client.post(CRONTABS, crontab("a", replicas=3))
    assert code == 422, status
    assert _messages(status) == ["spec: Invalid value: image unset",
                                 "spec: Invalid value: failed rule: !(self.replicas in [3, 4])"]


async def test_unchanged_values_are_ratcheted_on_update(client: Client) -> None:
    """A rule added after an object was written does not block updates that leave the offending value as it
    was (CRDValidationRatcheting); a changed value is checked."""
    body = crd_with_rules([], extra_props={"limits": {"type": "object", "properties": {
        "max": {"type": "integer"}}}})
    await _create_crd(client, body)
    code, created = await client.post(CRONTABS, crontab("a", replicas=2, limits={"max": 1}))
    assert code == 201, created
    _, stored_crd = await client.get(f"{CRDS}/crontabs.stable.example.com")
    spec = stored_crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["properties"]["limits"]["x-kubernetes-validations"] = [{"rule": "self.max > 5", "message": "max too low"}]
    code, updated = await client.put(f"{CRDS}/crontabs.stable.example.com", stored_crd)
    assert code == 200, updated
    code, body = await client.patch(f"{CRONTABS}/a", {"spec": {"replicas": 3}})
    assert code == 200, body  # limits unchanged: ratcheted
    code, status = await client.patch(f"{CRONTABS}/a", {"spec": {"limits": {"max": 2}}})
    assert code == 422, status
    assert _messages(status) == ["spec.limits: Invalid value: max too low"]
    code, status = await client.post(CRONTABS, crontab("b", limits={"max": 1}))
    assert code == 422, status


LIBRARY_RULES = [
    "self.ts < timestamp('2030-01-01T00:00:00Z')", "self.d > duration('1s')", "self.r > 1 && self.r == 2.0",
    "self.l.sum() == 6 && self.l.max() == 3 && self.l.min() == 1", "self.m.all(k, k.startsWith('a'))",
    "self.l.exists_one(x, x == 2)", "self.s.find('[0-9]+') == '123'", "self.s.findAll('[a-z]').size() == 3",
    "self.s.replace('a', 'b') == 'bbc123'", "'%d-%s'.format([1, 'x']) == '1-x'", "self.s.charAt(0) == 'a'",
    "self.s.substring(0, 3) == 'abc'", "self.s.split('1')[0] == 'abc'",
    "isURL('https://x.io/a') && url('https://x.io:8443/a?q=1').getPort() == '8443'",
    "quantity('1.5').asApproximateFloat() == 1.5", "isQuantity('1Gi') && !isQuantity('x')",
    "quantity('2Gi').compareTo(quantity('1Gi')) == 1", "self.l.indexOf(2) == 1 && self.l.lastIndexOf(9) == -1",
    "['a', 'b'].join('-') == 'a-b'", "self.l.isSorted()", "string(self.r) == '2'", "type(self.s) == string",
    "int('5') == 5", "self.s.lowerAscii().upperAscii() == 'ABC123'", "self.s.indexOf('c') == 2",
    "self.s.trim() == self.s", "size(self.m) == 1",
    "sets.contains(self.l, [1, 2]) && !sets.intersects(self.l, [7])", "strings.quote(self.s) == '\"abc123\"'",
    "cel.bind(n, self.l.size(), n == 3 && n > 2)", "self.l.all(i, v, v == self.l[i])",
    "self.m.transformMap(k, v, v + '!') == {'ab': 'x!'}", "self.l.transformList(i, v, i > 0, v).size() == 2",
    "!format.dns1123Label().validate(self.s).hasValue() && format.named('uuid').hasValue()",
    "format.dns1035Label().validate('1' + self.s).value().size() == 1",  # a DNS-1035 label starts with a letter
    "semver('v1.2', true).isLessThan(semver('1.10.0-rc.1')) && !isSemver('1.02.3')",
]


async def test_the_kubernetes_cel_library(client: Client) -> None:
    await _create_crd(client, crd_with_rules([{"rule": rule} for rule in LIBRARY_RULES], extra_props={
        "ts": {"type": "string", "format": "date-time"}, "d": {"type": "string", "format": "duration"},
        "r": {"type": "number"}, "l": {"type": "array", "maxItems": 3, "items": {"type": "integer"}},
        "m": {"type": "object", "maxProperties": 2, "additionalProperties": {"type": "string", "maxLength": 8}},
        "s": {"type": "string"}}))
    good = {"ts": "2024-01-01T00:00:00Z", "d": "5s", "r": 2, "l": [1, 2, 3], "m": {"ab": "x"}, "s": "abc123"}
    code, body = await client.post(CRONTABS, crontab("a", **good))
    assert code == 201, body  # every rule holds
    code, status = await client.post(CRONTABS, crontab("b", **{**good, "l": [3, 2, 1], "d": "500ms", "r": 2.5}))
    assert code == 422, status
    assert _messages(status) == [f"spec: Invalid value: failed rule: {rule}" for rule in (
        "self.d > duration('1s')", "self.r > 1 && self.r == 2.0", "self.l.isSorted()", "string(self.r) == '2'")]


def _compile_error(rule: dict[str, Any], detail: str) -> str:
    """A rule's compile error as the CRD's 422 shows it (the rule's Go form, then the detail)."""
    return f"{_go_rule(rule)}: {detail}"


def _go_rule(rule: dict[str, Any]) -> str:
    return "Invalid value: " + json.dumps({
        "Rule": rule["rule"], "Message": rule.get("message", ""),
        "MessageExpression": rule.get("messageExpression", ""), "Reason": rule.get("reason"),
        "FieldPath": rule.get("fieldPath", ""), "OptionalOldSelf": rule.get("optionalOldSelf")}, separators=(",", ":"))


# apiextensions-apiserver's compilation_test.go: rules cel-go's checker refuses, with the schema typing self
@pytest.mark.parametrize(("rule", "detail"), [
    ({"rule": "size(self.replicas) == 10"},
     "compilation failed: ERROR: <input>:1:5: found no matching overload for 'size' applied to '(int)'"),
    ({"rule": "self.ratio == 1"},
     "compilation failed: ERROR: <input>:1:12: found no matching overload for '_==_' applied to '(double, int)'"),
    ({"rule": "self.tags.all(t, t > 1)"},
     "compilation failed: ERROR: <input>:1:20: found no matching overload for '_>_' applied to '(string, int)'"),
    ({"rule": "self.minReplicas >= oldSelf.minReplicas", "optionalOldSelf": True},
     "compilation failed: ERROR: <input>:1:18: found no matching overload for '_>=_' applied to "
     "'(int, optional_type(int))'"),
    ({"rule": "self.minReplicas >= oldSelf.minReplicas.orValue('')", "optionalOldSelf": True},
     "compilation failed: ERROR: <input>:1:48: found no matching overload for 'orValue' applied to "
     "'optional_type(int).(string)'"),
    ({"rule": "self.endpoint.matches('(?=a)')"},
     "compilation failed: ERROR: <input>:1:23: invalid matches argument"),
    ({"rule": "self.?nope.hasValue()"}, "compilation failed: ERROR: <input>:1:5: undefined field 'nope'"),
    ({"rule": "[?self.minReplicas].size() == 1"},
     "compilation failed: ERROR: <input>:1:7: expected type 'optional_type(int)' but found 'int'"),
    ({"rule": "self.tags"}, "cel expression must evaluate to a bool"),
])
async def test_rules_are_type_checked_against_the_schema(client: Client, rule: dict[str, Any], detail: str) -> None:
    code, status = await client.post(CRDS, crd_with_rules([rule]))
    assert code == 422, status
    messages = _messages(status)
    assert messages[0].startswith(f"{SPEC_PATH}.x-kubernetes-validations[0].rule: {_compile_error(rule, detail)}"), \
        messages


async def test_optional_values_and_escaped_fields(client: Client) -> None:
    """Optional syntax (``.?``, ``[?]``, optional literal entries, ``optional.*``) and an optional ``oldSelf``
    evaluate as cel-go evaluates them; a property named with a CEL keyword or a dash is reached escaped."""
    await _create_crd(client, crd_with_rules([
        {"rule": "self.?limits.?max.optMap(m, m * 2).orValue(0) <= 20", "message": "max too high"},
        {"rule": "self.?tags[?0].orValue('a') == 'a'", "message": "first tag must be a"},
        {"rule": "[?self.?image, ?optional.none()].size() == (has(self.image) ? 1 : 0)"},
        {"rule": "!has(self.__namespace__) || !has(self.node__dash__name) || "
                 "self.__namespace__ != self.node__dash__name", "message": "same"},
        {"rule": "!has(self.namespace) || self.namespace == self.__namespace__"},  # a keyword, also as it is
        {"rule": "oldSelf.?replicas.orValue(0) <= self.replicas", "optionalOldSelf": True,
         "message": "replicas may not decrease"},
    ], extra_props={"limits": {"type": "object", "properties": {"max": {"type": "integer"}}},
                    "namespace": {"type": "string"}, "node-name": {"type": "string"}}))
    code, status = await client.post(CRONTABS, crontab("a", replicas=1, limits={"max": 11}, tags=["b"],
                                                       namespace="x", **{"node-name": "x"}))
    assert code == 422, status
    assert _messages(status) == ["spec: Invalid value: max too high", "spec: Invalid value: first tag must be a",
                                 "spec: Invalid value: same"]
    code, created = await client.post(CRONTABS, crontab("b", replicas=3, image="x", namespace="x"))
    assert code == 201, created  # on create the optional oldSelf is none
    code, status = await client.patch(f"{CRONTABS}/b", {"spec": {"replicas": 2}})
    assert code == 422, status
    assert _messages(status) == ["spec: Invalid value: replicas may not decrease"]


async def test_regexes_are_re2(client: Client) -> None:
    """``matches``, ``find`` and ``findAll`` run RE2 (Go's empty-match rule in ``findAll``); a pattern RE2
    refuses fails the rule at run time with Go's regexp error."""
    await _create_crd(client, crd_with_rules([
        {"rule": "self.endpoint.findAll('[0-9]*') == ['12', '3']", "message": "findAll"},  # re: '12', '', '3', ''
        {"rule": "self.endpoint.matches('^[0-9]+a[0-9]$') && self.endpoint.find('a[0-9]\\\\z') == 'a3'",
         "message": "matches"},
        {"rule": "self.memory.find(self.image) == ''"},
    ], extra_props={"image": {"type": "string", "maxLength": 64}}))
    code, status = await client.post(CRONTABS, crontab("a", endpoint="12a3", memory="x", image="(?=x)"))
    assert code == 422, status
    assert _messages(status) == [
        'spec: Invalid value: "object": Illegal regex: error parsing regexp: invalid or unsupported Perl syntax: '
        "`(?=` evaluating rule: self.memory.find(self.image) == ''"]


async def test_transition_rules_are_refused_where_old_values_do_not_correlate(client: Client) -> None:
    body = crd_with_rules([], extra_props={"items": {"type": "array", "items": {
        "type": "object", "properties": {"v": {"type": "integer"}},
        "x-kubernetes-validations": [{"rule": "self.v == oldSelf.v"}]}}})
    code, status = await client.post(CRDS, body)
    assert code == 422, status
    assert _messages(status) == [
        f'{SPEC_PATH}.properties[items].items.x-kubernetes-validations[0].rule: Invalid value: "self.v == oldSelf.v": '
        f"oldSelf cannot be used on the uncorrelatable portion of the schema within {SPEC_PATH}.properties[items]"]


async def test_ip_and_cidr_library(client: Client) -> None:
    """Kubernetes' IP and CIDR functions (Gateway API's rules use ``isIP``): Go's strict parsing (no zones, no
    IPv4-mapped IPv6, no leading zeros) and the library's error for a value that does not parse."""
    await _create_crd(client, crd_with_rules([
        {"rule": "!has(self.endpoint) || isIP(self.endpoint)", "message": "endpoint must be an IP"},
        {"rule": "!has(self.memory) || cidr('10.0.0.0/8').containsIP(self.memory)"},
        {"rule": "!has(self.image) || cidr(self.image).masked() == cidr('192.168.0.0/16') && "
                 "cidr(self.image).ip().isGlobalUnicast()", "message": "not in 192.168.0.0/16"},
    ]))
    code, status = await client.post(CRONTABS, crontab("a", endpoint="::ffff:10.0.0.1", memory="10.0.0.1%eth0",
                                                       image="192.168.3.4/16"))
    assert code == 422, status
    assert _messages(status) == [
        "spec: Invalid value: endpoint must be an IP",
        'spec: Invalid value: "object": IP address with zone value is not allowed evaluating rule: '
        "!has(self.memory) || cidr('10.0.0.0/8').containsIP(self.memory)"]
    code, body = await client.post(CRONTABS, crontab("b", endpoint="2001:db8::1", memory="10.2.3.4",
                                                     image="192.168.3.4/16"))
    assert code == 201, body
    code, status = await client.post(CRONTABS, crontab("c", endpoint="010.0.0.1", image="192.169.0.1/16"))
    assert code == 422, status
    assert _messages(status) == ["spec: Invalid value: endpoint must be an IP",
                                 "spec: Invalid value: not in 192.168.0.0/16"]


async def test_message_expressions_see_old_self_on_update(client: Client) -> None:
    await _create_crd(client, crd_with_rules([
        {"rule": "self.replicas <= 3", "messageExpression": "'replicas was %d'.format([oldSelf.replicas])"}]))
    code, created = await client.post(CRONTABS, crontab("a", replicas=2))
    assert code == 201, created
    code, status = await client.patch(f"{CRONTABS}/a", {"spec": {"replicas": 4}})
    assert code == 422, status
    assert _messages(status) == ["spec: Invalid value: replicas was 2"]


async def test_malformed_rules_are_reported_before_compile_errors(client: Client) -> None:
    """Upstream keeps a schema's malformed rules apart from its CEL errors and reports them first, whatever the
    nodes' order; a node above a malformed rule is not compiled at all."""
    code, status = await client.post(CRDS, crd_with_rules([{"rule": "self.nope == 1"}], extra_props={
        "alpha": {"type": "string", "x-kubernetes-validations": [{"rule": "self == 1"}]},
        "beta": {"type": "string", "x-kubernetes-validations": [{"rule": "self != ''", "message": "two\nlines"}]}}))
    assert code == 422, status
    assert _messages(status) == [
        f'{SPEC_PATH}.properties[beta].x-kubernetes-validations[0].message: Invalid value: "two\\nlines": must not '
        "contain line breaks",
        f"{SPEC_PATH}.properties[alpha].x-kubernetes-validations[0].rule: Invalid value: "
        '{"Rule":"self == 1","Message":"","MessageExpression":"","Reason":null,"FieldPath":"","OptionalOldSelf":null}: '
        "compilation failed: ERROR: <input>:1:6: found no matching overload for '_==_' applied to '(string, int)'\n"
        " | self == 1\n | .....^"]
