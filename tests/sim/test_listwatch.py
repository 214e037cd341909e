"""ListWatch against an in-process API server: the first list, live changes, the difference delivered after a
dropped watch, and a handler that raises."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from controller_manager.api.resources import CONFIGMAPS
from controller_manager.clock import FakeClock
from controller_manager.sim.apiserver import ApiServer, StatusError
from controller_manager.sim.listwatch import ListWatch, status_code


async def eventually(predicate: Callable[[], Any], timeout: float = 5.0) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not (value := predicate()):
        if loop.time() > deadline:
            pytest.fail(f"condition not met within {timeout}s")
        await asyncio.sleep(0.002)
    return value


def config_map(name: str, value: str = "1") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"},
            "data": {"v": value}}


class Recorder:
    def __init__(self, fail_on: str | None = None) -> None:
        self.seen: list[tuple[str, str, str]] = []
        self.fail_on = fail_on

    def __call__(self, kind: str, obj: dict[str, Any]) -> None:
        if obj["metadata"].get("namespace") != "default":
            return  # kube-sim's own ConfigMaps (kube-system's legacy token tracking) are not the test's
        name = obj["metadata"]["name"]
        if name == self.fail_on:
            raise ValueError("a bad object")
        self.seen.append((kind, name, (obj.get("data") or {}).get("v", "")))


@pytest.fixture
def api() -> ApiServer:
    return ApiServer(FakeClock())


@pytest.fixture
async def follow(api: ApiServer) -> AsyncIterator[Callable[[Recorder], Any]]:
    tasks: list[asyncio.Task[None]] = []

    async def start(recorder: Recorder) -> ListWatch:
        lw = ListWatch(api, CONFIGMAPS, recorder, clock=api.clock, name="test")
        tasks.append(asyncio.create_task(lw.run(), name="test-listwatch"))
        await asyncio.wait_for(lw.synced.wait(), 5)
        return lw

    try:
        yield start
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        api.close_all_watches()


async def test_list_then_live_changes(api: ApiServer, follow: Callable[[Recorder], Any]) -> None:
    api.create(CONFIGMAPS, config_map("a"))
    rec = Recorder()
    await follow(rec)
    assert rec.seen == [("ADDED", "a", "1")]
    api.create(CONFIGMAPS, config_map("b"))
    api.update(CONFIGMAPS, config_map("a", "2"))
    api.delete(CONFIGMAPS, "default", "b")
    await eventually(lambda: len(rec.seen) == 4)
    assert rec.seen[1:] == [("ADDED", "b", "1"), ("MODIFIED", "a", "2"), ("DELETED", "b", "1")]


async def test_dropped_watch_delivers_the_difference(api: ApiServer, follow: Callable[[Recorder], Any]) -> None:
    for name in ("keep", "change", "drop"):
        api.create(CONFIGMAPS, config_map(name))
    rec = Recorder()
    await follow(rec)
    api.update(CONFIGMAPS, config_map("keep", "live"))
    await eventually(lambda: ("MODIFIED", "keep", "live") in rec.seen)
    del rec.seen[:]
    # The watch drops and history is gone (an apiserver restart); what changes meanwhile comes from the re-list.
    api.close_all_watches()
    api.forget_history()
    api.update(CONFIGMAPS, config_map("change", "2"))
    api.delete(CONFIGMAPS, "default", "drop")
    api.create(CONFIGMAPS, config_map("new"))
    await eventually(lambda: len(rec.seen) == 3)
    assert sorted(rec.seen) == [("ADDED", "new", "1"), ("DELETED", "drop", "1"), ("MODIFIED", "change", "2")]
    api.update(CONFIGMAPS, config_map("new", "2"))  # and the new watch goes on
    await eventually(lambda: ("MODIFIED", "new", "2") in rec.seen)


async def test_a_failing_handler_does_not_stop_the_watch(api: ApiServer, follow: Callable[[Recorder], Any]) -> None:
    rec = Recorder(fail_on="bad")
    await follow(rec)
    api.create(CONFIGMAPS, config_map("bad"))
    api.create(CONFIGMAPS, config_map("good"))
    await eventually(lambda: rec.seen == [("ADDED", "good", "1")])


def test_status_code() -> None:
    with pytest.raises(StatusError) as caught:
        ApiServer(FakeClock()).get(CONFIGMAPS, "default", "missing")
    assert status_code(caught.value) == 404
    assert status_code(ValueError("plain")) is None
