"""kube-sim's audit log (``--audit-log-path``) and static token file (``--token-auth-file``), seen from the
file a client's requests leave behind: one Metadata-level audit.k8s.io/v1 Event per request."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from controller_manager.sim.apiserver.audit import FLUSH_INTERVAL
from controller_manager.sim.apiserver.auth.tokenfile import parse_token_file
from controller_manager.sim.cluster import SimCluster

TOKENS = 'tok-a,replica-a,uid-a,"system:masters,chaos"\ntok-b,replica-b,uid-b\n'


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[SimCluster]:
    async with SimCluster(nodes=1, kubeconfig_path=tmp_path / "kubeconfig", anonymous_admin=False,
                          audit_log_path=tmp_path / "audit.log") as c:
        assert c.api.auth is not None
        c.api.auth.add_static_tokens(parse_token_file(TOKENS, "tokens.csv"))
        yield c


def events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def audited(path: Path, predicate: Any, timeout: float = 5.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        found = [e for e in events(path) if predicate(e)]
        if found:
            return found
        assert time.monotonic() < deadline, "no such audit event"
        await asyncio.sleep(FLUSH_INTERVAL / 2)


async def test_each_request_is_one_metadata_event_with_user_agent_object_and_code(
        cluster: SimCluster, tmp_path: Path) -> None:
    headers = {"Authorization": "Bearer tok-a", "User-Agent": "replica-a/v1 (linux/amd64)"}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
           "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    async with aiohttp.ClientSession(base_url=cluster.url, headers=headers) as s:
        async with s.post("/api/v1/namespaces/default/pods", json=pod) as r:
            assert r.status == 201
            created_id = r.headers["Audit-ID"]
        async with s.post("/api/v1/namespaces/default/pods", json=pod) as r:
            assert r.status == 409
        async with s.get("/apis/apps/v1/namespaces/default/deployments/nope/scale",
                         headers={"Audit-ID": "my-id"}) as r:
            assert r.status == 404
        async with s.get("/version") as r:
            assert r.status == 200
    path = tmp_path / "audit.log"
    create = (await audited(path, lambda e: e["auditID"] == created_id))[0]
    assert create["kind"] == "Event"
    assert create["apiVersion"] == "audit.k8s.io/v1"
    assert create["level"] == "Metadata"
    assert create["stage"] == "ResponseComplete"
    assert create["verb"] == "create"
    assert create["requestURI"] == "/api/v1/namespaces/default/pods"
    assert create["user"] == {"username": "replica-a", "uid": "uid-a",
                              "groups": ["system:masters", "chaos", "system:authenticated"]}
    assert create["userAgent"] == "replica-a/v1 (linux/amd64)"
    assert create["sourceIPs"] == ["127.0.0.1"]
    assert create["objectRef"] == {"resource": "pods", "namespace": "default", "apiVersion": "v1"}
    assert create["responseStatus"] == {"metadata": {}, "code": 201}
    assert create["requestReceivedTimestamp"] <= create["stageTimestamp"]
    conflict = (await audited(path, lambda e: e["responseStatus"]["code"] == 409))[0]
    assert conflict["responseStatus"] == {"metadata": {}, "status": "Failure", "reason": "AlreadyExists",
                                          "message": 'pods "web" already exists', "code": 409}
    scale = (await audited(path, lambda e: e["auditID"] == "my-id"))[0]
    assert scale["objectRef"] == {"resource": "deployments", "namespace": "default", "name": "nope",
                                  "apiGroup": "apps", "apiVersion": "v1", "subresource": "scale"}
    assert scale["verb"] == "get"
    assert scale["responseStatus"]["code"] == 404
    version = (await audited(path, lambda e: e["requestURI"] == "/version"))[0]
    assert "objectRef" not in version
    assert version["verb"] == "get"


async def test_refused_and_fault_injected_requests_are_audited_with_their_user(
        cluster: SimCluster, tmp_path: Path) -> None:
    cluster.faults.fail(429, every=1, verbs=["list"], resources=["configmaps"], count=1)
    async with aiohttp.ClientSession(base_url=cluster.url) as s:
        async with s.get("/api/v1/namespaces/default/configmaps", headers={"Authorization": "Bearer tok-b"}) as r:
            assert r.status == 429
        async with s.get("/api/v1/namespaces/default/secrets", headers={"Authorization": "Bearer tok-b"}) as r:
            assert r.status == 403  # tok-b's user is in no group RBAC grants anything
        async with s.get("/api/v1/namespaces/default/secrets", headers={"Authorization": "Bearer wrong"}) as r:
            assert r.status == 401
        async with s.get("/api/v1/namespaces/default/secrets?watch=1&timeoutSeconds=1",
                         headers={"Authorization": "Bearer tok-a"}) as r:
            assert r.status == 200
            await r.read()  # the watch ends after its timeout: only then is it audited
    path = tmp_path / "audit.log"
    faulted = (await audited(path, lambda e: e["objectRef"].get("resource") == "configmaps"))[0]
    assert faulted["user"]["username"] == "replica-b"
    assert faulted["verb"] == "list"
    assert faulted["responseStatus"]["code"] == 429
    assert faulted["responseStatus"]["reason"] == "TooManyRequests"
    denied = await audited(path, lambda e: e["responseStatus"]["code"] in (401, 403))
    assert sorted((e["responseStatus"]["code"], e["user"]["username"]) for e in denied) == [
        (401, "system:anonymous"), (403, "replica-b")]
    watch = (await audited(path, lambda e: e["verb"] == "watch"))[0]
    assert watch["user"]["username"] == "replica-a"
    assert watch["responseStatus"]["code"] == 200


async def test_lines_are_written_while_serving_and_all_of_them_on_stop(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    async with SimCluster(nodes=0, kubelets=False, scheduler=False, audit_log_path=path) as c, \
            aiohttp.ClientSession() as s:
        for _ in range(50):
            async with s.get(f"{c.url}/api/v1/namespaces") as r:
                assert r.status == 200
        await audited(path, lambda e: True)  # flushed while serving, not only at the end
        for _ in range(20):
            async with s.get(f"{c.url}/api/v1/nodes") as r:
                assert r.status == 200
    lines = events(path)
    assert sum(1 for e in lines if e["requestURI"] == "/api/v1/namespaces") == 50
    assert sum(1 for e in lines if e["requestURI"] == "/api/v1/nodes") == 20
    assert len({e["auditID"] for e in lines}) == len(lines)


def test_token_file_records_and_errors() -> None:
    users = parse_token_file('t1,alice,1,"a, b,,c"\n\nt2, bob, 2\n', "f.csv")
    assert users["t1"].name == "alice"
    assert users["t1"].groups == ("a", "b", "c", "system:authenticated")
    assert users["t2"].name == "bob"
    assert users["t2"].uid == "2"
    assert users["t2"].groups == ("system:authenticated",)
    with pytest.raises(ValueError, match=r"must have at least 3 columns .* found 2"):
        parse_token_file("t3,carol\n", "f.csv")
