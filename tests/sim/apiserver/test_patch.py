"""PATCH semantics: RFC 7386 and RFC 6902 examples, strategic merge cases in the spirit of
strategicpatch/patch_test.go (each directive and list kind), and the patches kubectl and the daemon send."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

from controller_manager.sim.apiserver import patch_schema
from controller_manager.sim.apiserver.patch import (
    PatchError,
    apply_patch,
    json_merge_patch,
    json_patch,
    supports_strategic,
)
from controller_manager.sim.apiserver.patch_schema import merged

# --- RFC 7386 appendix A ------------------------------------------------------------------------------

RFC7386 = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("original", "patch", "want"), RFC7386)
def test_rfc7386_examples(original: Any, patch: Any, want: Any) -> None:
    assert json_merge_patch(original, patch) == want
    if isinstance(want, dict):
        assert apply_patch(original, json.dumps(patch).encode(), "merge", "Foo") == want
    else:
        with pytest.raises(PatchError, match="cannot unmarshal"):
            apply_patch(original, json.dumps(patch).encode(), "merge", "Foo")


def test_merge_patch_does_not_mutate_inputs() -> None:
    original = {"metadata": {"labels": {"a": "1"}}}
    patch = {"metadata": {"labels": {"b": "2"}}}
    snapshot = (copy.deepcopy(original), copy.deepcopy(patch))
    out = apply_patch(original, patch, "application/merge-patch+json", "Pod")
    assert out == {"metadata": {"labels": {"a": "1", "b": "2"}}}
    assert (original, patch) == snapshot
    out["metadata"]["labels"]["c"] = "3"
    assert "c" not in original["metadata"]["labels"]


# --- RFC 6902 appendix A ------------------------------------------------------------------------------

RFC6902_OK = [
    pytest.param({"foo": "bar"}, [{"op": "add", "path": "/baz", "value": "qux"}], {"baz": "qux", "foo": "bar"},
                 id="A.1-add-member"),
    pytest.param({"foo": ["bar", "baz"]}, [{"op": "add", "path": "/foo/1", "value": "qux"}],
                 {"foo": ["bar", "qux", "baz"]}, id="A.2-add-array-element"),
    pytest.param({"baz": "qux", "foo": "bar"}, [{"op": "remove", "path": "/baz"}], {"foo": "bar"},
                 id="A.3-remove-member"),
    pytest.param({"foo": ["bar", "qux", "baz"]}, [{"op": "remove", "path": "/foo/1"}], {"foo": ["bar", "baz"]},
                 id="A.4-remove-element"),
    pytest.param({"baz": "qux", "foo": "bar"}, [{"op": "replace", "path": "/baz", "value": "boo"}],
                 {"baz": "boo", "foo": "bar"}, id="A.5-replace"),
    pytest.param({"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}},
                 [{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}],
                 {"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}}, id="A.6-move"),
    pytest.param({"foo": ["all", "grass", "cows", "eat"]}, [{"op": "move", "from": "/foo/1", "path": "/foo/3"}],
                 {"foo": ["all", "cows", "eat", "grass"]}, id="A.7-move-element"),
    pytest.param({"baz": "qux", "foo": ["a", 2, "c"]},
                 [{"op": "test", "path": "/baz", "value": "qux"}, {"op": "test", "path": "/foo/1", "value": 2}],
                 {"baz": "qux", "foo": ["a", 2, "c"]}, id="A.8-test-success"),
    pytest.param({"foo": "bar"}, [{"op": "add", "path": "/child", "value": {"grandchild": {}}}],
                 {"foo": "bar", "child": {"grandchild": {}}}, id="A.10-add-nested"),
    pytest.param({"foo": "bar"}, [{"op": "add", "path": "/baz", "value": "qux", "xyz": 123}],
                 {"foo": "bar", "baz": "qux"}, id="A.11-ignore-unknown-members"),
    pytest.param({"foo": ["bar"]}, [{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}],
                 {"foo": ["bar", ["abc", "def"]]}, id="A.16-append-array"),
    pytest.param({"/": 9, "~1": 10}, [{"op": "test", "path": "/~01", "value": 10}], {"/": 9, "~1": 10},
                 id="A.14-escapes"),
    pytest.param({"a": {"b": 1}}, [{"op": "copy", "from": "/a", "path": "/c"}], {"a": {"b": 1}, "c": {"b": 1}},
                 id="copy"),
    pytest.param({"a": [1, 2, 3]}, [{"op": "remove", "path": "/a/-1"}], {"a": [1, 2]}, id="negative-index"),
    pytest.param({"a": 1}, [{"op": "replace", "path": "", "value": {"b": 2}}], {"b": 2}, id="replace-root"),
]


@pytest.mark.parametrize(("original", "ops", "want"), RFC6902_OK)
def test_rfc6902_examples(original: Any, ops: list[Any], want: Any) -> None:
    assert apply_patch(original, json.dumps(ops), "json", "Pod") == want
    assert json_patch(original, ops) == want


RFC6902_FAIL = [
    pytest.param({"baz": "qux"}, [{"op": "test", "path": "/baz", "value": "bar"}], "testing value /baz failed",
                 id="A.9-test-fails"),
    pytest.param({"foo": "bar"}, [{"op": "add", "path": "/baz/bat", "value": "qux"}], "doc is missing path",
                 id="A.12-add-to-missing-parent"),
    pytest.param({"foo": "bar"}, [{"op": "remove", "path": "/nope"}], "Unable to remove nonexistent key",
                 id="remove-missing"),
    pytest.param({"foo": "bar"}, [{"op": "replace", "path": "/nope", "value": 1}], "doc is missing key",
                 id="replace-missing"),
    pytest.param({"foo": [1]}, [{"op": "add", "path": "/foo/5", "value": 1}], "invalid index referenced",
                 id="index-out-of-range"),
    pytest.param({"foo": 1}, [{"op": "frobnicate", "path": "/foo"}], "Unexpected kind: frobnicate", id="bad-op"),
    pytest.param({"foo": 1}, [{"op": "move", "from": "/nope", "path": "/foo"}], "missing from path",
                 id="move-missing"),
    pytest.param({"foo": "1"}, [{"op": "test", "path": "/foo", "value": 1}], "test failed", id="A.15-type-differs"),
]


@pytest.mark.parametrize(("original", "ops", "message"), RFC6902_FAIL)
def test_rfc6902_failures_are_422(original: Any, ops: list[Any], message: str) -> None:
    with pytest.raises(PatchError, match=message) as info:
        apply_patch(original, ops, "json", "Pod")
    assert info.value.code == 422
    status = info.value.status()
    assert status["reason"] == "Invalid"
    assert status["details"]["causes"][0]["reason"] == "UnexpectedServerResponse"


def test_json_patch_is_all_or_nothing() -> None:
    original = {"a": 1}
    with pytest.raises(PatchError):
        apply_patch(original, [{"op": "add", "path": "/b", "value": 2}, {"op": "remove", "path": "/zz"}], "json", "X")
    assert original == {"a": 1}


@pytest.mark.parametrize(
    ("patch", "ptype"),
    [(b"{not json", "merge"), (b"{not json", "strategic"), (b'{"op": "add"}', "json"), (b"[1]", "strategic")],
)
def test_undecodable_patches_are_400(patch: bytes, ptype: str) -> None:
    with pytest.raises(PatchError) as info:
        apply_patch({}, patch, ptype, "Pod")
    assert info.value.code == 400
    assert info.value.status()["reason"] == "BadRequest"


def test_unknown_patch_type_is_415() -> None:
    with pytest.raises(PatchError) as info:
        apply_patch({}, b"{}", "application/apply-patch+cbor", "Pod")
    assert info.value.code == 415


# --- strategic merge: upstream-style cases on a test schema --------------------------------------------

@pytest.fixture
def merge_item_schema() -> Iterator[None]:
    """The mergeItem struct of upstream's tests: merging and non-merging lists of maps and of ints."""
    patch_schema.TYPES["MergeItem"] = {
        "mergingList": merged("name", "MergeItem"),
        "mergingIntList": merged(),
        "simpleMap": "MergeItem",
        "mergeItemPtr": merged("name", "MergeItem"),
    }
    patch_schema.ROOTS["MergeItem"] = "MergeItem"
    yield
    del patch_schema.TYPES["MergeItem"]
    del patch_schema.ROOTS["MergeItem"]


