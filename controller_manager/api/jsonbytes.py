"""JSON bytes that are kept: exact-size copies of orjson's output.

Guarantees:
- :func:`kept` returns bytes equal to its argument in an object of exactly that size; :func:`encode_kept` is
  ``kept(orjson.dumps(obj))``.

Why: orjson (3.13) hands back its working buffer as the result, sized for the worst case: 4 KiB for a few bytes
of JSON, 16 KiB for a 1.6 KB template, 32 KiB for a 3 KB pod (measured with tracemalloc). Bytes that outlive the
call (kube-sim's stored versions, pool and cache keys, request bodies in flight) would hold ~10x their size. The
copy costs a memcpy of the JSON's length.
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["encode_kept", "kept"]


def kept(raw: bytes) -> bytes:
    """``raw`` in a bytes object of its own size."""
    return bytes(memoryview(raw))


def encode_kept(obj: Any) -> bytes:
    """``obj``'s JSON in a bytes object of its own size."""
    return kept(orjson.dumps(obj))
