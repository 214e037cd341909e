"""The decode in C (gostructs) answers only where it reads a body exactly as gojson's walk does, else declines.

Whatever it accepts must be the walk's object byte for byte (key order, ``true`` against ``1``, ``1`` against
``1.0``) with no strict-decoding report; every body the walk would report on or refuse must be declined, so
that the walk words the error. The same for normalize (unknown fields dropped, not declined). Held on
generated objects of every kind, plain and with wrong types, nulls, empties and unknown fields put in; and,
through the codec, repeated keys and bodies the walk words errors for.
"""

from __future__ import annotations

import random
import re
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller_manager.api.resources import Resource
from controller_manager.sim.apiserver import codec, errors, gojson, gostructs, schema
from tests.sim.apiserver import schema_strategies

_JUNK: list[Any] = [None, 0, 1, -1, 2**40, 2**70, 1.5, "", "x", "100m", "0.1", "1.5", "2026-01-01T00:00:00Z",
                    "2026-01-01T00:00:00+01:00", True, False, [], [None], [1, "a"], {}, {"a": None}, {"zz": 1}]
_NAMES = sorted(set(schema.kinds().values()))
_POD = Resource("", "v1", "pods", "Pod", True)


def _mutated(value: Any, rnd: random.Random, rate: float) -> Any:
    """``value`` with about ``rate`` of its values replaced by a value of another type, a null or an empty
    one, and unknown fields added (keys are never repeated: such a body never reaches the Structs)."""
    if rnd.random() < rate:
        return rnd.choice(_JUNK)
    if isinstance(value, dict):
        out = {key: _mutated(item, rnd, rate) for key, item in value.items()}
        if rnd.random() < rate:
            out[f"unknownField{rnd.randint(0, 3)}"] = rnd.choice(_JUNK)
        return out
    if isinstance(value, list):
        return [_mutated(item, rnd, rate) for item in value]
    return value


def _assert_same_as_walk(sent: dict[str, Any], struct: schema.Struct) -> bool:
    """Whether the Structs took ``sent``; when they did, the walk's reading of it must be theirs."""
    fast = gostructs.convert(sent, struct)
    if fast is None:
        return False
    walked, strict = gojson.decode(sent, struct, "v1.Kind")  # (a GoTypeError here fails the test)
    assert strict == [], (struct.name, sent)
    assert orjson.dumps(fast) == orjson.dumps(walked), (struct.name, sent)
    return True


def _assert_written_as_walk(obj: dict[str, Any], struct: schema.Struct) -> bool:
    fast = gostructs.normalized(obj, struct)
    if fast is None:
        return False
    assert orjson.dumps(fast) == orjson.dumps(gojson.normalize(obj, struct)), (struct.name, obj)
    return True


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(_NAMES).flatmap(lambda name: st.tuples(st.just(name), schema_strategies.objects(name, 4))),
       st.randoms(use_true_random=False))
def test_what_the_structs_take_they_read_as_the_walk(drawn: tuple[str, dict[str, Any]], rnd: random.Random) -> None:
    name, obj = drawn
    struct = schema.struct(name)
    body = orjson.loads(orjson.dumps(obj))  # as parsed from a request
    for sent in (body, _mutated(body, rnd, 0.02), _mutated(body, rnd, 0.1), _mutated(body, rnd, 0.3)):
        _assert_same_as_walk(sent, struct)
        _assert_written_as_walk(sent, struct)


def _outcome(body: dict[str, Any], struct: schema.Struct, old: dict[str, Any] | None,
             fast: gojson.FastDecode | None) -> tuple[str, Any]:
    try:
        obj, strict = gojson.decode(body, struct, "v1.Kind", old, fast)
    except gojson.GoTypeError as e:
        return "error", str(e)
    return "ok", (orjson.dumps(obj), strict)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(schema_strategies.struct_with_two_objects(_NAMES),
       st.randoms(use_true_random=False))
def test_the_walk_with_the_structs_inside_reads_bodies_as_without(drawn: tuple[str, dict[str, Any], dict[str, Any]],
                                                                  rnd: random.Random) -> None:
    """The decode of an update or a create: each struct value with something to read tried in C first."""
    name, obj, other = drawn
    struct = schema.struct(name)
    body = orjson.loads(orjson.dumps(obj))
    stored = gojson.normalize(orjson.loads(orjson.dumps(other)), struct)
    for sent in (body, _mutated(body, rnd, 0.02), _mutated(body, rnd, 0.1)):
        for old in (None, stored, gojson.decode(body, struct, "v1.Kind")[0]):
            assert _outcome(sent, struct, old, gostructs.convert) == _outcome(sent, struct, old, None), (name, sent)


