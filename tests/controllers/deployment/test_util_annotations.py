"""deployment util: revisions and the replica annotations (TestAnnotationUtils, TestReplicasAnnotationsNeedUpdate,
TestGetNonNegativeInt32FromAnnotation, TestMaxRevision-style tables)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller_manager.controllers.deployment import util_annotations
from controller_manager.controllers.deployment.util_annotations import (
    ANNOTATIONS_TO_SKIP,
    CHANGE_CAUSE_ANNOTATION,
    DESIRED_REPLICAS_ANNOTATION,
    LAST_APPLIED_CONFIG_ANNOTATION,
    MAX_REPLICAS_ANNOTATION,
    MAX_REV_HISTORY_LENGTH_IN_CHARS,
    REVISION_ANNOTATION,
    REVISION_HISTORY_ANNOTATION,
    copy_deployment_annotations_to_replica_set,
    get_desired_replicas_annotation,
    get_max_replicas_annotation,
    get_non_negative_int32_from_annotation,
    get_skipped_annotations,
    last_revision,
    max_revision,
    replicas_annotations_need_update,
    set_deployment_annotations_to,
    set_deployment_revision,
    set_new_replica_set_annotations,
    set_replicas_annotations,
)
from tests.controllers.deployment.util_fixtures import deployment, replica_set, rolling


def test_annotation_keys_are_upstreams() -> None:
    assert REVISION_ANNOTATION == "deployment.kubernetes.io/revision"
    assert REVISION_HISTORY_ANNOTATION == "deployment.kubernetes.io/revision-history"
    assert DESIRED_REPLICAS_ANNOTATION == "deployment.kubernetes.io/desired-replicas"
    assert MAX_REPLICAS_ANNOTATION == "deployment.kubernetes.io/max-replicas"
    assert CHANGE_CAUSE_ANNOTATION == "kubernetes.io/change-cause"
    assert {
        "kubectl.kubernetes.io/last-applied-configuration",
        "deployment.kubernetes.io/revision",
        "deployment.kubernetes.io/revision-history",
        "deployment.kubernetes.io/desired-replicas",
        "deployment.kubernetes.io/max-replicas",
        "deprecated.deployment.rollback.to",
    } == ANNOTATIONS_TO_SKIP
    assert MAX_REV_HISTORY_LENGTH_IN_CHARS == 2000


def _with_revision(value: str | None) -> dict[str, Any]:
    return replica_set(deployment(), annotations={} if value is None else {REVISION_ANNOTATION: value})


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(None, 0, id="absent"),
        pytest.param("7", 7, id="plain"),
        pytest.param("+7", 7, id="plus sign"),
        pytest.param(str(2**63 - 1), 2**63 - 1, id="int64 max"),
    ],
)
def test_revision(value: str | None, expected: int) -> None:
    assert util_annotations.revision(_with_revision(value)) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param("", 'strconv.ParseInt: parsing "": invalid syntax', id="empty"),
        pytest.param(" 1", 'strconv.ParseInt: parsing " 1": invalid syntax', id="blank"),
        pytest.param("1_0", 'strconv.ParseInt: parsing "1_0": invalid syntax', id="underscore"),
        pytest.param(str(2**63), f'strconv.ParseInt: parsing "{2**63}": value out of range', id="overflow"),
    ],
)
def test_revision_invalid(value: str, message: str) -> None:
    with pytest.raises(ValueError, match=r"strconv\.ParseInt") as err:
        util_annotations.revision(_with_revision(value))
    assert str(err.value) == message


@pytest.mark.parametrize(
    ("revisions", "max_rev", "last_rev"),
    [
        pytest.param([], 0, 0, id="none"),
        pytest.param(["1"], 1, 0, id="one"),
        pytest.param(["1", "3", "2"], 3, 2, id="unordered"),
        pytest.param(["4", "4"], 4, 4, id="duplicate max"),
        pytest.param(["5", "bogus", None, "2"], 5, 2, id="unparsable and missing skipped"),
    ],
)
def test_max_and_last_revision(revisions: list[str | None], max_rev: int, last_rev: int) -> None:
    rss: list[dict[str, Any] | None] = [_with_revision(r) for r in revisions]
    assert max_revision([*rss, None]) == max_rev
    assert last_revision([*rss, None]) == last_rev


def test_set_deployment_revision() -> None:
    d = deployment()
    updated, changed = set_deployment_revision(d, "3")
    assert changed
    assert updated["metadata"]["annotations"][REVISION_ANNOTATION] == "3"
    assert REVISION_ANNOTATION not in d["metadata"]["annotations"]
    again, changed = set_deployment_revision(updated, "3")
    assert not changed
    assert again == updated


def test_set_new_replica_set_annotations_revision_history() -> None:
    """TestAnnotationUtils/SetNewReplicaSetAnnotations: revisions 11..20 with a 5-character history limit."""
    d = deployment()
    d["metadata"]["annotations"][REVISION_ANNOTATION] = "1"
    rs = replica_set(d)
    for i in range(10, 20):
        next_revision = str(i + 1)
        rs, _ = set_new_replica_set_annotations(d, rs, next_revision, True, 5)
        if i >= 12:
            assert rs["metadata"]["annotations"][REVISION_HISTORY_ANNOTATION] == f"{i - 1},{i}"
        assert rs["metadata"]["annotations"][REVISION_ANNOTATION] == next_revision


def test_set_new_replica_set_annotations_copies_and_protects() -> None:
    d = rolling(10, "25%", 0)
    d["metadata"]["annotations"] = {
        CHANGE_CAUSE_ANNOTATION: "kubectl set image",
        "team": "a",
        LAST_APPLIED_CONFIG_ANNOTATION: "{}",
        REVISION_ANNOTATION: "9",
        DESIRED_REPLICAS_ANNOTATION: "99",
    }
    rs = replica_set(d)
    snapshot = copy.deepcopy((d, rs))
    new_rs, changed = set_new_replica_set_annotations(d, rs, "4", False)
    assert changed
    assert new_rs["metadata"]["annotations"] == {
        CHANGE_CAUSE_ANNOTATION: "kubectl set image",
        "team": "a",
        REVISION_ANNOTATION: "4",
        DESIRED_REPLICAS_ANNOTATION: "10",
        MAX_REPLICAS_ANNOTATION: "13",  # 10 + ceil(25% of 10)
    }
    assert (d, rs) == snapshot
    # Nothing left to do the second time round.
    again, changed = set_new_replica_set_annotations(d, new_rs, "4", True)
    assert not changed
    assert again == new_rs


@pytest.mark.parametrize(
    ("annotations", "new_revision", "expected", "changed"),
    [
        pytest.param({REVISION_ANNOTATION: "5"}, "3", {REVISION_ANNOTATION: "5"}, False,
                     id="revision never goes down"),
        pytest.param({REVISION_ANNOTATION: "2"}, "6",
                     {REVISION_ANNOTATION: "6", REVISION_HISTORY_ANNOTATION: "2"}, True,
                     id="rollback records the old revision"),
        pytest.param({REVISION_ANNOTATION: "4", REVISION_HISTORY_ANNOTATION: "1,2"}, "7",
                     {REVISION_ANNOTATION: "7", REVISION_HISTORY_ANNOTATION: "1,2,4"}, True,
                     id="history appends"),
        pytest.param({REVISION_ANNOTATION: "x"}, "7", {REVISION_ANNOTATION: "x"}, False,
                     id="unparsable old revision aborts"),
        pytest.param({}, "y", {}, False, id="unparsable new revision aborts"),
        pytest.param({REVISION_ANNOTATION: "1", REVISION_HISTORY_ANNOTATION: "123456"}, "2",
                     {REVISION_ANNOTATION: "2", REVISION_HISTORY_ANNOTATION: "1"}, True,
                     id="oversized history entries are dropped"),
        pytest.param({REVISION_ANNOTATION: "123456", REVISION_HISTORY_ANNOTATION: "1,2"}, "1234567",
                     {REVISION_ANNOTATION: "1234567", REVISION_HISTORY_ANNOTATION: "1,2"}, True,
                     id="a revision longer than the limit is not appended"),
    ],
)
def test_set_new_replica_set_annotations_revisions(
    annotations: dict[str, str], new_revision: str, expected: dict[str, str], changed: bool
) -> None:
    d = deployment()
    rs = replica_set(d, annotations=annotations)
    new_rs, was_changed = set_new_replica_set_annotations(d, rs, new_revision, True, 5)
    assert was_changed is changed
    assert new_rs["metadata"]["annotations"] == expected


def test_copy_and_rollback_annotations() -> None:
    d = deployment()
    d["metadata"]["annotations"] = {"a": "1", "b": "", REVISION_ANNOTATION: "3"}
    rs = replica_set(d, annotations={"a": "0", "c": "keep"})
    copied, changed = copy_deployment_annotations_to_replica_set(d, rs)
    # An empty value equals a missing one (a Go map miss), so "b" is not copied.
    assert changed
    assert copied["metadata"]["annotations"] == {"a": "1", "c": "keep"}
    rolled = set_deployment_annotations_to(d, replica_set(d, annotations={
        "c": "from-rs", REVISION_ANNOTATION: "1", DESIRED_REPLICAS_ANNOTATION: "4"}))
    assert rolled["metadata"]["annotations"] == {REVISION_ANNOTATION: "3", "c": "from-rs"}
    assert get_skipped_annotations(None) == {}


def test_set_replicas_annotations() -> None:
    """TestAnnotationUtils/SetReplicasAnnotations."""
    rs = replica_set(deployment())
    updated, changed = set_replicas_annotations(rs, 10, 11)
    assert changed
    assert updated["metadata"]["annotations"][DESIRED_REPLICAS_ANNOTATION] == "10"
    assert updated["metadata"]["annotations"][MAX_REPLICAS_ANNOTATION] == "11"
    assert "annotations" not in rs["metadata"]
    _, changed = set_replicas_annotations(updated, 10, 11)
    assert not changed


def _rs_annotated(annotations: dict[str, str] | None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "hello", "namespace": "test"}
    if annotations is not None:
        metadata["annotations"] = annotations
    return {"metadata": metadata, "spec": {"selector": {"matchLabels": {"foo": "bar"}}}}


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        pytest.param(None, True, id="annotations nil"),
        pytest.param({DESIRED_REPLICAS_ANNOTATION: "8", MAX_REPLICAS_ANNOTATION: "20"}, True,
                     id="desiredReplicas update"),
        pytest.param({DESIRED_REPLICAS_ANNOTATION: "10", MAX_REPLICAS_ANNOTATION: "16"}, True,
                     id="maxReplicas update"),
        pytest.param({DESIRED_REPLICAS_ANNOTATION: "10", MAX_REPLICAS_ANNOTATION: "20"}, False,
                     id="needn't update"),
    ],
)
def test_replicas_annotations_need_update(annotations: dict[str, str] | None, expected: bool) -> None:
    assert replicas_annotations_need_update(_rs_annotated(annotations), 10, 20) is expected


@pytest.mark.parametrize(
    ("annotations", "value", "valid", "error"),
    [
        pytest.param(None, 0, False, None, id="invalid empty"),
        pytest.param({"test": "invalid", "foo": "2"}, 0, False, "invalid syntax", id="invalid"),
        pytest.param({"test": "-1", "foo": "2"}, 0, False, "invalid syntax", id="invalid negative"),
        pytest.param({"test": "+1"}, 0, False, "invalid syntax", id="invalid plus sign"),
        pytest.param({"test": "0", "foo": "2"}, 0, True, None, id="valid zero"),
        pytest.param({"test": "13", "foo": "2"}, 13, True, None, id="valid"),
        pytest.param({"test": str(2**31 - 1), "foo": "2"}, 2**31 - 1, True, None, id="valid max"),
        pytest.param({"test": str(2**31), "foo": "2"}, 0, False, "out of range", id="invalid max out of range"),
        pytest.param({"test": str(2**32), "foo": "2"}, 0, False, "out of range", id="invalid max out of range 2"),
    ],
)
def test_get_non_negative_int32_from_annotation(
    annotations: dict[str, str] | None, value: int, valid: bool, error: str | None
) -> None:
    rs = replica_set(deployment(), annotations=annotations)
    if error is None:
        assert get_non_negative_int32_from_annotation(rs, "test") == (value, valid)
    else:
        with pytest.raises(ValueError, match=error):
            get_non_negative_int32_from_annotation(rs, "test")
    # The tolerant readers report a bad value as absent.
    for key, reader in ((DESIRED_REPLICAS_ANNOTATION, get_desired_replicas_annotation),
                        (MAX_REPLICAS_ANNOTATION, get_max_replicas_annotation)):
        renamed = {key if k == "test" else k: v for k, v in (annotations or {}).items()}
        assert reader(replica_set(deployment(), annotations=renamed)) == (value, valid)
