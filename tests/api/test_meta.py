from __future__ import annotations

import pytest

from controller_manager.api.meta import (
    controller_ref,
    deep_copy,
    format_micro_time,
    format_time,
    key_of,
    parse_time,
    split_key,
)


@pytest.mark.parametrize(
    ("obj", "key"),
    [
        pytest.param({"metadata": {"namespace": "ns", "name": "a"}}, "ns/a", id="namespaced"),
        pytest.param({"metadata": {"name": "node-1"}}, "node-1", id="cluster-scoped"),
    ],
)
def test_key_round_trip(obj: dict[str, dict[str, str]], key: str) -> None:
    assert key_of(obj) == key
    ns, name = split_key(key)
    assert name == obj["metadata"]["name"]
    assert ns == obj["metadata"].get("namespace", "")


def test_controller_ref_picks_the_controller() -> None:
    obj = {"metadata": {"ownerReferences": [{"uid": "1"}, {"uid": "2", "controller": True}]}}
    ref = controller_ref(obj)
    assert ref is not None
    assert ref["uid"] == "2"
    assert controller_ref({"metadata": {}}) is None


def test_time_formats_round_trip() -> None:
    ts = 1_700_000_000.5
    assert format_time(ts) == "2023-11-14T22:13:20Z"
    assert parse_time(format_micro_time(ts)) == ts
    assert parse_time("garbage") is None
    assert parse_time(None) is None


def test_micro_time_is_what_strftime_gives() -> None:
    import random
    from datetime import UTC, datetime

    rng = random.Random(7)
    samples = [1_700_000_000.0, 1_700_000_000.9999995, 1_700_000_000.0000005, -0.25, 0.0, 1_799_999_999.999999]
    samples += [rng.uniform(0, 4e9) for _ in range(2000)] + [rng.randrange(0, 4 * 10**9) / 1e6 for _ in range(500)]
    for ts in samples:
        assert format_micro_time(ts) == datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"), ts


def test_deep_copy_is_equal_and_shares_nothing() -> None:
    obj = {"metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"replicas": 3, "ratio": 0.5, "on": True,
                                                                     "list": [{"k": None}], "big": 2**70}}
    copied = deep_copy(obj)
    assert copied == obj
    assert copied is not obj
    assert copied["metadata"] is not obj["metadata"]
    assert copied["spec"]["list"][0] is not obj["spec"]["list"][0]
    copied["metadata"]["labels"]["x"] = "2"
    assert obj["metadata"]["labels"]["x"] == "1"


def test_deep_copy_falls_back_for_what_json_cannot_hold() -> None:
    marker = object()
    obj = {"a": [marker]}
    copied = deep_copy(obj)
    assert copied["a"] is not obj["a"]
