"""The ``kube-sim`` command as a process: the one ready line, a kubeconfig kubectl and the official client
can use (HTTPS, the CA and a token; without the token a request is system:anonymous and denied), a clean
exit on SIGTERM/SIGINT, and one error line for bad flags."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import signal
import ssl
import sys
from pathlib import Path

import aiohttp
import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException

from controller_manager.sim.main import main

BIN = Path(sys.executable).parent
KUBE_SIM = str(BIN / "kube-sim")
KUBECTL = str(BIN / "kubectl")
READY = re.compile(r"^kube-sim ready: (https://127\.0\.0\.1:\d+)\n$")


async def start(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(KUBE_SIM, *args, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)


@pytest.mark.parametrize("sig", [pytest.param(signal.SIGTERM, id="sigterm"), pytest.param(signal.SIGINT, id="sigint")])
async def test_serves_until_signalled(tmp_path: Path, sig: signal.Signals) -> None:
    kubeconfig = tmp_path / "kc"
    proc = await start("--nodes", "2", "--zones", "2", "--port", "0", "--kubeconfig", str(kubeconfig),
                       "--faults", "latency:seconds=0.001")
    try:
        assert proc.stdout is not None
        assert proc.stderr is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        match = READY.match(line)
        assert match, line
        assert kubeconfig.exists()
        kubectl = await asyncio.create_subprocess_exec(
            KUBECTL, "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp_path / "cache"), "get", "nodes",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env={**os.environ, "HOME": str(tmp_path)})
        out, err = await asyncio.wait_for(kubectl.communicate(), 60)
        assert kubectl.returncode == 0, err
        assert out.decode().count(" Ready ") == 2
        proc.send_signal(sig)
        rest, _ = await asyncio.wait_for(proc.communicate(), 20)
        assert proc.returncode == 0
        assert rest == b""  # exactly one line on stdout
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


BAD_FLAGS = [
    pytest.param(["--nodes", "-1"], "--nodes", id="negative-nodes"),
    pytest.param(["--port", "70000"], "--port", id="port-range"),
    pytest.param(["--bogus"], "unrecognized arguments", id="unknown-flag"),
    pytest.param(["--faults", "explode"], "--faults", id="bad-fault-spec"),
    pytest.param(["--webhook-service", "hook.default:443=127.0.0.1:8443"], "--webhook-service",
                 id="bad-webhook-service"),
    pytest.param(["--service-account-key-file", "/nonexistent/sa.pub"], "--service-account-key-file",
                 id="missing-service-account-key-file"),
    pytest.param(["--service-account-key-file", __file__], "does not contain any valid RSA or ECDSA public keys",
                 id="not-a-key-file"),
    pytest.param(["--token-auth-file", "/nonexistent/tokens.csv"], "--token-auth-file", id="missing-token-file"),
    pytest.param(["--event-ttl", "1 hour"], "--event-ttl", id="event-ttl-not-a-duration"),
    pytest.param(["--event-ttl", "-1h"], "--event-ttl", id="event-ttl-negative"),
]


def assert_one_error_line(code: int | str | None, out: str, err: str, needle: str) -> None:
    assert code == 2
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("kube-sim: error:")
    assert needle in lines[0]


# Every bad flag in-process: main() rejects it before anything starts, as the process does.
@pytest.mark.parametrize(("args", "needle"), BAD_FLAGS)
def test_bad_flags_one_error_line(args: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(args)
    out, err = capsys.readouterr()
    assert_one_error_line(exited.value.code, out, err, needle)


# And as the installed command: a parser error and one found after parsing.
@pytest.mark.parametrize(("args", "needle"), [p for p in BAD_FLAGS if p.id in ("unknown-flag", "not-a-key-file")])
async def test_bad_flags_one_error_line_from_the_command(args: list[str], needle: str) -> None:
    proc = await start(*args)
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert_one_error_line(proc.returncode, out.decode(), err.decode(), needle)


# --- what real clients do with the kubeconfig kube-sim writes (the before-stop hook's smoke) ----------

_CONFIGMAP_YAML = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: smoke}\ndata: {a: b}\n"
def _official_client(kubeconfig: Path) -> str:
    """What the official ``kubernetes`` client does with the kubeconfig: create and read a ReplicaSet, read the
    ConfigMap; its answers one a line (or the refusal's status and body). Run in a thread of this process: the
    same loader and client as a script of its own, without a Python start-up and import of the client."""
    api = k8s_config.new_client_from_config(config_file=str(kubeconfig))
    try:
        apps = k8s.AppsV1Api(api)
        try:
            apps.create_namespaced_replica_set("default", {"metadata": {"name": "smoke-rs"}, "spec": {
                "replicas": 0, "selector": {"matchLabels": {"a": "b"}}, "template": {
                    "metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}})
            replicas = apps.read_namespaced_replica_set("smoke-rs", "default").status.replicas
            data = k8s.CoreV1Api(api).read_namespaced_config_map("smoke", "default").data["a"]
            return f"{replicas}\n{data}\n"
        except ApiException as e:
            return f"{e.status} {e.body}\n"
    finally:
        api.close()


async def _ready(*args: str) -> tuple[asyncio.subprocess.Process, str]:
    proc = await start(*args)
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
    match = READY.match(line)
    assert match, line
    return proc, match.group(1)


async def _run(*argv: str, env: dict[str, str]) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.STDOUT, env={**os.environ, **env})
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def _stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), 20)


async def test_kubectl_and_the_official_client_use_the_kubeconfig_over_https(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc"
    proc, url = await _ready("--nodes", "1", "--port", "0", "--kubeconfig", str(kubeconfig))
    try:
        (tmp_path / "cm.yaml").write_text(_CONFIGMAP_YAML)
        env = {"KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path)}
        code, out = await _run(KUBECTL, "create", "-f", str(tmp_path / "cm.yaml"), env=env)
        assert (code, out) == (0, "configmap/smoke created\n")
        assert await asyncio.to_thread(_official_client, kubeconfig) == "0\nb\n"
        config = yaml.safe_load(kubeconfig.read_text())
        assert config["clusters"][0]["cluster"]["server"] == url
        ca = base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]).decode()
        assert ca.startswith("-----BEGIN CERTIFICATE-----")

        # The same requests without the token: system:anonymous, which RBAC denies. (kubectl itself asks for
        # a username when its user has no credentials, so the official client and a raw request show it.)
        for user in config["users"]:
            user["user"] = {}
        (tmp_path / "anon").write_text(yaml.safe_dump(config))
        out = await asyncio.to_thread(_official_client, tmp_path / "anon")
        assert out.startswith("403 ")
        status = json.loads(out[4:])
        assert status["message"] == ('replicasets.apps is forbidden: User "system:anonymous" cannot create resource '
                                     '"replicasets" in API group "apps" in the namespace "default"')

        ctx = ssl.create_default_context(cadata=ca)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as session:
            async with session.get(f"{url}/api/v1/namespaces/default/pods") as resp:
                assert resp.status == 403
                body = await resp.json()
                assert body["message"] == ('pods is forbidden: User "system:anonymous" cannot list resource "pods" '
                                           'in API group "" in the namespace "default"')
            async with session.get(f"{url}/healthz") as resp:
                assert resp.status == 200
            async with session.get(f"{url}/api/v1/pods", headers={"Authorization": "Bearer wrong"}) as resp:
                assert resp.status == 401
                assert (await resp.json())["reason"] == "Unauthorized"
    finally:
        await _stop(proc)


async def test_anonymous_admin_serves_requests_without_credentials(tmp_path: Path) -> None:
    proc, url = await _ready("--nodes", "0", "--no-kubelets", "--port", "0", "--kubeconfig", str(tmp_path / "kc"),
                             "--anonymous-admin")
    try:
        config = yaml.safe_load((tmp_path / "kc").read_text())
        ca = base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]).decode()
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ssl.create_default_context(cadata=ca))
                                         ) as session, session.get(f"{url}/api/v1/namespaces") as resp:
            assert resp.status == 200
            assert (await resp.json())["kind"] == "NamespaceList"
    finally:
        await _stop(proc)


def test_event_ttl_flag_takes_a_go_duration() -> None:
    from controller_manager.sim.main import parse_args

    assert parse_args([]).event_ttl == 3600.0
    assert parse_args(["--event-ttl", "1h30m"]).event_ttl == 5400.0
    assert parse_args(["--event-ttl", "1.5s"]).event_ttl == 1.5
    assert parse_args(["--event-ttl", "0"]).event_ttl == 0.0


def test_webhook_service_flag() -> None:
    from controller_manager.sim.main import parse_args

    args = parse_args(["--webhook-service", "hook.hooks.svc:443=127.0.0.1:8443",
                       "--webhook-service", "other.ns.svc:9443=localhost:1"])
    assert dict(args.webhook_service) == {"hook.hooks.svc:443": "127.0.0.1:8443", "other.ns.svc:9443": "localhost:1"}


_POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}}


def _admin_and_ca(kubeconfig: Path) -> tuple[str, str]:
    config = yaml.safe_load(kubeconfig.read_text())
    ca = base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]).decode()
    return next(u["user"]["token"] for u in config["users"] if u["name"] == "kube-sim-admin"), ca


async def _post_pod(url: str, kubeconfig: Path) -> tuple[int, dict[str, object]]:
    admin, ca = _admin_and_ca(kubeconfig)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ssl.create_default_context(cadata=ca))
                                     ) as session:
        headers = {"Authorization": f"Bearer {admin}"}
        async with session.post(f"{url}/api/v1/namespaces/default/pods", json=_POD, headers=headers) as resp:
            return resp.status, await resp.json()


async def test_service_account_admission_is_on_as_in_kube_apiserver(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc"
    proc, url = await _ready("--nodes", "0", "--no-kubelets", "--port", "0", "--kubeconfig", str(kubeconfig))
    try:
        code, body = await _post_pod(url, kubeconfig)
        assert code == 403
        assert body["message"] == ('pods "p" is forbidden: error looking up service account default/default: '
                                   'serviceaccount "default" not found')
        code, out = await _run(KUBECTL, "create", "serviceaccount", "default",
                               env={"KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path)})
        assert code == 0, out
        code, body = await _post_pod(url, kubeconfig)
        assert code == 201, body
        spec = body["spec"]
        assert isinstance(spec, dict)
        assert spec["serviceAccountName"] == "default"
        assert [v["name"][:16] for v in spec["volumes"]] == ["kube-api-access-"]
    finally:
        await _stop(proc)


async def test_service_account_admission_can_be_turned_off(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc"
    proc, url = await _ready("--nodes", "0", "--no-kubelets", "--port", "0", "--kubeconfig", str(kubeconfig),
                             "--no-service-account-admission")
    try:
        code, body = await _post_pod(url, kubeconfig)
        assert code == 201, body
        spec = body["spec"]
        assert isinstance(spec, dict)
        assert "volumes" not in spec
    finally:
        await _stop(proc)
