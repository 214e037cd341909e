"""The watch-line decoder gives exactly what parsing and the default transform give, only cheaper."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.pods import pod
from controller_manager.runtime.informers import Sharer, default_transform
from controller_manager.runtime.informers.transform import POD_CONTAINER_KEEP
from controller_manager.runtime.informers.wire import WireDecoder


def _line(event_type: str, obj: Any) -> bytes:
    return orjson.dumps({"type": event_type, "object": obj})


def _expected(obj: dict[str, Any]) -> dict[str, Any]:
    return default_transform(copy.deepcopy(obj))


@pytest.mark.parametrize("replicasets", [1, 7])
def test_realistic_pods_decode_to_the_default_transform(replicasets: int) -> None:
    decoder = WireDecoder(Sharer())
    for i in range(300):
        obj = pod(i, replicasets=replicasets, nodes=5)
        etype, got = decoder.decode(_line("MODIFIED", obj))
        assert etype == "MODIFIED"
        assert got == _expected(obj)
        assert "managedFields" not in got["metadata"]
        assert "volumes" not in got["spec"]
        assert set(got["spec"]["containers"][0]) <= POD_CONTAINER_KEEP


def test_repeated_subtrees_are_one_shared_object() -> None:
    decoder = WireDecoder(Sharer())
    decoded = [decoder.decode(_line("ADDED", pod(i, replicasets=1, nodes=1)))[1] for i in range(5)]
    # From the second sight on, a repeated value is the pooled object itself.
    for path in (("spec", "tolerations"), ("spec", "containers"), ("metadata", "ownerReferences"),
                 ("metadata", "labels"), ("spec", "nodeName"), ("spec", "schedulerName")):
        a, b, c = (d[path[0]][path[1]] for d in decoded[2:])
        assert a is b is c, path
    # Values unique to each object are not pooled.
    assert len({d["metadata"]["uid"] for d in decoded}) == 5


def test_memoryview_lines_decode_like_bytes() -> None:
    obj = pod(1)
    line = b"  " + _line("ADDED", obj) + b"\n"
    assert WireDecoder(Sharer()).decode(memoryview(line)[2:-1]) == ("ADDED", _expected(obj))


def test_other_kinds_only_lose_managed_fields() -> None:
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
          "metadata": {"name": "rs", "namespace": "ns", "resourceVersion": "5",
                       "managedFields": [{"manager": "kubectl"}]},
          "spec": {"replicas": 3, "template": {"spec": {"volumes": [{"name": "v"}], "containers": [
              {"name": "c", "image": "i", "env": [{"name": "A", "value": "1"}]}]}}},
          "status": {"replicas": 3, "conditions": []}}
    _, got = WireDecoder(Sharer()).decode(_line("ADDED", rs))
    assert got == _expected(rs)
    assert got["spec"]["template"]["spec"]["volumes"] == [{"name": "v"}]
    assert "managedFields" not in got["metadata"]


def test_error_events_carry_the_status_as_sent() -> None:
    status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
              "message": "too old resource version: 1 (5)", "reason": "Expired", "code": 410}
    assert WireDecoder(Sharer()).decode(_line("ERROR", status)) == ("ERROR", status)


def test_bookmarks_decode() -> None:
    bookmark = {"kind": "Pod", "apiVersion": "v1",
                "metadata": {"resourceVersion": "12", "annotations": {"k8s.io/initial-events-end": "true"}}}
    assert WireDecoder(Sharer()).decode(_line("BOOKMARK", bookmark)) == ("BOOKMARK", bookmark)


@pytest.mark.parametrize("obj", [
    pytest.param({"kind": "Pod", "metadata": {"name": "p"}, "extra": 1}, id="unknown-top-level-field"),
    pytest.param({"kind": "Pod", "metadata": {"name": "p"}, "spec": None}, id="null-section"),
    pytest.param({"kind": "Pod", "metadata": {"name": "p"}, "spec": [1, 2]}, id="array-section"),
    pytest.param({"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [None, "x", {"name": "c"}]}},
                 id="odd-containers"),
    pytest.param({"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": {"name": "c"}}},
                 id="containers-not-a-list"),
    pytest.param({"kind": "Pod", "metadata": {"name": "p"},
                  "spec": {"containers": [{"name": "c", "image": 1.5, "resources": None, "ports": [1]}]}},
                 id="odd-container-values"),
    pytest.param({"kind": "Pod", "metadata": {"name": "p"},
                  "status": {"containerStatuses": [None, {"name": "c", "containerID": "x", "ready": True}]}},
                 id="odd-statuses"),
    pytest.param({"kind": 5, "metadata": {"name": "p"}}, id="kind-not-a-string"),
    pytest.param({"metadata": {"name": "p", "labels": {"a": "1.0", "b": 1.0, "c": 1, "d": True}}},
                 id="equal-looking-scalars"),
])
def test_odd_shapes_still_match_the_default_transform(obj: dict[str, Any]) -> None:
    decoder = WireDecoder(Sharer())
    for _ in range(3):  # the second and third sights come from the pool
        assert decoder.decode(_line("ADDED", obj)) == ("ADDED", _expected(obj))


def test_a_non_object_is_returned_as_sent() -> None:
    assert WireDecoder(Sharer()).decode(_line("ADDED", [1, 2])) == ("ADDED", [1, 2])


@pytest.mark.parametrize("line", [b"{not json", b'{"type": "ADDED", "object": {"kind": "Pod"', b"[1,"])
def test_invalid_json_raises_value_error(line: bytes) -> None:
    with pytest.raises(ValueError, match="invalid JSON"):
        WireDecoder(Sharer()).decode(line)


def test_a_missing_type_is_a_key_error_like_the_plain_decoder() -> None:
    with pytest.raises((KeyError, ValueError)):
        WireDecoder(Sharer()).decode(b'{"object": {"kind": "Pod"}}')


_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63 - 1),
                     st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))
_json = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["a", "name", "image", "x"]), inner, max_size=3)),
    max_leaves=8)
_keys = {
    "metadata": ["name", "namespace", "uid", "resourceVersion", "labels", "ownerReferences", "managedFields",
                 "generateName", "annotations"],
    "spec": ["containers", "initContainers", "volumes", "nodeName", "tolerations", "restartPolicy", "priority"],
    "status": ["containerStatuses", "podIPs", "hostIPs", "phase", "conditions", "podIP"],
}
_container = st.dictionaries(st.sampled_from(["name", "image", "resources", "restartPolicy", "env", "ports"]),
                             _json, max_size=4)


def _section(name: str) -> st.SearchStrategy[dict[str, Any]]:
    values: dict[str, st.SearchStrategy[Any]] = {}
    for key in _keys[name]:
        if key in ("containers", "initContainers", "containerStatuses"):
            values[key] = st.one_of(st.lists(_container, max_size=2), _json)
        else:
            values[key] = _json
    return st.fixed_dictionaries({}, optional=values)


_objects = st.fixed_dictionaries({}, optional={
    "apiVersion": st.sampled_from(["v1", "apps/v1"]), "kind": st.sampled_from(["Pod", "ReplicaSet", "Pod"]),
    "metadata": _section("metadata"), "spec": _section("spec"), "status": _section("status")})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=st.lists(_objects, min_size=1, max_size=4))
def test_decoding_equals_parse_then_default_transform(objects: list[dict[str, Any]]) -> None:
    decoder = WireDecoder(Sharer())
    # Each object twice, so pooled values are served too.
    for obj in objects + objects:
        assert decoder.decode(_line("MODIFIED", obj)) == ("MODIFIED", _expected(obj))


def _list_body(items: list[dict[str, Any]], **metadata: Any) -> bytes:
    return orjson.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": metadata, "items": items})


def _stamped(obj: dict[str, Any], kind: str = "Pod", api_version: str = "v1") -> dict[str, Any]:
    """What the reflector does to a plainly parsed List item before the transform."""
    return obj if "kind" in obj else {**obj, "kind": kind, "apiVersion": api_version}


def test_list_pages_decode_to_stamped_and_transformed_items() -> None:
    pods = [{k: v for k, v in pod(i, replicasets=2).items() if k not in ("kind", "apiVersion")} for i in range(50)]
    decoder = WireDecoder(Sharer(), kind="Pod", api_version="v1")
    page = decoder.decode_list(_list_body(pods, resourceVersion="77", **{"continue": "abc"}))
    assert page["metadata"] == {"resourceVersion": "77", "continue": "abc"}
    assert page["items"] == [_expected(_stamped(p)) for p in pods]
    # Items are pods by the informer's kind, so they are projected.
    assert all("volumes" not in item["spec"] for item in page["items"])


def test_list_items_with_their_own_kind_keep_it() -> None:
    item = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": {"name": "a"}}
    page = WireDecoder(Sharer(), kind="Pod", api_version="v1").decode_list(_list_body([item]))
    assert page["items"] == [item]


def test_watch_objects_are_never_stamped() -> None:
    obj = {"metadata": {"name": "a", "resourceVersion": "1"}, "spec": {"volumes": [{"name": "v"}]}}
    assert WireDecoder(Sharer(), kind="Pod", api_version="v1").decode(_line("ADDED", obj)) == ("ADDED", obj)


@pytest.mark.parametrize("body", [
    pytest.param(b'{"kind": "PodList", "metadata": {}, "items": null}', id="null-items"),
    pytest.param(b'{"kind": "PodList", "metadata": {}}', id="no-items"),
    pytest.param(b'{"kind": "PodList", "metadata": 5, "items": [{"metadata": {"name": "a"}}]}', id="odd-metadata"),
    pytest.param(b'{"kind": "PodList", "metadata": {}, "items": [1, {"metadata": {"name": "a"}, "extra": 2}]}',
                 id="odd-items"),
])
def test_odd_list_pages_take_the_general_path(body: bytes) -> None:
    page = WireDecoder(Sharer(), kind="Pod", api_version="v1").decode_list(body)
    plain = orjson.loads(body)
    items = plain.get("items")
    expected = [_expected(_stamped(i)) if isinstance(i, dict) else i for i in items] if items else []
    assert (page["items"] or []) == expected
    assert isinstance(page["metadata"], dict)


def test_invalid_list_json_raises_value_error() -> None:
    with pytest.raises(ValueError, match="invalid JSON"):
        WireDecoder(Sharer()).decode_list(b'{"items": [')


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=st.lists(_objects, max_size=4))
def test_list_decoding_equals_parse_stamp_then_default_transform(objects: list[dict[str, Any]]) -> None:
    decoder = WireDecoder(Sharer(), kind="Pod", api_version="v1")
    for _ in range(2):
        page = decoder.decode_list(_list_body(objects))
        assert page["items"] == [_expected(_stamped(o)) for o in objects]


def test_claim_and_csi_volumes_are_kept_whole_and_the_rest_dropped() -> None:
    volumes = [{"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}},
               {"name": "data", "persistentVolumeClaim": {"claimName": "data-0", "readOnly": True}},
               {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}},
               {"name": "inline", "csi": {"driver": "csi.example.com"}},
               {"name": "config", "configMap": {"name": "c"}}]
    obj = {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p"}, "spec": {"volumes": volumes}}
    decoder = WireDecoder(Sharer())
    _, got = decoder.decode(_line("ADDED", obj))
    assert got == _expected(obj)
    assert got["spec"]["volumes"] == volumes[1:4]
    plain = {**obj, "spec": {"volumes": [volumes[0], volumes[4]]}}
    _, got = decoder.decode(_line("ADDED", plain))
    assert got == _expected(plain)
    assert "volumes" not in got["spec"]


def test_pods_of_one_template_differ_where_their_specs_differ() -> None:
    decoder = WireDecoder(Sharer())
    template = pod(0, replicasets=1, nodes=1)
    variants = []
    for i in range(6):  # the template's text is remembered from its second sight on
        obj = copy.deepcopy(template)
        obj["metadata"]["name"] = f"p{i}"
        obj["spec"]["nodeName"] = f"node-{i % 2}"
        if i >= 4:
            obj["spec"]["priority"] = 7  # outside the per-pod fields: another template
            obj["spec"]["hostname"] = f"p{i}"
        variants.append(obj)
    for obj in variants:
        _, got = decoder.decode(_line("ADDED", obj))
        assert got == _expected(obj)
    spec = decoder.decode(_line("ADDED", variants[5]))[1]["spec"]
    assert (spec["priority"], spec["hostname"], spec["nodeName"]) == (7, "p5", "node-1")