SMP_CASES = [
    pytest.param({"name": "1", "value": "1"}, {"value": "2", "other": "a"}, {"name": "1", "value": "2", "other": "a"},
                 id="add-and-replace-scalars"),
    pytest.param({"name": "1", "value": "1", "other": "a"}, {"value": None}, {"name": "1", "other": "a"},
                 id="null-deletes-key"),
    pytest.param({"name": "1"}, {"gone": None}, {"name": "1"}, id="null-for-absent-key-ignored"),
    pytest.param({"simpleMap": {"key1": "1", "key2": "2"}}, {"simpleMap": {"key3": "3", "key1": None}},
                 {"simpleMap": {"key2": "2", "key3": "3"}}, id="nested-map-merge"),
    pytest.param({"simpleMap": {"key1": "1"}, "other": "a"}, {"simpleMap": {"$patch": "replace", "key2": "2"}},
                 {"simpleMap": {"key2": "2"}, "other": "a"}, id="map-patch-replace"),
    pytest.param({"simpleMap": {"key1": "1"}, "other": "a"}, {"simpleMap": {"$patch": "delete"}},
                 {"simpleMap": {}, "other": "a"}, id="map-patch-delete"),
    pytest.param({"name": "1", "other": "a"}, {"$patch": "replace", "name": "2"}, {"name": "2"},
                 id="top-level-replace"),
    pytest.param({"mergingIntList": [1, 2]}, {"mergingIntList": [2, 3]}, {"mergingIntList": [1, 2, 3]},
                 id="merge-int-list"),
    pytest.param({"mergingIntList": [1, 2, 3]}, {"$deleteFromPrimitiveList/mergingIntList": [2]},
                 {"mergingIntList": [1, 3]}, id="delete-from-primitive-list"),
    pytest.param({"mergingIntList": [1, 2, 3]},  # new items first, as upstream orders them
                 {"$deleteFromPrimitiveList/mergingIntList": [1], "mergingIntList": [4]},
                 {"mergingIntList": [4, 2, 3]}, id="delete-and-add-primitive"),
    pytest.param({"nonMergingList": [{"name": "1"}, {"name": "2"}]}, {"nonMergingList": [{"name": "3"}]},
                 {"nonMergingList": [{"name": "3"}]}, id="non-merging-list-replaced"),
    pytest.param({"mergingList": [{"name": "1", "value": "1"}, {"name": "2", "value": "2"}]},
                 {"mergingList": [{"name": "2", "value": "22", "other": "b"}, {"name": "3", "value": "3"}]},
                 {"mergingList": [{"name": "1", "value": "1"}, {"name": "2", "value": "22", "other": "b"},
                                  {"name": "3", "value": "3"}]}, id="merge-list-of-maps"),
    pytest.param({"mergingList": [{"name": "1", "value": "1", "other": "x"}]},
                 {"mergingList": [{"name": "1", "other": None}]},
                 {"mergingList": [{"name": "1", "value": "1"}]}, id="null-inside-merged-item"),
    pytest.param({"mergingList": [{"name": "1"}, {"name": "2"}]},
                 {"mergingList": [{"name": "1", "$patch": "delete"}]}, {"mergingList": [{"name": "2"}]},
                 id="delete-item-by-key"),
    pytest.param({"mergingList": [{"name": "1"}, {"name": "2"}]},
                 {"mergingList": [{"name": "3"}, {"$patch": "replace"}]}, {"mergingList": [{"name": "3"}]},
                 id="replace-list"),
    pytest.param({"mergingList": [{"name": "1", "mergingList": [{"name": "a", "v": 1}]}]},
                 {"mergingList": [{"name": "1", "mergingList": [{"name": "a", "v": 2}, {"name": "b"}]}]},
                 {"mergingList": [{"name": "1", "mergingList": [{"name": "a", "v": 2}, {"name": "b"}]}]},
                 id="nested-merging-lists"),
    pytest.param({"mergingList": [{"name": "1"}, {"name": "2"}, {"name": "3"}]},
                 {"$setElementOrder/mergingList": [{"name": "3"}, {"name": "1"}, {"name": "2"}]},
                 {"mergingList": [{"name": "3"}, {"name": "1"}, {"name": "2"}]}, id="set-element-order-only"),
    pytest.param({"mergingList": [{"name": "1"}, {"name": "2"}, {"name": "3"}]},
                 {"$setElementOrder/mergingList": [{"name": "2"}, {"name": "1"}]},
                 {"mergingList": [{"name": "2"}, {"name": "1"}, {"name": "3"}]},
                 id="set-element-order-keeps-server-only-items"),
    pytest.param({"mergingList": [{"name": "A"}, {"name": "B"}]},
                 {"$setElementOrder/mergingList": [{"name": "A"}, {"name": "C"}, {"name": "B"}],
                  "mergingList": [{"name": "C", "value": "c"}]},
                 {"mergingList": [{"name": "A"}, {"name": "C", "value": "c"}, {"name": "B"}]},
                 id="set-element-order-inserts-in-the-middle"),
    pytest.param({"mergingIntList": [1, 2, 3]},
                 {"$setElementOrder/mergingIntList": [3, 1, 4], "mergingIntList": [4],
                  "$deleteFromPrimitiveList/mergingIntList": [2]},
                 {"mergingIntList": [3, 1, 4]}, id="set-element-order-primitives"),
    pytest.param({},
                 {"$setElementOrder/mergingList": [{"name": "b"}, {"name": "a"}],
                  "mergingList": [{"name": "b"}, {"name": "a"}]},
                 {"mergingList": [{"name": "b"}, {"name": "a"}]}, id="set-element-order-new-list"),
    pytest.param({"simpleMap": {"a": 1, "b": 2, "c": 3}}, {"simpleMap": {"$retainKeys": ["a", "d"], "d": 4}},
                 {"simpleMap": {"a": 1, "d": 4}}, id="retain-keys"),
    pytest.param({"name": "1"}, {"mergingList": [{"name": "x", "$patch": "delete"}]}, {"name": "1"},
                 id="delete-directive-on-absent-list"),
    pytest.param({"name": "1"}, {"mergingList": [{"name": "x", "drop": None}]},
                 {"name": "1", "mergingList": [{"name": "x"}]}, id="new-list-drops-nulls"),
    pytest.param({"mergingList": "scalar"}, {"mergingList": [{"name": "1"}]}, {"mergingList": [{"name": "1"}]},
                 id="type-change-replaces"),
]


