"""Where the API server is and how to authenticate to it: kubeconfig or in-cluster service account.

Guarantees:
- :func:`load_config` looks, in order, at: the explicit ``kubeconfig`` path; ``$KUBECONFIG`` (a
  colon-separated list, merged as kubectl merges it: the first file to define a name or a
  ``current-context`` wins); ``~/.kube/config``; and finally the in-cluster service account
  (``KUBERNETES_SERVICE_HOST``/``_PORT`` plus the mounted token and CA).
- kubernetes_asyncio's loaders do the reading, so exec plugins, auth providers, token files,
  client certificates, ``certificate-authority(-data)``, ``insecure-skip-tls-verify`` and
  ``tls-server-name`` behave as in the official clients. What aiohttp needs is extracted once:
  the base URL, an ``ssl.SSLContext`` and the ``Authorization`` header value.
- Tokens that rotate (in-cluster projected tokens, exec plugins with an expiry) are refreshed
  through the loader's hook; :meth:`ClientConfig.authorization_header` runs it before each request.
  The hooks only compare a timestamp until a refresh is due, so this costs microseconds.
- Any problem surfaces as :class:`ConfigError` with a one-line message. Blocking file reads run in
  a worker thread so the event loop never stalls on them.
"""

from __future__ import annotations

import asyncio
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from kubernetes_asyncio.client import Configuration
from kubernetes_asyncio.config.config_exception import ConfigException
from kubernetes_asyncio.config.incluster_config import InClusterConfigLoader
from kubernetes_asyncio.config.kube_config import ENV_KUBECONFIG_PATH_SEPARATOR, KubeConfigLoader, KubeConfigMerger

from controller_manager.client.errors import ConfigError

SERVICE_TOKEN_FILENAME = "/var/run/secrets/kubernetes.io/serviceaccount/token"
SERVICE_CERT_FILENAME = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
_EXEC_MIN_INTERVAL = 10.0  # seconds between two runs of an exec credential plugin


@dataclass(slots=True)
class ClientConfig:
    """Everything the REST client needs to reach and authenticate to one API server."""

    host: str  # base URL without a trailing slash, e.g. "https://10.96.0.1:443"
    ssl_context: ssl.SSLContext | None = None  # None for plain http
    authorization: str | None = None  # the Authorization header value ("Bearer ...", "Basic ...")
    tls_server_name: str | None = None  # SNI / verification name when it differs from the host
    proxy: str | None = None
    ca_file: str | None = None  # the PEM bundle that verifies the server (what the root CA publisher publishes)
    # The kubernetes_asyncio Configuration whose refresh hook rotates the token; None when static.
    source: Any = field(default=None, repr=False)

    @property
    def host_label(self) -> str:
        """``host:port`` as client-go labels its metrics."""
        return urlsplit(self.host).netloc or self.host

    async def authorization_header(self) -> str | None:
        """The current Authorization value, refreshing a rotating token when it is due."""
        source = self.source
        if source is None or source.refresh_api_key_hook is None:
            return self.authorization
        try:
            value = await source.get_api_key_with_prefix("BearerToken")
        except (ConfigException, OSError) as exc:
            raise ConfigError(f"refreshing credentials failed: {_one_line(exc)}") from exc
        self.authorization = value or None
        return self.authorization


def _one_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())


class _FirstWinsMerger(KubeConfigMerger):
    """kubectl's merge: the first file that sets ``current-context`` wins (the base class keeps the last)."""

    def load_config(self, path: str) -> None:
        first = self.config_merged.value.get("current-context") if self.config_merged is not None else None
        super().load_config(path)
        if first and self.config_merged is not None:
            self.config_merged.value["current-context"] = first


def _ssl_context(configuration: Any) -> ssl.SSLContext | None:
    if not str(configuration.host).startswith("https"):
        return None
    ctx = ssl.create_default_context(cafile=configuration.ssl_ca_cert or None)
    if configuration.cert_file:
        ctx.load_cert_chain(configuration.cert_file, keyfile=configuration.key_file or None)
    if not configuration.verify_ssl:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


async def _finish(configuration: Any) -> ClientConfig:
    """Turn a filled-in kubernetes_asyncio Configuration into a ClientConfig."""
    host = str(configuration.host).rstrip("/")
    if not host.startswith(("http://", "https://")):
        raise ConfigError(f"invalid server URL {host!r}: expected http:// or https://")
    try:
        ctx = await asyncio.to_thread(_ssl_context, configuration)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"invalid TLS configuration for {host}: {_one_line(exc)}") from exc
    auth = await configuration.get_api_key_with_prefix("BearerToken")
    return ClientConfig(
        host=host,
        ssl_context=ctx,
        authorization=auth or None,
        tls_server_name=getattr(configuration, "tls_server_name", None) or None,
        proxy=getattr(configuration, "proxy", None) or None,
        ca_file=getattr(configuration, "ssl_ca_cert", None) or None,
        source=configuration if configuration.refresh_api_key_hook is not None else None,
    )


