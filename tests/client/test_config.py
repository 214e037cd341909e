"""Finding the server and credentials: kubeconfig (token, client certs, CA, exec plugin), $KUBECONFIG
precedence and merging, in-cluster service account, and clear errors when nothing usable exists."""

from __future__ import annotations

import asyncio
import base64
import io
import ssl
import stat
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from controller_manager.api.resources import PODS
from controller_manager.client import ApiClient, ApiConnectionError, ConfigError, load_config
from controller_manager.client import config as config_module
from controller_manager.client.config import load_incluster_config
from tests.client.certs import CertificateAuthority, Pem

POD = {"kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No ambient config leaks in: HOME is an empty temp dir, no KUBECONFIG, not in a cluster."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(var, raising=False)
    return home


def kubeconfig(path: Path, *clusters: tuple[str, str, dict[str, Any], dict[str, Any]],
               current: str | None = None) -> Path:
    """Write a kubeconfig (JSON is YAML) with one context per (name, server, cluster extras, user)."""
    doc: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": n, "cluster": {"server": s, **extra}} for n, s, extra, _ in clusters],
        "users": [{"name": n, "user": user} for n, _, _, user in clusters],
        "contexts": [{"name": n, "context": {"cluster": n, "user": n, "namespace": "default"}}
                     for n, _, _, _ in clusters],
    }
    if current is not None:
        doc["current-context"] = current
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(doc))
    return path


# --- plain http with a bearer token -------------------------------------------------------------


async def _echo_auth(request: web.Request) -> web.StreamResponse:
    peer = request.transport.get_extra_info("peercert") if request.transport else None
    subject = dict(x[0] for x in peer["subject"]) if peer else {}
    return web.json_response({**POD, "auth": request.headers.get("Authorization"),
                              "peer": subject.get("commonName")})


@pytest.fixture
async def http_server() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_get("/api/v1/namespaces/ns/pods/p", _echo_auth)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    yield str(server.make_url("")).rstrip("/")
    await server.close()


async def test_kubeconfig_with_bearer_token(tmp_path: Path, http_server: str) -> None:
    path = kubeconfig(tmp_path / "kc", ("sim", http_server, {}, {"token": "s3cret"}), current="sim")
    cfg = await load_config(str(path))
    assert (cfg.host, cfg.authorization, cfg.ssl_context, cfg.source) == (http_server, "Bearer s3cret", None, None)
    async with ApiClient(cfg, qps=0) as api:
        assert (await api.get(PODS, "p", "ns"))["auth"] == "Bearer s3cret"


async def test_token_file_and_basic_auth(tmp_path: Path) -> None:
    (tmp_path / "tok").write_text("from-file")
    path = kubeconfig(tmp_path / "kc", ("a", "http://a:1", {}, {"tokenFile": str(tmp_path / "tok")}),
                      ("b", "http://b:2", {}, {"username": "admin", "password": "pw"}), current="a")
    assert (await load_config(str(path))).authorization == "Bearer from-file"
    basic = await load_config(str(path), context="b")
    assert basic.host == "http://b:2"
    assert basic.authorization == "Basic " + base64.b64encode(b"admin:pw").decode()


async def test_unknown_context_is_a_config_error(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path / "kc", ("a", "http://a:1", {}, {"token": "t"}), current="a")
    with pytest.raises(ConfigError, match=r"invalid kubeconfig .*kc: .*nope") as info:
        await load_config(str(path), context="nope")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("content", "match"),
    [
        pytest.param(b"clusters: [unclosed", "invalid kubeconfig", id="bad-yaml"),
        pytest.param(b"apiVersion: v1\nkind: Config\n", "invalid kubeconfig", id="no-contexts"),
        pytest.param(orjson.dumps({"clusters": [{"name": "a", "cluster": {}}], "users": [],
                                   "contexts": [{"name": "a", "context": {"cluster": "a"}}],
                                   "current-context": "a"}), "cluster is missing or empty", id="empty-cluster"),
        pytest.param(orjson.dumps({"clusters": [{"name": "a", "cluster": {"insecure-skip-tls-verify": True}}],
                                   "users": [], "contexts": [{"name": "a", "context": {"cluster": "a"}}],
                                   "current-context": "a"}), "has no server", id="no-server"),
        pytest.param(orjson.dumps({"clusters": [{"name": "a", "cluster": {"server": "ftp://x"}}], "users": [],
                                   "contexts": [{"name": "a", "context": {"cluster": "a"}}],
                                   "current-context": "a"}), "invalid server URL", id="bad-scheme"),
    ],
)
async def test_broken_kubeconfig_is_a_one_line_config_error(tmp_path: Path, content: bytes, match: str) -> None:
    path = tmp_path / "kc"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=match) as info:
        await load_config(str(path))
    assert "\n" not in str(info.value)


