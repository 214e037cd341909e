"""Where the API server is and how to authenticate to it: kubeconfig or in-cluster service account.

Guarantees:
- :func:`load_config` looks, in order, at: the explicit ``kubeconfig`` path; ``$KUBECONFIG`` (a
  colon-separated list, merged as kubectl merges it: the first file to define a name or a
  ``current-context`` wins); ``~/.kube/config``; and finally the in-cluster service account
  (``KUBERNETES_SERVICE_HOST``/``_PORT`` plus the mounted token and CA).
- kubeconfig reading follows client-go's clientcmd (:mod:`controller_manager.client.kubeconfig`); what
  aiohttp needs is extracted once: the base URL, an ``ssl.SSLContext`` (``certificate-authority(-data)``,
  client certificates, ``insecure-skip-tls-verify``), the SNI name (``tls-server-name``), the proxy
  (``proxy-url``) and the ``Authorization`` header value (token, ``tokenFile``, basic auth, exec plugin).
- Credentials that change (``tokenFile``, the in-cluster projected token, exec plugins) are a
  :class:`~controller_manager.client.credentials.CredentialSource` in :attr:`ClientConfig.source`;
  :meth:`ClientConfig.authorization_header` asks it before each request. Until a refresh is due that is
  a timestamp comparison, so it costs microseconds.
- ``auth-provider`` users: kubectl removed the ``gcp`` and ``azure`` providers and so do we (a clear
  error naming the exec plugin that replaces them). For ``oidc`` the ``id-token`` in the kubeconfig is sent
  as a bearer token, but never refreshed: when it expires, use an exec plugin (e.g. kubelogin) instead.
- Any problem surfaces as :class:`ConfigError` with a one-line message. Blocking file reads run in
  a worker thread so the event loop never stalls on them.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import contextlib
import os
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import structlog

from controller_manager.client.credentials import (
    CredentialError,
    CredentialSource,
    ExecPlugin,
    TokenFile,
    exec_cluster_info,
    load_client_certificate,
)
from controller_manager.client.errors import ConfigError
from controller_manager.client.kubeconfig import (
    KubeconfigError,
    Selection,
    User,
    read_kubeconfig,
    split_paths,
)

log = structlog.get_logger("controller_manager.client")

SERVICE_TOKEN_FILENAME = "/var/run/secrets/kubernetes.io/serviceaccount/token"
SERVICE_CERT_FILENAME = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
_REMOVED_AUTH_PROVIDERS = {
    "gcp": "the gcp auth plugin has been removed; use the gke-gcloud-auth-plugin exec credential plugin instead",
    "azure": "the azure auth plugin has been removed; use the kubelogin exec credential plugin "
             "(https://github.com/Azure/kubelogin) instead",
}


@dataclass(slots=True)
class ClientConfig:
    """Everything the REST client needs to reach and authenticate to one API server."""

    host: str  # base URL without a trailing slash, e.g. "https://10.96.0.1:443"
    ssl_context: ssl.SSLContext | None = None  # None for plain http
    authorization: str | None = None  # the Authorization header value ("Bearer ...", "Basic ...")
    tls_server_name: str | None = None  # SNI / verification name when it differs from the host
    proxy: str | None = None
    ca_file: str | None = None  # the PEM bundle that verifies the server (what the root CA publisher publishes)
    # Where a rotating credential comes from (token file, exec plugin); None when the header is static.
    source: CredentialSource | None = field(default=None, repr=False)

    @property
    def host_label(self) -> str:
        """``host:port`` as client-go labels its metrics."""
        return urlsplit(self.host).netloc or self.host

    async def authorization_header(self) -> str | None:
        """The current Authorization value, refreshing a rotating token when it is due."""
        source = self.source
        if source is None:
            return self.authorization
        try:
            self.authorization = await source.authorization()
        except (CredentialError, OSError) as exc:
            raise ConfigError(f"refreshing credentials failed: {_one_line(exc)}") from exc
        return self.authorization


def _one_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())


def _private_file(data: bytes, prefix: str) -> str:
    """``data`` in a 0600 temporary file that lives as long as the process (removed at exit)."""
    fd, path = tempfile.mkstemp(prefix=prefix, suffix=".crt")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    atexit.register(_remove, path)
    return path


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _ssl_context(sel: Selection) -> tuple[ssl.SSLContext, str | None]:
    """The TLS context for the selected cluster and user, and the CA bundle's path (blocking)."""
    cluster, user = sel.cluster, sel.user
    ca_file: str | None = cluster.certificate_authority or None
    if cluster.certificate_authority_data:
        ca_file = _private_file(cluster.certificate_authority_data, "kubeconfig-ca-")
    ctx = ssl.create_default_context(cafile=ca_file)  # no CA: the system's roots, as client-go
    if cluster.insecure_skip_tls_verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if user.client_certificate_data or user.client_key_data:
        cert = user.client_certificate_data or Path(user.client_certificate).read_bytes()
        key = user.client_key_data or Path(user.client_key).read_bytes()
        load_client_certificate(ctx, cert, key)
    elif user.client_certificate:
        ctx.load_cert_chain(user.client_certificate, keyfile=user.client_key or None)
    return ctx, ca_file


