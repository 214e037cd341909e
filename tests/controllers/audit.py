"""Reading kube-sim's audit log in tests: which writes a controller sent, and how the API server answered."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["conflicts", "describe", "writes"]


def writes(audit_log: Path, resource: str, subresource: str | None = None, *,
           verbs: tuple[str, ...] = ("update", "patch")) -> list[dict[str, Any]]:
    """The audit entries of writes (``verbs``) of ``resource`` (and ``subresource``, None: the object itself)."""
    out: list[dict[str, Any]] = []
    for line in audit_log.read_text().splitlines():
        entry = json.loads(line)
        ref = entry.get("objectRef") or {}
        if entry.get("verb") in verbs and ref.get("resource") == resource and ref.get("subresource") == subresource:
            out.append(entry)
    return out


def conflicts(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The entries answered 409 Conflict."""
    return [e for e in entries if (e.get("responseStatus") or {}).get("code") == 409]


def describe(entries: list[dict[str, Any]]) -> list[tuple[str, str, int, str]]:
    """(verb, name, code, time received) per entry: what an assertion message shows."""
    return [(e["verb"], (e.get("objectRef") or {}).get("name", ""), (e.get("responseStatus") or {}).get("code", 0),
             e.get("requestReceivedTimestamp", "")) for e in entries]
