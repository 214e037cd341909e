"""The compiled walk of a struct (gojson's hot path) reads every body as the plan-interpreted walk does.

Structs are walked by the interpreter until they have been walked often, then by Python compiled from their
plan; both must give the same object, the same strict-decoding reports and the same errors (text included)
for any body: generated objects of every kind, and the same with wrong types, nulls, unknown and repeated
fields put in, decoded alone, against a stored object, and normalized against both.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller_manager.sim.apiserver import gojson, schema
from tests.sim.apiserver import schema_strategies

_JUNK: list[Any] = [None, 0, 1, -1, 2**40, 2**70, 1.5, "", "x", "100m", "1.5", "2026-01-01T00:00:00Z", True, False,
                    [], [None], [1, "a"], {}, {"a": None}, {"zz": 1}]
_PLAN_CACHES: dict[bool, dict[int, Any]] = {True: {}, False: {}}


@contextmanager
def _walks(compiled: bool, plans: dict[int, Any] | None = None, after: int | None = None) -> Iterator[None]:
    """Every struct walked compiled from its first walk, or never compiled (plans kept apart per mode);
    or (``plans``, ``after``) compiled after that many walks, with plans of its own."""
    saved = gojson._PLANS, gojson._COMPILE_AFTER
    gojson._PLANS = _PLAN_CACHES[compiled] if plans is None else plans
    gojson._COMPILE_AFTER = after if after is not None else 1 if compiled else 2**62
    try:
        yield
    finally:
        gojson._PLANS, gojson._COMPILE_AFTER = saved


def _mutated(value: Any, rnd: random.Random, rate: float) -> Any:
    """``value`` with about ``rate`` of its values (at any depth) replaced by something of another type or a
    zero, unknown fields added and keys repeated."""
    if rnd.random() < rate:
        return rnd.choice(_JUNK)
    if isinstance(value, dict):
        out = {key: _mutated(item, rnd, rate) for key, item in value.items()}
        if rnd.random() < rate:
            out[f"unknownField{rnd.randint(0, 3)}"] = rnd.choice(_JUNK)
        if out and rnd.random() < rate / 2:
            return gojson._DuplicateKeys([*out.items(), (rnd.choice(list(out)), rnd.choice(_JUNK))])
        return out
    if isinstance(value, list):
        return [_mutated(item, rnd, rate) for item in value]
    return value


def _outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", orjson.dumps(call())  # the bytes: key order (Go's field order) included
    except gojson.GoTypeError as e:
        return "error", str(e)


def _both(call: Callable[[], Any]) -> tuple[tuple[str, Any], tuple[str, Any]]:
    with _walks(compiled=False):
        interpreted = _outcome(call)
    with _walks(compiled=True):
        compiled = _outcome(call)
    return interpreted, compiled


_NAMES = sorted(set(schema.kinds().values()))


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(schema_strategies.struct_with_two_objects(_NAMES),
       st.randoms(use_true_random=False))
def test_compiled_walks_read_bodies_as_the_interpreter(drawn: tuple[str, dict[str, Any], dict[str, Any]],
                                                      rnd: random.Random) -> None:
    name, body, other = drawn
    struct = schema.struct(name)
    stored = gojson.normalize(other, struct)
    decoded_body = gojson.decode(body, struct, "v1.Kind")[0]
    for sent in (body, _mutated(body, rnd, 0.02), _mutated(body, rnd, 0.1)):
        for old in (None, stored, decoded_body):  # (decoded_body: an update sending most of it back)
            interpreted, compiled = _both(lambda: gojson.decode(sent, struct, "v1.Kind", old))  # noqa: B023
            assert interpreted == compiled, (name, sent)
            interpreted, compiled = _both(
                lambda: gojson.normalize(sent, struct, old, decoded_body))  # noqa: B023
            assert interpreted == compiled, (name, sent)


def test_a_struct_is_compiled_once_walked_often() -> None:
    struct = schema.struct("io.k8s.api.core.v1.ConfigMap")
    with _walks(compiled=False, plans={}, after=3):
        plan = gojson._plan(struct)
        bodies = [{"metadata": {"name": f"c{i}"}, "data": {"k": "v"}, "bogus": 1} for i in range(4)]
        results = [gojson.decode(body, struct, "v1.ConfigMap") for body in bodies]
        assert plan.decode.__name__ == "walk"  # the compiled function, no longer the warm-up
        assert [strict for _, strict in results] == [['unknown field "bogus"']] * 4
        assert [obj["metadata"]["name"] for obj, _ in results] == ["c0", "c1", "c2", "c3"]
