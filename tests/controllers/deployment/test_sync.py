"""sync.go's tables (TestScale, cleanupDeployment, cleanupDeploymentOrder, generateReplicaSetName) against
:mod:`controller_manager.controllers.deployment.sync`, plus the new-ReplicaSet and status paths.

The fakes and builders here are upstream's test helpers (``newDeployment``, ``rs``, ``newRSWithStatus``, the
fake clientset recording actions); the rolling/recreate/progress tests import them.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Mapping
from typing import Any

import pytest

from controller_manager.api.meta import format_time, meta
from controller_manager.api.resources import Resource
from controller_manager.client.errors import AlreadyExists, Forbidden
from controller_manager.clock import FakeClock
from controller_manager.controllers.deployment import util_strategy
from controller_manager.controllers.deployment.control import DeploymentControl
from controller_manager.controllers.deployment.sync import (
    calculate_status,
    cleanup_deployment,
    generate_replica_set_name,
    get_new_replica_set,
    scale,
    sync_deployment_status,
)
from controller_manager.controllers.deployment.util_annotations import (
    DESIRED_REPLICAS_ANNOTATION,
    MAX_REPLICAS_ANNOTATION,
    REVISION_ANNOTATION,
    REVISION_HISTORY_ANNOTATION,
    set_replicas_annotations,
)
from controller_manager.controllers.deployment.util_conditions import DEPLOYMENT_PROGRESSING, get_deployment_condition
from controller_manager.controllers.deployment.util_replicasets import DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY
from controller_manager.controllers.deployment.util_strategy import deployment_replicas, replica_set_replicas

NEW_TS = 1_463_709_600.0  # 2016-05-20T02:00:00Z
OLD_TS = NEW_TS - 3600
OLDER_TS = NEW_TS - 7200
MAX_INT32 = 2**31 - 1

_uids = itertools.count(1)


# --- fakes ------------------------------------------------------------------------------------------------


class FakeClient:
    """Records every write as ``(verb, plural, object-or-name)``; answers as an API server would."""

    def __init__(self) -> None:
        self.actions: list[tuple[str, str, Any]] = []
        self.failures: dict[tuple[str, str], Exception] = {}
        self._rv = itertools.count(100)

    def fail(self, verb: str, plural: str, error: Exception) -> None:
        self.failures[(verb, plural)] = error

    def _check(self, verb: str, res: Resource) -> None:
        error = self.failures.get((verb, res.plural))
        if error is not None:
            raise error

    def _answer(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        out = copy.deepcopy(dict(obj))
        out.setdefault("metadata", {})["resourceVersion"] = str(next(self._rv))
        return out

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        raise AssertionError("no reads expected")

    async def create(self, res: Resource, obj: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]:
        self.actions.append(("create", res.plural, copy.deepcopy(dict(obj))))
        self._check("create", res)
        out = self._answer(obj)
        out["metadata"]["uid"] = f"uid-{next(_uids)}"
        return out

    async def update(self, res: Resource, obj: Mapping[str, Any]) -> dict[str, Any]:
        self.actions.append(("update", res.plural, copy.deepcopy(dict(obj))))
        self._check("update", res)
        return self._answer(obj)

    async def update_status(self, res: Resource, obj: Mapping[str, Any]) -> dict[str, Any]:
        self.actions.append(("update_status", res.plural, copy.deepcopy(dict(obj))))
        self._check("update_status", res)
        return self._answer(obj)

    async def delete(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        self.actions.append(("delete", res.plural, name))
        self._check("delete", res)
        return {}

    def verbs(self, verb: str, plural: str = "replicasets") -> list[Any]:
        return [obj for v, p, obj in self.actions if v == verb and p == plural]


class FakeRecorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str, *,
              resource: Resource | None = None) -> None:
        self.events.append((type, reason, message))


def fake_control(replica_sets: list[dict[str, Any]] | None = None, now: float = NEW_TS
                 ) -> tuple[DeploymentControl, FakeClient, FakeRecorder]:
    client, recorder = FakeClient(), FakeRecorder()
    cache = {(meta(rs)["namespace"], meta(rs)["name"]): rs for rs in replica_sets or []}
    dc = DeploymentControl(client=client, recorder=recorder, clock=FakeClock(now),
                           rs_lister=lambda ns, name: cache.get((ns, name)))
    return dc, client, recorder


# --- builders (upstream's test helpers) -------------------------------------------------------------------


def new_deployment(name: str, replicas: int, revision_history_limit: int | None = None,
                   max_surge: int | str | None = None, max_unavailable: int | str | None = None,
                   selector: dict[str, str] | None = None) -> dict[str, Any]:
    """newDeployment: RollingUpdate with both fenceposts 0 unless given, one container ``foo/bar``."""
    labels = dict(selector or {})
    spec: dict[str, Any] = {
        "replicas": replicas,
        "selector": {"matchLabels": labels},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {
            "maxSurge": 0 if max_surge is None else max_surge,
            "maxUnavailable": 0 if max_unavailable is None else max_unavailable}},
        "template": {"metadata": {"labels": dict(labels)}, "spec": {"containers": [{"image": "foo/bar"}]}},
    }
    if revision_history_limit is not None:
        spec["revisionHistoryLimit"] = revision_history_limit
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "default", "uid": f"d-uid-{next(_uids)}", "annotations": {}},
            "spec": spec}


def rs(name: str, size: int, selector: dict[str, str] | None = None, timestamp: float | None = None,
       **status: Any) -> dict[str, Any]:
    """rs(): a ReplicaSet of ``size`` replicas created at ``timestamp`` (status fields as keyword arguments)."""
    m: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"rs-uid-{name}"}
    if timestamp is not None:
        m["creationTimestamp"] = format_time(timestamp)
    obj: dict[str, Any] = {"metadata": m, "spec": {"replicas": size, "selector": {"matchLabels": selector or {}},
                                                   "template": {}}}
    if status:
        obj["status"] = status
    return obj


def with_annotations(obj: dict[str, Any], **annotations: str) -> dict[str, Any]:
    obj["metadata"]["annotations"] = {**(obj["metadata"].get("annotations") or {}), **annotations}
    return obj


def sized_for(replica_set: dict[str, Any], d: dict[str, Any]) -> dict[str, Any]:
    """The desired/max-replicas annotations ``d`` would have left on the ReplicaSet (SetReplicasAnnotations)."""
    desired = deployment_replicas(d)
    annotated, _ = set_replicas_annotations(replica_set, desired, desired + util_strategy.max_surge(d))
    return dict(annotated)


def last_size(client: FakeClient, original: dict[str, Any]) -> int:
    """spec.replicas of the last update of ``original``, or its own when it was not written."""
    name = meta(original)["name"]
    sizes = [obj["spec"]["replicas"] for obj in client.verbs("update") if meta(obj)["name"] == name]
    return sizes[-1] if sizes else replica_set_replicas(original)


# --- TestScale ----------------------------------------------------------------------------------------------


def _updated_template(replicas: int) -> dict[str, Any]:
    d = new_deployment("foo", replicas, selector={"foo": "bar"})
    d["spec"]["template"]["metadata"]["labels"]["another"] = "label"
    return d


SCALE_CASES = [
    pytest.param(new_deployment("foo", 12), new_deployment("foo", 10), rs("foo-v1", 10, None, NEW_TS), [], 12, [],
                 {}, id="normal scaling event: 10 -> 12"),
    pytest.param(new_deployment("foo", 5), new_deployment("foo", 10), rs("foo-v1", 10, None, NEW_TS), [], 5, [],
                 {}, id="normal scaling event: 10 -> 5"),
    pytest.param(new_deployment("foo", 10), new_deployment("foo", 5), rs("foo-v2", 2, None, NEW_TS),
                 [rs("foo-v1", 3, None, OLD_TS)], 4, [6], {}, id="proportional scaling: 5 -> 10"),
    pytest.param(new_deployment("foo", 3), new_deployment("foo", 5), rs("foo-v2", 2, None, NEW_TS),
                 [rs("foo-v1", 3, None, OLD_TS)], 1, [2], {}, id="proportional scaling: 5 -> 3"),
    pytest.param(new_deployment("foo", 4), new_deployment("foo", 9), rs("foo-v2", 8, None, NEW_TS),
                 [rs("foo-v1", 1, None, OLD_TS)], 4, [0], {}, id="proportional scaling: 9 -> 4"),
    pytest.param(new_deployment("foo", 10), new_deployment("foo", 7), rs("foo-v3", 2, None, NEW_TS),
                 [rs("foo-v2", 3, None, OLD_TS), rs("foo-v1", 2, None, OLDER_TS)], 3, [4, 3], {},
                 id="proportional scaling: 7 -> 10"),
    pytest.param(new_deployment("foo", 8), new_deployment("foo", 13), rs("foo-v3", 2, None, NEW_TS),
                 [rs("foo-v2", 8, None, OLD_TS), rs("foo-v1", 3, None, OLDER_TS)], 1, [5, 2], {},
                 id="proportional scaling: 13 -> 8"),
    pytest.param(new_deployment("foo", 4), new_deployment("foo", 3), rs("foo-v3", 1, None, NEW_TS),
                 [rs("foo-v2", 1, None, OLD_TS), rs("foo-v1", 1, None, OLDER_TS)], 2, [1, 1], {},
                 id="leftover distribution: 3 -> 4 (scales up the new replica set)"),
    pytest.param(new_deployment("foo", 2), new_deployment("foo", 3), rs("foo-v3", 1, None, NEW_TS),
                 [rs("foo-v2", 1, None, OLD_TS), rs("foo-v1", 1, None, OLDER_TS)], 1, [1, 0], {},
                 id="leftover distribution: 3 -> 2 (scales down the older replica set)"),
    pytest.param(new_deployment("foo", 5), new_deployment("foo", 4), None,
                 [rs("foo-v2", 2, None, OLD_TS), rs("foo-v1", 2, None, OLDER_TS)], None, [3, 2], {},
                 id="proportional scaling (no new rs): 4 -> 5 (latest first)"),
    pytest.param(new_deployment("foo", 0), new_deployment("foo", 6), rs("foo-v3", 3, None, NEW_TS),
                 [rs("foo-v2", 2, None, OLD_TS), rs("foo-v1", 1, None, OLDER_TS)], 0, [0, 0], {},
                 id="proportional scaling: 6 -> 0"),
    pytest.param(new_deployment("foo", 6), new_deployment("foo", 6), rs("foo-v3", 0, None, NEW_TS),
                 [rs("foo-v2", 0, None, OLD_TS), rs("foo-v1", 0, None, OLDER_TS)], 6, [0, 0], {},
                 id="proportional scaling: 0 -> 6"),
    pytest.param(new_deployment("foo", 5), new_deployment("foo", 5), rs("foo-v3", 2, None, NEW_TS),
                 [rs("foo-v2", 1, None, OLD_TS), rs("foo-v1", 1, None, OLDER_TS)], 2, [2, 1], {"foo-v2": 3},
                 id="failed rs update"),
    pytest.param(new_deployment("foo", 20, max_surge=2), new_deployment("foo", 10, max_surge=2),
                 rs("foo-v2", 6, None, NEW_TS), [rs("foo-v1", 6, None, OLD_TS)], 11, [11], {},
                 id="deployment with surge pods"),
    pytest.param(new_deployment("foo", 50, max_surge=6), new_deployment("foo", 10, max_surge=3),
                 rs("foo-v2", 5, None, NEW_TS), [rs("foo-v1", 8, None, OLD_TS)], 22, [34], {},
                 id="change both surge and size"),
    pytest.param(_updated_template(14), new_deployment("foo", 10, selector={"foo": "bar"}), None,
                 [rs("foo-v2", 7, None, NEW_TS), rs("foo-v1", 3, None, OLD_TS)], None, [10, 4], {},
                 id="change both size and template"),
    pytest.param(new_deployment("foo", 2, max_surge=1, max_unavailable=1),
                 new_deployment("foo", 2, max_surge=1, max_unavailable=1),
                 rs("foo-v2", 2, None, NEW_TS, availableReplicas=0), [rs("foo-v1", 1, None, OLD_TS)], 2, [1], {},
                 id="saturated but broken new replica set does not affect old pods"),
]


@pytest.mark.parametrize(("deployment", "old_deployment", "new_rs", "old_rss", "expected_new", "expected_old",
                          "desired_annotations"), SCALE_CASES)
async def test_scale(deployment: dict[str, Any], old_deployment: dict[str, Any], new_rs: dict[str, Any] | None,
                     old_rss: list[dict[str, Any]], expected_new: int | None, expected_old: list[int],
                     desired_annotations: dict[str, int]) -> None:
    def annotate(replica_set: dict[str, Any]) -> dict[str, Any]:
        previous = copy.deepcopy(old_deployment)
        if meta(replica_set)["name"] in desired_annotations:
            previous["spec"]["replicas"] = desired_annotations[meta(replica_set)["name"]]
        return sized_for(replica_set, previous)

    new_rs = annotate(new_rs) if new_rs is not None else None
    old_rss = [annotate(r) for r in old_rss]
    dc, client, _ = fake_control()
    await scale(dc, copy.deepcopy(deployment), new_rs, old_rss)

    if new_rs is not None and expected_new is not None:
        assert last_size(client, new_rs) == expected_new
    assert [last_size(client, r) for r in old_rss] == expected_old
    # Whatever was written now carries the Deployment's size and surge.
    for written in client.verbs("update"):
        assert written["metadata"]["annotations"][DESIRED_REPLICAS_ANNOTATION] == str(
            deployment_replicas(deployment))
        assert written["metadata"]["annotations"][MAX_REPLICAS_ANNOTATION] == str(
            deployment_replicas(deployment) + util_strategy.max_surge(deployment))


async def test_scale_records_scaling_events_with_upstream_wording() -> None:
    dc, _, recorder = fake_control()
    new_rs = sized_for(rs("foo-v2", 2, None, NEW_TS), new_deployment("foo", 5))
    old = sized_for(rs("foo-v1", 3, None, OLD_TS), new_deployment("foo", 5))
    await scale(dc, new_deployment("foo", 10), new_rs, [old])
    assert sorted(recorder.events) == [
        ("Normal", "ScalingReplicaSet", "Scaled up replica set foo-v1 from 3 to 6"),
        ("Normal", "ScalingReplicaSet", "Scaled up replica set foo-v2 from 2 to 4"),
    ]


# --- cleanupDeployment ---------------------------------------------------------------------------------------


def new_rs_with_status(name: str, spec_replicas: int, status_replicas: int, selector: dict[str, str],
                       **status: Any) -> dict[str, Any]:
    return rs(name, spec_replicas, selector, None, replicas=status_replicas, **status)


def _already_deleted() -> dict[str, Any]:
    obj = new_rs_with_status("foo-1", 0, 0, {"foo": "bar"})
    obj["metadata"]["deletionTimestamp"] = format_time(NEW_TS)
    return obj


SEL = {"foo": "bar"}
CLEANUP_CASES = [
    pytest.param([new_rs_with_status(f"foo-{i}", 0, 0, SEL) for i in (1, 2, 3)], 1, 2, id="keep one of three"),
    pytest.param([new_rs_with_status("foo-1", 0, 0, SEL), new_rs_with_status("foo-2", 0, 1, SEL),
                  new_rs_with_status("foo-3", 1, 0, SEL), new_rs_with_status("foo-4", 1, 1, SEL)], 0, 1,
                 id="only spec.replicas = status.replicas = 0 is deleted"),
    pytest.param([rs("foo-1", 0, SEL, observedGeneration=1, terminatingReplicas=0),
                  rs("foo-2", 0, SEL, observedGeneration=1, terminatingReplicas=1),
                  rs("foo-3", 0, SEL, observedGeneration=1),
                  rs("foo-4", 0, SEL, observedGeneration=1, replicas=1, terminatingReplicas=0),
                  rs("foo-5", 1, SEL, observedGeneration=1, terminatingReplicas=0),
                  rs("foo-6", 1, SEL, observedGeneration=1, replicas=1, terminatingReplicas=0)], 0, 1,
                 id="terminating pods or an unknown terminating count keep a replica set"),
    pytest.param([new_rs_with_status("foo-1", 0, 0, SEL), new_rs_with_status("foo-2", 0, 0, SEL)], 0, 2,
                 id="limit 0 deletes all empty"),
    pytest.param([new_rs_with_status("foo-1", 1, 1, SEL), new_rs_with_status("foo-2", 1, 1, SEL)], 0, 0,
                 id="replica sets with pods stay"),
    pytest.param([_already_deleted()], 0, 0, id="already being deleted"),
    pytest.param([new_rs_with_status(f"foo-{i}", 0, 0, SEL) for i in (1, 2, 3)], MAX_INT32, 0,
                 id="unlimited revisionHistoryLimit"),
]


@pytest.mark.parametrize(("old_rss", "limit", "expected_deletions"), CLEANUP_CASES)
async def test_cleanup_deployment(old_rss: list[dict[str, Any]], limit: int, expected_deletions: int) -> None:
    dc, client, _ = fake_control()
    await cleanup_deployment(dc, old_rss, new_deployment("foo", 1, limit, selector=SEL))
    assert len(client.verbs("delete")) == expected_deletions


def _by_revision(name: str, replicas: int, offset: float, revision: str) -> dict[str, Any]:
    obj = rs(name, replicas, SEL, NEW_TS + offset, replicas=replicas)
    if revision:
        with_annotations(obj, **{REVISION_ANNOTATION: revision})
    return obj


CLEANUP_ORDER_CASES = [
    pytest.param([_by_revision("foo-1", 0, -60, "1"), _by_revision("foo-2", 0, 0, "2")], 1, {"foo-1"},
                 id="revision order rs1 < rs2: delete rs1"),
    pytest.param([_by_revision("foo-1", 0, -60, "2"), _by_revision("foo-2", 0, 0, "1")], 1, {"foo-2"},
                 id="revision order rs2 < rs1: delete rs2"),
    pytest.param([_by_revision("foo-1", 0, -60, "1"), _by_revision("foo-2", 0, 0, "")], 1, {"foo-2"},
                 id="rs2 without revision is deleted"),
    pytest.param([_by_revision("foo-1", 0, -60, ""), _by_revision("foo-2", 0, 0, "2")], 1, {"foo-1"},
                 id="rs1 without revision is deleted"),
    pytest.param([_by_revision("foo-1", 1, -60, "1"), _by_revision("foo-2", 0, 0, "2"),
                  _by_revision("foo-3", 0, 60, "3")], 1, {"foo-2"}, id="rs1 has replicas: delete rs2"),
    pytest.param([_by_revision("foo-1", 1, -60, "1"), _by_revision("foo-2", 1, 0, "2"),
                  _by_revision("foo-3", 0, 60, "3")], 1, set(), id="rs1 and rs2 have replicas: delete none"),
    pytest.param([_by_revision("foo-1", 0, -60, "3"), _by_revision("foo-2", 0, 0, "1"),
                  _by_revision("foo-3", 0, 60, "4"), _by_revision("foo-4", 0, 120, "2")], 2, {"foo-2", "foo-4"},
                 id="revision order rs2 < rs4 < rs1 < rs3: delete rs2 and rs4"),
]


@pytest.mark.parametrize(("old_rss", "limit", "expected"), CLEANUP_ORDER_CASES)
async def test_cleanup_deployment_order(old_rss: list[dict[str, Any]], limit: int, expected: set[str]) -> None:
    dc, client, _ = fake_control()
    await cleanup_deployment(dc, old_rss, new_deployment("foo", 1, limit, selector=SEL))
    assert set(client.verbs("delete")) == expected


# --- generateReplicaSetName ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "template_hash", "expected"), [
    pytest.param("my-deployment", "abcde12345", "my-deployment-abcde12345", id="short name"),
    pytest.param("a" * 242, "abcde12345", "a" * 242 + "-abcde12345", id="maximum length without truncating"),
    pytest.param("b" * 250, "abcde12345", "b" * 242 + "-abcde12345", id="very long deployment name is truncated"),
    pytest.param("d" * 252, "h" * 252, "d" * 252 + "-" + "h" * 252, id="very long hash is not truncated"),
])
def test_generate_replica_set_name(name: str, template_hash: str, expected: str) -> None:
    assert generate_replica_set_name(name, template_hash) == expected


@pytest.mark.parametrize(("name", "portion"), [
    pytest.param("my-deployment", "my-deployment", id="short name"),
    pytest.param("a" * 250, "a" * 242, id="very long name truncated"),
    pytest.param("a" * 242, "a" * 242, id="very long name not truncated"),
])
async def test_new_replica_set_name_fits_a_dns_subdomain(name: str, portion: str) -> None:
    dc, client, _ = fake_control()
    await get_new_replica_set(dc, new_deployment(name, 1, selector=SEL), [], [], True)
    created = meta(client.verbs("create")[0])["name"]
    assert len(created) <= 253
    assert created.rsplit("-", 1)[0] == portion


# --- getNewReplicaSet -----------------------------------------------------------------------------------------


async def test_new_replica_set_carries_hash_owner_revision_and_surge() -> None:
    d = new_deployment("web", 4, max_surge=1, max_unavailable=1, selector={"app": "web"})
    d["spec"]["progressDeadlineSeconds"] = 600
    d["metadata"]["annotations"]["team"] = "blue"
    dc, client, recorder = fake_control()
    created, _ = await get_new_replica_set(dc, d, [], [], True)
    assert created is not None
    body = client.verbs("create")[0]
    hash_label = body["metadata"]["labels"][DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY]
    assert body["metadata"]["name"] == f"web-{hash_label}"
    assert body["spec"]["selector"]["matchLabels"] == {"app": "web", "pod-template-hash": hash_label}
    assert body["spec"]["template"]["metadata"]["labels"] == {"app": "web", "pod-template-hash": hash_label}
    ref = body["metadata"]["ownerReferences"][0]
    assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == ("Deployment", "web", meta(d)["uid"], True)
    assert body["spec"]["replicas"] == 4  # nothing else exists: up to replicas (within replicas + surge)
    assert body["metadata"]["annotations"] == {
        "team": "blue", REVISION_ANNOTATION: "1", DESIRED_REPLICAS_ANNOTATION: "4",
        MAX_REPLICAS_ANNOTATION: "5"}
    assert recorder.events == [("Normal", "ScalingReplicaSet", f"Scaled up replica set web-{hash_label} from 0 to 4")]
    # The Deployment learns its revision and the creation, in one /status write.
    status_write = client.verbs("update_status", "deployments")[-1]
    assert status_write["metadata"]["annotations"][REVISION_ANNOTATION] == "1"
    progressing = get_deployment_condition(status_write["status"], DEPLOYMENT_PROGRESSING)
    assert progressing is not None
    assert (progressing["status"], progressing["reason"], progressing["message"]) == (
        "True", "NewReplicaSetCreated", f'Created new replica set "web-{hash_label}"')


async def test_already_existing_own_replica_set_is_taken_as_the_new_one() -> None:
    d = new_deployment("web", 2, selector={"app": "web"})
    dc, client, _ = fake_control()
    await get_new_replica_set(dc, copy.deepcopy(d), [], [], True)
    mine = client.verbs("create")[0]
    mine["metadata"]["uid"] = "rs-mine"
    dc, client, recorder = fake_control([mine])
    client.fail("create", "replicasets", AlreadyExists(409, "AlreadyExists", "exists"))
    found, _ = await get_new_replica_set(dc, d, [], [], True)
    assert found is not None
    assert meta(found)["uid"] == "rs-mine"
    assert recorder.events == []  # not created by this sync: no scaling event


async def test_hash_collision_bumps_collision_count_and_retries() -> None:
    d = new_deployment("web", 2, selector={"app": "web"})
    dc, client, _ = fake_control()
    await get_new_replica_set(dc, copy.deepcopy(d), [], [], True)
    other = client.verbs("create")[0]
    other["spec"]["template"]["spec"]["containers"][0]["image"] = "someone/else"
    dc, client, _ = fake_control([other])
    client.fail("create", "replicasets", AlreadyExists(409, "AlreadyExists", "exists"))
    with pytest.raises(AlreadyExists):
        await get_new_replica_set(dc, d, [], [], True)
    assert client.verbs("update_status", "deployments")[-1]["status"]["collisionCount"] == 1
    # The next attempt (on the Deployment as written) hashes with the new count: another name.
    d = client.verbs("update_status", "deployments")[-1]
    dc2, client2, _ = fake_control()
    await get_new_replica_set(dc2, d, [], [], True)
    assert meta(client2.verbs("create")[0])["name"] != meta(other)["name"]


async def test_refused_create_reports_replica_set_create_error() -> None:
    d = new_deployment("web", 2, selector={"app": "web"})
    d["spec"]["progressDeadlineSeconds"] = 600
    dc, client, recorder = fake_control()
    client.fail("create", "replicasets", Forbidden(403, "Forbidden", "quota exceeded"))
    with pytest.raises(Forbidden):
        await get_new_replica_set(dc, d, [], [], True)
    name = meta(client.verbs("create")[0])["name"]
    message = f'Failed to create new replica set "{name}": quota exceeded'
    assert recorder.events == [("Warning", "ReplicaSetCreateError", message)]
    cond = get_deployment_condition(client.verbs("update_status", "deployments")[-1]["status"],
                                         DEPLOYMENT_PROGRESSING)
    assert cond is not None
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "False", "ReplicaSetCreateError", message)


async def test_existing_new_replica_set_gets_next_revision_and_min_ready_seconds() -> None:
    d = new_deployment("web", 2, selector={"app": "web"})
    d["spec"]["minReadySeconds"] = 5
    dc, client, _ = fake_control()
    await get_new_replica_set(dc, copy.deepcopy(d), [], [], True)
    current = client.verbs("create")[0]
    with_annotations(current, **{REVISION_ANNOTATION: "1"})
    old = with_annotations(rs("web-old", 0, {"app": "web"}, OLD_TS), **{REVISION_ANNOTATION: "3"})
    dc, client, _ = fake_control()
    await get_new_replica_set(dc, d, [current, old], [old], False)
    written = client.verbs("update")[0]
    assert written["metadata"]["annotations"][REVISION_ANNOTATION] == "4"
    assert written["metadata"]["annotations"][REVISION_HISTORY_ANNOTATION] == "1"
    assert written["spec"]["minReadySeconds"] == 5


# --- status -------------------------------------------------------------------------------------------------


def test_calculate_status_counts_and_availability() -> None:
    d = new_deployment("web", 4, max_surge=1, max_unavailable=1)
    d["metadata"]["generation"] = 3
    d["status"] = {"collisionCount": 2}
    new_rs = rs("web-2", 2, None, NEW_TS, replicas=2, readyReplicas=2, availableReplicas=1, observedGeneration=1,
                terminatingReplicas=1)
    old_rs = rs("web-1", 2, None, OLD_TS, replicas=3, readyReplicas=2, availableReplicas=2, observedGeneration=1,
                terminatingReplicas=0)
    status = calculate_status([old_rs, new_rs], new_rs, d, NEW_TS)
    conditions = status.pop("conditions")
    assert status == {"observedGeneration": 3, "replicas": 5, "updatedReplicas": 2, "readyReplicas": 4,
                      "availableReplicas": 3, "unavailableReplicas": 1, "terminatingReplicas": 1,
                      "collisionCount": 2}
    assert [(c["type"], c["status"], c["reason"]) for c in conditions] == [
        ("Available", "True", "MinimumReplicasAvailable")]


async def test_status_written_only_when_it_changes() -> None:
    d = new_deployment("web", 1)
    d["metadata"]["generation"] = 1
    one = rs("web-1", 1, None, NEW_TS, replicas=1, availableReplicas=1, readyReplicas=1, observedGeneration=1,
             terminatingReplicas=0)
    dc, client, _ = fake_control()
    d = await sync_deployment_status(dc, [one], one, d)
    d = await sync_deployment_status(dc, [one], one, d)
    assert len(client.verbs("update_status", "deployments")) == 1
    assert d["metadata"]["resourceVersion"]  # the working copy follows the server
