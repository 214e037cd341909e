"""Revision data and naming (update.go's getPatch/Match and snapshot naming) and the failed-pod backoff
(client-go flowcontrol.Backoff as the DaemonSet controller configures it)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller_manager.controllers.daemonset.backoff import Backoff
from controller_manager.controllers.daemonset.history import get_patch, go_json, match, revision_hash, revision_name


@pytest.mark.parametrize(("value", "encoded"), [
    pytest.param({"b": 1, "a": [True, None, "x"]}, b'{"a":[true,null,"x"],"b":1}', id="sorted compact"),
    pytest.param("<a&b>", b'"\\u003ca\\u0026b\\u003e"', id="HTML characters escaped"),
    pytest.param("line\nbreak\t\"q\"\\", b'"line\\nbreak\\t\\"q\\"\\\\"', id="short escapes"),
    pytest.param("\x01\u2028", b'"\\u0001\\u2028"', id="control characters and line separators"),
    pytest.param("h\u00e9", "\"h\u00e9\"".encode(), id="non-ASCII stays UTF-8"),
    pytest.param(1.5, b"1.5", id="float"),
    pytest.param(2.0, b"2", id="integral float"),
    pytest.param(1e21, b"1e+21", id="large float"),
    pytest.param(1.5e-7, b"1.5e-7", id="small float"),
    pytest.param(0.000001, b"0.000001", id="small float, plain"),
    pytest.param(2**60, b"1152921504606847000", id="big int as float64: shortest digits"),
    pytest.param(2**53 - 1, b"9007199254740991", id="exact int"),
    pytest.param(12345678901234567890, b"12345678901234567000", id="bigger int rounds as float64"),
])
def test_go_json(value: Any, encoded: bytes) -> None:
    assert go_json(value) == encoded


DS: dict[str, Any] = {
    "metadata": {"name": "foo", "namespace": "default"},
    "spec": {"selector": {"matchLabels": {"app": "x"}},
             "template": {"metadata": {"labels": {"app": "x"}, "creationTimestamp": None},
                          "spec": {"containers": [{"name": "c", "image": "nginx:1", "resources": {}}]}}},
}


def test_get_patch_is_the_template_replace_patch() -> None:
    assert get_patch(DS) == (b'{"spec":{"template":{"$patch":"replace","metadata":{"creationTimestamp":null,'
                             b'"labels":{"app":"x"}},"spec":{"containers":[{"image":"nginx:1","name":"c",'
                             b'"resources":{}}]}}}}')


def test_match_compares_templates_only() -> None:
    revision = {"data": {"spec": {"template": {**DS["spec"]["template"], "$patch": "replace"}}}}
    assert match(DS, revision)
    relabelled = copy.deepcopy(DS)
    relabelled["metadata"]["labels"] = {"other": "y"}
    relabelled["spec"]["minReadySeconds"] = 10
    assert match(relabelled, revision)
    changed = copy.deepcopy(DS)
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:2"
    assert not match(changed, revision)
    assert not match(DS, {"data": None})


def test_revision_hash_and_name() -> None:
    first = revision_hash(DS)
    assert first == revision_hash(copy.deepcopy(DS))
    assert revision_name(DS, first) == f"foo-{first}"
    assert set(first) <= set("bcdfghjklmnpqrstvwxz2456789")
    changed = copy.deepcopy(DS)
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:2"
    assert revision_hash(changed) != first
    collided = {**DS, "status": {"collisionCount": 1}}
    assert revision_hash(collided) != first
    assert revision_hash({**DS, "status": {"collisionCount": 2}}) not in (first, revision_hash(collided))


def test_backoff_doubles_up_to_the_cap_and_resets() -> None:
    backoff = Backoff(initial=1.0, cap=8.0)
    now = 1000.0
    assert not backoff.in_backoff_since_update("k", now)
    delays = []
    for _ in range(6):
        backoff.next("k", now)
        delays.append(backoff.get("k"))
    assert delays == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert backoff.in_backoff_since_update("k", now + 7.9)
    assert not backoff.in_backoff_since_update("k", now + 8.0)
    backoff.next("k", now + 17.0)  # quiet for more than twice the cap: start over
    assert backoff.get("k") == 1.0
    backoff.gc(now + 100.0)
    assert len(backoff) == 0
    assert backoff.get("k") == 0.0


def test_backoff_defaults_are_upstreams() -> None:
    backoff = Backoff()
    assert (backoff.initial, backoff.cap) == (1.0, 900.0)
