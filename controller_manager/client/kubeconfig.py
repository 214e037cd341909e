"""Reading kubeconfig files as kubectl (client-go's clientcmd) reads them.

Guarantees:
- :func:`read_kubeconfig` takes one file or a ``$KUBECONFIG``-style list. Missing files in the list are
  skipped (a list naming only missing files is an error); the files are merged by clientcmd's rules: the
  first file to define a cluster, user or context *name* wins (the whole entry, never field by field),
  within one file the last entry of a name wins, and the first non-empty ``current-context`` wins.
- Relative paths in a file resolve against that file's directory: ``certificate-authority``,
  ``client-certificate``, ``client-key``, ``tokenFile``, and an exec plugin's ``command`` when it contains a
  path separator (a bare name is looked up on ``$PATH`` when the plugin runs).
- ``context`` (the ``--context`` flag) overrides ``current-context``. The chosen context must exist and its
  cluster must have a server; a user the context names but no file defines means anonymous, as in clientcmd.
- The usability checks of clientcmd's ``ConfirmUsable`` are made (both a ``-data`` field and its file
  given, a certificate without a key, unreadable files, token plus basic auth, incomplete exec config,
  a CA with ``insecure-skip-tls-verify``); every problem is a :class:`KubeconfigError` whose message is one line.
- ``*-data`` fields are base64-decoded here; nothing else is read: certificates and tokens are read by
  whoever uses them. Everything here blocks on file reads: call it from a worker thread.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
EXEC_INTERACTIVE_MODES = ("Never", "IfAvailable", "Always")
# The cluster extension whose value an exec plugin receives as spec.cluster.config.
EXEC_CLUSTER_EXTENSION = "client.authentication.k8s.io/exec"


class KubeconfigError(ValueError):
    """A kubeconfig that cannot be used; the message is one line, naming the files read."""


class KubeconfigNotFound(KubeconfigError):
    """None of the files named exists."""


@dataclass(frozen=True, slots=True)
class Cluster:
    name: str
    server: str = ""
    certificate_authority: str = ""  # a path, already resolved against its file's directory
    certificate_authority_data: bytes = b""
    insecure_skip_tls_verify: bool = False
    tls_server_name: str = ""
    proxy_url: str = ""
    disable_compression: bool = False
    exec_extension: Any = None  # extensions[client.authentication.k8s.io/exec], handed to exec plugins


@dataclass(frozen=True, slots=True)
class ExecConfig:
    command: str
    api_version: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    install_hint: str = ""
    provide_cluster_info: bool = False
    interactive_mode: str = "IfAvailable"


@dataclass(frozen=True, slots=True)
class AuthProvider:
    name: str
    config: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class User:
    name: str
    token: str = ""
    token_file: str = ""
    client_certificate: str = ""
    client_certificate_data: bytes = b""
    client_key: str = ""
    client_key_data: bytes = b""
    username: str = ""
    password: str = ""
    exec: ExecConfig | None = None
    auth_provider: AuthProvider | None = None


@dataclass(frozen=True, slots=True)
class Selection:
    """What one context resolves to."""

    context: str
    cluster: Cluster
    user: User
    namespace: str
    files: tuple[str, ...]  # the files that were read, in precedence order (for messages)


@dataclass(slots=True)
class _Merged:
    clusters: dict[str, Cluster] = field(default_factory=dict)
    users: dict[str, User] = field(default_factory=dict)
    contexts: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    current_context: str = ""


def split_paths(paths: str) -> list[str]:
    """A ``$KUBECONFIG`` value as a list: empty entries dropped, duplicates dropped (first kept), ``~`` expanded."""
    seen: dict[str, None] = {}
    for entry in paths.split(os.pathsep):
        if entry:
            seen.setdefault(os.path.expanduser(entry), None)
    return list(seen)


def read_kubeconfig(paths: Sequence[str], context: str | None = None) -> Selection:
    """Merge the files that exist among ``paths`` and resolve ``context`` (or ``current-context``)."""
    files = [p for p in paths if os.path.isfile(p)]
    if not files:
        raise KubeconfigNotFound(f"kubeconfig {os.pathsep.join(paths)}: no such file")
    merged = _Merged()
    try:
        for path in files:
            _merge_file(merged, path)
        return _select(merged, context, tuple(files))
    except KubeconfigError as exc:
        raise KubeconfigError(f"invalid kubeconfig {os.pathsep.join(files)}: {exc}") from exc


# --- reading and merging -----------------------------------------------------------------------------


def _merge_file(merged: _Merged, path: str) -> None:
    try:
        with open(path, "rb") as f:
            doc = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (OSError, yaml.YAMLError) as exc:
        raise KubeconfigError(f"error loading config file {path!r}: {_one_line(exc)}") from exc
    if doc is None:
        return  # an empty file is an empty config
    if not isinstance(doc, Mapping):
        raise KubeconfigError(f"error loading config file {path!r}: expected a mapping, got {type(doc).__name__}")
    base = os.path.dirname(os.path.abspath(path))
    where = f"config file {path!r}"
    # Within one file a later entry of a name replaces an earlier one; across files the first file keeps it.
    clusters = {n: _cluster(n, body, base, where) for n, body in _named(doc, "clusters", "cluster", where)}
    users = {n: _user(n, body, base, where) for n, body in _named(doc, "users", "user", where)}
    contexts = dict(_named(doc, "contexts", "context", where))
    for name, cluster in clusters.items():
        merged.clusters.setdefault(name, cluster)
    for name, user in users.items():
        merged.users.setdefault(name, user)
    for name, ctx in contexts.items():
        merged.contexts.setdefault(name, ctx)
    if not merged.current_context:
        merged.current_context = _string(doc, "current-context", where)


def _named(doc: Mapping[str, Any], key: str, inner: str, where: str) -> list[tuple[str, Mapping[str, Any]]]:
    entries = doc.get(key)
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise KubeconfigError(f"{where}: {key}: expected a list")
    out = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            raise KubeconfigError(f"{where}: {key}[{i}]: expected a mapping")
        body = entry.get(inner) or {}
        if not isinstance(body, Mapping):
            raise KubeconfigError(f"{where}: {key}[{i}].{inner}: expected a mapping")
        out.append((_string(entry, "name", f"{where}: {key}[{i}]"), body))
    return out


def _string(body: Mapping[str, Any], key: str, where: str) -> str:
    value = body.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise KubeconfigError(f"{where}: {key}: expected a string, got {type(value).__name__}")
    return value


def _bool(body: Mapping[str, Any], key: str, where: str) -> bool:
    value = body.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise KubeconfigError(f"{where}: {key}: expected a boolean, got {type(value).__name__}")
    return value


def _data(body: Mapping[str, Any], key: str, where: str) -> bytes:
    text = _string(body, key, where)
    try:
        return base64.b64decode(text, validate=True) if text else b""
    except (binascii.Error, ValueError) as exc:
        raise KubeconfigError(f"{where}: {key}: not valid base64: {exc}") from exc


def _resolve(path: str, base: str) -> str:
    return path if not path or os.path.isabs(path) else os.path.join(base, path)


def _cluster(name: str, body: Mapping[str, Any], base: str, where: str) -> Cluster:
    where = f"{where}: cluster {name!r}"
    extensions = body.get("extensions") or []
    exec_extension = None
    if isinstance(extensions, list):
        for ext in extensions:
            if isinstance(ext, Mapping) and ext.get("name") == EXEC_CLUSTER_EXTENSION:
                exec_extension = ext.get("extension")
    return Cluster(
        name=name,
        server=_string(body, "server", where),
        certificate_authority=_resolve(_string(body, "certificate-authority", where), base),
        certificate_authority_data=_data(body, "certificate-authority-data", where),
        insecure_skip_tls_verify=_bool(body, "insecure-skip-tls-verify", where),
        tls_server_name=_string(body, "tls-server-name", where),
        proxy_url=_string(body, "proxy-url", where),
        disable_compression=_bool(body, "disable-compression", where),
        exec_extension=exec_extension,
    )


def _user(name: str, body: Mapping[str, Any], base: str, where: str) -> User:
    where = f"{where}: user {name!r}"
    exec_body = body.get("exec")
    provider = body.get("auth-provider")
    auth_provider = None
    if provider is not None:
        if not isinstance(provider, Mapping):
            raise KubeconfigError(f"{where}: auth-provider: expected a mapping")
        config = provider.get("config") or {}
        auth_provider = AuthProvider(_string(provider, "name", where),
                                     {str(k): str(v) for k, v in dict(config).items()})
    return User(
        name=name,
        token=_string(body, "token", where),
        token_file=_resolve(_string(body, "tokenFile", where), base),
        client_certificate=_resolve(_string(body, "client-certificate", where), base),
        client_certificate_data=_data(body, "client-certificate-data", where),
        client_key=_resolve(_string(body, "client-key", where), base),
        client_key_data=_data(body, "client-key-data", where),
        username=_string(body, "username", where),
        password=_string(body, "password", where),
        exec=None if exec_body is None else _exec(exec_body, base, where),
        auth_provider=auth_provider,
    )


def _exec(body: Any, base: str, where: str) -> ExecConfig:
    where = f"{where}: exec"
    if not isinstance(body, Mapping):
        raise KubeconfigError(f"{where}: expected a mapping")
    command = _string(body, "command", where)
    if os.sep in command:  # a bare name is looked up on $PATH; a path is relative to the file
        command = _resolve(command, base)
    args = body.get("args") or []
    env = body.get("env") or []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise KubeconfigError(f"{where}: args: expected a list of strings")
    if not isinstance(env, list) or not all(isinstance(e, Mapping) for e in env):
        raise KubeconfigError(f"{where}: env: expected a list of name/value pairs")
    api_version = _string(body, "apiVersion", where)
    mode = _string(body, "interactiveMode", where)
    if not mode and api_version == "client.authentication.k8s.io/v1beta1":
        mode = "IfAvailable"  # v1beta1's default; v1 requires the field
    return ExecConfig(
        command=command,
        api_version=api_version,
        args=tuple(args),
        env=tuple((_string(e, "name", where), _string(e, "value", where)) for e in env),
        install_hint=" ".join(_string(body, "installHint", where).split()),
        provide_cluster_info=_bool(body, "provideClusterInfo", where),
        interactive_mode=mode,
    )


# --- choosing and checking the context ---------------------------------------------------------------


def _select(merged: _Merged, override: str | None, files: tuple[str, ...]) -> Selection:
    name = override or merged.current_context
    if not name:
        raise KubeconfigError("no context chosen: current-context is not set and no context was given")
    ctx = merged.contexts.get(name)
    if ctx is None:
        raise KubeconfigError(f"context was not found for specified context: {name}")
    where = f"context {name!r}"
    cluster_name = _string(ctx, "cluster", where)
    user_name = _string(ctx, "user", where)
    cluster = merged.clusters.get(cluster_name)
    if cluster is None or cluster == Cluster(name=cluster_name):
        raise KubeconfigError(f"cluster {cluster_name!r} of context {name!r}: the cluster is missing or empty")
    user = merged.users.get(user_name) or User(name=user_name)  # clientcmd: an unknown user is anonymous
    problems = _cluster_problems(cluster) + _user_problems(user)
    if problems:
        raise KubeconfigError("; ".join(problems))
    return Selection(context=name, cluster=cluster, user=user, namespace=_string(ctx, "namespace", where),
                     files=files)


def _cluster_problems(cluster: Cluster) -> list[str]:
    name = cluster.name
    problems = []
    if not cluster.server:
        problems.append(f"the cluster {name!r} has no server")
    if cluster.proxy_url and not cluster.proxy_url.startswith(("http://", "https://")):
        problems.append(f"invalid 'proxy-url' {cluster.proxy_url!r} for cluster {name!r}: "
                        f"only http and https proxies are supported")
    if cluster.certificate_authority and cluster.certificate_authority_data:
        problems.append(f"certificate-authority-data and certificate-authority are both specified for {name}")
    if cluster.certificate_authority and not os.access(cluster.certificate_authority, os.R_OK):
        problems.append(f"unable to read certificate-authority {cluster.certificate_authority} for {name}")
    if cluster.insecure_skip_tls_verify and (cluster.certificate_authority or cluster.certificate_authority_data):
        problems.append("specifying a root certificates file with the insecure flag is not allowed")
    return problems


def _user_problems(user: User) -> list[str]:
    name = user.name
    problems = []
    methods = [m for m, used in (("token", user.token), ("basicAuth", user.username or user.password)) if used]
    if len(methods) > 1:
        problems.append(f"more than one authentication method found for {name}; found {methods}, only one is allowed")
    if user.client_certificate or user.client_certificate_data:
        if user.client_certificate and user.client_certificate_data:
            problems.append(f"client-cert-data and client-cert are both specified for {name}")
        if user.client_key and user.client_key_data:
            problems.append(f"client-key-data and client-key are both specified for {name}")
        if not user.client_key and not user.client_key_data:
            problems.append(f"client-key-data or client-key must be specified for {name} to use the clientCert "
                            f"authentication method")
        for what, path in (("client-cert", user.client_certificate), ("client-key", user.client_key)):
            if path and not os.access(path, os.R_OK):
                problems.append(f"unable to read {what} {path} for {name}")
    if user.exec is not None:
        ex = user.exec
        if user.auth_provider is not None:
            problems.append(f"authProvider cannot be provided in combination with an exec plugin for {name}")
        if not ex.command:
            problems.append(f"command must be specified for {name} to use exec authentication plugin")
        if not ex.api_version:
            problems.append(f"apiVersion must be specified for {name} to use exec authentication plugin")
        elif ex.api_version not in EXEC_API_VERSIONS:
            problems.append(f"exec plugin: invalid apiVersion {ex.api_version!r}")
        if any(not env_name for env_name, _ in ex.env):
            problems.append(f"env variable name must be specified for {name} to use exec authentication plugin")
        if not ex.interactive_mode:
            problems.append(f"interactiveMode must be specified for {name} to use exec authentication plugin")
        elif ex.interactive_mode not in EXEC_INTERACTIVE_MODES:
            problems.append(f"invalid interactiveMode for {name}: {ex.interactive_mode!r}")
    return problems


def _one_line(exc: BaseException) -> str:
    return " ".join((str(exc) or type(exc).__name__).split())
