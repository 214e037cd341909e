"""Bad values in field errors print as apimachinery's ``field.Error.ErrorBody``: ``%v`` for numbers and
booleans, ``%q`` for strings, ``json.Marshal`` for everything else (tables from errors_test.go)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller_manager.api.resources import DAEMONSETS, DEPLOYMENTS, PODS, STATEFULSETS, VOLUMEATTACHMENTS
from controller_manager.sim.apiserver.validation import validate
from controller_manager.sim.apiserver.validation_errors import (
    OMIT,
    FieldError,
    duplicate,
    go_value,
    invalid,
    label_selector_repr,
    not_supported,
)


@pytest.mark.parametrize(("error", "want"), [
    (invalid("path.to.field", "the value", "the details"), 'path.to.field: Invalid value: "the value": the details'),
    (invalid("path.to.field", -42, "the details"), "path.to.field: Invalid value: -42: the details"),
    (invalid("path.to.field", True, "the details"), "path.to.field: Invalid value: true: the details"),
    (invalid("path.to.field", {"stringField": "stringval", "intField": 9376, "boolField": True}, "the details"),
     'path.to.field: Invalid value: {"boolField":true,"intField":9376,"stringField":"stringval"}: the details'),
    (invalid("path.to.field", ["one", "two", "three"], "the details"),
     'path.to.field: Invalid value: ["one","two","three"]: the details'),
    (invalid("path.to.field", {"one": 1, "two": 2, "three": 3}, "the details"),
     'path.to.field: Invalid value: {"one":1,"three":3,"two":2}: the details'),
    (invalid("path.to.field", OMIT, "the details"), "path.to.field: Invalid value: the details"),
    (invalid("path.to.field", None, "the details"), "path.to.field: Invalid value: null: the details"),
    (not_supported("path.to.field", "the value", ["val1", "val2"]),
     'path.to.field: Unsupported value: "the value": supported values: "val1", "val2"'),
    (duplicate("path.to.field", "the value"), 'path.to.field: Duplicate value: "the value"'),
])
def test_error_body_table(error: FieldError, want: str) -> None:
    assert str(error) == want


@pytest.mark.parametrize(("value", "want"), [
    # %v of a float64: shortest digits, exponent form from 1e+06 on and below 1e-04.
    (0.5, "0.5"), (1e6, "1e+06"), (123456.0, "123456"), (1e-5, "1e-05"), (0.0001, "0.0001"), (2.0, "2"),
    # %q: Go escapes, not JSON's.
    ('a"b\\c', '"a\\"b\\\\c"'), ("x\ny\x01", '"x\\ny\\x01"'), ("soft\u00adhyphen", '"soft\\u00adhyphen"'),
    ("héllo", '"héllo"'),
    # json.Marshal escapes HTML characters and keeps struct-less maps sorted.
    (["<a>", "b&c"], '["\\u003ca\\u003e","b\\u0026c"]'), ({"b": [1, 2.5], "a": None}, '{"a":null,"b":[1,2.5]}'),
    ([1e21, 1e-7, 1e6], "[1e+21,1e-7,1000000]"), ([], "[]"), ({}, "{}"),
])
def test_go_value(value: Any, want: str) -> None:
    assert go_value(value) == want


def test_label_selector_marshals_with_its_json_tags() -> None:
    sel = {"matchLabels": {"b": "2", "a": "1"}, "matchExpressions": [
        {"key": "k", "operator": "Exists"}, {"key": "t", "operator": "In", "values": ["x", "y"]}]}
    assert label_selector_repr(sel).text == (
        '{"matchLabels":{"a":"1","b":"2"},"matchExpressions":[{"key":"k","operator":"Exists"},'
        '{"key":"t","operator":"In","values":["x","y"]}]}')
    assert label_selector_repr({}).text == "{}"
    assert label_selector_repr(None).text == "null"


def _template(labels: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"labels": labels}, "spec": {
        "containers": [{"name": "c", "image": "nginx", "imagePullPolicy": "Always",
                        "terminationMessagePolicy": "File"}],
        "restartPolicy": "Always", "dnsPolicy": "ClusterFirst"}}


def _messages(res: Any, obj: dict[str, Any]) -> list[str]:
    return [str(e) for e in validate(res, obj, None)]


def test_internal_strategy_structs_print_with_go_field_names() -> None:
    deploy = {"metadata": {"name": "web", "namespace": "default"}, "spec": {
        "replicas": 1, "selector": {"matchLabels": {"app": "web"}}, "template": _template({"app": "web"}),
        "strategy": {"type": "Blue", "rollingUpdate": {"maxSurge": "25%"}}, "revisionHistoryLimit": 10,
        "progressDeadlineSeconds": 600}}
    assert 'spec.strategy: Unsupported value: {"Type":"Blue","RollingUpdate":{"MaxUnavailable":0,"MaxSurge":"25%"}}: ' \
        'supported values: "Recreate", "RollingUpdate"' in _messages(DEPLOYMENTS, deploy)
    ds = copy.deepcopy(deploy)
    ds["spec"] = {"selector": {"matchLabels": {"app": "web"}}, "template": _template({"app": "web"}),
                  "updateStrategy": {"type": "Green"}, "revisionHistoryLimit": 10}
    assert 'spec.updateStrategy: Unsupported value: {"Type":"Green","RollingUpdate":null}: supported values: ' \
        '"RollingUpdate", "OnDelete"' in _messages(DAEMONSETS, ds)
    sts = copy.deepcopy(deploy)
    sts["spec"] = {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}, "template": _template({"app": "web"}),
                   "podManagementPolicy": "Parallel", "revisionHistoryLimit": 10,
                   "updateStrategy": {"type": "OnDelete", "rollingUpdate": {"partition": 2}}}
    assert 'spec.updateStrategy.rollingUpdate: Invalid value: {"Partition":2,"MaxUnavailable":null}: only allowed ' \
        "for updateStrategy 'RollingUpdate'" in _messages(STATEFULSETS, sts)


def _pod(owner_refs: list[dict[str, Any]]) -> dict[str, Any]:
    pod = {"metadata": {"name": "p", "namespace": "default", "ownerReferences": owner_refs},
           "spec": _template({})["spec"]}
    return pod


def test_owner_references_as_objectmeta_validates_them() -> None:
    refs = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "a", "uid": "1", "controller": True},
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "b", "uid": "2", "controller": True},
            {"apiVersion": "", "kind": "", "name": "", "uid": ""},
            {"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "3"}]
    msgs = _messages(PODS, _pod(refs))
    assert msgs == [
        'metadata.ownerReferences: Invalid value: [{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"a","uid":"1",'
        '"controller":true},{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"b","uid":"2","controller":true},'
        '{"apiVersion":"","kind":"","name":"","uid":""},{"apiVersion":"v1","kind":"Event","name":"e","uid":"3"}]: '
        'Only one reference can have Controller set to true. Found "true" in references for ReplicaSet/a and '
        "ReplicaSet/b",
        "metadata.ownerReferences[2].apiVersion: Required value: must not be empty",
        "metadata.ownerReferences[2].kind: Required value: must not be empty",
        "metadata.ownerReferences[2].name: Required value: must not be empty",
        "metadata.ownerReferences[2].uid: Required value: must not be empty",
        'metadata.ownerReferences[3]: Invalid value: {"apiVersion":"v1","kind":"Event","name":"e","uid":"3"}: '
        "/v1, Kind=Event is disallowed from being an owner",
    ]


def test_volume_attachment_spec_prints_as_the_internal_struct() -> None:
    old = {"metadata": {"name": "va"}, "spec": {"attacher": "csi.example.com", "nodeName": "n1",
                                                "source": {"persistentVolumeName": "pv1"}}}
    new = copy.deepcopy(old)
    new["spec"]["nodeName"] = "n2"
    assert [str(e) for e in validate(VOLUMEATTACHMENTS, new, old)] == [
        'spec: Invalid value: {"Attacher":"csi.example.com","Source":{"PersistentVolumeName":"pv1",'
        '"InlineVolumeSpec":null},"NodeName":"n2"}: field is immutable']