@pytest.mark.parametrize(("current", "patch", "want"), SMP_CASES)
@pytest.mark.usefixtures("merge_item_schema")
def test_strategic_merge_cases(current: dict[str, Any], patch: dict[str, Any], want: dict[str, Any]) -> None:
    snapshot = copy.deepcopy(current)
    assert apply_patch(current, json.dumps(patch), "strategic", "MergeItem") == want
    assert current == snapshot


SMP_ERRORS = [
    pytest.param({"mergingList": [{"name": "1"}]}, {"mergingList": [{"value": "x"}]},
                 "does not contain declared merge key", id="missing-merge-key"),
    pytest.param({"mergingList": [{"name": "1"}]}, {"mergingList": [{"$patch": "delete"}]},
                 "does not contain declared merge key", id="delete-without-key"),
    pytest.param({"mergingList": [{"name": "1"}]}, {"mergingList": [{"$patch": "merge"}]},
                 "merging lists cannot yet be specified", id="merge-directive-in-list"),
    pytest.param({"simpleMap": {"a": 1}}, {"simpleMap": {"$patch": "bogus"}}, "Unknown patch type", id="bad-directive"),
    pytest.param({"simpleMap": {"a": 1}}, {"simpleMap": {"$retainKeys": "a"}}, "retainKeys", id="bad-retain-keys"),
    pytest.param({"mergingList": [{"name": "1"}, {"name": "2"}]},
                 {"$setElementOrder/mergingList": [{"name": "1"}], "mergingList": [{"name": "2"}]},
                 "doesn't match", id="set-element-order-mismatch"),
    pytest.param({"mergingIntList": [1]}, {"mergingIntList": [{"name": "1"}]}, "mismatched types",
                 id="mixed-list-types"),
]


