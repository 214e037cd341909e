"""The API Priority and Fairness configuration kube-sim keeps as kube-apiserver's config producer does, seen through
the API: mandatory objects come back and are put back, suggested ones follow their autoupdate annotation, and
objects the bootstrap configuration does not have but that are annotated for auto-update are deleted."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from controller_manager.api.resources import FLOWSCHEMAS, PRIORITYLEVELCONFIGURATIONS
from controller_manager.clock import FakeClock
from controller_manager.sim.apiserver import ApiServer, flowcontrol_bootstrap
from controller_manager.sim.apiserver.flowcontrol_bootstrap import AUTO_UPDATE, ENSURE_INTERVAL
from tests.sim.apiserver.conftest import Client

APF = "/apis/flowcontrol.apiserver.k8s.io/v1"
FS = f"{APF}/flowschemas"
PLC = f"{APF}/prioritylevelconfigurations"


async def _after_a_pass(clock: FakeClock, done: Callable[[], Awaitable[bool]]) -> None:
    """Move the server's clock one producer period on, then wait (real time, bounded) until ``done``."""
    clock.advance(ENSURE_INTERVAL)
    deadline = asyncio.get_running_loop().time() + 5.0
    while not await done():
        assert asyncio.get_running_loop().time() < deadline, "the config producer did not run"
        await asyncio.sleep(0.01)


async def _get(client: Client, path: str) -> dict[str, Any]:
    status, obj = await client.get(path)
    assert status == 200, obj
    result: dict[str, Any] = obj
    return result


async def test_deleted_mandatory_objects_come_back_on_the_next_pass(client: Client, clock: FakeClock) -> None:
    before = {path: await _get(client, path) for path in (f"{FS}/exempt", f"{PLC}/exempt")}
    for path in before:
        status, _ = await client.delete(path)
        assert status == 200
    # Not at once: the producer runs once a minute.
    assert (await client.get(f"{FS}/exempt"))[0] == 404

    async def back() -> bool:
        return [(await client.get(path))[0] for path in before] == [200, 200]

    await _after_a_pass(clock, back)
    for path, old in before.items():
        new = await _get(client, path)
        assert new["metadata"]["uid"] != old["metadata"]["uid"]
        assert new["metadata"]["annotations"] == {AUTO_UPDATE: "true"}
        assert new["spec"] == old["spec"]
        managers = {(m["manager"], m["operation"]) for m in new["metadata"]["managedFields"]}
        assert (flowcontrol_bootstrap.PRODUCER, "Update") in managers
    schema = await _get(client, f"{FS}/exempt")
    assert [(c["type"], c["status"]) for c in schema["status"]["conditions"]] == [("Dangling", "False")]


async def test_edited_mandatory_objects_are_put_back_but_the_exempt_tunables_stay(client: Client,
                                                                                 clock: FakeClock) -> None:
    catch_all = await _get(client, f"{FS}/catch-all")
    status, patched = await client.patch(f"{FS}/catch-all", {
        "metadata": {"annotations": {AUTO_UPDATE: "false"}}, "spec": {"matchingPrecedence": 5000}})
    assert status == 200, patched
    status, patched = await client.patch(f"{PLC}/catch-all", {"spec": {"limited": {"nominalConcurrencyShares": 50}}})
    assert status == 200, patched
    status, patched = await client.patch(f"{PLC}/exempt", {"spec": {"exempt": {"nominalConcurrencyShares": 10,
                                                                                 "lendablePercent": 20}}})
    assert status == 200, patched

    async def reverted() -> bool:
        return bool((await _get(client, f"{FS}/catch-all"))["spec"]["matchingPrecedence"] == 10000)

    await _after_a_pass(clock, reverted)
    schema = await _get(client, f"{FS}/catch-all")
    assert schema["spec"] == catch_all["spec"]
    assert schema["metadata"]["annotations"] == {AUTO_UPDATE: "true"}  # mandatory: always auto-updated
    assert schema["metadata"]["generation"] == 3
    level = await _get(client, f"{PLC}/catch-all")
    assert level["spec"]["limited"]["nominalConcurrencyShares"] == 5
    exempt = await _get(client, f"{PLC}/exempt")
    assert exempt["spec"] == {"type": "Exempt", "exempt": {"nominalConcurrencyShares": 10, "lendablePercent": 20}}