async def test_missing_explicit_kubeconfig(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"kubeconfig .*absent: no such file"):
        await load_config(str(tmp_path / "absent"))


async def test_nothing_configured() -> None:
    with pytest.raises(ConfigError, match="no configuration found") as info:
        await load_config()
    assert "\n" not in str(info.value)


# --- precedence ------------------------------------------------------------------------------------


async def test_precedence_explicit_then_env_then_home(tmp_path: Path, clean_env: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    kubeconfig(clean_env / ".kube" / "config", ("home", "http://home:1", {}, {"token": "h"}), current="home")
    first = kubeconfig(tmp_path / "first", ("first", "http://first:1", {}, {"token": "f"}), current="first")
    second = kubeconfig(tmp_path / "second", ("first", "http://shadowed:1", {}, {"token": "x"}),
                        ("second", "http://second:1", {}, {"token": "s"}), current="second")
    explicit = kubeconfig(tmp_path / "explicit", ("ex", "http://explicit:1", {}, {"token": "e"}), current="ex")

    assert (await load_config()).host == "http://home:1"
    monkeypatch.setenv("KUBECONFIG", f"{first}:{tmp_path / 'missing'}:{second}")
    # Merged as kubectl merges: the first file to set current-context, and to define a name, wins.
    assert (await load_config()).host == "http://first:1"
    assert (await load_config(context="second")).host == "http://second:1"
    assert (await load_config(str(explicit))).host == "http://explicit:1"


async def test_kubeconfig_env_naming_only_missing_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "nope"))
    with pytest.raises(ConfigError, match="no such file"):
        await load_config()


# --- TLS: CA, client certificates, skip-verify, server name -----------------------------------------


@pytest.fixture(scope="module")
def pki() -> dict[str, Any]:
    ca = CertificateAuthority()
    return {
        "ca": ca,
        "server": ca.issue("kube-apiserver", server_names=("127.0.0.1", "localhost")),
        "named": ca.issue("kubernetes", server_names=("kubernetes.default.svc",)),
        "client": ca.issue("system:kube-controller-manager", client=True),
    }


ServerFactory = Callable[[Pem, bool], Coroutine[Any, Any, str]]


@pytest.fixture
async def https_server(tmp_path: Path, pki: dict[str, Any]) -> AsyncIterator[ServerFactory]:
    servers: list[TestServer] = []
    ca_file = tmp_path / "server-ca.crt"
    ca_file.write_bytes(pki["ca"].pem.cert)

    async def start(pem: Pem, require_client_cert: bool) -> str:
        cert, key = pem.write(tmp_path, f"srv{len(servers)}")
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(ca_file))
        ctx.load_cert_chain(cert, key)
        ctx.verify_mode = ssl.CERT_REQUIRED if require_client_cert else ssl.CERT_NONE
        app = web.Application()
        app.router.add_get("/api/v1/namespaces/ns/pods/p", _echo_auth)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server(ssl=ctx)
        servers.append(server)
        return f"https://127.0.0.1:{server.port}"

    yield start
    for server in servers:
        await server.close()


async def test_client_certificate_and_ca_files(tmp_path: Path, pki: dict[str, Any],
                                                https_server: ServerFactory) -> None:
    url = await https_server(pki["server"], True)
    certs = tmp_path / "certs"
    certs.mkdir()
    (certs / "ca.crt").write_bytes(pki["ca"].pem.cert)
    pki["client"].write(certs, "client")
    # Relative paths resolve against the kubeconfig's directory, as kubectl resolves them.
    path = kubeconfig(tmp_path / "kc", ("tls", url, {"certificate-authority": "certs/ca.crt"},
                                        {"client-certificate": "certs/client.crt", "client-key": "certs/client.key"}),
                      current="tls")
    cfg = await load_config(str(path))
    assert cfg.ssl_context is not None
    assert cfg.authorization is None
    async with ApiClient(cfg, qps=0) as api:
        got = await api.get(PODS, "p", "ns")
    assert got["peer"] == "system:kube-controller-manager"
    assert got["auth"] is None


