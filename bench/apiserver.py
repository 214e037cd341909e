"""kube-sim's own throughput over HTTP: pod creates (JSON and protobuf), pod status updates, and watch events
delivered; and the protobuf codec's cost per pod.

Everything the benchmarks and tests measure stands on kube-sim, so its cost per request is tracked: a change
to how it decodes, validates and writes objects shows here first. One kube-sim app on loopback, one client
session; creates and updates run ``concurrency`` at a time, as a controller's workers would send them; the
watch figure counts events delivered to ``watchers`` concurrent pod watches while pods are written
in-process.
"""

from __future__ import annotations

import asyncio
import time
import timeit
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from bench.report import Figure
from controller_manager.api.resources import PODS
from controller_manager.sim.apiserver import ApiServer, build_app, gojson, protobuf, schema

POD_PATH = "/api/v1/namespaces/default/pods"
POD_STRUCT = "io.k8s.api.core.v1.Pod"
PROTOBUF = "application/vnd.kubernetes.protobuf"


def pod(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"bench-{i}", "labels": {"app": "bench", "pod-template-hash": "7d4b9c8f5"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "bench-7d4b9c8f5",
                                              "uid": "0b7c8a52-9d3e-4f1a-8c55-2f6e1d9a7b10", "controller": True,
                                              "blockOwnerDeletion": True}]},
            "spec": {"nodeName": "node-1", "containers": [{
                "name": "app", "image": "registry.example.com/team/app:1.2.3",
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
                "env": [{"name": "MODE", "value": "production"}]}]}}


def running(obj: dict[str, Any]) -> dict[str, Any]:
    now = "2026-01-01T00:00:00Z"
    return {**obj, "status": {
        "phase": "Running", "podIP": "10.0.0.1", "hostIP": "192.168.0.1", "startTime": now,
        "conditions": [{"type": t, "status": "True", "lastTransitionTime": now}
                       for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                                 "PodScheduled")],
        "containerStatuses": [{"name": "app", "ready": True, "restartCount": 0, "started": True,
                               "image": "registry.example.com/team/app:1.2.3", "imageID": "sha256:abc",
                               "containerID": "containerd://1", "state": {"running": {"startedAt": now}}}]}}


async def _pooled(n: int, concurrency: int, call: Any) -> float:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(n):
        queue.put_nowait(i)

    async def worker() -> None:
        while not queue.empty():
            await call(queue.get_nowait())

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started


async def run(pods: int = 2000, concurrency: int = 8, watchers: int = 4) -> list[Figure]:
    api = ApiServer()
    runner = web.AppRunner(build_app(api))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    base = f"http://127.0.0.1:{port}"
    headers = {"Content-Type": "application/json"}
    try:
        async with aiohttp.ClientSession(base) as session:
            created: dict[int, dict[str, Any]] = {}

            async def create(i: int) -> None:
                async with session.post(POD_PATH, data=orjson.dumps(pod(i)), headers=headers) as resp:
                    assert resp.status == 201, await resp.text()
                    created[i] = orjson.loads(await resp.read())

            async def update(i: int) -> None:
                obj = running(created[i])
                async with session.put(f"{POD_PATH}/{obj['metadata']['name']}/status", data=orjson.dumps(obj),
                                       headers=headers) as resp:
                    assert resp.status == 200, await resp.text()

            create_s = await _pooled(pods, concurrency, create)
            update_s = await _pooled(pods, concurrency, update)
            delivered = await _watch_throughput(session, api, pods, watchers)
            protobuf_create_s = await _protobuf_creates(session, pods, concurrency)
            list_json_s = await _list_seconds(session, "application/json")
            await _list_seconds(session, f"{PROTOBUF},application/json")  # the first encodes every pod once
            list_protobuf_s = await _list_seconds(session, f"{PROTOBUF},application/json")
    finally:
        await runner.cleanup()
    encode_us, decode_us = codec_timings(api)
    return [
        Figure("apiserver", f"kube-sim pod creates/s over HTTP ({concurrency} at a time)", pods / create_s, "req/s"),
        Figure("apiserver", f"kube-sim pod creates/s over HTTP in protobuf ({concurrency} at a time)",
               pods / protobuf_create_s, "req/s", reference=pods / create_s, reference_name="JSON"),
        Figure("apiserver", f"kube-sim list of {2 * pods} pods in protobuf (encoded before)", list_protobuf_s * 1e3,
               "ms", reference=list_json_s * 1e3, reference_name="JSON"),
        Figure("apiserver", "protobuf encode of a running pod (pure Python)", encode_us, "µs"),
        Figure("apiserver", "protobuf decode of a running pod (pure Python)", decode_us, "µs"),
        Figure("apiserver", f"kube-sim pod status updates/s over HTTP ({concurrency} at a time)", pods / update_s,
               "req/s"),
        Figure("apiserver", f"kube-sim watch events/s delivered ({watchers} watchers)", delivered, "ev/s"),
    ]


