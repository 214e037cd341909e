"""GET pods/<name>/log: kube-sim's containers write nothing, so a readable log is empty; the options, the pod,
the container and the container's state are checked as kube-apiserver and the kubelet behind it check them,
and a followed log ends when the container stops (HTTP API and the real kubectl)."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import pytest

from controller_manager.api.resources import PODS
from controller_manager.sim.apiserver import ApiServer, ApiServerOptions
from tests.runtime.informers.fakes import eventually
from tests.sim.apiserver.conftest import ADMIN, Client, pod
from tests.sim.apiserver.kubectl_harness import serve

BASE = "/api/v1/namespaces/default/pods"
_STARTED = "2026-01-01T00:00:00Z"


def _status(name: str, state: dict[str, Any], last: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": name, "image": "nginx", "imageID": "", "ready": "running" in state, "restartCount": 0,
            "state": state, "lastState": last or {}}


def _running(name: str = "c") -> dict[str, Any]:
    return _status(name, {"running": {"startedAt": _STARTED}})


def _with_status(api: ApiServer, name: str, *statuses: dict[str, Any]) -> None:
    current = copy.deepcopy(api.get(PODS, "default", name))
    current["status"]["containerStatuses"] = list(statuses)
    api.update(PODS, current, subresource="status", namespace="default", name=name)


async def _log(client: Client, name: str, **query: str) -> tuple[int, Any]:
    resp = await client.tc.get(f"{BASE}/{name}/log", params=query, headers=ADMIN)
    text = await resp.text()
    return resp.status, (await resp.json() if resp.content_type == "application/json" else text)


async def test_a_running_containers_log_is_empty_text(client: Client, api: ApiServer) -> None:
    assert (await client.post(BASE, pod("p", node="node-1")))[0] == 201
    _with_status(api, "p", _running())
    code, body = await _log(client, "p")
    assert (code, body) == (200, "")
    code, body = await _log(client, "p", container="c", tailLines="10", timestamps="true")
    assert (code, body) == (200, "")


async def test_a_pod_on_no_node_has_an_empty_log(client: Client) -> None:
    assert (await client.post(BASE, pod("p")))[0] == 201
    assert await _log(client, "p") == (200, "")


@pytest.mark.parametrize(("statuses", "query", "message"), [
    pytest.param([], {}, 'container "c" in pod "p" is not available', id="no-status"),
    pytest.param([_status("c", {"waiting": {"reason": "ContainerCreating"}})], {},
                 'container "c" in pod "p" is waiting to start: ContainerCreating', id="creating"),
    pytest.param([_status("c", {"waiting": {"reason": "ImagePullBackOff"}})], {},
                 'container "c" in pod "p" is waiting to start: trying and failing to pull image', id="backoff"),
    pytest.param([_status("c", {"waiting": {"reason": "ErrImagePull"}})], {},
                 'container "c" in pod "p" is waiting to start: image can\'t be pulled', id="pull-error"),
    pytest.param([_status("c", {"terminated": {"exitCode": 1, "startedAt": _STARTED, "finishedAt": _STARTED}})],
                 {}, 'container "c" in pod "p" is terminated', id="terminated-without-container"),
    pytest.param([_running()], {"previous": "true"}, 'previous terminated container "c" in pod "p" not found',
                 id="no-previous"),
    pytest.param([_status("c", {})], {}, 'container "c" in pod "p" is waiting to start - no logs yet', id="no-state"),
])
async def test_the_kubelets_refusals(client: Client, api: ApiServer, statuses: list[dict[str, Any]],
                                     query: dict[str, str], message: str) -> None:
    assert (await client.post(BASE, pod("p", node="node-1")))[0] == 201
    if statuses:
        _with_status(api, "p", *statuses)
    code, body = await _log(client, "p", **query)
    assert code == 400, body
    assert (body["reason"], body["message"]) == ("BadRequest", message)


async def test_a_terminated_or_restarted_containers_log_can_be_read(client: Client, api: ApiServer) -> None:
    assert (await client.post(BASE, pod("p", node="node-1", restartPolicy="Never")))[0] == 201
    done = {"exitCode": 0, "startedAt": _STARTED, "finishedAt": _STARTED, "containerID": "containerd://a"}
    _with_status(api, "p", _status("c", {"terminated": done}))
    assert await _log(client, "p") == (200, "")
    assert (await _log(client, "p", previous="true"))[0] == 400
    assert (await client.post(BASE, pod("q", node="node-1")))[0] == 201
    _with_status(api, "q", _status("c", {"running": {"startedAt": _STARTED}}, last={"terminated": done}))
    assert await _log(client, "q", previous="true") == (200, "")


async def test_options_and_containers(client: Client) -> None:
    two = pod("p", node="node-1", containers=[{"name": "a", "image": "nginx"}, {"name": "b", "image": "nginx"}],
              initContainers=[{"name": "i", "image": "busybox"}])
    assert (await client.post(BASE, two))[0] == 201
    code, body = await _log(client, "p")
    assert code == 400, body
    assert body["message"] == "a container name must be specified for pod p, choose one of: [i a b]"
    code, body = await _log(client, "p", container="z")
    assert (code, body["message"]) == (400, "container z is not valid for pod p")
    code, body = await _log(client, "p", container="a", tailLines="-1", limitBytes="0", sinceSeconds="0")
    assert code == 422, body
    assert body["message"] == ('PodLogOptions "p" is invalid: [tailLines: Invalid value: -1: must be greater than '
                               "or equal to 0, limitBytes: Invalid value: 0: must be greater than 0, sinceSeconds: "
                               "Invalid value: 0: must be greater than 0]")
    assert [c["field"] for c in body["details"]["causes"]] == ["tailLines", "limitBytes", "sinceSeconds"]
    code, body = await _log(client, "p", container="a", follow="yes")
    assert (code, body["message"]) == (400, 'strconv.ParseBool: parsing "yes": invalid syntax')
    code, body = await _log(client, "absent")
    assert (code, body["message"]) == (404, 'pods "absent" not found')


async def test_kubectl_logs_and_a_followed_log_ending_with_its_container(tmp_path: Path) -> None:
    api = ApiServer(options=ApiServerOptions())
    api.create(PODS, pod("p", node="node-1"), "default")
    _with_status(api, "p", _running())
    async with serve(api, tmp_path) as kubectl:
        assert await kubectl("logs", "p") == ""
        pods = api.store(PODS)
        follow = await kubectl.start("logs", "-f", "p")
        try:
            # the followed log waits on the pod (only a follow of a running container does)
            await eventually(lambda: len(pods.watchers) == 1, timeout=20)
            assert follow.returncode is None
            done = {"exitCode": 0, "startedAt": _STARTED, "finishedAt": _STARTED, "containerID": "containerd://a"}
            _with_status(api, "p", _status("c", {"terminated": done}))
            await asyncio.wait_for(follow.wait(), 10)
        finally:
            if follow.returncode is None:
                follow.kill()
        assert follow.returncode == 0
        await eventually(lambda: not pods.watchers)