@pytest.mark.parametrize(("current", "patch", "message"), SMP_ERRORS)
@pytest.mark.usefixtures("merge_item_schema")
def test_strategic_merge_errors(current: dict[str, Any], patch: dict[str, Any], message: str) -> None:
    with pytest.raises(PatchError, match=message):
        apply_patch(current, patch, "strategic", "MergeItem")


# --- strategic merge on real kinds --------------------------------------------------------------------
# Without $setElementOrder upstream puts items the live list lacks before the server-only ones
# (mergeSortedSlice cannot rank an item absent from the live order), so new items come first.

def _deployment() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "uid": "d-1", "labels": {"app": "web"},
                     "finalizers": ["a", "b"],
                     "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "x", "uid": "u1"},
                                         {"apiVersion": "v1", "kind": "Y", "name": "y", "uid": "u2"}]},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {"name": "web", "image": "nginx:1.24",
                         "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                         "ports": [{"containerPort": 80, "protocol": "TCP"}],
                         "volumeMounts": [{"name": "data", "mountPath": "/data"}]},
                        {"name": "sidecar", "image": "busybox"},
                    ],
                    "volumes": [{"name": "data", "emptyDir": {}}],
                    "tolerations": [{"key": "a", "operator": "Exists"}],
                },
            },
        },
        "status": {"conditions": [{"type": "Available", "status": "True"},
                                  {"type": "Progressing", "status": "True"}]},
    }


