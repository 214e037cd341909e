"""Event handlers, stale DisruptionTarget conditions, status writes and messages of the disruption controller."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.api.meta import format_time
from controller_manager.controllers.disruption.messages import go_label_selector
from controller_manager.controllers.disruption.status import (
    DELETION_TIMEOUT,
    build_disrupted_pod_map,
    count_healthy_pods,
    set_status_condition,
)
from controller_manager.runtime.informers import Added, Deleted, Updated

from .fakes import NS, add, new_controller, new_pdb, new_pod, new_replica_set, owned_by, status_of, with_name


async def _drain(queue: Any) -> list[str]:
    keys = []
    while len(queue):
        key = await queue.get()
        queue.done(key)
        keys.append(key)
    return keys


# --- handlers ---------------------------------------------------------------------------------------------------


async def test_pod_events_enqueue_the_selecting_pdb() -> None:
    dc, _, _, recorder = new_controller()
    pdb, key = new_pdb(min_available=1)
    add(dc.pdb_informer, pdb)
    pod = new_pod("p")
    other = new_pod("other", labels={"app": "x"})
    dc._on_pod(Added(pod))
    dc._on_pod(Added(other))
    assert await _drain(dc.queue) == [key]
    dc._on_pod(Updated(pod, pod))
    assert await _drain(dc.queue) == [key]
    dc._on_pod(Deleted(pod))
    assert await _drain(dc.queue) == [key]
    assert recorder.events == []


async def test_pdb_events_enqueue_the_pdb() -> None:
    dc, _, _, _ = new_controller()
    pdb, key = new_pdb(min_available=1)
    for event in (Added(pdb), Updated(pdb, pdb), Deleted(pdb)):
        dc._on_pdb(event)
        assert await _drain(dc.queue) == [key]


@pytest.mark.parametrize(("selector", "matches"), [
    pytest.param({}, True, id="empty selector matches every pod (policy/v1)"),
    pytest.param(None, False, id="missing selector matches none"),
    pytest.param({"matchLabels": {"foo": "baz"}}, False, id="other labels"),
    pytest.param({"matchExpressions": [{"key": "foo", "operator": "illegal"}]}, False, id="invalid selector"),
])
def test_pdbs_for_pod(selector: dict[str, Any] | None, matches: bool) -> None:
    dc, _, _, _ = new_controller()
    pdb, _ = new_pdb(min_available=1)
    pdb["spec"]["selector"] = selector
    if selector is None:
        del pdb["spec"]["selector"]
    add(dc.pdb_informer, pdb)
    assert dc.pdbs_for_pod(new_pod("p")) == ([pdb] if matches else [])


async def test_multiple_pdbs_warn_and_pick_the_first_by_name() -> None:
    dc, _, _, recorder = new_controller()
    b, _ = new_pdb(min_available=1)
    a, _ = new_pdb(min_available=1, selector={})
    b, a = with_name(b, "b"), with_name(a, "a")
    add(dc.pdb_informer, b, a)
    dc._on_pod(Added(new_pod("p")))
    assert await _drain(dc.queue) == [f"{NS}/a"]
    assert recorder.events == [(f"{NS}/p", "Warning", "MultiplePodDisruptionBudgets",
                                'Pod "default"/"p" matches multiple PodDisruptionBudgets.  Chose "a" arbitrarily.')]


# --- status writes ----------------------------------------------------------------------------------------------


async def test_status_written_only_when_changed() -> None:
    dc, client, _, _ = new_controller()
    pdb, key = new_pdb(min_available=1)
    pdb["metadata"]["generation"] = 3
    rs = new_replica_set(2)
    add(dc.pdb_informer, pdb)
    add(dc.rs_informer, rs)
    add(dc.pod_informer, owned_by(new_pod("a"), rs), owned_by(new_pod("b"), rs))
    await dc.sync(key)
    assert client.writes == 1
    status = status_of(client, key)
    assert status["observedGeneration"] == 3
    assert status["conditions"][0]["observedGeneration"] == 3
    assert {k: status["conditions"][0][k] for k in ("type", "status", "reason", "message")} == {
        "type": "DisruptionAllowed", "status": "True", "reason": "SufficientPods", "message": ""}
    add(dc.pdb_informer, client.statuses[key])
    await dc.sync(key)
    assert client.writes == 1  # nothing changed, nothing written

    # A new generation must be observed, even if the counts stay.
    written = client.statuses[key]
    add(dc.pdb_informer, {**written, "metadata": {**written["metadata"], "generation": 4}})
    await dc.sync(key)
    assert client.writes == 2
    assert status_of(client, key)["observedGeneration"] == 4


async def test_missing_controller_fails_safe() -> None:
    """A pod whose ReplicaSet is not cached and is gone from the server fails the sync with upstream's message."""
    dc, client, _, recorder = new_controller()
    client.group_versions["/apis/apps/v1"] = {"resources": [
        {"name": "replicasets/scale", "group": "autoscaling", "version": "v1", "kind": "Scale"}]}
    pdb, key = new_pdb(max_unavailable=1)
    pdb["status"] = {"disruptionsAllowed": 1, "currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2,
                     "observedGeneration": 1}
    add(dc.pdb_informer, pdb)
    add(dc.pod_informer, owned_by(new_pod("orphan-ish"), new_replica_set(2)))
    await dc.sync(key)
    status = status_of(client, key)
    assert status["disruptionsAllowed"] == 0
    assert (status["currentHealthy"], status["desiredHealthy"], status["expectedPods"]) == (2, 1, 2)
    cond = status["conditions"][0]
    assert (cond["status"], cond["reason"], cond["message"], cond["observedGeneration"]) == (
        "False", "SyncFailed", 'found no controllers for pod "orphan-ish"', 1)
    assert recorder.events[-1][2:] == ("CalculateExpectedPodCountFailed",
                                       'Failed to calculate the number of expected pods: found no controllers '
                                       'for pod "orphan-ish"')


