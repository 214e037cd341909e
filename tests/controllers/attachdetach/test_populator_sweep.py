"""The populator's sweep over every pod (every 3 minutes) is spread over event-loop turns, and never re-adds a
pod that changed or went away while it ran."""

from __future__ import annotations

import asyncio
from typing import Any

from controller_manager.api.meta import key_of
from controller_manager.clock import FakeClock
from controller_manager.controllers.attachdetach import AttachDetachController
from controller_manager.controllers.attachdetach.controller import POPULATOR_CHUNK
from controller_manager.runtime.controller import ControllerContext
from controller_manager.runtime.events import EventBroadcaster
from controller_manager.runtime.informers import SharedInformerFactory


class NoWrites:
    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"unexpected API call: {name}")


def _pod(i: int) -> dict[str, Any]:
    return {"metadata": {"name": f"p{i:04d}", "namespace": "ns", "uid": f"u{i}", "resourceVersion": "1"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}]}, "status": {"phase": "Running"}}


async def test_the_sweep_yields_between_chunks_and_skips_pods_replaced_meanwhile() -> None:
    client: Any = NoWrites()
    clock = FakeClock()
    ctrl = AttachDetachController(ControllerContext(client=client, informers=SharedInformerFactory(client, clock),
                                                    clock=clock, events=EventBroadcaster(client, clock)))
    count = 2 * POPULATOR_CHUNK + 3
    store = ctrl.pods.store
    for i in range(count):
        store._put(key_of(_pod(i)), _pod(i))
    processed: list[str] = []
    ctrl._process = lambda pod, add: processed.append(pod["metadata"]["name"])  # type: ignore[method-assign]
    turns: list[int] = []
    last = f"p{count - 1:04d}"

    async def meanwhile() -> None:
        while True:
            turns.append(len(processed))
            if processed:  # the sweep has begun: the last pod is deleted (its event handled on its own)
                store._remove(f"ns/{last}")
            await asyncio.sleep(0)

    other = asyncio.create_task(meanwhile())
    await asyncio.sleep(0)
    await ctrl.find_and_add_active_pods()
    other.cancel()
    assert any(0 < n < count - 1 for n in turns)  # the loop ran between chunks
    assert len(processed) == count - 1
    assert last not in processed
