"""The kubelets' heartbeat schedule: per-node intervals kept exactly on one clock timer, due beats in one batch,
re-arming and disarming."""

from __future__ import annotations

from controller_manager.clock import FakeClock
from controller_manager.sim.heartbeats import HeartbeatSchedule


def schedule() -> tuple[FakeClock, HeartbeatSchedule[str, str], list[tuple[float, list[tuple[str, str]]]]]:
    clock = FakeClock()
    fired: list[tuple[float, list[tuple[str, str]]]] = []
    beats: HeartbeatSchedule[str, str] = HeartbeatSchedule(clock, lambda due: fired.append((clock.monotonic(), due)))
    return clock, beats, fired


def test_each_beat_fires_every_interval_from_arming() -> None:
    clock, beats, fired = schedule()
    beats.arm("a", [("lease", 10.0), ("status", 4.0)])
    clock.advance(3.0)
    beats.arm("b", [("lease", 10.0)])
    clock.advance(20.0)
    assert fired == [(4.0, [("a", "status")]), (8.0, [("a", "status")]), (10.0, [("a", "lease")]),
                     (12.0, [("a", "status")]), (13.0, [("b", "lease")]), (16.0, [("a", "status")]),
                     (20.0, [("a", "lease"), ("a", "status")]), (23.0, [("b", "lease")])]


def test_beats_due_together_come_in_one_batch_on_one_timer() -> None:
    clock, beats, fired = schedule()
    for i in range(1000):
        beats.arm(f"node-{i}", [("lease", 10.0)])
    assert clock.pending_timers() == 1
    clock.advance(10.0)
    assert len(fired) == 1
    assert fired[0][1] == [(f"node-{i}", "lease") for i in range(1000)]  # in the order they were armed
    assert clock.pending_timers() == 1


def test_disarm_and_rearm_drop_pending_beats() -> None:
    clock, beats, fired = schedule()
    beats.arm("a", [("lease", 10.0)])
    beats.arm("b", [("lease", 10.0)])
    clock.advance(5.0)
    beats.disarm("a")
    beats.arm("b", [("lease", 10.0)])  # b restarts: next beat 10 s from now, not 5
    clock.advance(9.0)
    assert fired == []
    clock.advance(1.0)
    assert fired == [(15.0, [("b", "lease")])]
    beats.arm("a", [("lease", 2.0)])
    clock.advance(2.0)
    assert fired[-1] == (17.0, [("a", "lease")])


def test_cancel_stops_everything() -> None:
    clock, beats, fired = schedule()
    beats.arm("a", [("lease", 1.0)])
    beats.cancel()
    clock.advance(5.0)
    assert fired == []
    assert clock.pending_timers() == 0
