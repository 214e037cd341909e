"""ControllerExpectations and UIDTrackingControllerExpectations (ported from controller_utils_test.go)."""

from __future__ import annotations

import random

import pytest

from controller_manager.clock import FakeClock
from controller_manager.controllerutil.expectations import (
    EXPECTATIONS_TIMEOUT,
    ControllerExpectations,
    UIDTrackingControllerExpectations,
)

RC_KEY = "default/foobar"


def test_controller_expectations_lifecycle() -> None:
    # TestControllerExpectations with a 30 s TTL.
    clock = FakeClock()
    ttl = 30.0
    e = ControllerExpectations(clock, ttl=ttl)
    adds, dels = 10, 30
    e.set_expectations(RC_KEY, adds, dels)
    for _ in range(adds + 1):
        e.creation_observed(RC_KEY)
    assert not e.satisfied(RC_KEY), "deletions are still outstanding"
    for _ in range(dels + 1):
        e.deletion_observed(RC_KEY)

    # "Expectations have been surpassed"
    exp = e.get_expectations(RC_KEY)
    assert exp is not None
    assert exp.get_expectations() == (-1, -1)
    assert e.satisfied(RC_KEY)

    # "Old expectations are cleared because of ttl"
    e.set_expectations(RC_KEY, 1, 2)
    exp = e.get_expectations(RC_KEY)
    assert exp is not None
    assert exp.get_expectations() == (1, 2)
    assert not e.satisfied(RC_KEY)
    clock.advance(ttl)
    assert not e.satisfied(RC_KEY), "exactly the TTL is not past it"
    clock.advance(1)
    assert e.satisfied(RC_KEY), "expectations should have expired"


def test_default_ttl_is_five_minutes() -> None:
    clock = FakeClock()
    e = ControllerExpectations(clock)
    e.expect_creations(RC_KEY, 3)
    clock.advance(EXPECTATIONS_TIMEOUT - 1)
    assert not e.satisfied(RC_KEY)
    clock.advance(2)
    assert e.satisfied(RC_KEY)
    assert EXPECTATIONS_TIMEOUT == 300.0


def test_setting_again_restarts_the_ttl() -> None:
    clock = FakeClock()
    e = ControllerExpectations(clock, ttl=10)
    e.expect_creations(RC_KEY, 1)
    clock.advance(8)
    e.expect_creations(RC_KEY, 1)
    clock.advance(8)
    assert not e.satisfied(RC_KEY)


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        pytest.param(lambda e: None, True, id="never set"),
        pytest.param(lambda e: e.expect_creations(RC_KEY, 2), False, id="creations outstanding"),
        pytest.param(lambda e: e.expect_deletions(RC_KEY, 1), False, id="deletions outstanding"),
        pytest.param(lambda e: e.expect_creations(RC_KEY, 0), True, id="expected nothing"),
        pytest.param(lambda e: (e.expect_creations(RC_KEY, 1), e.creation_observed(RC_KEY)), True,
                     id="creation observed"),
        pytest.param(lambda e: (e.expect_deletions(RC_KEY, 1), e.deletion_observed(RC_KEY)), True,
                     id="deletion observed"),
        pytest.param(lambda e: (e.expect_creations(RC_KEY, 1), e.delete_expectations(RC_KEY)), True,
                     id="deleted expectations"),
        pytest.param(lambda e: (e.expect_creations(RC_KEY, 1), e.raise_expectations(RC_KEY, 1, 0),
                                e.creation_observed(RC_KEY)), False, id="raised then one observed"),
        pytest.param(lambda e: (e.expect_creations(RC_KEY, 3), e.lower_expectations(RC_KEY, 3, 0)), True,
                     id="lowered to zero"),
        pytest.param(lambda e: e.raise_expectations(RC_KEY, 1, 1), True, id="raise without expectations is a no-op"),
        pytest.param(lambda e: (e.expect_creations("other/rc", 1)), True, id="other keys do not matter"),
    ],
)
def test_satisfied_table(action: object, expected: bool) -> None:
    e = ControllerExpectations(FakeClock())
    action(e)  # type: ignore[operator]
    assert e.satisfied(RC_KEY) is expected


@pytest.mark.parametrize("replicas", [2, 1, 0, 5])
def test_uid_expectations(replicas: int) -> None:
    # TestUIDExpectations: each controller expects its own 5 pods deleted.
    uid_exp = UIDTrackingControllerExpectations(ControllerExpectations(FakeClock()))
    keys = [f"default/rc-{n}" for n in (2, 1, 0, 5)]
    random.Random(replicas).shuffle(keys)
    rc_key = f"default/rc-{replicas}"
    pods = {k: [f"default/pod{i}-{k}" for i in range(5)] for k in keys}
    for k in keys:
        uid_exp.expect_deletions(k, pods[k])

    assert not uid_exp.satisfied(rc_key)
    for p in pods[rc_key]:
        uid_exp.deletion_observed(rc_key, p)
    assert uid_exp.satisfied(rc_key)
    others = [k for k in keys if k != rc_key]
    assert all(not uid_exp.satisfied(k) for k in others)

    uid_exp.delete_expectations(rc_key)
    assert uid_exp.get_uids(rc_key) is None


def test_uid_expectations_count_each_pod_once() -> None:
    e = UIDTrackingControllerExpectations(ControllerExpectations(FakeClock()))
    e.expect_deletions(RC_KEY, ["default/a", "default/b"])
    e.deletion_observed(RC_KEY, "default/a")  # deletionTimestamp set
    e.deletion_observed(RC_KEY, "default/a")  # then really gone
    e.deletion_observed(RC_KEY, "default/stranger")
    assert not e.satisfied(RC_KEY)
    exp = e.get_expectations(RC_KEY)
    assert exp is not None
    assert exp.get_expectations() == (0, 1)
    assert e.get_uids(RC_KEY) == {"default/b"}
    e.deletion_observed(RC_KEY, "default/b")
    assert e.satisfied(RC_KEY)


def test_uid_expectations_delegate_creations() -> None:
    e = UIDTrackingControllerExpectations(ControllerExpectations(FakeClock()))
    e.expect_creations(RC_KEY, 2)
    e.creation_observed(RC_KEY)
    assert not e.satisfied(RC_KEY)
    e.lower_expectations(RC_KEY, 1, 0)
    assert e.satisfied(RC_KEY)
    e.set_expectations(RC_KEY, 1, 0)
    e.raise_expectations(RC_KEY, 1, 0)
    exp = e.get_expectations(RC_KEY)
    assert exp is not None
    assert exp.get_expectations() == (2, 0)
