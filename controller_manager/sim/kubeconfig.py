"""The kubeconfig kube-sim writes for its clients.

Guarantees:
- One cluster (``server`` = the sim's URL, with ``certificate-authority-data`` when it serves HTTPS),
  two users (the admin token, and a "viewer" with the non-admin token), a context for each, the admin
  context current. The file is JSON, which every kubeconfig reader (kubectl, client-go, both Python
  clients) accepts as YAML.
- The file is written atomically (temp file + rename) with mode 0600, so a reader polling for it never
  sees half a file.
"""

from __future__ import annotations

import base64
import os
import tempfile
from pathlib import Path
from typing import Any

import orjson

__all__ = ["CLUSTER_NAME", "VIEWER_CONTEXT", "kubeconfig", "write_kubeconfig"]

CLUSTER_NAME = "kube-sim"
ADMIN_USER = "kube-sim-admin"
VIEWER_USER = "kube-sim-viewer"
VIEWER_CONTEXT = "kube-sim-viewer"


def kubeconfig(url: str, admin_token: str, viewer_token: str, *, namespace: str = "default",
               ca_pem: bytes | None = None) -> dict[str, Any]:
    cluster: dict[str, Any] = {"server": url}
    if ca_pem:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [{"name": CLUSTER_NAME, "cluster": cluster}],
        "users": [
            {"name": ADMIN_USER, "user": {"token": admin_token}},
            {"name": VIEWER_USER, "user": {"token": viewer_token}},
        ],
        "contexts": [
            {"name": CLUSTER_NAME, "context": {"cluster": CLUSTER_NAME, "user": ADMIN_USER, "namespace": namespace}},
            {"name": VIEWER_CONTEXT, "context": {"cluster": CLUSTER_NAME, "user": VIEWER_USER,
                                                 "namespace": namespace}},
        ],
        "current-context": CLUSTER_NAME,
    }


def write_kubeconfig(path: str | os.PathLike[str], url: str, admin_token: str, viewer_token: str, *,
                     ca_pem: bytes | None = None) -> Path:
    """Write the kubeconfig to ``path`` atomically; returns the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    data = orjson.dumps(kubeconfig(url, admin_token, viewer_token, ca_pem=ca_pem), option=orjson.OPT_INDENT_2)
    fd, tmp = tempfile.mkstemp(prefix=".kubeconfig-", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data + b"\n")
        os.chmod(tmp, 0o600)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)  # the temp file must not stay behind
        raise
    return target
