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
METADATA_LIST_ACCEPT = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
METADATA_WATCH_ACCEPT = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
_RETRY_AFTER_CAP = 60.0
_GOARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64", "armv7l": "arm"}


def default_user_agent() -> str:
    """``controller-manager/0.1.0 (linux/amd64)``, shaped like client-go's DefaultKubernetesUserAgent."""
    try:
        version = importlib.metadata.version("controller-manager")
    except importlib.metadata.PackageNotFoundError:  # running from a source tree that is not installed
        version = "0.0.0"
    machine = platform.machine().lower()
    return f"controller-manager/{version} ({sys.platform}/{_GOARCH.get(machine, machine or 'unknown')})"


def parse_retry_after(value: str | None) -> float | None:
    # client-go reads whole seconds only; an HTTP-date form is ignored the same way.
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return min(max(seconds, 0.0), _RETRY_AFTER_CAP)