def _sp(obj: dict[str, Any], patch: dict[str, Any], kind: str = "Deployment") -> dict[str, Any]:
    return apply_patch(obj, json.dumps(patch).encode(), "strategic", kind)


def test_kubectl_apply_three_way_patch_updates_one_container() -> None:
    patch = {
        "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}\n"}},
        "spec": {"replicas": 3, "template": {"spec": {
            "$setElementOrder/containers": [{"name": "web"}, {"name": "sidecar"}],
            "containers": [{"image": "nginx:1.25", "name": "web"}]}}},
    }
    out = _sp(_deployment(), patch)
    containers = out["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["web", "sidecar"]
    assert containers[0]["image"] == "nginx:1.25"
    assert containers[0]["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    assert out["spec"]["replicas"] == 3
    assert out["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] == "{}\n"


def test_kubectl_apply_removes_a_container_and_env_and_strategy_params() -> None:
    patch = {"spec": {
        "strategy": {"$retainKeys": ["type"], "type": "Recreate", "rollingUpdate": None},
        "template": {"spec": {
            "$setElementOrder/containers": [{"name": "web"}],
            "containers": [{"name": "sidecar", "$patch": "delete"},
                           {"name": "web", "$setElementOrder/env": [{"name": "B"}],
                            "env": [{"name": "A", "$patch": "delete"}]}]}}}}
    out = _sp(_deployment(), patch)
    spec = out["spec"]["template"]["spec"]
    assert [c["name"] for c in spec["containers"]] == ["web"]
    assert spec["containers"][0]["env"] == [{"name": "B", "value": "2"}]
    assert out["spec"]["strategy"] == {"type": "Recreate"}


@pytest.mark.parametrize(
    ("patch", "path", "want"),
    [
        pytest.param({"spec": {"template": {"metadata": {"annotations": {
            "kubectl.kubernetes.io/restartedAt": "2024-05-01T10:00:00Z"}}}}},
            ("spec", "template", "metadata", "annotations"),
            {"kubectl.kubernetes.io/restartedAt": "2024-05-01T10:00:00Z"}, id="rollout-restart"),
        pytest.param({"spec": {"paused": True}}, ("spec", "paused"), True, id="rollout-pause"),
        pytest.param({"spec": {"paused": None}}, ("spec",), None, id="rollout-resume"),
        pytest.param({"spec": {"template": {"spec": {"tolerations": [{"key": "b", "operator": "Exists"}]}}}},
                     ("spec", "template", "spec", "tolerations"), [{"key": "b", "operator": "Exists"}],
                     id="tolerations-replaced"),
        pytest.param({"spec": {"template": {"spec": {"containers": [
            {"name": "web", "ports": [{"containerPort": 443}]}]}}}},
            ("spec", "template", "spec", "containers", 0, "ports"),
            [{"containerPort": 443}, {"containerPort": 80, "protocol": "TCP"}], id="ports-by-containerPort"),
        pytest.param({"spec": {"template": {"spec": {"containers": [
            {"name": "web", "volumeMounts": [{"mountPath": "/data", "readOnly": True}]}]}}}},
            ("spec", "template", "spec", "containers", 0, "volumeMounts"),
            [{"name": "data", "mountPath": "/data", "readOnly": True}], id="volumeMounts-by-mountPath"),
        pytest.param({"spec": {"template": {"spec": {"volumes": [{"name": "cfg", "configMap": {"name": "c"}}]}}}},
                     ("spec", "template", "spec", "volumes"),
                     [{"name": "cfg", "configMap": {"name": "c"}}, {"name": "data", "emptyDir": {}}],
                     id="volumes-by-name"),
        pytest.param({"metadata": {"finalizers": ["c", "a"]}}, ("metadata", "finalizers"), ["c", "a", "b"],
                     id="finalizers-set-merge"),
        pytest.param({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}, ("metadata", "finalizers"), ["b"],
                     id="finalizers-delete"),
        pytest.param({"status": {"conditions": [{"type": "Progressing", "status": "False"}]}},
                     ("status", "conditions"),
                     [{"type": "Available", "status": "True"}, {"type": "Progressing", "status": "False"}],
                     id="conditions-by-type"),
    ],
)
def test_kubectl_style_patches(patch: dict[str, Any], path: tuple[Any, ...], want: Any) -> None:
    out: Any = _sp(_deployment(), patch)
    for step in path:
        out = out[step]
    if want is None:
        assert "paused" not in out
    else:
        assert out == want


def test_daemon_release_patch_deletes_owner_reference_by_uid() -> None:
    patch = {"metadata": {"ownerReferences": [{"$patch": "delete", "uid": "u1"}], "uid": "d-1"}}
    out = _sp(_deployment(), patch)
    assert out["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Y", "name": "y", "uid": "u2"}]
    pod = {"metadata": {"name": "p", "uid": "p-1"}}
    assert _sp(pod, patch, "Pod") == {"metadata": {"name": "p", "uid": "d-1"}}


def test_daemon_adopt_patch_adds_controller_reference() -> None:
    ref = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-1", "controller": True,
           "blockOwnerDeletion": True}
    patch = {"metadata": {"ownerReferences": [ref], "uid": "p-1"}}
    pod = {"metadata": {"name": "p", "uid": "p-1", "ownerReferences": [{"uid": "other", "name": "o"}]}}
    out = _sp(pod, patch, "Pod")
    assert out["metadata"]["ownerReferences"] == [ref, {"uid": "other", "name": "o"}]


def test_kubectl_cordon_and_node_taints_are_replaced() -> None:
    node = {"metadata": {"name": "n1"}, "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]},
            "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname",
                                                                                     "address": "n1"}],
                       "conditions": [{"type": "Ready", "status": "True"}]}}
    out = _sp(node, {"spec": {"unschedulable": True, "taints": [{"key": "b", "effect": "NoExecute"}]},
                     "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.2"}],
                                "conditions": [{"type": "Ready", "status": "Unknown"}]}}, "Node")
    assert out["spec"] == {"unschedulable": True, "taints": [{"key": "b", "effect": "NoExecute"}]}
    assert out["status"]["addresses"] == [{"type": "InternalIP", "address": "10.0.0.2"},
                                          {"type": "Hostname", "address": "n1"}]
    assert out["status"]["conditions"] == [{"type": "Ready", "status": "Unknown"}]


