"""Credentials that change while the daemon runs: a token file re-read every minute, and exec credential
plugins (``client.authentication.k8s.io`` v1 and v1beta1 ``ExecCredential``).

Guarantees:
- :class:`TokenFile` re-reads its file at most once a ``period`` (a minute, as client-go's cached file token
  source), in a worker thread; until then :meth:`~TokenFile.authorization` only compares a timestamp. A
  failed or empty read keeps the last good token (logged), as client-go does; only the first read fails.
- :class:`ExecPlugin` runs the plugin as an asyncio subprocess (the event loop never blocks on it) with the
  kubeconfig's ``args`` and ``env`` added to ours, and ``KUBERNETES_EXEC_INFO`` holding an ``ExecCredential``
  whose ``spec`` says whether it may be interactive and, with ``provideClusterInfo``, describes the cluster.
  Its stdin is ours only when interactive; its stderr is ours. The answer is checked as client-go checks it
  (kind, apiVersion, a status, a token or a certificate and key pair, never only one of the two).
- The plugin runs again once its ``expirationTimestamp`` has passed, or after the server answered 401 to its
  current credentials (client-go's ``MaybeRefresh``; the failed request is not retried), never more often than every
  :data:`EXEC_MIN_INTERVAL` seconds (a plugin handing out already-expired tokens would otherwise run on every
  request), one run at a time. A credential without expiry is kept for the life of the process.
- A client certificate from a plugin is loaded into the client's ``ssl.SSLContext``; a new one replaces it for
  connections made after the run (open connections keep theirs: client-go also closes them, we do not).
"""

from __future__ import annotations

import abc
import asyncio
import base64
import os
import ssl
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import orjson
import structlog

from controller_manager.api.meta import parse_time
from controller_manager.client.kubeconfig import Cluster, ExecConfig

log = structlog.get_logger("controller_manager.client")

TOKEN_FILE_PERIOD = 60.0  # seconds between two reads of a token file (client-go's cached token source)
EXEC_MIN_INTERVAL = 10.0  # seconds between two runs of an exec credential plugin
EXEC_INFO_ENV = "KUBERNETES_EXEC_INFO"


class CredentialError(Exception):
    """Credentials could not be obtained; the message is one line."""


class CredentialSource(abc.ABC):
    """Something that hands out the current ``Authorization`` header value."""

    @abc.abstractmethod
    async def authorization(self) -> str | None:
        """The value to send now (refreshed first when it is due); None for no header."""

    def rejected(self, authorization: str | None) -> None:  # noqa: B027  # a hook: only refreshable sources act
        """The server answered 401 to a request sent with ``authorization``."""