# --- stale DisruptionTarget conditions (TestStalePodDisruption) -------------------------------------------------


def _target_pod(now: float, *, status: str = "True", deleting: bool = False, reason: str | None = None,
                phase: str | None = None) -> dict[str, Any]:
    pod: dict[str, Any] = {"metadata": {"name": "foo", "namespace": NS, "resourceVersion": "7"}, "status": {}}
    if deleting:
        pod["metadata"]["deletionTimestamp"] = format_time(now)
    cond = {"type": "DisruptionTarget", "status": status, "lastTransitionTime": format_time(now)}
    if reason:
        cond["reason"] = reason
    pod["status"]["conditions"] = [cond]
    if phase:
        pod["status"]["phase"] = phase
    return pod


@pytest.mark.parametrize(("kwargs", "time_passed", "reset"), [
    pytest.param({}, 121.0, True, id="stale pod disruption"),
    pytest.param({}, 119.0, False, id="pod disruption in progress"),
    pytest.param({"deleting": True}, 121.0, False, id="pod disruption actuated"),
    pytest.param({"status": "False", "deleting": True}, 121.0, False, id="pod disruption cleared"),
    pytest.param({"reason": "TerminationByKubelet"}, 121.0, False, id="set by the kubelet"),
    pytest.param({"phase": "Failed"}, 121.0, False, id="terminal pod"),
])
async def test_stale_pod_disruption(kwargs: dict[str, Any], time_passed: float, reset: bool) -> None:
    dc, client, clock, _ = new_controller()
    pod = _target_pod(clock.now(), **kwargs)
    clock.advance(time_passed)
    add(dc.pod_informer, pod)
    dc._on_pod(Added(pod))
    for key in await _drain(dc.stale_pod_disruption_queue):
        await dc.sync_stale_pod_disruption(key)
    if not reset:
        assert client.patches == []
        return
    assert client.patches == [(NS, "foo", {
        "metadata": {"resourceVersion": "7"},
        "status": {"conditions": [{"type": "DisruptionTarget", "status": "False",
                                   "lastTransitionTime": format_time(clock.now()),
                                   "reason": None, "message": None, "lastProbeTime": None}]}}, "status")]