async def test_embedded_certificate_data(tmp_path: Path, pki: dict[str, Any], https_server: ServerFactory) -> None:
    url = await https_server(pki["server"], True)

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    path = kubeconfig(tmp_path / "kc", ("tls", url, {"certificate-authority-data": b64(pki["ca"].pem.cert)},
                                        {"client-certificate-data": b64(pki["client"].cert),
                                         "client-key-data": b64(pki["client"].key), "token": "also"}),
                      current="tls")
    async with ApiClient(await load_config(str(path)), qps=0) as api:
        got = await api.get(PODS, "p", "ns")
    assert (got["peer"], got["auth"]) == ("system:kube-controller-manager", "Bearer also")


async def test_unknown_server_certificate_fails_without_retry(tmp_path: Path, pki: dict[str, Any],
                                                              https_server: ServerFactory) -> None:
    url = await https_server(pki["server"], False)
    other_ca = CertificateAuthority("someone-else")
    (tmp_path / "other.crt").write_bytes(other_ca.pem.cert)
    path = kubeconfig(tmp_path / "kc", ("tls", url, {"certificate-authority": str(tmp_path / "other.crt")},
                                        {"token": "t"}), current="tls")
    async with ApiClient(await load_config(str(path)), qps=0, backoff_base=5.0) as api:
        # A verification failure will not fix itself: raised at once (a retry would sleep 5 s first).
        with pytest.raises(ApiConnectionError, match=r"(?i)certificate"):
            await api.get(PODS, "p", "ns")


async def test_insecure_skip_tls_verify(tmp_path: Path, pki: dict[str, Any], https_server: ServerFactory) -> None:
    url = await https_server(pki["server"], False)
    path = kubeconfig(tmp_path / "kc", ("tls", url, {"insecure-skip-tls-verify": True}, {"token": "t"}),
                      current="tls")
    cfg = await load_config(str(path))
    assert cfg.ssl_context is not None
    assert cfg.ssl_context.verify_mode == ssl.CERT_NONE
    async with ApiClient(cfg, qps=0) as api:
        assert (await api.get(PODS, "p", "ns"))["auth"] == "Bearer t"


async def test_tls_server_name(tmp_path: Path, pki: dict[str, Any], https_server: ServerFactory) -> None:
    url = await https_server(pki["named"], False)  # certificate only names kubernetes.default.svc
    (tmp_path / "ca.crt").write_bytes(pki["ca"].pem.cert)
    path = kubeconfig(tmp_path / "kc", ("tls", url, {"certificate-authority": str(tmp_path / "ca.crt"),
                                                     "tls-server-name": "kubernetes.default.svc"},
                                        {"token": "t"}), current="tls")
    cfg = await load_config(str(path))
    assert cfg.tls_server_name == "kubernetes.default.svc"
    async with ApiClient(cfg, qps=0) as api:
        assert (await api.get(PODS, "p", "ns"))["auth"] == "Bearer t"


# --- exec credential plugin --------------------------------------------------------------------------


async def test_exec_plugin_token(tmp_path: Path, http_server: str) -> None:
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "import json\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', 'kind': 'ExecCredential',\n"
        "                  'status': {'token': 'from-exec', 'expirationTimestamp': '2999-01-01T00:00:00Z'}}))\n"
    )
    plugin.chmod(plugin.stat().st_mode | stat.S_IEXEC)
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
                     "args": [str(plugin)], "interactiveMode": "Never"}}
    cfg = await load_config(str(kubeconfig(tmp_path / "kc", ("x", http_server, {}, user), current="x")))
    assert cfg.authorization == "Bearer from-exec"
    assert cfg.source is not None  # expiring credentials are refreshed through the hook
    async with ApiClient(cfg, qps=0) as api:
        assert (await api.get(PODS, "p", "ns"))["auth"] == "Bearer from-exec"


async def test_failing_exec_plugin_is_a_config_error(tmp_path: Path) -> None:
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
                     "args": ["-c", "import sys; sys.exit(3)"], "interactiveMode": "Never"}}
    with pytest.raises(ConfigError, match=r"exec: executable .* failed with exit code 3"):
        await load_config(str(kubeconfig(tmp_path / "kc", ("x", "http://x:1", {}, user), current="x")))


# --- in-cluster ----------------------------------------------------------------------------------------


