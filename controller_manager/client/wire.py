"""What goes on the wire besides objects: media types, the User-Agent, Retry-After parsing.

Guarantees: the Accept values for metadata-only lists and watches and the PATCH content types are
the ones the API server negotiates on (``docs/internals.md``); the User-Agent is shaped like
client-go's ``name/version (os/arch)``.
"""

from __future__ import annotations

import importlib.metadata
import platform
import sys

JSON = "application/json"
PATCH_CONTENT_TYPES = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
}
APPLY_PATCH_CONTENT_TYPE = "application/apply-patch+yaml"  # server-side apply; JSON is YAML too
METADATA_LIST_ACCEPT = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
METADATA_WATCH_ACCEPT = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
_RETRY_AFTER_CAP = 60.0
_GOARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64", "armv7l": "arm"}


def _version() -> str:
    try:
        return importlib.metadata.version("controller-manager")
    except importlib.metadata.PackageNotFoundError:  # running from a source tree that is not installed
        return "0.0.0"


def _platform() -> str:
    machine = platform.machine().lower()
    return f"{sys.platform}/{_GOARCH.get(machine, machine or 'unknown')}"


def default_user_agent() -> str:
    """``controller-manager/0.1.0 (linux/amd64)``, shaped like client-go's DefaultKubernetesUserAgent."""
    return f"controller-manager/{_version()} ({_platform()})"


def kube_controller_manager_user_agent(suffix: str = "") -> str:
    """What kube-controller-manager's clients send: ``kube-controller-manager/v0.1.0 (linux/amd64)
    kubernetes/unknown``, plus ``/<name>`` for a client of its own (rest.AddUserAgent). The API server records
    the part before the first "/" as the field manager of every write, so the daemon's writes show as
    ``kube-controller-manager``'s, as the real one's do."""
    agent = f"kube-controller-manager/v{_version()} ({_platform()}) kubernetes/unknown"
    return f"{agent}/{suffix}" if suffix else agent


def parse_retry_after(value: str | None) -> float | None:
    # client-go reads whole seconds only; an HTTP-date form is ignored the same way.
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return min(max(seconds, 0.0), _RETRY_AFTER_CAP)
