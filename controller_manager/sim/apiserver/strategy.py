"""Strategy facts looked up by kind, for readers that only know a kind (the field manager's reset fields).

The rules themselves live in :mod:`registry`, one strategy per kind; this module only derives from them.
"""

from __future__ import annotations

from typing import Any

from controller_manager.api.resources import Resource


def has_status(res: Resource) -> bool:
    return "status" in res.subresources


def __getattr__(name: str) -> Any:
    if name == "STATUS_RESET_META":  # (computed on use: the registry imports much of the server)
        from controller_manager.sim.apiserver.registry import status_reset_meta

        return status_reset_meta()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
