"""The envelope's event-to-action arithmetic on known inputs: percentiles, the audit Events read, pods matched to
their creates, and triggers paired with their first answers (the ambiguous ones left out)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import cast

import orjson
from hypothesis import given
from hypothesis import strategies as st

from bench import failover, reaction
from bench.reaction import Pod, Request, Scaled
from bench.report import percentile
from controller_manager.api.meta import format_micro_time
from controller_manager.client import ApiClient

NS = "envelope-0"
DAEMON = "kube-controller-manager/v0.1.0 (linux/amd64) kubernetes/unknown"
BENCH = "bench-envelope"


@given(st.lists(st.floats(min_value=0, max_value=1e6, allow_nan=False), min_size=1, max_size=300),
       st.floats(min_value=0.01, max_value=1.0))
def test_percentile_is_the_nearest_rank(samples: list[float], q: float) -> None:
    got = percentile(samples, q)
    rank = math.ceil(q * len(samples) - 1e-9)
    assert got in samples
    assert sum(1 for x in samples if x <= got) >= rank  # at least q of them at or below it
    assert sum(1 for x in samples if x < got) < rank  # and it is the smallest such sample


def test_percentile_of_fewer_than_a_hundred_is_their_maximum_at_p99() -> None:
    assert percentile([5.0, 1.0, 3.0], 0.99) == 5.0
    assert percentile([float(i) for i in range(1, 201)], 0.99) == 198.0
    assert percentile([float(i) for i in range(1, 11)], 0.7) == 7.0  # 0.7 * 10 is 7.000000000000001


def req(verb: str, resource: str, at: float, *, name: str = "", sub: str = "", code: int = 200, ns: str = NS,
        agent: str = DAEMON, took: float = 0.001) -> Request:
    return Request(verb=verb, resource=resource, subresource=sub, namespace=ns, name=name, code=code,
                   received=at, completed=at + took, agent=agent)


def test_audit_events_are_read_in_log_order_and_non_resource_requests_skipped(tmp_path: Path) -> None:
    def event(received: float, completed: float, **extra: object) -> bytes:
        return orjson.dumps({"kind": "Event", "apiVersion": "audit.k8s.io/v1", "verb": "update",
                             "requestReceivedTimestamp": format_micro_time(received),
                             "stageTimestamp": format_micro_time(completed), "userAgent": DAEMON,
                             "responseStatus": {"metadata": {}, "code": 200}, **extra}) + b"\n"

    log = tmp_path / "audit.log"
    ref = {"resource": "deployments", "namespace": NS, "name": "d30-0", "apiGroup": "apps", "apiVersion": "v1",
           "subresource": "scale"}
    log.write_bytes(event(1.0, 1.5) + event(2.0, 2.1) + event(1.7, 1.8, objectRef=ref) + b'{"cut sh')
    got = reaction.read_audit(log)
    assert got == [Request("update", "deployments", "scale", NS, "d30-0", 200, 1.7, 1.8, DAEMON)]
    assert got[0].by_daemon
    assert reaction.read_audit(log, offset=reaction.log_end(log)) == []


def test_pod_creates_are_matched_to_the_watch_in_order_until_they_disagree() -> None:
    creates = [req("create", "pods", t, code=201, ns=ns) for t, ns in ((10.1, NS), (10.2, "other"), (10.3, NS))]
    before = req("create", "pods", 9.0, code=201)  # before the watch began: not one of its pods
    refused = req("create", "pods", 10.15, code=403)
    bench = req("create", "pods", 10.16, code=201, agent=BENCH)
    requests = [before, creates[0], refused, bench, creates[1], creates[2]]
    pods = [Pod(NS, "a-1", "ReplicaSet", "a", 10.0), Pod("other", "b-1", "Job", "b", 10.0),
            Pod(NS, "a-2", "ReplicaSet", "a", 10.0)]
    assert reaction.attribute(requests, pods, since=9.5) == (list(zip(creates, pods, strict=True)), math.inf)
    # A namespace that disagrees stops attribution there: the rest are not guessed.
    swapped = [pods[1], pods[0], pods[2]]
    assert reaction.attribute(requests, swapped, since=9.5) == ([], creates[0].completed)
    # So does a creationTimestamp from another second.
    late = [pods[0], Pod("other", "b-1", "Job", "b", 14.0), pods[2]]
    assert reaction.attribute(requests, late, since=9.5) == ([(creates[0], pods[0])], creates[1].completed)
    # The watch saw fewer: attribution ends where it does.
    assert reaction.attribute(requests, pods[:1], since=9.5) == ([(creates[0], pods[0])], creates[1].completed)


def _pair(triggers: list[float], actions: list[float], until: float = math.inf) -> reaction.Paired[int]:
    answers = sorted((req("update", "replicasets", a) for a in actions), key=lambda r: r.received)
    return reaction.pair([(t, i) for i, t in enumerate(triggers)],
                         lambda at, _i: reaction.first_after(answers, at), until=until)


def test_a_trigger_is_paired_with_the_first_action_after_it() -> None:
    got = _pair([1.0, 5.0], [0.5, 1.2, 1.3, 5.25])
    assert [(at, i, a.received) for at, i, a in got.sampled] == [(1.0, 0, 1.2), (5.0, 1, 5.25)]
    assert got.left_out == got.unanswered == []


def _bounds(got: reaction.Paired[int]) -> list[tuple[int, float]]:
    return [(i, round(bound, 6)) for i, bound in got.unanswered]


def test_unanswered_triggers_get_a_lower_bound_and_ambiguous_ones_are_left_out() -> None:
    # No answer before the next trigger: at least that long. The answer after the second may be either's.
    got = _pair([1.0, 1.1], [1.2])
    assert (_bounds(got), got.left_out, got.sampled) == ([(0, 0.1)], [1], [])
    # Once a trigger is answered before the next commits, the next is clear again.
    got = _pair([1.0, 1.1, 3.0], [1.2, 1.4, 3.1])
    assert (_bounds(got), got.left_out) == ([(0, 0.1)], [1])
    assert [i for _at, i, _a in got.sampled] == [2]
    # No answer at all: at least until the end of what was seen.
    assert _bounds(reaction.pair([(1.0, 0), (2.0, 1)], lambda _at, _i: None, horizon=5.0)) == [(0, 1.0), (1, 3.0)]
    # An answer past the end of attribution is no answer.
    got = _pair([1.0, 3.0], [1.5, 3.5], until=3.2)
    assert [i for _at, i, _a in got.sampled] == [0]
    assert _bounds(got) == [(1, 0.2)]
    # A trigger its object was not settled for is left out, whatever follows it.
    got = reaction.pair([(1.0, 0), (2.0, 1)], lambda at, _i: req("update", "replicasets", at + 0.1),
                        settled=lambda _at, i: i != 0)
    assert got.left_out == [0]
    assert [i for _at, i, _a in got.sampled] == [1]


def test_percentiles_count_unanswered_triggers_at_their_lower_bound() -> None:
    samples = reaction.Samples(seconds=[0.01] * 98, unanswered=[10.0, 12.0], left_out=3)
    got = samples.summary()
    assert (got["count"], got["unanswered"], got["left_out"]) == (98, 2, 3)
    assert got["p99_ms"] == 10_000.0  # the 99th of 100: a controller that never answered is not fast
    assert got["max_ms"] == 12_000.0
    assert got["answered_p99_ms"] == got["answered_p50_ms"] == got["p50_ms"] == 10.0


@given(st.lists(st.integers(0, 200), max_size=12, unique=True), st.lists(st.integers(0, 200), max_size=12))
def test_pairing_never_crosses_another_trigger(trigger_ms: list[int], action_ms: list[int]) -> None:
    triggers = sorted(t / 100 for t in trigger_ms)
    actions = sorted(a / 100 + 0.005 for a in action_ms)  # never at a trigger's very instant
    got = _pair(triggers, actions)
    placed = sorted([i for _at, i, _a in got.sampled] + got.left_out + [i for i, _b in got.unanswered])
    assert placed == list(range(len(triggers)))  # every trigger is in exactly one list
    for i, bound in got.unanswered:  # nothing answered it for that long
        assert not any(triggers[i] < a < triggers[i] + bound for a in actions)
    for at, _i, action in got.sampled:
        assert action.received == min(a for a in actions if a > at)  # its first answer
        assert not any(at < t < action.received for t in triggers)  # no other trigger in between
        earlier = [t for t in triggers if t < at]
        if earlier:  # the trigger before it was answered before it
            assert any(max(earlier) < a < at for a in actions)


def _scale_up_and_down_run() -> tuple[list[Request], list[Scaled], list[str], list[Pod]]:
    """d30-0 (30 replicas, ReplicaSet d30-0-abc) scaled to 32 at t=1 and back to 30 at t=2; Job churn-1 created at
    t=3; d5-0 (ReplicaSet d5-0-xyz) scaled to 7 at t=4 and again to 9 at t=4.2, before its first pods were all
    made (so that second scale is left out), then its pods."""
    rs, rs5 = "d30-0-abc", "d5-0-xyz"
    scale = {"sub": "scale", "agent": BENCH}
    requests = [
        req("list", "pods", 0.5, ns="", agent=BENCH),
        req("update", "deployments", 1.0, name="d30-0", **scale),
        req("update", "replicasets", 1.05, name=rs, sub="status"),  # a status write is no answer
        req("update", "replicasets", 1.06, name=rs),
        req("create", "pods", 1.10, code=201), req("create", "pods", 1.12, code=201),
        req("update", "deployments", 2.0, name="d30-0", **scale),
        req("update", "replicasets", 2.03, name=rs),
        req("delete", "pods", 2.08, name=f"{rs}-aaaaa"), req("delete", "pods", 2.09, name=f"{rs}-bbbbb"),
        req("delete", "pods", 2.10, name=f"{rs}-aaaaa"),  # sent again: counts once
        req("create", "jobs", 3.0, ns="envelope-system", code=201, agent=BENCH),
        req("create", "pods", 3.07, ns="envelope-system", code=201),
        req("update", "deployments", 4.0, name="d5-0", **scale),
        req("update", "replicasets", 4.02, name=rs5),
        req("create", "pods", 4.05, code=201),
        req("update", "deployments", 4.2, name="d5-0", **scale),
        req("update", "replicasets", 4.3, name=rs5),
        req("create", "pods", 4.35, code=201), req("create", "pods", 4.36, code=201),
        req("create", "pods", 4.37, code=201),
    ]
    scaled = [Scaled(NS, "d30-0", 30, 32), Scaled(NS, "d30-0", 32, 30), Scaled(NS, "d5-0", 5, 7),
              Scaled(NS, "d5-0", 7, 9)]
    pods = [Pod(NS, f"{rs}-aaaaa", "ReplicaSet", rs), Pod(NS, f"{rs}-bbbbb", "ReplicaSet", rs),
            Pod("envelope-system", "churn-1-q", "Job", "churn-1")] + \
        [Pod(NS, f"{rs5}-{i}", "ReplicaSet", rs5) for i in range(4)]
    return requests, scaled, ["churn-1"], pods


def _ms(samples: reaction.Samples) -> list[int]:
    return [round(s * 1000) for s in samples.seconds]


def test_reactions_pair_every_kind_of_trigger_with_its_answer() -> None:
    requests, scaled, jobs, pods = _scale_up_and_down_run()
    got = reaction.reactions(requests, scaled, jobs, pods, since=0.6, until=10.0)
    # Each start is the trigger's completion (received + 1 ms here), each end the answer's receipt.
    deployment, up, down, job = (got[name] for name in reaction.PAIRS)
    assert _ms(deployment) == [59, 29, 19, 99]  # d30-0 up, down; d5-0 up, up
    assert (deployment.left_out, deployment.unanswered) == (0, [])
    assert _ms(up) == [39, 29]  # d30-0's first pod after its ReplicaSet write; d5-0's first
    assert up.left_out == 1  # d5-0's second scale found one of the first's two pods still to make
    assert _ms(down) == [49]
    assert _ms(job) == [69]
    every = reaction.Samples.combined(got.values())
    assert len(every.seconds) == 8
    assert every.left_out == 1
    assert every.summary()["max_ms"] == deployment.summary()["max_ms"]


def test_triggers_after_the_churn_are_not_counted() -> None:
    requests, scaled, jobs, pods = _scale_up_and_down_run()
    got = reaction.reactions(requests, scaled, jobs, pods, since=0.6, until=1.5)
    assert [len(got[name].seconds) for name in reaction.PAIRS] == [1, 1, 0, 0]


def test_fail_over_reads_the_lease_the_first_controller_write_and_the_probe() -> None:
    lease = {"ns": "kube-system", "name": failover.DEFAULT_LEASE_NAME}
    requests = [
        req("patch", "jobs", 10.51, name="churn-7"),  # the killed leader's last write, still on the wire
        req("get", "leases", 11.0, **lease),
        req("update", "leases", 12.0, code=409, **lease),  # refused: not held yet
        req("update", "deployments", 11.5, name="d30-3", sub="scale", agent=BENCH),
        req("update", "leases", 15.2, **lease),
        req("create", "events", 15.3, code=201, ns="kube-system"),
        req("create", "subjectaccessreviews", 15.35, code=201, ns=""),
        req("update", "replicasets", 16.1, name="d5-2-abc", sub="status"),
        req("update", "replicasets", 16.4, name="d30-3-def"),
    ]
    killed = 10.5
    probe = failover.Probe(NS, "d30-3")
    assert failover.lease_won(requests, killed) == requests[4]
    assert failover.lease_won(requests, 15.5) is None
    assert failover.controller_write(requests, killed) == requests[0]
    assert failover.replicaset_write(requests, requests[3].completed, probe) == requests[8]
    assert failover.replicaset_write(requests, 16.5, probe) is None
    # The standby's writes are those after its Lease write: the dead leader's last one is not its first.
    assert failover.takeover(requests, killed, probe) == (requests[4], requests[7], requests[3], requests[8])
    assert failover.takeover(requests[:4], killed, probe) == (None, None, None, None)


def test_the_pod_watch_has_caught_up_once_the_replicasets_pods_grew_by_the_scales_and_every_job_has_one() -> None:
    watch = reaction.PodWatch(cast(ApiClient, None))  # never started: only what it has seen is read
    scaled = [Scaled(NS, "d5-0", 5, 7), Scaled(NS, "d5-0", 7, 5), Scaled(NS, "d30-0", 30, 31)]
    assert not watch.caught_up(scaled, ["churn-1"])
    watch.added += [Pod(NS, "d5-0-abc-1", "ReplicaSet", "d5-0-abc"), Pod(NS, "d5-0-abc-2", "ReplicaSet", "d5-0-abc")]
    watch.replicaset_pods_deleted.add((NS, "d5-0-abc-1"))
    assert not watch.caught_up(scaled, ["churn-1"])  # one more to delete, and the Job has no pod yet
    watch.replicaset_pods_deleted.add((NS, "d5-0-abc-2"))
    watch.added.append(Pod(NS, "d30-0-def-1", "ReplicaSet", "d30-0-def"))
    assert not watch.caught_up(scaled, ["churn-1"])
    watch.added.append(Pod("envelope-system", "churn-1-x", "Job", "churn-1"))
    assert watch.caught_up(scaled, ["churn-1"])


def test_a_replicaset_write_answering_a_left_out_scale_still_ends_the_window_of_the_one_before() -> None:
    rs = "d30-0-abc"
    scale = {"sub": "scale", "agent": BENCH}
    requests = [
        req("list", "pods", 0.5, ns="", agent=BENCH),
        req("update", "deployments", 1.0, name="d30-0", **scale),  # up 30 -> 32, answered at once
        req("update", "replicasets", 1.05, name=rs),
        req("update", "deployments", 1.3, name="d30-0", **scale),  # down, then up again before any answer
        req("update", "deployments", 1.35, name="d30-0", **scale),
        req("update", "replicasets", 1.4, name=rs),
        req("create", "pods", 1.6, code=201), req("create", "pods", 1.61, code=201),
    ]
    scaled = [Scaled(NS, "d30-0", 30, 32), Scaled(NS, "d30-0", 32, 30), Scaled(NS, "d30-0", 30, 32)]
    pods = [Pod(NS, f"{rs}-{i}", "ReplicaSet", rs) for i in range(2)]
    got = reaction.reactions(requests, scaled, [], pods, since=0.6, until=10.0)
    deployment, up = got[reaction.PAIRS[0]], got[reaction.PAIRS[1]]
    assert _ms(deployment) == [49]
    assert deployment.left_out == 1  # the up after the unanswered down
    assert [round(b, 3) for b in deployment.unanswered] == [0.05]
    # The creates at 1.6 answer the write at 1.4, not the first scale-up (which the down made moot): that one
    # was not answered before the next write to its ReplicaSet.
    assert up.seconds == []
    assert [round(b, 3) for b in up.unanswered] == [0.35]
