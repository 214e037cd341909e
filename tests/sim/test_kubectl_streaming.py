"""The real kubectl's exec, cp, attach and port-forward against kube-sim over HTTPS, and the same subresources
spoken to directly over WebSockets (TTY, the v4 and base64 protocols, the API server's refusals).

One kube-sim (one node, fast kubelets) serves the whole module; each test makes the pods it needs.
"""

from __future__ import annotations

import asyncio
import base64
import os
import ssl
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import pytest_asyncio

from controller_manager.api.resources import CONFIGMAPS, PODS, SECRETS, SERVICEACCOUNTS, SERVICES
from controller_manager.sim.cluster import SimCluster
from controller_manager.sim.kubelet import KubeletConfig

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.xdist_group("kubectl-streaming")]

KUBECTL = str(Path(sys.executable).parent / "kubectl")
FAST = KubeletConfig(node_status_update_frequency=0.2, lease_renew_interval=0.2)
NS = "default"


class Sim:
    def __init__(self, cluster: SimCluster, home: Path) -> None:
        self.cluster = cluster
        self.home = home
        config = orjson.loads(Path(str(cluster.kubeconfig_path)).read_bytes())
        self.server = config["clusters"][0]["cluster"]["server"]
        self.token = config["users"][0]["user"]["token"]
        self.ssl = ssl.create_default_context(
            cadata=base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]).decode())

    async def kubectl(self, *args: str, stdin: bytes | None = None, spdy: bool = False) -> tuple[int, str, str]:
        env = {**os.environ, "HOME": str(self.home)}
        if spdy:  # kubectl's switches back to its SPDY executors and dialer
            env |= {"KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "false", "KUBECTL_PORT_FORWARD_WEBSOCKETS": "false"}
        proc = await asyncio.create_subprocess_exec(
            KUBECTL, "--kubeconfig", str(self.cluster.kubeconfig_path), "--cache-dir", str(self.home / "cache"), *args,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env)
        out, err = await asyncio.wait_for(proc.communicate(stdin), 30)
        return proc.returncode or 0, out.decode(), err.decode()

    async def ok(self, *args: str, stdin: bytes | None = None, spdy: bool = False) -> str:
        code, out, err = await self.kubectl(*args, stdin=stdin, spdy=spdy)
        assert code == 0, f"kubectl {' '.join(args)}: {err}"
        return out

    def url(self, pod: str, sub: str, query: str) -> str:
        return f"{self.server.replace('https', 'wss')}/api/v1/namespaces/{NS}/pods/{pod}/{sub}?{query}"

    async def running(self, name: str, body: dict[str, Any]) -> None:
        self.cluster.api.create(PODS, {"metadata": {"name": name, "namespace": NS, **body.pop("metadata", {})},
                                       "spec": body})
        await until(lambda: (self.cluster.api.get(PODS, NS, name).get("status") or {}).get("phase") == "Running")


async def until(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    delay = 0.02
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.25)


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def sim(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Sim]:
    home = tmp_path_factory.mktemp("streaming")
    async with SimCluster(nodes=1, kubelet_config=FAST, tls=True, anonymous_admin=False,
                          kubeconfig_path=home / "kubeconfig") as cluster:
        s = Sim(cluster, home)
        api = cluster.api
        api.create(CONFIGMAPS, {"metadata": {"name": "cfg", "namespace": NS},
                                "data": {"greeting": "hello", "app.conf": "mode=fast\n"}})
        api.create(SECRETS, {"metadata": {"name": "creds", "namespace": NS},
                             "data": {"password": base64.b64encode(b"s3cret").decode()}})
        api.create(SERVICES, {"metadata": {"name": "backend", "namespace": NS},
                              "spec": {"ports": [{"name": "http", "port": 80}], "selector": {"app": "b"}}})
        await s.running("web", {
            "metadata": {"labels": {"app": "web"}},
            "containers": [{
                "name": "app", "image": "busybox", "ports": [{"containerPort": 8080}],
                "env": [{"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "greeting"}}},
                        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                        {"name": "MESSAGE", "value": "$(GREETING) from $(POD_NAME)"}],
                "envFrom": [{"secretRef": {"name": "creds"}, "prefix": "DB_"}],
                "volumeMounts": [{"name": "cfg", "mountPath": "/etc/cfg"},
                                 {"name": "info", "mountPath": "/etc/podinfo"},
                                 {"name": "scratch", "mountPath": "/scratch"}]},
                {"name": "sidecar", "image": "busybox",
                 "volumeMounts": [{"name": "scratch", "mountPath": "/data"}]}],
            "volumes": [{"name": "cfg", "configMap": {"name": "cfg"}},
                        {"name": "info", "downwardAPI": {"items": [
                            {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}},
                        {"name": "scratch", "emptyDir": {}}]})
        yield s


async def test_exec_runs_against_the_pods_environment_and_files(sim: Sim) -> None:
    script = ("echo $MESSAGE; printenv DB_password; echo $BACKEND_SERVICE_PORT_HTTP; hostname; cat /etc/cfg/app.conf; "
              "cat /etc/podinfo/labels")
    out = await sim.ok("exec", "web", "-c", "app", "--", "sh", "-c", script)
    lines = out.splitlines()
    assert lines == ["hello from web", "s3cret", "80", "web", "mode=fast", 'app="web"']
    ip = sim.cluster.api.get(PODS, NS, "web")["status"]["podIP"]
    hosts = await sim.ok("exec", "web", "-c", "app", "--", "cat", "/etc/hosts")
    assert hosts.startswith("# Kubernetes-managed hosts file.\n")
    assert hosts.endswith(f"{ip}\tweb\n")
    # What one container writes into an emptyDir the other reads.
    await sim.ok("exec", "web", "-c", "app", "--", "sh", "-c", "echo shared > /scratch/note")
    assert await sim.ok("exec", "web", "-c", "sidecar", "--", "cat", "/data/note") == "shared\n"
    code, _, err = await sim.kubectl("exec", "web", "-c", "app", "--", "sh", "-c", "echo x > /etc/cfg/new")
    assert (code, err) == (1, "sh: can't create /etc/cfg/new: Read-only file system\ncommand terminated with exit "
                              "code 1\n")


async def test_projected_service_account_token_authenticates_as_the_pod(sim: Sim) -> None:
    sim.cluster.api.create(SERVICEACCOUNTS, {"metadata": {"name": "robot", "namespace": NS}})
    await sim.running("bot", {"serviceAccountName": "robot", "containers": [{
        "name": "c", "image": "busybox", "volumeMounts": [{"name": "token", "mountPath": "/var/run/secrets/tokens"}]}],
        "volumes": [{"name": "token", "projected": {"sources": [
            {"serviceAccountToken": {"path": "api-token", "expirationSeconds": 600}}]}}]})
    token = await sim.ok("exec", "bot", "--", "cat", "/var/run/secrets/tokens/api-token")
    out = await sim.ok("auth", "whoami", "--token", token, "-o", "json")
    info = orjson.loads(out)["status"]["userInfo"]
    assert info["username"] == "system:serviceaccount:default:robot"
    assert info["extra"]["authentication.kubernetes.io/pod-name"] == ["bot"]


async def test_exec_exit_codes_and_commands_that_cannot_start(sim: Sim) -> None:
    code, out, err = await sim.kubectl("exec", "web", "-c", "app", "--", "sh", "-c", "echo partial; exit 3")
    assert (code, out, err) == (3, "partial\n", "command terminated with exit code 3\n")
    code, out, err = await sim.kubectl("exec", "web", "-c", "app", "--", "sh", "-c", "nosuch --flag")
    assert (code, err) == (127, "sh: nosuch: not found\ncommand terminated with exit code 127\n")
    code, _, err = await sim.kubectl("exec", "web", "-c", "app", "--", "nosuch")
    assert code == 1
    assert err.startswith("error: Internal error occurred: Internal error occurred: error executing command in "
                          'container: failed to exec in container: failed to start exec "')
    assert err.endswith('": OCI runtime exec failed: exec failed: unable to start container process: exec: "nosuch": '
                        "executable file not found in $PATH: unknown\n")
    code, _, err = await sim.kubectl("exec", "web", "-c", "app", "--", "/bin/bash")
    assert 'exec: "/bin/bash": stat /bin/bash: no such file or directory: unknown' in err


async def test_exec_with_stdin(sim: Sim) -> None:
    assert await sim.ok("exec", "-i", "web", "-c", "app", "--", "cat", stdin=b"line one\nline two\n") == \
        "line one\nline two\n"
    out = await sim.ok("exec", "-i", "web", "-c", "app", "--", "sh", stdin=b"cd /etc\npwd\nexit 0\necho never\n")
    assert out == "/etc\n"


async def test_cp_to_and_from_a_pod(sim: Sim, tmp_path: Path) -> None:
    src = tmp_path / "site"
    (src / "css").mkdir(parents=True)
    (src / "index.html").write_text("<h1>hi</h1>\n")
    (src / "css" / "main.css").write_text("body{}\n")
    await sim.ok("cp", str(src), "web:/tmp/site", "-c", "app")
    listing = await sim.ok("exec", "web", "-c", "app", "--", "ls", "/tmp/site", "/tmp/site/css")
    assert listing == "/tmp/site:\ncss\nindex.html\n\n/tmp/site/css:\nmain.css\n"
    out = await sim.ok("cp", "web:/tmp/site", str(tmp_path / "back"), "-c", "app")
    assert out == "tar: removing leading '/' from member names\n"  # tar's stderr: kubectl cp prints it on stdout
    assert (tmp_path / "back" / "index.html").read_text() == "<h1>hi</h1>\n"
    assert (tmp_path / "back" / "css" / "main.css").read_text() == "body{}\n"
    await sim.ok("cp", "web:/etc/cfg/app.conf", str(tmp_path / "app.conf"), "-c", "app")
    assert (tmp_path / "app.conf").read_text() == "mode=fast\n"


@pytest.mark.parametrize("spdy", [False, True], ids=["websocket-tunnel", "spdy"])
async def test_port_forward_declared_and_undeclared_ports(sim: Sim, spdy: bool) -> None:
    env = {**os.environ, "HOME": str(sim.home)}
    if spdy:
        env["KUBECTL_PORT_FORWARD_WEBSOCKETS"] = "false"
    proc = await asyncio.create_subprocess_exec(
        KUBECTL, "--kubeconfig", str(sim.cluster.kubeconfig_path), "port-forward", "pod/web", ":8080", ":9090",
        "--address", "127.0.0.1", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env)
    try:
        assert proc.stdout is not None
        assert proc.stderr is not None
        ports: dict[int, int] = {}
        while len(ports) < 2:
            line = (await asyncio.wait_for(proc.stdout.readline(), 15)).decode()
            assert line.startswith("Forwarding from 127.0.0.1:"), line
            local, remote = line.split("127.0.0.1:")[1].split(" -> ")
            ports[int(remote)] = int(local)
        reader, writer = await asyncio.open_connection("127.0.0.1", ports[8080])
        writer.write(b"GET / HTTP/1.1\r\nHost: web\r\n\r\n")
        answer = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
        assert answer.endswith(b"\r\n\r\npod default/web container app port 8080\n")
        reader, writer = await asyncio.open_connection("127.0.0.1", ports[9090])
        writer.write(b"GET / HTTP/1.1\r\nHost: web\r\n\r\n")
        assert await asyncio.wait_for(reader.read(), 10) == b""
        writer.close()
        _, err = await asyncio.wait_for(proc.communicate(), 15)  # kubectl gives up after a forwarding error
        text = err.decode()
        assert "error forwarding port 9090 to pod " in text
        assert "failed to connect to localhost:9090 inside namespace" in text
        assert "connect: connection refused" in text
        assert text.rstrip().endswith("error: lost connection to pod")
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_kubectl_over_spdy(sim: Sim, tmp_path: Path) -> None:
    # The kubelet's answers reach a SPDY client without the stream translator's wrapping.
    code, out, err = await sim.kubectl("exec", "web", "-c", "app", "--", "sh", "-c", "echo out; echo err >&2; exit 3",
                                       spdy=True)
    assert (code, out, err) == (3, "out\n", "err\ncommand terminated with exit code 3\n")
    assert await sim.ok("exec", "-i", "web", "-c", "app", "--", "cat", stdin=b"via spdy\n", spdy=True) == "via spdy\n"
    code, _, err = await sim.kubectl("exec", "web", "-c", "app", "--", "nosuch", spdy=True)
    assert code == 1
    assert err.startswith("error: Internal error occurred: error executing command in container: failed to exec")
    (tmp_path / "f.txt").write_text("spdy copy\n")
    await sim.ok("cp", str(tmp_path / "f.txt"), "web:/tmp/spdy.txt", "-c", "app", spdy=True)
    await sim.ok("cp", "web:/tmp/spdy.txt", str(tmp_path / "back.txt"), "-c", "app", spdy=True)
    assert (tmp_path / "back.txt").read_text() == "spdy copy\n"
    sim.cluster.api.create(PODS, {"metadata": {"name": "slow", "namespace": NS,
                                               "annotations": {"sim.controller-manager.io/start-seconds": "3600"}},
                                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    await until(lambda: bool(sim.cluster.api.get(PODS, NS, "slow")["spec"].get("nodeName")))
    code, _, err = await sim.kubectl("exec", "slow", "--", "true", spdy=True)
    assert (code, err) == (1, 'error: unable to upgrade connection: container not found ("c")\n')


async def test_attach_reads_what_the_client_types(sim: Sim) -> None:
    await sim.running("echo", {"containers": [{"name": "cat", "image": "busybox", "command": ["cat"], "stdin": True}]})
    code, out, err = await sim.kubectl("attach", "-i", "echo", stdin=b"typed in\n")
    assert (code, out) == (0, "typed in\n"), err
    assert "If you don't see a command prompt, try pressing enter." in err


async def test_kubectl_run_interactive_ends_with_the_shells_exit(sim: Sim) -> None:
    code, out, err = await sim.kubectl("run", "-i", "--rm", "--restart=Never", "oneshot", "--image=busybox", "--",
                                       "sh", stdin=b"echo $HOSTNAME\nexit 3\n")
    assert code == 3, err
    assert out == 'oneshot\npod "oneshot" deleted from default namespace\n'
    assert err.endswith("pod default/oneshot terminated (Error)\n")


async def test_attach_ends_when_the_container_stops(sim: Sim) -> None:
    await sim.running("quiet", {"terminationGracePeriodSeconds": 0,
                                "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"]}]})
    url = sim.url("quiet", "attach", "container=c&stdout=true&stderr=true")
    session = asyncio.ensure_future(_session(sim, url, "v5.channel.k8s.io"))
    done, _ = await asyncio.wait({session}, timeout=0.3)
    assert not done  # a quiet process: nothing to read, the session stays
    sim.cluster.api.delete(PODS, NS, "quiet")
    received, code = await asyncio.wait_for(session, 15)
    assert (received, code) == ([b'\x03{"metadata":{},"status":"Success"}'], 1000)


async def test_refusals(sim: Sim) -> None:
    code, _, err = await sim.kubectl("exec", "nosuch", "--", "true")
    assert (code, err) == (1, 'Error from server (NotFound): pods "nosuch" not found\n')
    # Not scheduled: no node to reach.
    sim.cluster.api.create(PODS, {"metadata": {"name": "unplaced", "namespace": NS},
                                  "spec": {"nodeSelector": {"no": "such"},
                                           "containers": [{"name": "c", "image": "busybox"}]}})
    code, _, err = await sim.kubectl("exec", "unplaced", "--", "true")
    # (kubectl's SPDY fallback gets the same 400 and words it so)
    assert (code, err) == (1, "error: unable to upgrade connection: pod unplaced does not have a host assigned\n")
    # Scheduled but its container not started yet: the kubelet has no such container.
    sim.cluster.api.create(PODS, {"metadata": {"name": "starting", "namespace": NS,
                                               "annotations": {"sim.controller-manager.io/start-seconds": "3600"}},
                                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    await until(lambda: bool(sim.cluster.api.get(PODS, NS, "starting")["spec"].get("nodeName")))
    code, _, err = await sim.kubectl("exec", "starting", "--", "true")
    assert (code, err) == (1, 'error: Internal error occurred: unable to upgrade connection: container not found '
                              '("c")\n')
    # The viewer may get pods/exec but not create it, which a WebSocket upgrade needs too.
    code, _, err = await sim.kubectl("--context", "kube-sim-viewer", "exec", "web", "-c", "app", "--", "true")
    assert code == 1
    assert 'User "viewer" cannot create resource "pods/exec" in API group "" in the namespace "default"' in err
    await sim.ok("create", "role", "exec-get-only", "--verb=get", "--resource=pods,pods/exec")
    await sim.ok("create", "rolebinding", "alice-exec-get", "--role=exec-get-only", "--user=alice")
    code, _, err = await sim.kubectl("exec", "--as=alice", "web", "-c", "app", "--", "true")
    assert 'User "alice" cannot create resource "pods/exec"' in err
    await sim.ok("create", "rolebinding", "alice-edit", "--clusterrole=edit", "--user=alice")
    assert await sim.ok("exec", "--as=alice", "web", "-c", "app", "--", "echo", "allowed") == "allowed\n"


async def _session(sim: Sim, url: str, protocol: str, send: list[bytes | str] | None = None
                   ) -> tuple[list[bytes | str], int | None]:
    async with aiohttp.ClientSession() as http, http.ws_connect(
            url, protocols=(protocol,), ssl=sim.ssl, headers={"Authorization": f"Bearer {sim.token}"}) as ws:
        assert ws.protocol == protocol
        for message in send or []:
            await (ws.send_bytes(message) if isinstance(message, bytes) else ws.send_str(message))
        received: list[bytes | str] = []
        async for msg in ws:
            received.append(msg.data)
        return received, ws.close_code


async def test_websocket_protocols_tty_and_status(sim: Sim) -> None:
    # v5 with a TTY: the terminal echoes what is typed, prompts, and ends lines with CRLF.
    url = sim.url("web", "exec", "container=app&command=sh&stdin=true&stdout=true&tty=true")
    received, code = await _session(sim, url, "v5.channel.k8s.io",
                                    [b"\x04" + b'{"Width":80,"Height":24}', b"\x00echo hi\r", b"\x00exit 5\r"])
    assert code == 1000
    stdout = b"".join(m[1:] for m in received if isinstance(m, bytes) and m[:1] == b"\x01")
    assert stdout == b"/ # echo hi\r\nhi\r\n/ # exit 5\r\n"
    assert orjson.loads(received[-1][1:]) == {
        "metadata": {}, "status": "Failure",
        "message": "command terminated with non-zero exit code: command terminated with exit code 5",
        "reason": "NonZeroExitCode", "details": {"causes": [{"reason": "ExitCode", "message": "5"}]}}
    # v4 has no close signal: a command that does not read stdin still ends.
    url = sim.url("web", "exec", "container=app&command=echo&command=v4&stdout=true&stderr=true")
    received, _ = await _session(sim, url, "v4.channel.k8s.io")
    assert received == [b"\x01v4\n", b'\x03{"metadata":{},"status":"Success"}']
    # base64: text frames, the channel as a digit.
    url = sim.url("web", "exec", "container=app&command=echo&command=b64&stdout=true")
    received, _ = await _session(sim, url, "v4.base64.channel.k8s.io")
    assert received[0] == "1" + base64.b64encode(b"b64\n").decode()


async def test_api_server_refusals_before_the_upgrade(sim: Sim) -> None:
    headers = {"Authorization": f"Bearer {sim.token}"}
    base = sim.server + f"/api/v1/namespaces/{NS}/pods/web"
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{base}/exec?container=nope&command=true&stdout=true", ssl=sim.ssl,
                            headers=headers) as resp:
            assert resp.status == 400
            assert (await resp.json())["message"] == "container nope is not valid for pod web"
        async with http.get(f"{base}/exec?command=true&stdout=true", ssl=sim.ssl, headers=headers) as resp:
            assert resp.status == 400
            assert (await resp.json())["message"] == ("a container name must be specified for pod web, choose one "
                                                      "of: [app sidecar]")
        async with http.post(f"{base}/exec?container=app&command=true&stdout=true", ssl=sim.ssl,
                             headers=headers) as resp:
            assert resp.status == 400
            assert (await resp.json())["message"] == "Upgrade request required"
        async with http.get(sim.server + "/api/v1", ssl=sim.ssl, headers=headers) as resp:
            found = {r["name"]: r for r in (await resp.json())["resources"]}
        assert found["pods/exec"] == {"name": "pods/exec", "singularName": "", "namespaced": True,
                                      "kind": "PodExecOptions", "verbs": ["create", "get"]}
        assert found["pods/portforward"]["kind"] == "PodPortForwardOptions"


async def test_port_forward_over_the_channel_protocol(sim: Sim) -> None:
    # What client libraries (the official Python client among them) speak: two channels per port, each opened by
    # the server with the port's two little-endian bytes.
    url = sim.url("web", "portforward", "ports=8080,9090")
    request = b"GET / HTTP/1.1\r\nHost: web\r\n\r\n"
    received, _ = await _session(sim, url, "v4.channel.k8s.io", [b"\x00" + request, b"\x02" + request])
    by_channel: dict[int, bytes] = {}
    for message in received:
        assert isinstance(message, bytes)
        if message[0] not in by_channel:
            assert message[1:] == (8080 if message[0] < 2 else 9090).to_bytes(2, "little")
            by_channel[message[0]] = b""
        else:
            by_channel[message[0]] += message[1:]
    assert by_channel[0].endswith(b"\r\n\r\npod default/web container app port 8080\n")
    assert by_channel[1] == b""
    assert by_channel[2] == b""
    assert by_channel[3].startswith(b"error forwarding port 9090 to pod ")
    async with aiohttp.ClientSession() as http, http.get(
            sim.url("web", "portforward", "").replace("wss", "https"), ssl=sim.ssl,
            headers={"Authorization": f"Bearer {sim.token}", "Upgrade": "websocket", "Connection": "Upgrade",
                     "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}) as resp:
        assert resp.status == 400
        assert (await resp.json())["message"] == 'query parameter "port" is required'