def _pod(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-0", "labels": {"app": "web"}, "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "u-1", "controller": True}]},
            "spec": {"containers": [{"name": "app", "image": "nginx", "ports": [{"containerPort": 80}],
                                     "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}], **spec},
            "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z", "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}


def test_a_pod_as_controllers_send_it_is_read_in_c() -> None:
    pod = schema.kind("v1", "Pod")
    assert pod is not None
    assert _assert_same_as_walk(_pod(), pod)
    assert _assert_written_as_walk({**_pod(), "unknown": 1}, pod)
    assert _assert_same_as_walk(_pod(nodeName="node-1", terminationGracePeriodSeconds=0), pod)
    # A quantity's canonical text, made by the walk's own converter.
    changed = _pod()
    changed["spec"]["containers"][0]["resources"]["limits"] = {"cpu": "0.5"}
    assert _assert_same_as_walk(changed, pod)
    assert gostructs.convert(changed, pod)["spec"]["containers"][0]["resources"]["limits"] == {  # type: ignore[index]
        "cpu": "500m"}


def test_bodies_go_wrong_go_to_the_walk() -> None:
    pod = schema.kind("v1", "Pod")
    assert pod is not None
    for path, value in ((("spec", "nodeName"), ""),             # omitempty drops it
                        (("spec", "nodeName"), None),           # Go leaves the zero value
                        (("spec", "priority"), 1.0),            # not an int to Go
                        (("spec", "hostNetwork"), 1),
                        (("spec", "hostNetwork"), False),       # omitempty drops it
                        (("spec", "activeDeadlineSeconds"), 2**70),
                        (("spec", "nodeSelectorr"), {}),        # unknown field
                        (("metadata", "labels"), {"a": 1}),
                        (("status", "startTime"), "yesterday"),
                        (("status", "startTime"), "2026-01-01T01:00:00+01:00")):  # (not as Go writes a time)
        sent = _pod()
        sent[path[0]][path[1]] = value
        assert gostructs.convert(sent, pod) is None, (path, value)


def _typed(raw: bytes, validation: str = "Warn") -> codec.Decoded:
    body = codec.parse(raw, codec.JSON, keep_duplicates=validation != "Ignore", res=_POD, number_texts=True)
    return codec.typed(_POD, body, validation, parsed=True)


def test_the_codec_answers_as_before_where_the_structs_decline() -> None:
    good = orjson.dumps(_pod())
    pod = schema.kind("v1", "Pod")
    assert pod is not None
    assert _typed(good).obj == gojson.decode(orjson.loads(good), pod, "v1.Pod")[0]
    repeated = good.replace(b'"image":"nginx"', b'"image":"nginx","image":"nginx:2"')
    decoded = _typed(repeated)
    assert decoded.warnings == ['duplicate field "spec.containers[0].image"']
    assert decoded.obj["spec"]["containers"][0]["image"] == "nginx:2"
    unknown = good.replace(b'"image":"nginx"', b'"image":"nginx","imagee":"x"')
    assert _typed(unknown).warnings == ['unknown field "spec.containers[0].imagee"']
    with pytest.raises(errors.StatusError, match=re.escape('strict decoding error: unknown field '
                                                           '"spec.containers[0].imagee"')):
        _typed(unknown, "Strict")
    wrong = good.replace(b'"containerPort":80', b'"containerPort":"80"')
    with pytest.raises(errors.StatusError) as refused:
        _typed(wrong)
    assert refused.value.status["message"] == (
        'Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal string into Go struct field '
        'ContainerPort.spec.containers.ports.containerPort of type int32')
    offset = good.replace(b'"startTime":"2026-01-01T00:00:00Z"', b'"startTime":"2026-01-01T01:00:00+01:00"')
    assert _typed(offset).obj["status"]["startTime"] == "2026-01-01T00:00:00Z"
    # A quantity given as a number with an exponent reads its text (1e3, not 1k): the walk's, not the Structs'.
    exponent = good.replace(b'"cpu":"100m"', b'"cpu":1e3')
    assert _typed(exponent).obj["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "1e3"