async def test_in_cluster_service_account(tmp_path: Path, pki: dict[str, Any], https_server: ServerFactory,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    url = await https_server(pki["server"], False)
    port = url.rsplit(":", 1)[1]
    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("sa-token")
    ca.write_bytes(pki["ca"].pem.cert)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", port)
    monkeypatch.setattr(config_module, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(config_module, "SERVICE_CERT_FILENAME", str(ca))

    cfg = await load_config()
    assert cfg.host == url
    assert cfg.authorization == "Bearer sa-token"
    assert cfg.source is not None  # the token is re-read as it rotates
    async with ApiClient(cfg, qps=0) as api:
        assert (await api.get(PODS, "p", "ns"))["auth"] == "Bearer sa-token"


async def test_in_cluster_ipv6_host(tmp_path: Path, pki: dict[str, Any]) -> None:
    (tmp_path / "token").write_text("t")
    (tmp_path / "ca.crt").write_bytes(pki["ca"].pem.cert)
    cfg = await load_incluster_config(str(tmp_path / "token"), str(tmp_path / "ca.crt"),
                                      {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"})
    assert cfg.host == "https://[fd00::1]:443"
    assert cfg.host_label == "[fd00::1]:443"


@pytest.mark.parametrize(
    ("env", "write_token", "match"),
    [
        pytest.param({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, True, "Service host/port is not set", id="no-port"),
        pytest.param({"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}, False,
                     "Service token file does not exist", id="no-token"),
    ],
)
async def test_in_cluster_errors(tmp_path: Path, pki: dict[str, Any], env: dict[str, str], write_token: bool,
                                 match: str) -> None:
    if write_token:
        (tmp_path / "token").write_text("t")
    (tmp_path / "ca.crt").write_bytes(pki["ca"].pem.cert)
    with pytest.raises(ConfigError, match=f"in-cluster config: {match}"):
        await load_incluster_config(str(tmp_path / "token"), str(tmp_path / "ca.crt"), env)


def _plugin(tmp_path: Path, body: str, name: str = "plugin.py") -> Path:
    """A Python exec plugin; ``body`` sees ``json``, ``os``, ``sys``, ``time`` and ``cred(status)`` (prints it)."""
    plugin = tmp_path / name
    plugin.write_text(
        "import json, os, sys, time\n"
        "def cred(status, version='client.authentication.k8s.io/v1'):\n"
        "    print(json.dumps({'apiVersion': version, 'kind': 'ExecCredential', 'status': status}))\n"
        + body
    )
    return plugin


def _exec_user(plugin: Path, **extra: Any) -> dict[str, Any]:
    return {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
                     "args": [str(plugin)], "interactiveMode": "Never", **extra}}


async def test_exec_plugin_runs_again_once_its_token_expired(tmp_path: Path, http_server: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from controller_manager.client import credentials

    counter = tmp_path / "runs"
    plugin = _plugin(tmp_path, (
        f"path = {str(counter)!r}\n"
        "n = int(open(path).read()) + 1 if os.path.exists(path) else 1\n"
        "open(path, 'w').write(str(n))\n"
        "expiry = time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(time.time() + 2))\n"
        "cred({'token': f't{n}', 'expirationTimestamp': expiry})\n"
    ))
    monkeypatch.setattr(credentials, "EXEC_MIN_INTERVAL", 0.5)
    cfg = await load_config(str(kubeconfig(tmp_path / "kc", ("x", http_server, {}, _exec_user(plugin)),
                                           current="x")))
    assert cfg.authorization == "Bearer t1"
    async with ApiClient(cfg, qps=0) as api:
        assert (await api.get(PODS, "p", "ns"))["auth"] == "Bearer t1"  # not expired: not run again
        assert counter.read_text() == "1"
        deadline = asyncio.get_running_loop().time() + 10
        while (auth := (await api.get(PODS, "p", "ns"))["auth"]) == "Bearer t1":
            assert asyncio.get_running_loop().time() < deadline, "the plugin never ran again"
            await asyncio.sleep(0.05)
    assert auth == "Bearer t2"


async def test_exec_plugin_is_spaced_out_when_it_hands_out_expired_tokens(tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    plugin = _plugin(tmp_path, (
        f"open({str(counter)!r}, 'a').write('x')\n"
        "cred({'token': 'stale', 'expirationTimestamp': '2000-01-01T00:00:00Z'})\n"
    ))
    cfg = await load_config(str(kubeconfig(tmp_path / "kc", ("x", "http://x:1", {}, _exec_user(plugin)),
                                           current="x")))
    for _ in range(5):
        assert await cfg.authorization_header() == "Bearer stale"
    assert counter.read_text() == "x"  # ran once: the next run waits EXEC_MIN_INTERVAL (10 s)


async def test_exec_plugin_gets_env_and_cluster_info(tmp_path: Path, pki: dict[str, Any]) -> None:
    seen = tmp_path / "seen.json"
    plugin = _plugin(tmp_path, (
        f"open({str(seen)!r}, 'w').write(json.dumps({{'info': json.loads(os.environ['KUBERNETES_EXEC_INFO']),\n"
        "                                         'extra': os.environ.get('EXTRA'), 'argv': sys.argv[1:],\n"
        "                                         'stdin_tty': sys.stdin.isatty()}))\n"
        "cred({'token': 'tok'})\n"
    ))
    user = _exec_user(plugin, provideClusterInfo=True, env=[{"name": "EXTRA", "value": "from-kubeconfig"}])
    user["exec"]["args"] = [str(plugin), "--flag"]
    ca = pki["ca"].pem.cert
    cluster = {"certificate-authority-data": base64.b64encode(ca).decode(), "tls-server-name": "kubernetes",
               "extensions": [{"name": "client.authentication.k8s.io/exec", "extension": {"audience": "me"}}]}
    cfg = await load_config(str(kubeconfig(tmp_path / "kc", ("x", "https://10.0.0.1:6443", cluster, user),
                                           current="x")))
    assert cfg.authorization == "Bearer tok"
    got = orjson.loads(seen.read_bytes())
    assert got["extra"] == "from-kubeconfig"
    assert got["argv"] == ["--flag"]
    assert got["stdin_tty"] is False
    assert got["info"] == {
        "kind": "ExecCredential", "apiVersion": "client.authentication.k8s.io/v1",
        "spec": {"interactive": False, "cluster": {
            "server": "https://10.0.0.1:6443", "tls-server-name": "kubernetes",
            "certificate-authority-data": base64.b64encode(ca).decode(), "config": {"audience": "me"}}},
    }


async def test_exec_plugin_client_certificate(tmp_path: Path, pki: dict[str, Any],
                                              https_server: ServerFactory) -> None:
    url = await https_server(pki["server"], True)
    client = pki["client"]
    plugin = _plugin(tmp_path, f"cred({{'clientCertificateData': {client.cert.decode()!r}, "
                               f"'clientKeyData': {client.key.decode()!r}}})\n")
    (tmp_path / "ca.crt").write_bytes(pki["ca"].pem.cert)
    cfg = await load_config(str(kubeconfig(tmp_path / "kc", ("x", url, {"certificate-authority": "ca.crt"},
                                                             _exec_user(plugin)), current="x")))
    assert cfg.authorization is None
    async with ApiClient(cfg, qps=0) as api:
        got = await api.get(PODS, "p", "ns")
    assert (got["peer"], got["auth"]) == ("system:kube-controller-manager", None)


@pytest.mark.parametrize(
    ("body", "match"),
    [
        pytest.param("cred({'token': 't'}, version='client.authentication.k8s.io/v1beta1')\n",
                     "configured to use API version client.authentication.k8s.io/v1, plugin returned version "
                     "client.authentication.k8s.io/v1beta1", id="wrong-version"),
        pytest.param("print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', 'kind': 'ExecCredential'}))\n",
                     "didn't return a status field", id="no-status"),
        pytest.param("cred({})\n", "didn't return a token or cert/key pair", id="empty-status"),
        pytest.param("cred({'clientCertificateData': 'x'})\n", "only certificate or key, not both", id="cert-only"),
        pytest.param("print('not json')\n", "decoding stdout", id="not-json"),
    ],
)
async def test_bad_exec_plugin_answers(tmp_path: Path, body: str, match: str) -> None:
    user = _exec_user(_plugin(tmp_path, body))
    with pytest.raises(ConfigError, match=match) as info:
        await load_config(str(kubeconfig(tmp_path / "kc", ("x", "http://x:1", {}, user), current="x")))
    assert "\n" not in str(info.value)


async def test_missing_exec_plugin_names_its_install_hint(tmp_path: Path) -> None:
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "no-such-plugin-anywhere",
                     "interactiveMode": "IfAvailable", "installHint": "Install it\nwith brew."}}
    with pytest.raises(ConfigError, match=r"executable no-such-plugin-anywhere not found: Install it with brew\."):
        await load_config(str(kubeconfig(tmp_path / "kc", ("x", "http://x:1", {}, user), current="x")))


async def test_exec_plugin_does_not_block_the_loop(tmp_path: Path) -> None:
    plugin = _plugin(tmp_path, "time.sleep(0.5)\ncred({'token': 'slow'})\n")
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.create_task(tick())
    try:
        cfg = await load_config(str(kubeconfig(tmp_path / "kc", ("x", "http://x:1", {}, _exec_user(plugin)),
                                               current="x")))
    finally:
        ticker.cancel()
    assert cfg.authorization == "Bearer slow"
    assert ticks >= 10  # the loop went on running while the plugin slept


# --- token files rotate ------------------------------------------------------------------------------------


async def test_token_file_is_read_again_every_minute(tmp_path: Path) -> None:
    from controller_manager.client.credentials import TokenFile

    now = [1000.0]
    path = tmp_path / "token"
    path.write_text("first\n")
    source = TokenFile.read(str(path), clock=lambda: now[0])
    assert await source.authorization() == "Bearer first"
    path.write_text("second")
    now[0] += 59
    assert await source.authorization() == "Bearer first"  # cached for a minute
    now[0] += 1
    assert await source.authorization() == "Bearer second"
    path.unlink()  # a failed read keeps the last good token
    now[0] += 60
    assert await source.authorization() == "Bearer second"
    path.write_text("")  # so does an empty file
    now[0] += 60
    assert await source.authorization() == "Bearer second"


async def test_kubeconfig_token_file_and_in_cluster_token_rotate(tmp_path: Path, pki: dict[str, Any]) -> None:
    (tmp_path / "tok").write_text("from-file")
    path = kubeconfig(tmp_path / "kc", ("a", "http://a:1", {}, {"tokenFile": "tok"}),
                      ("b", "http://b:1", {}, {"tokenFile": "tok", "token": "literal"}), current="a")
    cfg = await load_config(str(path))
    assert cfg.source is not None  # re-read as it rotates
    assert await cfg.authorization_header() == "Bearer from-file"
    # A literal token as well: the file wins whenever it can be read, the literal token is the fallback.
    both = await load_config(str(path), context="b")
    assert both.authorization == "Bearer from-file"
    (tmp_path / "tok").unlink()
    cfg_missing = await load_config(str(path), context="b")
    assert cfg_missing.authorization == "Bearer literal"
    with pytest.raises(ConfigError, match=r"user 'a': .*tok"):
        await load_config(str(path))

    (tmp_path / "sa").write_text("sa-token")
    (tmp_path / "ca.crt").write_bytes(pki["ca"].pem.cert)
    incluster = await load_incluster_config(str(tmp_path / "sa"), str(tmp_path / "ca.crt"),
                                            {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"})
    assert incluster.source is not None
    assert (incluster.ca_file, incluster.authorization) == (str(tmp_path / "ca.crt"), "Bearer sa-token")


async def test_exec_plugin_runs_again_after_a_401(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from controller_manager.client import credentials
    from controller_manager.client.errors import Unauthorized

    counter = tmp_path / "runs"
    plugin = _plugin(tmp_path, (
        f"path = {str(counter)!r}\n"
        "n = int(open(path).read()) + 1 if os.path.exists(path) else 1\n"
        "open(path, 'w').write(str(n))\n"
        "cred({'token': f't{n}'})\n"  # no expiry: kept until the server refuses it
    ))

    async def only_t2(request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != "Bearer t2":
            return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 401,
                                      "reason": "Unauthorized", "message": "Unauthorized"}, status=401)
        return await _echo_auth(request)

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/ns/pods/p", only_t2)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    monkeypatch.setattr(credentials, "EXEC_MIN_INTERVAL", 0.0)
    try:
        url = str(server.make_url("")).rstrip("/")
        cfg = await load_config(str(kubeconfig(tmp_path / "kc", ("x", url, {}, _exec_user(plugin)), current="x")))
        async with ApiClient(cfg, qps=0) as api:
            with pytest.raises(Unauthorized):
                await api.get(PODS, "p", "ns")
            assert (await api.get(PODS, "p", "ns"))["auth"] == "Bearer t2"
            assert (await api.get(PODS, "p", "ns"))["auth"] == "Bearer t2"
    finally:
        await server.close()
    assert counter.read_text() == "2"


async def test_exec_plugin_that_must_be_interactive_needs_a_terminal(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO())  # not a terminal, even under pytest -s
    plugin = _plugin(tmp_path, "cred({'token': 'never-run'})\n")
    user = _exec_user(plugin, interactiveMode="Always")
    with pytest.raises(ConfigError, match="exec plugin cannot support interactive mode: standard input is not a "
                                          "terminal"):
        await load_config(str(kubeconfig(tmp_path / "kc", ("x", "http://x:1", {}, user), current="x")))