async def _protobuf_creates(session: aiohttp.ClientSession, pods: int, concurrency: int) -> float:
    """Seconds to create ``pods`` pods as client-go does: protobuf bodies, protobuf preferred back."""
    st = schema.struct(POD_STRUCT)
    bodies = [protobuf.encode_object(gojson.normalize({**p, "metadata": {**p["metadata"], "name": f"pb-{i}"}}, st),
                                     POD_STRUCT) for i, p in enumerate(pod(i) for i in range(pods))]
    headers = {"Content-Type": PROTOBUF, "Accept": f"{PROTOBUF},application/json"}

    async def create(i: int) -> None:
        async with session.post(POD_PATH, data=bodies[i], headers=headers) as resp:
            assert resp.status == 201, await resp.text()
            assert resp.content_type == PROTOBUF
            await resp.read()

    return await _pooled(pods, concurrency, create)


async def _list_seconds(session: aiohttp.ClientSession, accept: str) -> float:
    """The best of three lists of every pod, read to the end."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        async with session.get(POD_PATH, headers={"Accept": accept}) as resp:
            assert resp.status == 200
            await resp.read()
        best = min(best, time.perf_counter() - started)
    return best


def codec_timings(api: ApiServer, rounds: int = 2000) -> tuple[float, float]:
    """Microseconds to encode and to decode one running pod as kube-sim stores it (best of five runs)."""
    obj, _ = api.list(PODS, "default")
    running_pod = next(p for p in obj if p.get("status", {}).get("phase") == "Running")
    data = protobuf.encode_object(running_pod, POD_STRUCT)
    encode_s = min(timeit.repeat(lambda: protobuf.encode_object(running_pod, POD_STRUCT), number=rounds, repeat=5))
    decode_s = min(timeit.repeat(lambda: protobuf.decode_object(data), number=rounds, repeat=5))
    return encode_s / rounds * 1e6, decode_s / rounds * 1e6


async def _watch_throughput(session: aiohttp.ClientSession, api: ApiServer, pods: int, watchers: int) -> float:
    """Events per second reaching ``watchers`` pod watches while every pod is relabelled in-process."""
    rv = api.current_rv()
    counts = [0] * watchers

    async def watch(index: int) -> None:
        params = {"watch": "1", "resourceVersion": str(rv)}
        async with session.get(POD_PATH, params=params) as resp:
            async for _line in resp.content:
                counts[index] += 1
                if counts[index] >= pods:
                    return

    tasks = [asyncio.create_task(watch(i)) for i in range(watchers)]
    deadline = time.monotonic() + 10
    while len(api.store(PODS).watchers) < watchers and time.monotonic() < deadline:  # noqa: ASYNC110 - no event to wait on
        await asyncio.sleep(0.01)  # the watches are registered before the writes begin
    started = time.perf_counter()
    objs, _ = api.list(PODS, "default")
    for obj in list(objs):
        meta = obj["metadata"]
        api.patch(PODS, "default", meta["name"], {"metadata": {"labels": {"round": "2"}}}, "merge")
        if meta["name"].endswith("0"):
            await asyncio.sleep(0)  # let the watch streams drain, as a busy server's loop would
    await asyncio.wait_for(asyncio.gather(*tasks), 120)
    return sum(counts) / (time.perf_counter() - started)
