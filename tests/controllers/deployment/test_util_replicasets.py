"""deployment util: template equality and finding the new/old ReplicaSets (TestEqualIgnoreHash,
TestFindNewReplicaSet, TestFindOldReplicaSets, TestGetDeploymentsForReplicaSet, ...)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller_manager.controllers.deployment.util_annotations import REVISION_ANNOTATION
from controller_manager.controllers.deployment.util_replicasets import (
    DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY,
    add_label_to_selector,
    clone_and_add_label,
    clone_selector_and_add_label,
    equal_ignore_hash,
    filter_active_replica_sets,
    find_active_or_latest,
    find_new_replica_set,
    find_old_replica_sets,
    get_deployments_for_replica_set,
    replica_sets_by_revision,
    set_from_replica_set_template,
)
from tests.controllers.deployment.util_fixtures import T0, deployment, replica_set

HASH = DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY


def pod_template(name: str, node: str, annotations: dict[str, str], labels: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name, "annotations": annotations, "labels": labels}, "spec": {"nodeName": node}}


def test_label_key_is_upstreams() -> None:
    assert HASH == "pod-template-hash"


@pytest.mark.parametrize(
    ("former", "latter", "expected"),
    [
        pytest.param(
            pod_template("foo", "foo-node", {}, {HASH: "value-1", "something": "else"}),
            pod_template("foo", "foo-node", {}, {HASH: "value-1", "something": "else"}),
            True,
            id="same spec, same labels",
        ),
        pytest.param(
            pod_template("foo", "foo-node", {}, {HASH: "value-1", "something": "else"}),
            pod_template("foo", "foo-node", {}, {HASH: "value-2", "something": "else"}),
            True,
            id="same spec, only pod-template-hash label value is different",
        ),
        pytest.param(
            pod_template("foo", "foo-node", {}, {"something": "else"}),
            pod_template("foo", "foo-node", {}, {HASH: "value-2", "something": "else"}),
            True,
            id="same spec, the former doesn't have pod-template-hash label",
        ),
        pytest.param(
            pod_template("foo", "foo-node", {}, {"something": "else"}),
            pod_template("foo", "foo-node", {}, {HASH: "value-2"}),
            False,
            id="same spec, different label, former lacks the hash, same number of labels",
        ),
        pytest.param(
            pod_template("foo", "foo-node", {}, {HASH: "value-1"}),
            pod_template("foo", "foo-node", {}, {"something": "else"}),
            False,
            id="same spec, different label, latter lacks the hash, same number of labels",
        ),
        pytest.param(
            pod_template("foo", "foo-node", {}, {HASH: "value-1"}),
            pod_template("foo", "foo-node", {}, {HASH: "value-1", "something": "else"}),
            False,
            id="same spec, different label, same hash value",
        ),
        pytest.param(
            pod_template("foo", "foo-node", {"former": "value"}, {HASH: "value-1", "something": "else"}),
            pod_template("foo", "foo-node", {"latter": "value"}, {HASH: "value-1", "something": "else"}),
            False,
            id="different spec, same labels",
        ),
        pytest.param(
            pod_template("foo-1", "foo-node", {}, {HASH: "value-1", "something": "else"}),
            pod_template("foo-2", "foo-node", {}, {HASH: "value-2", "something": "else"}),
            False,
            id="different spec, different pod-template-hash label value",
        ),
        pytest.param(
            pod_template("foo-1", "foo-node-1", {}, {"something": "else"}),
            pod_template("foo-2", "foo-node-2", {}, {HASH: "value-2", "something": "else"}),
            False,
            id="different spec, the former doesn't have pod-template-hash label",
        ),
        pytest.param(
            pod_template("foo", "foo-node-1", {}, {"something": "else"}),
            pod_template("foo", "foo-node-2", {}, {"nothing": "else"}),
            False,
            id="different spec, different labels",
        ),
    ],
)
def test_equal_ignore_hash(former: dict[str, Any], latter: dict[str, Any], expected: bool) -> None:
    before = (copy.deepcopy(former), copy.deepcopy(latter))
    assert equal_ignore_hash(former, latter) is expected
    assert equal_ignore_hash(latter, former) is expected  # the same case in reverse order
    assert (former, latter) == before  # labels (the hash included) are left as they were


@pytest.mark.parametrize(
    ("former", "latter", "expected"),
    [
        pytest.param({"metadata": {"labels": {HASH: "x"}}, "spec": {}}, {"spec": {"nodeName": ""}}, True,
                     id="absent equals zero values"),
        pytest.param({"spec": {"volumes": []}}, {"spec": {"volumes": None}}, True, id="empty list equals null"),
        pytest.param({"spec": {"containers": [{"name": "a", "resources": {"limits": {"cpu": "1000m"}}}]}},
                     {"spec": {"containers": [{"name": "a", "resources": {"limits": {"cpu": "1"}}}]}},
                     True, id="quantities compare by value"),
        pytest.param({"spec": {"containers": [{"name": "a", "resources": {"limits": {"cpu": "1"}}}]}},
                     {"spec": {"containers": [{"name": "a", "resources": {"limits": {"cpu": "2"}}}]}},
                     False, id="different quantities"),
        pytest.param({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}},
                     {"spec": {"containers": [{"name": "b"}, {"name": "a"}]}}, False, id="list order matters"),
        pytest.param({"spec": {"automountServiceAccountToken": False}}, {"spec": {}}, False,
                     id="explicit false is not absent"),
        pytest.param(None, {}, True, id="no template equals an empty one"),
        pytest.param({"metadata": {"labels": {"tier": ""}}}, {"metadata": {"labels": {}}}, False,
                     id="an empty label value is still a label"),
        pytest.param({"metadata": {"labels": {}}, "spec": {"nodeSelector": {}}}, {}, True,
                     id="empty maps equal absent ones"),
    ],
)
def test_equal_ignore_hash_semantic(former: Any, latter: Any, expected: bool) -> None:
    assert equal_ignore_hash(former, latter) is expected
    assert equal_ignore_hash(latter, former) is expected


def _old_deployment() -> dict[str, Any]:
    old = deployment("nginx")
    old["spec"]["template"]["spec"]["containers"][0]["name"] = "nginx-old-1"
    return old


def test_find_new_replica_set() -> None:
    d = deployment("nginx")
    new_rs = replica_set(d, hash_label="hash", created=T0 + 60)
    new_rs_dup = replica_set(d, hash_label="different-hash", created=T0)
    old_rs = replica_set(_old_deployment())

    assert find_new_replica_set(d, [new_rs, old_rs]) is new_rs
    # More than one ReplicaSet with the template: the oldest wins.
    assert find_new_replica_set(d, [new_rs, old_rs, new_rs_dup]) is new_rs_dup
    assert find_new_replica_set(d, [old_rs]) is None
    assert find_new_replica_set(d, [None, new_rs]) is new_rs


def test_templates_are_compared_by_their_current_content() -> None:
    # Normalized templates are remembered between calls: a template edited in place (a working copy) must be
    # compared as it is now, and equal content in another object must compare the same.
    d = deployment("nginx")
    rs = replica_set(d, hash_label="hash")
    assert find_new_replica_set(d, [rs]) is rs
    d["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:2"
    assert find_new_replica_set(d, [rs]) is None
    assert not equal_ignore_hash(d["spec"]["template"], rs["spec"]["template"])
    d["spec"]["template"]["spec"]["containers"][0]["image"] = rs["spec"]["template"]["spec"]["containers"][0]["image"]
    assert find_new_replica_set(d, [rs]) is rs
    assert find_new_replica_set(copy.deepcopy(d), [copy.deepcopy(rs)]) is not None


def test_find_new_replica_set_ties_break_by_name() -> None:
    d = deployment("nginx")
    b = replica_set(d, name="b", created=T0)
    a = replica_set(d, name="a", created=T0)
    assert find_new_replica_set(d, [b, a]) is a


@pytest.mark.parametrize(
    ("members", "expected", "expected_required"),
    [
        pytest.param(["new", "old"], ["old"], [], id="get old ReplicaSets"),
        pytest.param(["old"], ["old"], [], id="get old ReplicaSets with no new ReplicaSet"),
        pytest.param(["old", "new", "dup"], ["old", "new"], ["new"],
                     id="two new ReplicaSets: only the oldest is the new one"),
        pytest.param(["new"], [], [], id="get empty old ReplicaSets"),
    ],
)
def test_find_old_replica_sets(members: list[str], expected: list[str], expected_required: list[str]) -> None:
    d = deployment("nginx")
    by_role = {
        "new": replica_set(d, 1, hash_label="hash", created=T0 + 60),
        "dup": replica_set(d, 0, hash_label="different-hash", created=T0),
        "old": replica_set(_old_deployment(), 0, created=T0 - 60),
    }
    required, everything = find_old_replica_sets(d, [by_role[m] for m in members])
    assert everything == [by_role[m] for m in expected]  # oldest first
    assert required == [by_role[m] for m in expected_required]  # filtered by spec.replicas


def test_find_active_or_latest() -> None:
    d = deployment("nginx")
    old1 = replica_set(d, 0, created=T0)
    old2 = replica_set(d, 0, created=T0 + 10)
    new = replica_set(d, 0, created=T0 + 20)
    assert find_active_or_latest(None, []) is None
    assert find_active_or_latest(new, [old1, old2]) is new  # nothing active: the new one
    assert find_active_or_latest(None, [old1, old2]) is old2  # nothing active, no new one: the newest
    active = replica_set(d, 3, created=T0 + 5)
    assert find_active_or_latest(new, [old1, active]) is active
    assert find_active_or_latest(replica_set(d, 1), [active]) is None  # two active: scale proportionally


def test_replica_sets_by_revision() -> None:
    d = deployment("nginx")
    r3 = replica_set(d, annotations={REVISION_ANNOTATION: "3"}, created=T0)
    r10 = replica_set(d, annotations={REVISION_ANNOTATION: "10"}, created=T0 - 5)
    bad = replica_set(d, annotations={REVISION_ANNOTATION: "x"}, created=T0 + 5)
    none = replica_set(d, created=T0 + 1)
    assert replica_sets_by_revision([r10, r3]) == [r3, r10]
    assert replica_sets_by_revision([none, r3]) == [none, r3]  # no annotation is revision 0
    assert replica_sets_by_revision([bad, r3]) == [r3, bad]  # unparsable: creation order


def test_set_from_replica_set_template() -> None:
    d = deployment("nginx")
    rs = replica_set(_old_deployment(), hash_label="abc")
    snapshot = copy.deepcopy((d, rs))
    rolled = set_from_replica_set_template(d, rs["spec"]["template"])
    assert rolled["spec"]["template"]["spec"] == rs["spec"]["template"]["spec"]
    assert HASH not in rolled["spec"]["template"]["metadata"]["labels"]
    assert (d, rs) == snapshot


def _namespaced(name: str, labels: dict[str, str] | None, namespace: str = "test") -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels is not None:
        metadata["labels"] = labels
    return {"metadata": metadata}


def test_get_deployments_for_replica_set() -> None:
    deployments = [
        {"metadata": {"name": f"deployment-{i}", "namespace": "test"},
         "spec": {"selector": {"matchLabels": {"app": f"test-{i}"}}}}
        for i in range(3)
    ]
    # Ones that must never match: another namespace, an empty selector, an invalid one.
    deployments += [
        {"metadata": {"name": "elsewhere", "namespace": "other"},
         "spec": {"selector": {"matchLabels": {"app": "test-0"}}}},
        {"metadata": {"name": "empty", "namespace": "test"}, "spec": {"selector": {}}},
        {"metadata": {"name": "invalid", "namespace": "test"},
         "spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "Bogus"}]}}},
    ]
    rss = [_namespaced(f"test-replicaSet-{i}", {"app": f"test-{i}", "label": f"label-{i}"}) for i in range(5)]
    for i in range(3):
        assert get_deployments_for_replica_set(deployments, rss[i]) == [deployments[i]]
    for i in (3, 4):
        with pytest.raises(LookupError) as err:
            get_deployments_for_replica_set(deployments, rss[i])
        assert str(err.value) == (
            f"could not find deployments set for ReplicaSet test-replicaSet-{i} in namespace test "
            f"with labels: map[app:test-{i} label:label-{i}]"
        )
    with pytest.raises(LookupError, match="because it has no labels"):
        get_deployments_for_replica_set(deployments, _namespaced("bare", None))


def test_label_helpers_copy() -> None:
    labels = {"a": "1"}
    assert clone_and_add_label(labels, HASH, "h") == {"a": "1", HASH: "h"}
    assert clone_and_add_label(labels, "", "h") == {"a": "1"}
    selector = {"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "b", "operator": "Exists"}]}
    cloned = clone_selector_and_add_label(selector, HASH, "h")
    assert cloned == {"matchLabels": {"a": "1", HASH: "h"}, "matchExpressions": [{"key": "b", "operator": "Exists"}]}
    assert clone_selector_and_add_label(None, HASH, "h") is None
    assert add_label_to_selector(None, HASH, "h") == {"matchLabels": {HASH: "h"}}
    assert labels == {"a": "1"}
    assert selector == {"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "b", "operator": "Exists"}]}


def test_filter_active_replica_sets() -> None:
    d = deployment("nginx")
    active, idle = replica_set(d, 2), replica_set(d, 0)
    assert filter_active_replica_sets([active, None, idle]) == [active]


def test_template_cache_keys_hold_their_size_not_orjsons_buffer() -> None:
    """The normalized-template cache keeps template JSON as keys; orjson's output holds a buffer ~10x its length,
    which 1,024 kept keys turned into ~16 MiB of a leader's RSS. A kept key must cost about its own length."""
    import tracemalloc

    from controller_manager.controllers.deployment import util_replicasets

    util_replicasets._normalized_cache.clear()
    image = "registry.example.com/team/" + "x" * 1500
    templates = [{"metadata": {"labels": {"app": f"a{i}"}}, "spec": {"containers": [{"name": "c", "image": image}]}}
                 for i in range(50)]
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for t in templates:
            assert equal_ignore_hash(t, t)
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
        util_replicasets._normalized_cache.clear()
    held = sum(s.size_diff for s in after.compare_to(before, "filename")
               if s.traceback[0].filename == util_replicasets.__file__)
    # Each template's JSON is ~1.6 KB; its normalized copy is small dicts sharing the image string.
    assert held / len(templates) < 4096