def _static_authorization(user: User) -> str | None:
    if user.token:
        return f"Bearer {user.token}"
    if user.username or user.password:
        return "Basic " + base64.b64encode(f"{user.username}:{user.password}".encode()).decode()
    provider = user.auth_provider
    if provider is not None:
        if provider.name in _REMOVED_AUTH_PROVIDERS:
            raise ConfigError(_REMOVED_AUTH_PROVIDERS[provider.name])
        if provider.name != "oidc":
            raise ConfigError(f"auth-provider {provider.name!r} is not supported: use an exec credential plugin")
        id_token = provider.config.get("id-token")
        if not id_token:
            raise ConfigError("auth-provider oidc: no id-token (refreshing one is not supported: use an exec "
                              "credential plugin such as kubelogin)")
        return f"Bearer {id_token}"
    return None


async def _from_selection(sel: Selection) -> ClientConfig:
    cluster, user = sel.cluster, sel.user
    host = cluster.server.rstrip("/")
    if not host.startswith(("http://", "https://")):
        raise ConfigError(f"invalid server URL {host!r}: expected http:// or https://")
    ctx: ssl.SSLContext | None = None
    ca_file: str | None = None
    if host.startswith("https://"):
        try:
            ctx, ca_file = await asyncio.to_thread(_ssl_context, sel)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"invalid TLS configuration for {host}: {_one_line(exc)}") from exc
    authorization = _static_authorization(user)
    source: CredentialSource | None = None
    try:
        if user.exec is not None:
            info = await asyncio.to_thread(exec_cluster_info, cluster) if user.exec.provide_cluster_info else None
            source = ExecPlugin(user.exec, info, ctx)
        elif user.token_file and user.token:
            # The file, whenever it reads, wins over the literal token (client-go's BearerTokenFile).
            source = TokenFile(user.token_file, user.token, stale=True)
        elif user.token_file:
            source = await asyncio.to_thread(TokenFile.read, user.token_file)
        if source is not None:
            authorization = await source.authorization() or authorization
    except (CredentialError, OSError) as exc:
        raise ConfigError(f"user {user.name!r}: {_one_line(exc)}") from exc
    return ClientConfig(
        host=host,
        ssl_context=ctx,
        authorization=authorization,
        tls_server_name=cluster.tls_server_name or None,
        proxy=cluster.proxy_url or None,
        ca_file=ca_file,
        source=source,
    )


async def load_kubeconfig(paths: str, context: str | None = None) -> ClientConfig:
    """Load a kubeconfig file, or a ``$KUBECONFIG``-style list of files merged."""
    files = split_paths(paths)
    try:
        selection = await asyncio.to_thread(read_kubeconfig, files, context)
    except KubeconfigError as exc:
        raise ConfigError(str(exc)) from exc
    return await _from_selection(selection)


async def load_incluster_config(
    token_file: str = SERVICE_TOKEN_FILENAME,
    ca_file: str = SERVICE_CERT_FILENAME,
    environ: Mapping[str, str] | None = None,
) -> ClientConfig:
    """The pod's service account: ``https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT``,
    the mounted token (re-read every minute, as tokens are projected and rotate) and CA."""
    env = os.environ if environ is None else environ
    host, port = env.get("KUBERNETES_SERVICE_HOST", ""), env.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise ConfigError("in-cluster config: Service host/port is not set: KUBERNETES_SERVICE_HOST and "
                          "KUBERNETES_SERVICE_PORT must be defined")
    if ":" in host:
        host = f"[{host}]"  # an IPv6 address (net.JoinHostPort)
    try:
        source = await asyncio.to_thread(TokenFile.read, token_file)
    except FileNotFoundError as exc:
        raise ConfigError(f"in-cluster config: Service token file does not exist: {token_file}") from exc
    except (OSError, CredentialError) as exc:
        raise ConfigError(f"in-cluster config: {_one_line(exc)}") from exc

    def tls() -> tuple[ssl.SSLContext, str | None]:
        try:
            return ssl.create_default_context(cafile=ca_file), ca_file
        except (OSError, ssl.SSLError) as exc:
            # client-go logs this and goes on with the system's roots; so do we.
            log.error(
                "in-cluster config: could not load the CA; using the system's roots", path=ca_file,
                error=_one_line(exc))
            return ssl.create_default_context(), None

    ctx, loaded_ca = await asyncio.to_thread(tls)
    return ClientConfig(
        host=f"https://{host}:{port}",
        ssl_context=ctx,
        authorization=await source.authorization(),
        ca_file=loaded_ca,
        source=source,
    )


async def load_config(kubeconfig: str | None = None, context: str | None = None) -> ClientConfig:
    """The client configuration, from the first source present (see the module docstring)."""
    if kubeconfig:
        return await load_kubeconfig(kubeconfig, context)
    env_paths = os.environ.get("KUBECONFIG", "")
    if env_paths.strip(os.pathsep):
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