async def test_suggested_objects_follow_their_autoupdate_annotation(client: Client, clock: FakeClock) -> None:
    # Opted out: the operator's edit stays.
    status, _ = await client.patch(f"{FS}/global-default", {
        "metadata": {"annotations": {AUTO_UPDATE: "false"}}, "spec": {"matchingPrecedence": 9800}})
    assert status == 200
    # Still opted in: put back.
    status, _ = await client.patch(f"{FS}/service-accounts", {"spec": {"matchingPrecedence": 8000}})
    assert status == 200
    # No annotation and a changed spec (generation 2): left alone, and the annotation now says so.
    status, _ = await client.patch(f"{PLC}/workload-low", {
        "metadata": {"annotations": {AUTO_UPDATE: None}}, "spec": {"limited": {"nominalConcurrencyShares": 7}}})
    assert status == 200
    # Deleted: created again.
    assert (await client.delete(f"{FS}/probes"))[0] == 200
    # Not a bootstrap object: deleted when annotated for auto-update, kept otherwise.
    for name, notes in (("stale", {AUTO_UPDATE: "true"}), ("mine", {})):
        status, created = await client.post(FS, {
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
            "metadata": {"name": name, "annotations": notes},
            "spec": {"priorityLevelConfiguration": {"name": "global-default"},
                     "rules": [{"subjects": [{"kind": "Group", "group": {"name": name}}],
                                "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/version"]}]}]}})
        assert status == 201, created

    async def stale_gone() -> bool:  # the last step of a pass
        return (await client.get(f"{FS}/stale"))[0] == 404

    await _after_a_pass(clock, stale_gone)
    kept = await _get(client, f"{FS}/global-default")
    assert (kept["spec"]["matchingPrecedence"], kept["metadata"]["annotations"]) == (9800, {AUTO_UPDATE: "false"})
    assert (await _get(client, f"{FS}/service-accounts"))["spec"]["matchingPrecedence"] == 9000
    level = await _get(client, f"{PLC}/workload-low")
    assert level["spec"]["limited"]["nominalConcurrencyShares"] == 7
    assert level["metadata"]["annotations"] == {AUTO_UPDATE: "false"}
    probes = await _get(client, f"{FS}/probes")
    assert probes["spec"]["priorityLevelConfiguration"] == {"name": "exempt"}
    assert probes["metadata"]["annotations"] == {AUTO_UPDATE: "true"}
    assert (await client.get(f"{FS}/mine"))[0] == 200


def test_a_pass_over_the_configuration_as_it_should_be_writes_nothing(api: ApiServer) -> None:
    rv = api.current_rv()
    flowcontrol_bootstrap.ensure(api)
    assert api.current_rv() == rv


def _comparable(obj: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in obj["metadata"].items()
            if k not in ("uid", "resourceVersion", "creationTimestamp", "managedFields")}
    conditions = [{k: v for k, v in c.items() if k != "lastTransitionTime"}
                  for c in obj.get("status", {}).get("conditions", [])]
    return {**obj, "metadata": meta, "status": {**obj.get("status", {}), "conditions": conditions}}


def test_the_producer_recreates_every_object_as_start_up_stored_it(api: ApiServer) -> None:
    resources = (PRIORITYLEVELCONFIGURATIONS, FLOWSCHEMAS)
    installed = {(res.kind, o["metadata"]["name"]): _comparable(o) for res in resources for o in api.list(res)[0]}
    for res in resources:
        for o in api.list(res)[0]:
            api.delete(res, None, o["metadata"]["name"])
    flowcontrol_bootstrap.ensure(api)
    assert {(res.kind, o["metadata"]["name"]): _comparable(o) for res in resources
            for o in api.list(res)[0]} == installed