def test_service_ports_merge_by_port_and_cronjob_nested_template() -> None:
    svc = {"spec": {"ports": [{"port": 80, "targetPort": 8080}]}}
    out = _sp(svc, {"spec": {"ports": [{"port": 80, "targetPort": 9090}, {"port": 443}]}}, "Service")
    assert out["spec"]["ports"] == [{"port": 80, "targetPort": 9090}, {"port": 443}]
    cj = {"spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "a"}]}}}}}}
    out = _sp(cj, {"spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [
        {"name": "d", "image": "b"}]}}}}}}, "CronJob")
    names = [c["name"] for c in out["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]]
    assert names == ["d", "c"]


def test_kubectl_rollout_undo_json_patch() -> None:
    template = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "old"}]}}
    ops = [{"op": "replace", "path": "/spec/template", "value": template},
           {"op": "replace", "path": "/metadata/annotations", "value": {"deployment.kubernetes.io/revision": "1"}}]
    obj = _deployment()
    obj["metadata"]["annotations"] = {"deployment.kubernetes.io/revision": "2"}
    out = apply_patch(obj, json.dumps(ops).encode(), "application/json-patch+json", "Deployment")
    assert out["spec"]["template"] == template
    assert out["metadata"]["annotations"] == {"deployment.kubernetes.io/revision": "1"}


