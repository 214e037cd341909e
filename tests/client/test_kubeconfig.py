"""kubeconfig files read as kubectl reads them: $KUBECONFIG merge rules, relative paths, --context, the
``*-data`` fields, auth providers, and one-line errors for configurations clientcmd refuses."""

from __future__ import annotations

import base64
import os
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from controller_manager.client import ConfigError, load_config
from controller_manager.client.config import load_kubeconfig
from tests.client.certs import CertificateAuthority


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(var, raising=False)
    return home


def write(path: Path, doc: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(doc))
    return path


def config(clusters: dict[str, dict[str, Any]] | None = None, users: dict[str, dict[str, Any]] | None = None,
           contexts: dict[str, dict[str, Any]] | None = None, current: str | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": n, "cluster": c} for n, c in (clusters or {}).items()],
        "users": [{"name": n, "user": u} for n, u in (users or {}).items()],
        "contexts": [{"name": n, "context": c} for n, c in (contexts or {}).items()],
    }
    if current is not None:
        doc["current-context"] = current
    return doc


def one(server: str = "http://a:1", user: dict[str, Any] | None = None, **cluster: Any) -> dict[str, Any]:
    """A config whose single context "c" uses cluster "c" and user "c"."""
    return config({"c": {"server": server, **cluster}}, {"c": user or {}}, {"c": {"cluster": "c", "user": "c"}},
                  current="c")


# --- merging a $KUBECONFIG list ---------------------------------------------------------------------


async def test_first_file_to_define_a_name_wins_the_whole_entry(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    first = write(tmp_path / "first", config(
        {"shared": {"server": "http://first:1"}}, {"shared": {"token": "first-token"}},
        {"ctx": {"cluster": "shared", "user": "shared"}}, current="ctx"))
    # The second file's entries of the same names are ignored entirely, even fields the first lacks.
    second = write(tmp_path / "second", config(
        {"shared": {"server": "http://second:1", "tls-server-name": "ignored"}, "own": {"server": "http://own:1"}},
        {"shared": {"token": "second-token"}},
        {"ctx": {"cluster": "own", "user": "shared"}, "other": {"cluster": "own", "user": "shared"}},
        current="other"))
    monkeypatch.setenv("KUBECONFIG", f"{first}{os.pathsep}{second}")
    cfg = await load_config()
    assert (cfg.host, cfg.authorization, cfg.tls_server_name) == ("http://first:1", "Bearer first-token", None)
    # A context only the second file defines is there, and uses the first file's user of that name.
    other = await load_config(context="other")
    assert (other.host, other.authorization) == ("http://own:1", "Bearer first-token")

    monkeypatch.setenv("KUBECONFIG", f"{second}{os.pathsep}{first}")
    assert (await load_config()).host == "http://own:1"  # now the second file's current-context wins


async def test_current_context_comes_from_the_first_file_that_sets_one(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    clusters_only = write(tmp_path / "a", config({"x": {"server": "http://x:1"}}))
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    contexts = write(tmp_path / "b", config({"y": {"server": "http://y:1"}}, None,
                                            {"cx": {"cluster": "x"}, "cy": {"cluster": "y"}}, current="cx"))
    later = write(tmp_path / "c", config(None, None, None, current="cy"))
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(clusters_only), str(empty), "", str(contexts),
                                                      str(later)]))
    assert (await load_config()).host == "http://x:1"


async def test_within_one_file_the_last_entry_of_a_name_wins(tmp_path: Path) -> None:
    doc = one("http://early:1")
    doc["clusters"].append({"name": "c", "cluster": {"server": "http://late:1"}})
    assert (await load_config(str(write(tmp_path / "kc", doc)))).host == "http://late:1"