def _install_exec_refresh(loader: KubeConfigLoader, configuration: Any) -> None:
    """Re-run an exec credential plugin when its token expires (the loader only runs it once)."""
    user = getattr(loader, "_user", None)
    if user is None or "exec" not in user or not hasattr(loader, "exec_plugin_expiry"):
        return  # a token without expiry never needs re-running; a cert-based plugin is static

    last_run = -_EXEC_MIN_INTERVAL

    async def refresh(config: Any) -> None:
        nonlocal last_run
        # The loader re-runs the plugin whenever the token is within 5 minutes of expiry; a plugin
        # that hands out short-lived tokens would then run on every request. Space the runs out.
        now = asyncio.get_running_loop().time()
        if now - last_run < _EXEC_MIN_INTERVAL:
            return
        last_run = now
        await loader.load_from_exec_plugin()  # returns at once unless the token is near expiry
        token = getattr(loader, "token", None)
        if token:
            config.api_key["BearerToken"] = token

    configuration.refresh_api_key_hook = refresh


def _existing_files(paths: list[str]) -> list[str]:
    return [p for p in paths if os.path.isfile(os.path.expanduser(p))]


async def load_kubeconfig(paths: str, context: str | None = None) -> ClientConfig:
    """Load a kubeconfig file, or a ``$KUBECONFIG``-style list of files merged."""
    files = [p for p in paths.split(ENV_KUBECONFIG_PATH_SEPARATOR) if p]
    existing = await asyncio.to_thread(_existing_files, files)
    if not existing:
        raise ConfigError(f"kubeconfig {paths}: no such file")
    where = ENV_KUBECONFIG_PATH_SEPARATOR.join(existing)
    try:
        merger = await asyncio.to_thread(_FirstWinsMerger, where)
        if merger.config is None:
            raise ConfigError(f"invalid kubeconfig {where}: empty")
        loader = KubeConfigLoader(config_dict=merger.config, active_context=context, config_base_path=None)
        configuration = type.__call__(Configuration)
        await loader.load_and_set(configuration)
        _install_exec_refresh(loader, configuration)
    except ConfigError:
        raise
    except ConfigException as exc:
        raise ConfigError(f"invalid kubeconfig {where}: {_one_line(exc)}") from exc
    except AssertionError as exc:  # the loader asserts the context's cluster is there and non-empty
        raise ConfigError(f"invalid kubeconfig {where}: the context's cluster is missing or empty") from exc
    except Exception as exc:  # yaml errors, missing keys, bad types: all mean a broken file
        raise ConfigError(f"invalid kubeconfig {where}: {type(exc).__name__}: {_one_line(exc)}") from exc
    if not getattr(configuration, "host", None) or not getattr(loader, "host", None):
        raise ConfigError(f"invalid kubeconfig {where}: the cluster has no server")
    return await _finish(configuration)


async def load_incluster_config(
    token_file: str = SERVICE_TOKEN_FILENAME,
    ca_file: str = SERVICE_CERT_FILENAME,
    environ: Mapping[str, str] | None = None,
) -> ClientConfig:
    """The pod's service account: ``https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT``,
    the mounted token (re-read every minute, as tokens are projected and rotate) and CA."""
    env = dict(os.environ if environ is None else environ)
    configuration = type.__call__(Configuration)
    try:
        loader = InClusterConfigLoader(token_filename=token_file, cert_filename=ca_file, environ=env)
        await asyncio.to_thread(loader.load_and_set, configuration)
    except (ConfigException, OSError) as exc:
        raise ConfigError(f"in-cluster config: {_one_line(exc)}") from exc
    return await _finish(configuration)


async def load_config(kubeconfig: str | None = None, context: str | None = None) -> ClientConfig:
    """The client configuration, from the first source present (see the module docstring)."""
    if kubeconfig:
        return await load_kubeconfig(kubeconfig, context)
    env_paths = os.environ.get("KUBECONFIG", "")
    if env_paths.strip(ENV_KUBECONFIG_PATH_SEPARATOR):
        return await load_kubeconfig(env_paths, context)
    home_config = Path.home() / ".kube" / "config"
    if await asyncio.to_thread(home_config.is_file):
        return await load_kubeconfig(str(home_config), context)
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return await load_incluster_config(SERVICE_TOKEN_FILENAME, SERVICE_CERT_FILENAME)
    raise ConfigError(
        "no configuration found: pass --kubeconfig, set $KUBECONFIG, create ~/.kube/config, "
        "or run in a cluster (KUBERNETES_SERVICE_HOST unset)"
    )
