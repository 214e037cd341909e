"""The typed walks over kube-sim's schema: list and map semantics come from the API types' markers."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.sim.apiserver.fieldmanager import typed
from controller_manager.sim.apiserver.fieldmanager.fieldpath import path_string

POD = typed.kind_atom("v1", "Pod")


def _paths(s: Any) -> list[str]:
    return sorted(path_string(p) for p in s.paths())


def _pod(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


@pytest.mark.parametrize(("spec", "expected"), [
    # containers: listType=map keyed by name; ports keyed by containerPort+protocol, protocol defaulting to TCP
    ({"containers": [{"name": "c", "ports": [{"containerPort": 80}]}]},
     ['.spec.containers[name="c"]', '.spec.containers[name="c"].name',
      '.spec.containers[name="c"].ports[containerPort=80,protocol="TCP"]',
      '.spec.containers[name="c"].ports[containerPort=80,protocol="TCP"].containerPort']),
    # tolerations: an atomic list; nodeSelector: an atomic map (+mapType=atomic); overhead: a granular map
    ({"tolerations": [{"key": "k"}], "nodeSelector": {"zone": "a"}, "overhead": {"cpu": "1"}},
     [".spec.nodeSelector", ".spec.overhead.cpu", ".spec.tolerations"]),
    # an empty struct value is owned as a leaf
    ({"securityContext": {}}, [".spec.securityContext"]),
])
def test_to_field_set(spec: dict[str, Any], expected: list[str]) -> None:
    s = typed.to_field_set(_pod(**spec), POD)
    assert [p for p in _paths(s) if p.startswith(".spec.")] == expected


def test_finalizers_are_a_set_and_selectors_atomic() -> None:
    rs = typed.kind_atom("apps/v1", "ReplicaSet")
    obj = {"metadata": {"finalizers": ["a", "b"]}, "spec": {"selector": {"matchLabels": {"x": "1"}}}}
    assert _paths(typed.to_field_set(obj, rs)) == ['.metadata.finalizers[="a"]', '.metadata.finalizers[="b"]',
                                                   ".spec.selector"]


def test_merge_keeps_live_items_and_config_order() -> None:
    live = _pod(containers=[{"name": "a", "image": "1"}, {"name": "b", "image": "1"}])
    config = _pod(containers=[{"name": "c", "image": "3"}, {"name": "a", "image": "2"}])
    merged = typed.merge(live, config, POD)
    assert [(c["name"], c["image"]) for c in merged["spec"]["containers"]] == [("c", "3"), ("a", "2"), ("b", "1")]


def test_compare_reports_only_what_changed() -> None:
    old = _pod(containers=[{"name": "a", "image": "1"}], nodeSelector={"z": "1"}, overhead={"cpu": "1"})
    new = _pod(containers=[{"name": "a", "image": "2"}, {"name": "b"}], nodeSelector={"z": "2"},
               overhead={"memory": "1"})
    cmp = typed.compare(old, new, POD)
    assert _paths(cmp.modified) == ['.spec.containers[name="a"].image', ".spec.nodeSelector"]
    assert _paths(cmp.added) == ['.spec.containers[name="b"]', '.spec.containers[name="b"].name',
                                 ".spec.overhead.memory"]
    assert _paths(cmp.removed) == [".spec.overhead.cpu"]


def test_duplicate_keys_in_an_applied_list_are_refused() -> None:
    config = _pod(containers=[{"name": "a"}, {"name": "a"}])
    with pytest.raises(typed.TypedError, match=r'duplicate entries for key \[name="a"\]'):
        typed.merge(_pod(), config, POD)


def test_a_value_added_whole_reports_every_field_and_keyed_item_under_it() -> None:
    # A status written for the first time: each field a member, keyed list items with their fields, a key
    # given twice only as the item itself, atomic lists and empty values as leaves.
    old = {**_pod(), "status": {"phase": "Pending"}}
    status = {"phase": "Running", "podIP": "10.0.0.1", "podIPs": [],
              "conditions": [{"type": "Ready", "status": "True"}, {"type": "Ready", "status": "False"},
                             {"type": "PodScheduled", "status": "True"}],
              "containerStatuses": [{"name": "app", "ready": True}],
              "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "c"}]}
    cmp = typed.compare(old, {**_pod(), "status": status}, POD)
    assert _paths(cmp.modified) == [".status.phase"]
    assert _paths(cmp.removed) == []
    assert _paths(cmp.added) == [
        ".status.conditions", '.status.conditions[type="PodScheduled"]',
        '.status.conditions[type="PodScheduled"].status', '.status.conditions[type="PodScheduled"].type',
        '.status.conditions[type="Ready"]', ".status.containerStatuses", ".status.podIP", ".status.podIPs",
        ".status.resourceClaimStatuses", '.status.resourceClaimStatuses[name="gpu"]',
        '.status.resourceClaimStatuses[name="gpu"].name',
        '.status.resourceClaimStatuses[name="gpu"].resourceClaimName']
    assert cmp.added.to_fields_v1() == {"f:status": {
        "f:conditions": {".": {}, 'k:{"type":"PodScheduled"}': {".": {}, "f:status": {}, "f:type": {}},
                         'k:{"type":"Ready"}': {}},
        "f:containerStatuses": {}, "f:podIP": {}, "f:podIPs": {},
        "f:resourceClaimStatuses": {".": {}, 'k:{"name":"gpu"}': {".": {}, "f:name": {}, "f:resourceClaimName": {}}}}}