async def test_context_flag_overrides_current_context(tmp_path: Path) -> None:
    path = write(tmp_path / "kc", config({"a": {"server": "http://a:1"}, "b": {"server": "http://b:1"}}, None,
                                         {"a": {"cluster": "a"}, "b": {"cluster": "b"}}, current="a"))
    assert (await load_kubeconfig(str(path))).host == "http://a:1"
    assert (await load_kubeconfig(str(path), context="b")).host == "http://b:1"


async def test_unknown_user_is_anonymous(tmp_path: Path) -> None:
    doc = config({"c": {"server": "http://a:1"}}, None, {"c": {"cluster": "c", "user": "nobody"}}, current="c")
    cfg = await load_config(str(write(tmp_path / "kc", doc)))
    assert (cfg.authorization, cfg.source) == (None, None)


# --- relative paths ----------------------------------------------------------------------------------


async def test_relative_paths_resolve_against_their_own_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "one" / "secrets").mkdir(parents=True)
    (tmp_path / "one" / "secrets" / "token").write_text("token-of-one\n")
    (tmp_path / "two").mkdir()
    (tmp_path / "two" / "token").write_text("token-of-two")
    first = write(tmp_path / "one" / "kc", one(user={"tokenFile": "secrets/token"}))
    second = write(tmp_path / "two" / "kc", config({"d": {"server": "http://d:1"}}, {"d": {"tokenFile": "token"}},
                                                   {"d": {"cluster": "d", "user": "d"}}))
    monkeypatch.chdir(tmp_path)  # nothing resolves against the working directory
    monkeypatch.setenv("KUBECONFIG", f"{first}{os.pathsep}{second}")
    assert (await load_config()).authorization == "Bearer token-of-one"
    assert (await load_config(context="d")).authorization == "Bearer token-of-two"


async def test_exec_command_with_a_separator_resolves_against_the_file(tmp_path: Path) -> None:
    plugin = tmp_path / "conf" / "bin" / "plugin"
    plugin.parent.mkdir(parents=True)
    plugin.write_text(
        f"#!{sys.executable}\n"
        "import json\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1beta1', 'kind': 'ExecCredential',\n"
        "                  'status': {'token': 'relative'}}))\n"
    )
    plugin.chmod(0o755)
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "bin/plugin"}}
    cfg = await load_config(str(write(tmp_path / "conf" / "kc", one(user=user))))
    assert cfg.authorization == "Bearer relative"  # v1beta1 needs no interactiveMode (IfAvailable)


# --- data fields, basic auth, auth providers -----------------------------------------------------------


def _content_and_mode(path: str) -> tuple[bytes, int]:
    return Path(path).read_bytes(), Path(path).stat().st_mode & 0o777


async def test_certificate_authority_data_is_a_private_file_the_publisher_can_read(tmp_path: Path) -> None:
    ca = CertificateAuthority().pem.cert
    doc = one("https://127.0.0.1:1", {"token": "t"}, **{"certificate-authority-data": base64.b64encode(ca).decode()})
    cfg = await load_config(str(write(tmp_path / "kc", doc)))
    assert cfg.ca_file is not None
    assert _content_and_mode(cfg.ca_file) == (ca, 0o600)
    assert cfg.ssl_context is not None


async def test_oidc_auth_provider_sends_its_id_token(tmp_path: Path) -> None:
    user = {"auth-provider": {"name": "oidc", "config": {"id-token": "eyJ.id.token", "refresh-token": "r"}}}
    assert (await load_config(str(write(tmp_path / "kc", one(user=user))))).authorization == "Bearer eyJ.id.token"


@pytest.mark.parametrize(
    ("provider", "match"),
    [
        pytest.param({"name": "gcp"}, "gcp auth plugin has been removed.*gke-gcloud-auth-plugin", id="gcp"),
        pytest.param({"name": "azure"}, "azure auth plugin has been removed.*kubelogin", id="azure"),
        pytest.param({"name": "oidc", "config": {"refresh-token": "r"}}, "oidc: no id-token", id="oidc-no-token"),
        pytest.param({"name": "openstack"}, "'openstack' is not supported", id="other"),
    ],
)
async def test_unsupported_auth_providers(tmp_path: Path, provider: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match) as info:
        await load_config(str(write(tmp_path / "kc", one(user={"auth-provider": provider}))))
    assert "\n" not in str(info.value)


