"""Ordering resourceVersions (apimachinery's ``resourceversion.CompareResourceVersion``).

The API server's resourceVersions are opaque strings to clients, but kube-apiserver's (and kube-sim's) are
decimal integers without leading zeros, which KEP-5647 lets controllers compare to tell whether a cache has
caught up with a write. Anything else is refused with ValueError: callers then do not block on it.
"""

from __future__ import annotations

__all__ = ["compare_resource_versions"]


def compare_resource_versions(a: str, b: str) -> int:
    """-1, 0 or 1 as ``a`` is older than, the same as or newer than ``b`` (both decimal integers without
    leading zeros, as the API server's are); ValueError for anything else."""
    for rv in (a, b):
        if not rv.isdigit() or (len(rv) > 1 and rv[0] == "0"):
            raise ValueError(f"resource version {rv!r} is not comparable")
    ka, kb = (len(a), a), (len(b), b)
    return (ka > kb) - (ka < kb)