async def test_no_pod_disruption_condition() -> None:
    dc, client, clock, _ = new_controller()
    pod = {"metadata": {"name": "foo", "namespace": NS, "deletionTimestamp": format_time(clock.now())}}
    add(dc.pod_informer, pod)
    dc._on_pod(Added(pod))
    assert len(dc.stale_pod_disruption_queue) == 0
    assert dc.stale_pod_disruption_queue.waiting() == 0
    assert client.patches == []


async def test_disruption_in_progress_is_reset_once_stale() -> None:
    """The pod waits in the queue until its condition is two minutes old, then is reset."""
    dc, client, clock, _ = new_controller()
    pod = _target_pod(clock.now())
    clock.advance(100)
    add(dc.pod_informer, pod)
    dc._on_pod(Added(pod))
    assert dc.stale_pod_disruption_queue.waiting() == 1
    clock.advance(19)
    assert len(dc.stale_pod_disruption_queue) == 0
    clock.advance(1)
    for key in await _drain(dc.stale_pod_disruption_queue):
        await dc.sync_stale_pod_disruption(key)
    assert len(client.patches) == 1


async def test_stale_pod_disruption_of_a_deleted_pod() -> None:
    dc, client, _, _ = new_controller()
    await dc.sync_stale_pod_disruption(f"{NS}/gone")
    assert client.patches == []


# --- pure pieces ------------------------------------------------------------------------------------------------


def test_disrupted_pod_boundaries() -> None:
    """At exactly the deletion timeout the entry is kept and the pod counts as healthy again (upstream's
    Before/After asymmetry)."""
    now = 1_700_000_000.0
    pod = new_pod("p")
    pdb, _ = new_pdb(min_available=1)
    pdb["status"] = {"disruptedPods": {"p": format_time(now - DELETION_TIMEOUT)}}
    kept, expired, recheck = build_disrupted_pod_map([pod], pdb, now)
    assert kept == {"p": format_time(now - DELETION_TIMEOUT)}
    assert expired == []
    assert recheck == now
    assert count_healthy_pods([pod], kept, now) == 1
    assert count_healthy_pods([pod], kept, now - 1) == 0


def test_set_status_condition_keeps_transition_time_while_status_holds() -> None:
    first = set_status_condition([], {"type": "X", "status": "False", "reason": "A", "message": "m"}, 100.0)
    same = set_status_condition(first, {"type": "X", "status": "False", "reason": "B", "message": ""}, 200.0)
    flipped = set_status_condition(same, {"type": "X", "status": "True", "reason": "C", "message": ""}, 300.0)
    assert first[0]["lastTransitionTime"] == same[0]["lastTransitionTime"] == format_time(100.0)
    assert (same[0]["reason"], same[0]["message"]) == ("B", "")
    assert flipped[0]["lastTransitionTime"] == format_time(300.0)


@pytest.mark.parametrize(("selector", "text"), [
    pytest.param(None, "nil", id="nil"),
    pytest.param({}, "&LabelSelector{MatchLabels:map[string]string{},MatchExpressions:[]LabelSelectorRequirement{},}",
                 id="empty"),
    pytest.param({"matchLabels": {"b": "2", "a": "1"},
                  "matchExpressions": [{"key": "k", "operator": "In", "values": ["x", "y"]}]},
                 "&LabelSelector{MatchLabels:map[string]string{a: 1,b: 2,},MatchExpressions:"
                 "[]LabelSelectorRequirement{LabelSelectorRequirement{Key:k,Operator:In,Values:[x y],},},}",
                 id="labels and expressions"),
])
def test_go_label_selector(selector: dict[str, Any] | None, text: str) -> None:
    assert go_label_selector(selector) == text
