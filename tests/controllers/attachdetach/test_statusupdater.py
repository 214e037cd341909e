"""node_status_updater_test.go: volumesAttached follows the actual state; a missing node is skipped, a failed
patch is retried on the next pass."""

from __future__ import annotations

from controller_manager.controllers.attachdetach.cache import ActualStateOfWorld
from controller_manager.controllers.attachdetach.statusupdater import NodeStatusUpdater

from .fakes import FakeClient, Log, node, spec


async def test_update_node_statuses_reports_attached_volumes() -> None:
    client = FakeClient(nodes={"node-1": node("node-1"), "node-2": node("node-2")})
    asw = ActualStateOfWorld()
    updater = NodeStatusUpdater(client, client.nodes, asw, Log())
    v1 = asw.mark_volume_as_attached("", spec("v1"), "node-1")
    v2 = asw.mark_volume_as_attached("", spec("v2"), "node-1")
    asw.mark_volume_as_uncertain("", spec("v3"), "node-2")
    assert await updater.update_node_statuses() == []
    assert client.nodes["node-1"]["status"]["volumesAttached"] == [{"name": v1, "devicePath": ""},
                                                                   {"name": v2, "devicePath": ""}]
    assert "volumesAttached" not in client.nodes["node-2"]["status"]
    assert client.calls == [("patch-node", "node-1")]
    # Nothing changed: nothing is sent.
    asw.set_node_status_update_needed("node-1")
    assert await updater.update_node_statuses() == []
    assert client.calls == [("patch-node", "node-1")]


async def test_a_node_missing_from_the_cache_is_skipped() -> None:
    client = FakeClient()
    asw = ActualStateOfWorld()
    asw.mark_volume_as_attached("", spec(), "gone")
    assert await NodeStatusUpdater(client, client.nodes, asw, Log()).update_node_statuses() == []
    assert client.calls == []


async def test_a_failed_patch_marks_the_node_for_another_update() -> None:
    client = FakeClient(nodes={"node-1": node("node-1")}, fail_node_patch=True)
    asw = ActualStateOfWorld()
    updater = NodeStatusUpdater(client, client.nodes, asw, Log())
    name = asw.mark_volume_as_attached("", spec(), "node-1")
    assert [str(e) for e in await updater.update_node_statuses()] == ["etcd is down"]
    client.fail_node_patch = False
    assert await updater.update_node_status_for_node("node-1") is None
    assert client.nodes["node-1"]["status"]["volumesAttached"] == [{"name": name, "devicePath": ""}]


async def test_a_cache_behind_the_controllers_own_writes_does_not_hide_a_change() -> None:
    client = FakeClient(nodes={"node-1": node("node-1")})
    stale = {"node-1": node("node-1")}  # a cache that never sees the patches
    asw = ActualStateOfWorld()
    updater = NodeStatusUpdater(client, stale, asw, Log())
    name = asw.mark_volume_as_attached("", spec(), "node-1")
    await updater.update_node_statuses()
    asw.mark_volume_as_detached(name, "node-1")
    await updater.update_node_statuses()
    assert "volumesAttached" not in client.nodes["node-1"]["status"]
    assert client.calls == [("patch-node", "node-1"), ("patch-node", "node-1")]