def test_unknown_kind_falls_back_to_merge_semantics() -> None:
    assert not supports_strategic("Widget")
    assert supports_strategic("Deployment")
    assert supports_strategic("ConfigMap")
    obj = {"spec": {"items": [{"name": "a"}], "keep": 1}}
    out = apply_patch(obj, {"spec": {"items": [{"name": "b"}]}}, "strategic", "Widget")
    assert out == {"spec": {"items": [{"name": "b"}], "keep": 1}}


def test_service_cidr_finalizers_and_conditions_merge() -> None:
    """The ServiceCIDR controller's patches: a finalizer added to the set, then taken out with
    ``$deleteFromPrimitiveList`` (a JSON merge patch would leave it there); status conditions merge by type."""
    assert supports_strategic("ServiceCIDR")
    assert supports_strategic("IPAddress")
    cidr = {"metadata": {"name": "extra", "finalizers": ["example.com/keep"]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Other", "status": "True"}]}}
    f = "networking.k8s.io/service-cidr-finalizer"
    added = _sp(cidr, {"metadata": {"finalizers": [f]}}, "ServiceCIDR")
    assert sorted(added["metadata"]["finalizers"]) == sorted([f, "example.com/keep"])
    removed = _sp(added, {"metadata": {"$deleteFromPrimitiveList/finalizers": [f]}}, "ServiceCIDR")
    assert removed["metadata"]["finalizers"] == ["example.com/keep"]
    out = _sp(cidr, {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}, "ServiceCIDR")
    assert out["status"]["conditions"] == [{"type": "Ready", "status": "False"}, {"type": "Other", "status": "True"}]