# --- what clientcmd refuses -------------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.mark.parametrize(
    ("doc", "match"),
    [
        pytest.param(config({"c": {"server": "http://a:1"}}, None, {"c": {"cluster": "gone"}}, current="c"),
                     "cluster 'gone' of context 'c': the cluster is missing or empty", id="cluster-missing"),
        pytest.param(one(user={"token": "t", "username": "u", "password": "p"}),
                     r"more than one authentication method found for c; found \['token', 'basicAuth'\]",
                     id="token-and-basic"),
        pytest.param(one("https://a:1", **{"certificate-authority": "/nonexistent/ca.crt"}),
                     "unable to read certificate-authority /nonexistent/ca.crt for c", id="ca-unreadable"),
        pytest.param(one("https://a:1", **{"certificate-authority-data": _b64(b"x"), "certificate-authority": "/x"}),
                     "certificate-authority-data and certificate-authority are both specified for c",
                     id="ca-file-and-data"),
        pytest.param(one("https://a:1", **{"certificate-authority-data": _b64(b"x"),
                                           "insecure-skip-tls-verify": True}),
                     "root certificates file with the insecure flag is not allowed", id="ca-and-insecure"),
        pytest.param(one(user={"client-certificate-data": _b64(b"cert")}),
                     "client-key-data or client-key must be specified for c", id="cert-without-key"),
        pytest.param(one(user={"client-certificate-data": "not base64!"}), "client-certificate-data: not valid base64",
                     id="bad-base64"),
        pytest.param(one(**{"insecure-skip-tls-verify": "yes please"}),
                     "insecure-skip-tls-verify: expected a boolean", id="bad-type"),
        pytest.param(one(**{"proxy-url": "socks5://p:1080"}), "invalid 'proxy-url'", id="socks-proxy"),
        pytest.param(one(user={"exec": {"command": "x", "apiVersion": "client.authentication.k8s.io/v1alpha1",
                                        "interactiveMode": "Never"}}),
                     "exec plugin: invalid apiVersion", id="exec-v1alpha1"),
        pytest.param(one(user={"exec": {"command": "x", "apiVersion": "client.authentication.k8s.io/v1"}}),
                     "interactiveMode must be specified for c", id="exec-v1-without-interactive-mode"),
        pytest.param(one(user={"exec": {"apiVersion": "client.authentication.k8s.io/v1", "interactiveMode": "Never",
                                        "env": [{"value": "v"}]}}),
                     "command must be specified for c.*env variable name must be specified", id="exec-incomplete"),
        pytest.param({"clusters": {"not": "a list"}}, "clusters: expected a list", id="clusters-not-a-list"),
        pytest.param({"current-context": "nope"}, "context was not found for specified context: nope",
                     id="context-not-found"),
    ],
)
async def test_refused_configurations(tmp_path: Path, doc: dict[str, Any], match: str) -> None:
    path = write(tmp_path / "kc", doc)
    with pytest.raises(ConfigError, match=f"invalid kubeconfig {path}: .*{match}") as info:
        await load_config(str(path))
    assert "\n" not in str(info.value)


async def test_proxy_url_and_tls_server_name_are_passed_on(tmp_path: Path) -> None:
    doc = one("https://10.0.0.1:6443", {"token": "t"}, **{"proxy-url": "http://proxy:3128",
                                                           "tls-server-name": "kubernetes"})
    cfg = await load_config(str(write(tmp_path / "kc", doc)))
    assert (cfg.proxy, cfg.tls_server_name, cfg.host_label) == ("http://proxy:3128", "kubernetes", "10.0.0.1:6443")
