"""Equal parts of stored objects are held once (sharing.py); what clients read is unchanged by it."""

from __future__ import annotations

from typing import Any

import orjson

from controller_manager.api.resources import PODS
from controller_manager.sim.apiserver import ApiServer
from controller_manager.sim.apiserver.sharing import SharedParts
from tests.sim.apiserver.conftest import Client, pod

URL = "/api/v1/namespaces/default/pods"


async def test_pods_from_one_template_share_their_equal_parts(api: ApiServer, client: Client) -> None:
    tolerations = [{"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}]
    for name in ("a", "b"):
        code, _ = await client.post(URL, pod(name, labels={"app": "web"}, tolerations=tolerations))
        assert code == 201
    code, _ = await client.post(URL, pod("c", labels={"app": "web"}, tolerations=[{**tolerations[0], "value": "x"}]))
    assert code == 201
    a, b, c = (api.get_stored(PODS, "default", n).obj for n in ("a", "b", "c"))
    assert a["spec"]["tolerations"] is b["spec"]["tolerations"]
    assert a["spec"]["containers"] is b["spec"]["containers"]
    assert a["metadata"]["managedFields"][0]["fieldsV1"] is b["metadata"]["managedFields"][0]["fieldsV1"]
    assert c["spec"]["tolerations"] is not a["spec"]["tolerations"]
    # Each reads as its own
    _, got_c = await client.get(f"{URL}/c")
    assert got_c["spec"]["tolerations"][0]["value"] == "x"
    _, got_a = await client.get(f"{URL}/a")
    assert got_a["metadata"]["name"] == "a"
    assert got_a["spec"]["tolerations"][0]["value"] == "batch"
    # A status write of one pod leaves the other's shared parts as they were
    code, _ = await client.patch(f"{URL}/a/status", {"status": {"phase": "Running"}})
    assert code == 200
    _, got_b = await client.get(f"{URL}/b")
    assert got_b["status"]["phase"] == "Pending"
    assert api.get_stored(PODS, "default", "a").obj["spec"] is a["spec"]


def test_shared_values_encode_as_the_originals() -> None:
    parts = SharedParts()
    objects: list[dict[str, Any]] = [
        {"metadata": {"name": "one"}, "spec": {"n": [1], "m": {"k": True}}},
        {"metadata": {"name": "two"}, "spec": {"n": [1.0], "m": {"k": 1}}},   # equal in Python, not in JSON
        {"metadata": {"name": "three"}, "spec": {"m": {"k": True}, "n": [1]}},  # other key order
        {"metadata": {"name": "four"}, "spec": {"n": [1], "m": {"k": True}}},
    ]
    shared = [parts.object(o, None) for o in objects]
    for before, after in zip(objects, shared, strict=True):
        assert orjson.dumps(after) == orjson.dumps(before)
    assert shared[3]["spec"]["n"] is shared[0]["spec"]["n"]
    assert shared[3]["spec"]["m"] is shared[0]["spec"]["m"]
    assert shared[1]["spec"]["n"] is not shared[0]["spec"]["n"]
    assert shared[1]["spec"]["m"] is not shared[0]["spec"]["m"]
    assert shared[2]["spec"]["m"] is shared[0]["spec"]["m"]  # a part is shared where the whole is not


def test_capacity_bounds_what_is_remembered() -> None:
    parts = SharedParts(capacity=10)
    for i in range(100):
        parts.object({"metadata": {}, "spec": {"i": [i]}}, None)
    assert len(parts) == 10
