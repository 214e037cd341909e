"""Where the root CA publisher's bundle comes from (kube-controller-manager's ``startRootCACertPublisher``).

Guarantees:
- ``--root-ca-file`` set: its content, which must hold at least one valid PEM ``CERTIFICATE`` (upstream's
  ``readCA``: ``certutil.ParseCertsPEM``); otherwise :class:`InvalidRootCA` naming the file, so the controller
  (hence the daemon) fails to start, as upstream does.
- Not set: the CA bundle the daemon's client verifies the API server with (``ClientConfig.ca_file``: the
  kubeconfig's ``certificate-authority(-data)`` or the in-cluster ``ca.crt``), as it is, unvalidated.
  Upstream uses the rest config's ``CAData`` here, which is empty when the kubeconfig names a CA *file*; using
  the file's content publishes the bundle the client really trusts instead of an empty one.
- Neither (plain-HTTP API server, or a client trusting the system store): the empty string, as upstream
  publishes when ``CAData`` is empty.
- Files are read once, when the controller is built (a few KiB, before any worker runs); the bundle is not
  re-read when the file changes, as upstream.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cryptography import x509

__all__ = ["InvalidRootCA", "load_root_ca", "read_ca"]


class InvalidRootCA(ValueError):
    """``--root-ca-file`` cannot be read or holds no valid PEM certificate."""


def read_ca(path: str) -> str:
    """The PEM bundle in ``path``, checked to hold at least one parsable certificate (upstream ``readCA``)."""
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        raise InvalidRootCA(f"error parsing root-ca-file at {path}: {err.strerror or err}") from err
    try:
        # Like certutil.ParseCertsPEM: CERTIFICATE blocks must parse, other blocks are skipped, none is an error.
        x509.load_pem_x509_certificates(data)
    except ValueError as err:
        raise InvalidRootCA(f"error parsing root-ca-file at {path}: data does not contain any valid RSA or "
                            f"ECDSA certificates ({err})") from err
    return data.decode("ascii", errors="replace")


def load_root_ca(options: Mapping[str, Any], client_config: Any) -> str:
    """The bundle to publish: ``root_ca_file`` from ``options``, else the client config's CA file, else ``""``."""
    root_ca_file = options.get("root_ca_file", options.get("root-ca-file")) or ""
    if root_ca_file:
        return read_ca(str(root_ca_file))
    ca_file = getattr(client_config, "ca_file", None)
    if not ca_file:
        return ""
    try:
        return Path(ca_file).read_bytes().decode("utf-8", errors="replace")
    except OSError as err:
        raise InvalidRootCA(f"error reading the client's CA bundle at {ca_file}: {err.strerror or err}") from err