def _read_token(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read().strip()


class TokenFile(CredentialSource):
    """A bearer token file that rotates (projected service account tokens, kubeconfig ``tokenFile``)."""

    def __init__(self, path: str, token: str, *, stale: bool = False, period: float = TOKEN_FILE_PERIOD,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``token`` is what the file held when read just now; ``stale``: a fallback, the file is read first."""
        self.path = path
        self._token = token
        self._period = period
        self._clock = clock
        self._read_at = -float("inf") if stale else clock()

    @classmethod
    def read(cls, path: str, **kwargs: Any) -> TokenFile:
        """Read the token once, now (blocking); a missing or empty file raises OSError or CredentialError."""
        token = _read_token(path)
        if not token:
            raise CredentialError(f"read empty token from file {path!r}")
        return cls(path, token, **kwargs)

    async def authorization(self) -> str | None:
        now = self._clock()
        if now - self._read_at >= self._period:
            self._read_at = now
            try:
                token = await asyncio.to_thread(_read_token, self.path)
            except OSError as exc:
                log.error("reading the token file failed; keeping the last token", path=self.path, error=str(exc))
            else:
                if token:
                    self._token = token
                else:
                    log.error("the token file is empty; keeping the last token", path=self.path)
        return f"Bearer {self._token}"


def load_client_certificate(ctx: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """Load an in-memory certificate and key into ``ctx`` (blocking). ``ssl`` reads only files: they are written
    to a private (0600) temporary file that is removed as soon as the context holds them."""
    fd, path = tempfile.mkstemp(prefix="kube-client-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(cert_pem.rstrip(b"\n") + b"\n" + key_pem)
        ctx.load_cert_chain(path)
    finally:
        os.unlink(path)


def exec_cluster_info(cluster: Cluster) -> dict[str, Any]:
    """The ``spec.cluster`` an exec plugin gets with ``provideClusterInfo`` (empty fields omitted, as in Go)."""
    info: dict[str, Any] = {"server": cluster.server}
    if cluster.tls_server_name:
        info["tls-server-name"] = cluster.tls_server_name
    if cluster.insecure_skip_tls_verify:
        info["insecure-skip-tls-verify"] = True
    ca = cluster.certificate_authority_data
    if not ca and cluster.certificate_authority:
        with open(cluster.certificate_authority, "rb") as f:  # clientcmd hands the plugin the CA's bytes
            ca = f.read()
    if ca:
        info["certificate-authority-data"] = base64.b64encode(ca).decode()
    if cluster.proxy_url:
        info["proxy-url"] = cluster.proxy_url
    if cluster.disable_compression:
        info["disable-compression"] = True
    if cluster.exec_extension is not None:
        info["config"] = cluster.exec_extension
    return info


class ExecPlugin(CredentialSource):
    """A ``users[].user.exec`` credential plugin."""

    def __init__(self, config: ExecConfig, cluster_info: dict[str, Any] | None,
                 ssl_context: ssl.SSLContext | None = None, *, wall_clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self._cluster_info = cluster_info
        self.ssl_context = ssl_context  # where a returned client certificate goes
        self._wall = wall_clock
        self._monotonic = monotonic
        self._lock = asyncio.Lock()
        self._token = ""
        self._cert: tuple[bytes, bytes] | None = None
        self._expiry: float | None = None
        self._last_run: float | None = None
        self._rejected = False

    @property
    def has_certificate(self) -> bool:
        return self._cert is not None

    @property
    def certificate(self) -> tuple[bytes, bytes] | None:
        return self._cert

    def _expired(self) -> bool:
        return (self._last_run is None or self._rejected
                or (self._expiry is not None and self._wall() > self._expiry))

    def rejected(self, authorization: str | None) -> None:
        # As client-go: a 401 to the current credentials (not to ones already replaced) means run the plugin again.
        if authorization == (f"Bearer {self._token}" if self._token else None):
            self._rejected = True

    async def authorization(self) -> str | None:
        if self._expired():
            async with self._lock:
                now = self._monotonic()
                if self._expired() and (self._last_run is None or now - self._last_run >= EXEC_MIN_INTERVAL):
                    self._last_run = now
                    await self.run()
        return f"Bearer {self._token}" if self._token else None

    def _interactive(self) -> bool:
        mode = self.config.interactive_mode
        if mode == "Never":
            return False
        tty = sys.stdin is not None and sys.stdin.isatty()
        if mode == "Always" and not tty:
            raise CredentialError("exec plugin cannot support interactive mode: standard input is not a terminal")
        return tty

    async def run(self) -> None:
        """Run the plugin once and take its credentials (raises CredentialError)."""
        cfg = self.config
        interactive = self._interactive()
        spec: dict[str, Any] = {"interactive": interactive}
        if cfg.provide_cluster_info and self._cluster_info is not None:
            spec["cluster"] = self._cluster_info
        info = {"kind": "ExecCredential", "apiVersion": cfg.api_version, "spec": spec}
        env = {**os.environ, **dict(cfg.env), EXEC_INFO_ENV: orjson.dumps(info).decode()}
        try:
            proc = await asyncio.create_subprocess_exec(
                cfg.command, *cfg.args, env=env, stdout=asyncio.subprocess.PIPE,
                stdin=None if interactive else asyncio.subprocess.DEVNULL,
            )
        except OSError as exc:
            hint = f": {cfg.install_hint}" if cfg.install_hint else ""
            message = "not found" if isinstance(exc, FileNotFoundError) else f"could not be run: {exc.strerror}"
            raise CredentialError(f"exec: executable {cfg.command} {message}{hint}") from exc
        stdout, _ = await proc.communicate()
        if proc.returncode != 0:
            raise CredentialError(f"exec: executable {cfg.command} failed with exit code {proc.returncode}")
        await self._take(stdout)

    async def _take(self, stdout: bytes) -> None:
        cfg = self.config
        try:
            cred = orjson.loads(stdout)
        except orjson.JSONDecodeError as exc:
            raise CredentialError(f"decoding stdout: {exc}") from exc
        if not isinstance(cred, dict) or cred.get("kind") != "ExecCredential":
            raise CredentialError("decoding stdout: not an ExecCredential")
        if cred.get("apiVersion") != cfg.api_version:
            raise CredentialError(f"exec plugin is configured to use API version {cfg.api_version}, plugin returned "
                                  f"version {cred.get('apiVersion')}")
        status = cred.get("status")
        if not isinstance(status, dict):
            raise CredentialError("exec plugin didn't return a status field")
        token = status.get("token") or ""
        cert = (status.get("clientCertificateData") or "").encode()
        key = (status.get("clientKeyData") or "").encode()
        if not token and not cert and not key:
            raise CredentialError("exec plugin didn't return a token or cert/key pair")
        if bool(cert) != bool(key):
            raise CredentialError("exec plugin returned only certificate or key, not both")
        expiry_text = status.get("expirationTimestamp")
        expiry = parse_time(expiry_text) if expiry_text else None
        if expiry_text and expiry is None:
            raise CredentialError(f"decoding stdout: invalid expirationTimestamp {expiry_text!r}")
        if cert and (cert, key) != self._cert and self.ssl_context is not None:
            try:
                await asyncio.to_thread(load_client_certificate, self.ssl_context, cert, key)
            except (OSError, ssl.SSLError) as exc:
                raise CredentialError(f"failed parsing client key/certificate: {exc}") from exc
        self._token, self._expiry, self._rejected = str(token), expiry, False
        self._cert = (cert, key) if cert else None
