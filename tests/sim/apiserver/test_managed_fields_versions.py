"""managedFields of a kind served in two versions (HorizontalPodAutoscaler as autoscaling/v1 and /v2): each
write is recorded in the version the client sent, with that version's field paths; managers of the other
version lose the fields the write changed, compared in their own version."""

from __future__ import annotations

from typing import Any

import yaml

from .conftest import Client

V1 = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers"
V2 = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers"
APPLY = "application/apply-patch+yaml"
TARGET = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}


def _by_manager(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["manager"]: e for e in obj["metadata"].get("managedFields", [])}


def _v1_hpa(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h"},
            "spec": {"scaleTargetRef": TARGET, "maxReplicas": 5, **spec}}


async def test_a_v1_create_is_recorded_as_autoscaling_v1(client: Client) -> None:
    code, created = await client.post(V1, _v1_hpa(targetCPUUtilizationPercentage=50), params={"fieldManager": "me"})
    assert code == 201, created
    entry = _by_manager(created)["me"]
    assert entry["apiVersion"] == "autoscaling/v1"
    assert entry["operation"] == "Update"
    # (v1's CrossVersionObjectReference is an atomic struct: owned whole)
    assert entry["fieldsV1"] == {"f:spec": {"f:maxReplicas": {}, "f:minReplicas": {}, "f:scaleTargetRef": {},
                                            "f:targetCPUUtilizationPercentage": {}}}
    # The v2 view shows the same entry: managedFields are not converted.
    _, as_v2 = await client.get(f"{V2}/h")
    assert _by_manager(as_v2)["me"] == entry


async def test_a_v1_update_is_recorded_as_autoscaling_v1(client: Client) -> None:
    code, created = await client.post(V2, {**_v1_hpa(), "apiVersion": "autoscaling/v2"},
                                      params={"fieldManager": "v2-writer"})
    assert code == 201, created
    assert _by_manager(created)["v2-writer"]["apiVersion"] == "autoscaling/v2"
    _, current = await client.get(f"{V1}/h")
    current["spec"]["maxReplicas"] = 7
    code, updated = await client.put(f"{V1}/h", current, params={"fieldManager": "v1-writer"})
    assert code == 200, updated
    entries = _by_manager(updated)
    assert entries["v1-writer"]["apiVersion"] == "autoscaling/v1"
    assert entries["v1-writer"]["fieldsV1"] == {"f:spec": {"f:maxReplicas": {}}}
    # The v2 manager lost maxReplicas, compared in v2, and kept the rest.
    v2_fields = entries["v2-writer"]["fieldsV1"]["f:spec"]
    assert "f:maxReplicas" not in v2_fields
    assert "f:scaleTargetRef" in v2_fields
    assert "f:minReplicas" in v2_fields


async def test_a_v1_apply_conflicts_with_the_v2_owner(client: Client) -> None:
    code, _ = await client.post(V2, {**_v1_hpa(), "apiVersion": "autoscaling/v2"}, params={"fieldManager": "v2-writer"})
    assert code == 201
    doc = _v1_hpa(maxReplicas=9)
    code, body = await client.call("PATCH", f"{V1}/h", raw=yaml.safe_dump(doc).encode(), content_type=APPLY,
                                   params={"fieldManager": "applier"})
    assert code == 409, body
    assert body["message"] == 'Apply failed with 1 conflict: conflict with "v2-writer" using autoscaling/v2: ' \
        ".spec.maxReplicas"
    code, applied = await client.call("PATCH", f"{V1}/h", raw=yaml.safe_dump(doc).encode(), content_type=APPLY,
                                      params={"fieldManager": "applier", "force": "true"})
    assert code == 200, applied
    entries = _by_manager(applied)
    assert entries["applier"]["apiVersion"] == "autoscaling/v1"
    assert "f:maxReplicas" not in entries["v2-writer"]["fieldsV1"]["f:spec"]
