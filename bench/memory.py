"""Benchmark 2: memory per cached pod, beside raw parsed dicts and kubernetes_asyncio models.

Each way of holding pods is measured in a fresh subprocess (``python -m bench.memory <way> <pods>``), so one
measurement's heap never skews another's:
- ``informer``: a real ``SharedInformer`` for pods (default transform, built-in indexes) fed ``ADDED`` events one
  by one, decoded as its watch decodes them (``runtime/informers/wire.py``); ``informer-list`` is the same with
  the pods parsed whole and transformed, as items of a list arrive (in the details);
- ``dicts``: the same pods as ``orjson.loads`` returns them, kept in a dict by key (the usual Python way);
- ``models``: the same pods as kubernetes_asyncio ``V1Pod`` models, kept in a dict by key.
The figure is RSS growth (``VmRSS`` in ``/proc/self/status``) divided by the number of pods, after a warm-up round
in a throwaway store so process-wide tables (interned strings, orjson's key cache) are already at size. Beside
it, ``tracemalloc``'s count of bytes the informer holds per pod, measured in this process at a smaller scale
(it slows allocation ~3x).
"""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import orjson

from bench.pods import pod_json
from bench.report import Figure, at_most

ROOT = Path(__file__).resolve().parent.parent
KIB = 1024.0


def rss_bytes() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def _pod_bytes(i: int, pods: int) -> bytes:
    # About 100 pods per ReplicaSet and per node, as in a real cluster of that size.
    return pod_json(i, replicasets=max(1, pods // 100), nodes=max(1, pods // 100))


def _informer_holder() -> Any:
    from controller_manager.api.resources import PODS
    from controller_manager.clock import RealClock
    from controller_manager.runtime.informers import SharedInformer
    from controller_manager.runtime.informers.wire import WireDecoder

    class _NoClient:
        async def list_all(self, *a: Any, **k: Any) -> Any:
            raise AssertionError("not used")

        def watch(self, *a: Any, **k: Any) -> Any:
            raise AssertionError("not used")

    informer = SharedInformer(_NoClient(), PODS, clock=RealClock())
    informer.add_handler(lambda event: None)
    decode = WireDecoder().decode  # what the informer's watch decodes lines with

    def add(raw: bytes) -> None:
        etype, obj = decode(b'{"type":"ADDED","object":' + raw + b"}")
        informer.apply(etype, obj, transformed=True)

    return informer, add


def _listed_informer_holder() -> Any:
    """The informer again, its pods arriving as items of a list (parsed whole, then the default transform)."""
    informer, _ = _informer_holder()

    def add(raw: bytes) -> None:
        informer.apply("ADDED", orjson.loads(raw))

    return informer, add


def _dicts_holder() -> Any:
    store: dict[str, Any] = {}

    def add(raw: bytes) -> None:
        obj = orjson.loads(raw)
        m = obj["metadata"]
        store[f"{m['namespace']}/{m['name']}"] = obj

    return store, add


def _models_holder() -> Any:
    from kubernetes_asyncio.client import ApiClient

    async def make() -> Any:
        return ApiClient()  # it builds an aiohttp connector, which wants a running loop

    client = asyncio.new_event_loop().run_until_complete(make())
    store: dict[str, Any] = {}
    deserialize = client._ApiClient__deserialize  # what ApiClient.deserialize calls after json.loads

    def add(raw: bytes) -> None:
        model = deserialize(json.loads(raw), "V1Pod")
        store[f"{model.metadata.namespace}/{model.metadata.name}"] = model

    return store, add


_HOLDERS = {"informer": _informer_holder, "informer-list": _listed_informer_holder, "dicts": _dicts_holder,
            "models": _models_holder}


def measure_rss(way: str, pods: int, warmup: int | None = None) -> dict[str, float]:
    """In this process: RSS growth per pod for ``pods`` pods held the ``way`` way, after ``warmup`` pods (default
    2,000, never more than are measured: the smoke test's few hundred need no bigger warm-up) held and dropped."""
    make = _HOLDERS[way]
    holder, add = make()
    for i in range(min(2000, pods) if warmup is None else warmup):
        add(_pod_bytes(pods + i, pods))
    del holder, add
    _holder, add = make()
    gc.collect()
    before = rss_bytes()
    start = time.perf_counter()
    for i in range(pods):
        add(_pod_bytes(i, pods))
    seconds = time.perf_counter() - start
    gc.collect()
    after = rss_bytes()
    return {"bytes_per_pod": (after - before) / pods, "pods": pods, "seconds": seconds,
            "json_bytes_per_pod": float(len(_pod_bytes(0, pods)))}


def in_subprocess(way: str, pods: int) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-m", "bench.memory", way, str(pods)], cwd=ROOT, check=True,
                         capture_output=True, text=True, timeout=1800)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def traced_bytes_per_pod(pods: int) -> float:
    """tracemalloc's count of bytes an informer holds per cached pod (store, indexes, shared pool growth)."""
    warm, add = _informer_holder()
    for i in range(pods):
        add(_pod_bytes(pods + i, pods))
    del warm, add
    raws = [_pod_bytes(i, pods) for i in range(pods)]
    informer, add = _informer_holder()
    gc.collect()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        for raw in raws:
            add(raw)
        gc.collect()
        used = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    assert len(informer.store) == pods
    return used / pods


def run(*, pods: int = 100_000, model_pods: int = 10_000, traced_pods: int = 10_000) -> list[Figure]:
    ours = in_subprocess("informer", pods)
    listed = in_subprocess("informer-list", pods)
    dicts = in_subprocess("dicts", pods)
    models = in_subprocess("models", model_pods)
    traced = traced_bytes_per_pod(traced_pods)
    details = {"pods": pods, "kubernetes_asyncio_pods": model_pods, "json_bytes_per_pod": ours["json_bytes_per_pod"],
               "rss_kib_per_pod": {"informer": ours["bytes_per_pod"] / KIB,
                                   "informer, pods from a list": listed["bytes_per_pod"] / KIB,
                                   "raw dicts": dicts["bytes_per_pod"] / KIB,
                                   "kubernetes_asyncio models": models["bytes_per_pod"] / KIB},
               "tracemalloc_kib_per_pod_informer": traced / KIB, "tracemalloc_pods": traced_pods,
               "seconds_to_fill": {"informer": ours["seconds"], "raw dicts": dicts["seconds"],
                                   "kubernetes_asyncio models": models["seconds"]}}
    return [
        Figure("memory", f"KiB per cached pod (RSS, {pods // 1000}k pods)", ours["bytes_per_pod"] / KIB, "KiB",
               dicts["bytes_per_pod"] / KIB, "raw orjson dicts", "<= 3 KiB", at_most(3.0), details),
        Figure("memory", "KiB per cached pod vs kubernetes_asyncio", ours["bytes_per_pod"] / KIB, "KiB",
               models["bytes_per_pod"] / KIB, f"V1Pod models, {model_pods // 1000}k pods"),
        Figure("memory", f"KiB per cached pod (tracemalloc, {traced_pods // 1000}k pods)", traced / KIB, "KiB",
               None, "", "<= 3 KiB", at_most(3.0)),
    ]


def main(argv: list[str]) -> int:
    way, pods = argv[0], int(argv[1])
    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))
    print(json.dumps(measure_rss(way, pods)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
