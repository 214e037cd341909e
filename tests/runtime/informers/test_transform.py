"""The default transform: managedFields stripped, repeated strings and sub-trees shared, and what that saves."""

from __future__ import annotations

import copy
import gc
import json
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import pytest

from bench.pods import pod_json
from controller_manager.api.meta import key_of
from controller_manager.api.pods import pod_ips
from controller_manager.api.resources import PODS
from controller_manager.runtime.informers import Sharer, Store, compose, default_transform, strip_managed_fields
from controller_manager.runtime.informers.informer import builtin_indexers
from controller_manager.runtime.informers.transform import project_pod
from controller_manager.runtime.informers.wire import WireDecoder

ROOT = Path(__file__).resolve().parents[3]


def _pod(i: int) -> dict[str, Any]:
    parsed: dict[str, Any] = orjson.loads(pod_json(i, replicasets=10, nodes=20))
    return parsed


def test_strip_managed_fields_builds_a_new_object() -> None:
    pod = _pod(0)
    original = copy.deepcopy(pod)
    stripped = strip_managed_fields(pod)
    assert "managedFields" not in stripped["metadata"]
    assert pod == original  # the input is never mutated
    original["metadata"].pop("managedFields")
    assert stripped == original


def test_strip_managed_fields_keeps_last_applied_configuration() -> None:
    obj = {"metadata": {"name": "x", "managedFields": [{}],
                        "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}}}
    assert strip_managed_fields(obj)["metadata"] == {
        "name": "x", "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}}


def test_strip_managed_fields_without_any_returns_the_input() -> None:
    obj = {"metadata": {"name": "x"}}
    assert strip_managed_fields(obj) is obj


def test_share_preserves_content_and_shares_identical_subtrees() -> None:
    sharer = Sharer()
    # Same ReplicaSet (i % 10), same node (i % 20).
    pods = [sharer.share(strip_managed_fields(_pod(i))) for i in (0, 20, 40, 60)]
    for i, shared in zip((0, 20, 40, 60), pods, strict=True):
        assert shared == strip_managed_fields(_pod(i))
    # Sub-trees are pooled once seen twice; from then on every copy is the same object. (The doorkeeper's slot
    # for a sub-tree may be taken by another one between two sightings, which delays pooling by one sighting:
    # so the third and fourth copies are compared.)
    assert pods[2]["spec"]["tolerations"] is pods[3]["spec"]["tolerations"]
    assert pods[2]["metadata"]["ownerReferences"] is pods[3]["metadata"]["ownerReferences"]
    assert pods[2]["metadata"]["labels"] is pods[3]["metadata"]["labels"]
    assert pods[2]["spec"]["containers"][0]["resources"] is pods[3]["spec"]["containers"][0]["resources"]
    assert pods[2]["spec"]["volumes"][0]["projected"] is pods[3]["spec"]["volumes"][0]["projected"]
    # Strings are interned: the image of every pod of the ReplicaSet is one string.
    assert pods[0]["spec"]["containers"][0]["image"] is pods[3]["status"]["containerStatuses"][0]["image"]
    # Per-object parts are never shared.
    assert pods[2]["metadata"] is not pods[3]["metadata"]
    assert pods[2]["spec"] is not pods[3]["spec"]


def test_share_never_conflates_equal_looking_scalars() -> None:
    sharer = Sharer()
    objs = [sharer.share({"a": {"b": {"v": value}}}) for value in (1, True, 1.0, 1, True, 1.0, "1")]
    assert [type(o["a"]["b"]["v"]) for o in objs] == [int, bool, float, int, bool, float, str]


def test_volatile_values_do_not_pool_their_parents() -> None:
    sharer = Sharer()
    for _ in range(3):
        sharer.share({"a": {"b": {"c": {"resourceVersion": "1", "x": "y"}}}})
    assert len(sharer) == 0


def test_sweep_forgets_subtrees_no_object_holds() -> None:
    sharer = Sharer()
    kept = [sharer.share(strip_managed_fields(_pod(i))) for i in range(40)]
    sharer.sweep()  # may drop a few orphans (see Sharer.sweep), never what an object holds
    pooled = len(sharer)
    assert pooled > 0
    assert sharer.sweep() == 0
    assert [strip_managed_fields(_pod(i)) for i in range(40)] == kept
    del kept
    gc.collect()
    assert sharer.sweep() == pooled
    assert len(sharer) == 0


def test_compose_applies_left_to_right() -> None:
    def add_x(obj: dict[str, Any]) -> dict[str, Any]:
        return {**obj, "x": 1}

    def double_x(obj: dict[str, Any]) -> dict[str, Any]:
        return {**obj, "x": obj["x"] * 2}

    assert compose(add_x, double_x)({}) == {"x": 2}


def test_default_transform_output_equals_the_stripped_projected_input() -> None:
    pod = _pod(3)
    assert default_transform(pod) == project_pod(strip_managed_fields(_pod(3)))
    assert pod == _pod(3)  # the input is never mutated


def test_pod_projection_drops_only_what_no_controller_reads() -> None:
    pod = strip_managed_fields(_pod(4))
    original = copy.deepcopy(pod)
    projected = project_pod(pod)
    assert pod == original
    assert "volumes" not in projected["spec"]
    assert projected["spec"]["containers"] == [
        {k: v for k, v in c.items() if k in ("name", "image", "resources", "ports")}
        for c in pod["spec"]["containers"]]
    # Single-stack: podIPs/hostIPs only repeat podIP/hostIP.
    assert "podIPs" not in projected["status"]
    assert "hostIPs" not in projected["status"]
    assert pod_ips(projected) == [pod["status"]["podIP"]]
    assert projected["status"]["podIP"] == pod["status"]["podIP"]
    statuses = projected["status"]["containerStatuses"]
    assert all("containerID" not in c and "imageID" not in c for c in statuses)
    assert [c["restartCount"] for c in statuses] == [c["restartCount"] for c in pod["status"]["containerStatuses"]]
    for key in ("nodeName", "tolerations", "restartPolicy", "terminationGracePeriodSeconds"):
        assert projected["spec"][key] == pod["spec"][key]
    assert projected["metadata"] == pod["metadata"]
    assert projected["status"]["conditions"] == pod["status"]["conditions"]


def test_pod_projection_keeps_dual_stack_addresses() -> None:
    pod = strip_managed_fields(_pod(5))
    pod["status"] = {**pod["status"], "podIP": "10.1.0.5", "podIPs": [{"ip": "10.1.0.5"}, {"ip": "fd00::5"}],
                     "hostIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}]}
    projected = project_pod(pod)
    assert projected["status"]["podIPs"] == pod["status"]["podIPs"]
    assert projected["status"]["hostIPs"] == pod["status"]["hostIPs"]
    assert pod_ips(projected) == ["10.1.0.5", "fd00::5"]


def test_pod_projection_leaves_other_kinds_alone() -> None:
    rs = {"kind": "ReplicaSet", "spec": {"template": {"spec": {"volumes": [{"name": "v"}]}}}}
    assert project_pod(rs) is rs


def _bytes_per_object(make_build: Any, raws: list[bytes]) -> float:
    """Bytes held per object by what ``make_build()`` returns (a fresh build function: its own Sharer and Store).

    A first pass with its own build function runs and is dropped before the measured one, so process-wide tables
    (the interned-string table, orjson's key cache) have reached their size first: whether one of them happens to
    double inside the measured window would otherwise swing the figure by 20%. The measured build function is
    made before tracing starts, so the Sharer's fixed 512 KiB doorkeeper table is not counted.
    """
    warm_up = make_build()
    kept = [warm_up(raw) for raw in raws]
    del kept, warm_up
    build = make_build()
    gc.collect()
    # Only memory allocated from this file and the project's code counts: a thread an earlier test left behind
    # in this worker (an executor, a logger) must not be billed to the cache.
    mine = [tracemalloc.Filter(True, __file__), tracemalloc.Filter(True, "*/controller_manager/*")]
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot().filter_traces(mine)
        kept = [build(raw) for raw in raws]
        gc.collect()
        after = tracemalloc.take_snapshot().filter_traces(mine)
        grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
        # Minus the list holding the results, which is the measurement's, not the cache's.
        used = grown - sys.getsizeof(kept)
    finally:
        tracemalloc.stop()
    return used / len(raws)


def _shared() -> Any:
    sharer = Sharer()
    return lambda raw: sharer.share(strip_managed_fields(orjson.loads(raw)))


def _cached() -> Any:
    sharer = Sharer()
    store = Store(builtin_indexers(PODS))

    def cache(raw: bytes) -> None:
        obj = sharer.share(strip_managed_fields(orjson.loads(raw)))
        store._put(key_of(obj), obj)

    return cache


def measure_bytes_per_pod() -> dict[str, float]:
    """~3 KB pods (4 KB with managedFields), 10 ReplicaSets on 50 nodes: bytes held per pod, three ways."""
    raws = [pod_json(i, replicasets=10, nodes=50) for i in range(2000)]
    # A plain parse shares nothing, so its bytes per pod do not depend on how many pods there are (2000 and 500
    # give the same figure to the byte); a quarter of the sample spares most of its tracing. The shared ways
    # gain with the sample's size and keep all of it.
    ways = {"plain": (lambda: orjson.loads, raws[:500]), "shared": (_shared, raws), "cached": (_cached, raws)}
    # Each way twice, the smaller kept: in a fresh interpreter the first rounds still grow process-wide tables
    # (the interned strings' dict doubling inside the window costs ~1 KB per pod of this sample).
    return {name: min(_bytes_per_object(make, sample) for _ in range(2)) for name, (make, sample) in ways.items()}


@pytest.mark.timeout(150)
def test_memory_per_cached_pod() -> None:
    # In a fresh interpreter: what earlier tests of this worker left in the process (interned strings, caches,
    # the collector's frozen generation) once swung the figure by 40%.
    code = "import json, tests.runtime.informers.test_transform as t; print(json.dumps(t.measure_bytes_per_pod()))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         timeout=140)  # ~20 s of CPU under tracemalloc: room for a loaded 2-core machine
    sizes = json.loads(out.stdout.strip().splitlines()[-1])
    plain, shared, cached = sizes["plain"], sizes["shared"], sizes["cached"]
    print(f"\nbytes per pod: plain parse {plain:.0f}, default transform {shared:.0f}, "
          f"in a store with the built-in indexes {cached:.0f}")
    assert plain > 15_000
    assert shared < 4_200
    assert cached < 4_600


def test_pod_projection_keeps_the_volumes_that_name_a_claim() -> None:
    claim = {"name": "data", "persistentVolumeClaim": {"claimName": "data-0", "readOnly": True}}
    scratch = {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"resources": {}}}}}
    inline = {"name": "inline", "csi": {"driver": "csi.example.com"}}
    pod = {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"volumes": [
        {"name": "token", "projected": {"sources": []}}, claim, {"name": "cfg", "configMap": {"name": "c"}},
        scratch, inline]}}
    assert project_pod(pod)["spec"]["volumes"] == [claim, scratch, inline]
    plain = {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"volumes": [{"name": "e", "emptyDir": {}}]}}
    assert "volumes" not in project_pod(plain)["spec"]
    decoder = WireDecoder(Sharer())
    for obj in (pod, plain):
        assert decoder.decode(orjson.dumps({"type": "ADDED", "object": obj}))[1] == project_pod(obj)
