"""The binder's metrics (upstream's ``metrics_test.go`` ideas): the pv_collector gauges from the controller's
caches, retroactive StorageClass assignments, and provision/delete operation errors and latency."""

from __future__ import annotations

import copy

from controller_manager.controllers.persistentvolume import metrics
from controller_manager.controllers.persistentvolume.helpers import claim_key
from tests.prometheus import sample_value

from .framework import FakeApi, new_binder, new_claim, new_volume, storage_class


def sample(name: str, **labels: str) -> float:
    return sample_value(name, labels) or 0.0


def test_collector_counts_volumes_and_claims_by_phase_and_labels() -> None:
    api = FakeApi()
    binder, _ = new_binder(api, [])
    for volume in (new_volume("a", "1Gi", "u", "c", "Bound", "Retain", "gold"),
                   new_volume("b", "1Gi", "", "", "Available", "Retain", "gold"),
                   new_volume("c", "1Gi", "", "", "Released", "Retain", "")):
        binder.volumes[volume["metadata"]["name"]] = volume
    hostpath = new_volume("d", "1Gi", "", "", "Available", "Retain", "")
    del hostpath["spec"]["gcePersistentDisk"]
    hostpath["spec"]["hostPath"] = {"path": "/tmp/d"}
    hostpath["spec"]["volumeMode"] = "Block"
    binder.volumes["d"] = hostpath
    for claim in (new_claim("x", "ux", "1Gi", "a", "Bound", "gold"), new_claim("y", "uy", "1Gi", "", "Pending", None)):
        binder.claims[claim_key(claim)] = claim
    from controller_manager.controllers.persistentvolume.plugins import default_plugins
    binder.plugins.plugins = default_plugins()
    previous = metrics.COLLECTOR.source
    metrics.COLLECTOR.source = lambda: (binder.volumes.values(), binder.claims.values(),
                                        binder.plugin_name_for_metrics)
    try:
        assert sample("pv_collector_bound_pv_count", storage_class="gold") == 1
        assert sample("pv_collector_unbound_pv_count", storage_class="gold") == 1
        assert sample("pv_collector_unbound_pv_count", storage_class="") == 2
        assert sample("pv_collector_total_pv_count", plugin_name="N/A", volume_mode="Filesystem") == 3
        assert sample("pv_collector_total_pv_count", plugin_name="kubernetes.io/host-path", volume_mode="Block") == 1
        assert sample("pv_collector_bound_pvc_count", namespace="default", storage_class="gold",
                      volume_attributes_class="") == 1
        assert sample("pv_collector_unbound_pvc_count", namespace="default", storage_class="",
                      volume_attributes_class="") == 1
    finally:
        metrics.COLLECTOR.source = previous


async def test_retroactive_default_storage_class_is_counted() -> None:
    api = FakeApi()
    default = storage_class("standard", "csi.example.com")
    default["metadata"]["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    claim = new_claim("old", "u-old", "1Gi", "", "Pending", None)
    api.add([], [claim])
    binder, _ = new_binder(api, [default])
    before = sample("retroactive_storageclass_total")
    errors_before = sample("retroactive_storageclass_errors_total")
    await binder.sync_claim(copy.deepcopy(claim))
    assert api.claims["default/old"]["spec"]["storageClassName"] == "standard"
    assert sample("retroactive_storageclass_total") == before + 1
    assert sample("retroactive_storageclass_errors_total") == errors_before


async def test_delete_errors_and_provision_latency_are_recorded() -> None:
    api = FakeApi()
    volume = new_volume("doomed", "1Gi", "uid-gone", "gone", "Bound", "Delete", "")
    api.add([volume], [])
    binder, _ = new_binder(api, [storage_class("ext", "vendor.com/my-volume")])
    binder.volumes["doomed"] = copy.deepcopy(volume)
    errors_before = sample("volume_operation_total_errors_total", plugin_name="N/A", operation_name="delete")
    await binder.sync_volume(copy.deepcopy(volume))
    await binder.operations.wait_idle()
    errors_after = sample("volume_operation_total_errors_total", plugin_name="N/A", operation_name="delete")
    assert errors_after == errors_before + 1

    claim = new_claim("fresh", "uid-fresh", "1Gi", "", "Pending", "ext")
    api.add([], [claim])
    binder.claims[claim_key(claim)] = copy.deepcopy(claim)
    count_before = sample("volume_operation_total_seconds_count", plugin_name="vendor.com/my-volume",
                          operation_name="provision")
    await binder.sync_claim(copy.deepcopy(claim))
    await binder.operations.wait_idle()
    assert binder.timestamps.has("default/fresh")
    provisioned = new_volume("pvc-uid-fresh", "1Gi", "uid-fresh", "fresh", "Pending", "Delete", "ext")
    api.add([provisioned], [])
    binder.volumes["pvc-uid-fresh"] = copy.deepcopy(provisioned)
    current = api.claims["default/fresh"]
    binder.claims["default/fresh"] = copy.deepcopy(current)
    await binder.sync_claim(copy.deepcopy(current))
    assert api.claims["default/fresh"]["status"]["phase"] == "Bound"
    assert not binder.timestamps.has("default/fresh")
    assert sample("volume_operation_total_seconds_count", plugin_name="vendor.com/my-volume",
                  operation_name="provision") == count_before + 1
