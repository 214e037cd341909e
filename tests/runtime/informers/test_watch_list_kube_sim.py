"""Streaming lists against kube-sim over HTTP, judged by kube-sim's audit log: what reached the API server.

- With WatchListClient on, an informer syncs (and re-syncs after 410 Gone) without a single LIST request: one
  watch with ``sendInitialEvents=true&resourceVersionMatch=NotOlderThan`` each time.
- A server that refuses the streaming list gets one paged LIST instead, and the informer works the same.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from prometheus_client import REGISTRY

from controller_manager.api.resources import CONFIGMAPS
from controller_manager.client import ApiClient, ClientConfig
from controller_manager.clock import RealClock
from controller_manager.runtime.informers import SharedInformerFactory
from controller_manager.sim.cluster import SimCluster

from .fakes import eventually

pytestmark = pytest.mark.timeout(60)

NAME = "v1/configmaps"


def _metric(name: str) -> float:
    return REGISTRY.get_sample_value(name, {"name": NAME}) or 0.0


def _requests(path: Path) -> list[tuple[str, dict[str, list[str]], int]]:
    """(verb, query, code) of every configmaps request in the audit log."""
    out = []
    for line in path.read_text().splitlines():
        event = json.loads(line)
        if (event.get("objectRef") or {}).get("resource") == "configmaps":
            out.append((event["verb"], parse_qs(urlsplit(event["requestURI"]).query),
                        event["responseStatus"]["code"]))
    return out


def _streaming(query: dict[str, list[str]]) -> bool:
    return query.get("sendInitialEvents") == ["true"] and query.get("resourceVersionMatch") == ["NotOlderThan"]


def _configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"},
            "data": {"k": name}}


def _cluster(tmp_path: Path) -> SimCluster:
    return SimCluster(nodes=0, scheduler=False, kubelets=False, audit_log_path=tmp_path / "audit.log")


async def _informer_run(client: ApiClient, body: Callable[[Any], Any]) -> None:
    factory = SharedInformerFactory(client, RealClock())
    informer = factory.informer(CONFIGMAPS)
    task = asyncio.create_task(factory.run())
    try:
        assert await factory.wait_for_cache_sync(timeout=15)
        await body(informer)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def _expected(cluster: SimCluster) -> set[str]:
    return {f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in cluster.api.list(CONFIGMAPS)[0]}


async def test_syncs_and_resyncs_after_410_with_no_list_request(tmp_path: Path) -> None:
    lists, relists, fallbacks = (_metric("reflector_lists_total"), _metric("reflector_relists_total"),
                                 _metric("reflector_watch_list_fallbacks_total"))
    async with _cluster(tmp_path) as cluster, ApiClient(ClientConfig(host=cluster.url), qps=0) as client:
        for i in range(30):
            await client.create(CONFIGMAPS, _configmap(f"cm-{i}"))

        async def body(informer: Any) -> None:
            assert set(informer.store.keys()) == _expected(cluster)
            assert informer.store.get("default/cm-7")["data"] == {"k": "cm-7"}
            await client.create(CONFIGMAPS, _configmap("late"))  # through the stream, now a plain watch
            await eventually(lambda: informer.store.get("default/late") is not None, timeout=15)
            # The watch is cut and the re-watch told its resourceVersion is too old: the informer re-lists.
            cluster.faults.fail(410, verbs=["watch"], resources=["configmaps"], count=1)
            cluster.faults.drop_watches()
            await client.create(CONFIGMAPS, _configmap("while-away"))
            await client.delete(CONFIGMAPS, "cm-3", "default")
            await eventually(lambda: _metric("reflector_relists_total") == relists + 1, timeout=15)
            await eventually(lambda: set(informer.store.keys()) == _expected(cluster), timeout=15)
            assert informer.store.get("default/cm-3") is None

        await _informer_run(client, body)
    # The cluster has stopped: its audit log is complete (watches are logged when their stream ends).

    requests = _requests(tmp_path / "audit.log")
    assert [verb for verb, _, _ in requests if verb == "list"] == []
    streams = [q for verb, q, _ in requests if verb == "watch" and _streaming(q)]
    assert len(streams) == 2  # the first sync and the re-list after 410
    assert streams[0].get("resourceVersion", [""]) == [""]
    assert streams[1]["resourceVersion"] != [""]  # NotOlderThan what the informer had seen
    assert streams[0]["allowWatchBookmarks"] == ["true"]
    assert _metric("reflector_lists_total") == lists + 2
    assert _metric("reflector_watch_list_fallbacks_total") == fallbacks


async def test_refused_streaming_list_falls_back_to_one_paged_list(tmp_path: Path) -> None:
    fallbacks = _metric("reflector_watch_list_fallbacks_total")
    async with _cluster(tmp_path) as cluster, ApiClient(ClientConfig(host=cluster.url), qps=0) as client:
        # A server without streaming lists answers the parameters 422 (ListOptions validation).
        cluster.faults.fail(422, verbs=["watch"], resources=["configmaps"], count=1)
        for i in range(5):
            await client.create(CONFIGMAPS, _configmap(f"cm-{i}"))

        async def body(informer: Any) -> None:
            assert set(informer.store.keys()) == _expected(cluster)
            await client.create(CONFIGMAPS, _configmap("late"))
            await eventually(lambda: informer.store.get("default/late") is not None, timeout=15)

        await _informer_run(client, body)

    requests = _requests(tmp_path / "audit.log")
    calls = [(verb, _streaming(q), code) for verb, q, code in requests if verb in ("list", "watch")]
    assert ("watch", True, 422) in calls
    assert [c for c in calls if c[0] == "list"] == [("list", False, 200)]
    assert _metric("reflector_watch_list_fallbacks_total") == fallbacks + 1
