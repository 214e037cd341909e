"""The PV protection controller against an in-memory API, after upstream's pv_protection_controller_test.go
(TestPVProtectionController)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controller_manager.api.meta import format_time
from controller_manager.api.resources import PERSISTENTVOLUMES
from controller_manager.api.volumes import PV_PROTECTION_FINALIZER
from controller_manager.controllers.pvprotection import PVProtectionController
from controller_manager.runtime.controller import Controller
from controller_manager.runtime.informers import Added
from tests.controllers.pvcprotection.fakes import FakeApi, build, cache

Obj = dict[str, Any]


def pv(*, finalizer: bool = False, deleted: bool = False, bound: bool = False) -> Obj:
    metadata: Obj = {"name": "pv1"}
    if finalizer:
        metadata["finalizers"] = [PV_PROTECTION_FINALIZER]
    if deleted:
        metadata["deletionTimestamp"] = format_time(1_700_000_000)
    status = {"phase": "Bound"} if bound else {}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": metadata, "spec": {}, "status": status}


async def drain(ctrl: Controller, api: FakeApi, expected: int) -> None:
    """Process the queue until it is empty and the expected actions happened (advancing past backoffs)."""
    clock: Any = ctrl.ctx.clock
    for _ in range(100_000):
        if len(ctrl.queue):
            await ctrl.process_next(ctrl.queue, ctrl.sync)
            continue
        if len(api.actions) < expected and ctrl.queue.waiting():
            clock.advance(0.001)
            await asyncio.sleep(0)
            continue
        return
    raise AssertionError("timed out")


def updates(api: FakeApi) -> list[bool]:
    """Each update's finalizer presence."""
    assert all(a.verb == "update" and a.resource == "persistentvolumes" for a in api.actions)
    return [PV_PROTECTION_FINALIZER in (a.obj or {})["metadata"].get("finalizers", []) for a in api.actions]


@pytest.mark.parametrize(("updated", "fail", "expected"), [
    pytest.param(pv(), 0, [True], id="PV without finalizer -> finalizer is added"),
    pytest.param(pv(finalizer=True), 0, [], id="PV with finalizer -> no action"),
    pytest.param(pv(), 2, [True, True, True], id="saving PV finalizer fails -> controller retries"),
    pytest.param(pv(finalizer=True, deleted=True), 0, [False], id="deleted PV with finalizer -> finalizer is removed"),
    pytest.param(pv(finalizer=True, deleted=True), 2, [False, False, False],
                 id="finalizer removal fails -> controller retries"),
    pytest.param(pv(finalizer=True, deleted=True, bound=True), 0, [],
                 id="deleted PV with finalizer + PV is bound -> finalizer is not removed"),
])
async def test_pv_protection_controller(updated: Obj, fail: int, expected: list[bool]) -> None:
    ctrl, api, _, _ = build(PVProtectionController)
    api.put(PERSISTENTVOLUMES, updated)
    cache(ctrl, PERSISTENTVOLUMES, updated)
    if fail:
        api.fail("update", "persistentvolumes", fail)
    ctrl._on_pv(Added(updated))
    await drain(ctrl, api, len(expected))
    assert updates(api) == expected
