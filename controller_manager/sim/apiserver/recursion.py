"""Room on the interpreter's stack for walking a deeply nested tree recursively (a YAML body, a CEL expression).

Python 3.11 frames live off the C stack, so a higher recursion limit is safe for the few frames each level takes;
the limit is raised only as far as the walk needs and put back afterwards.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

FRAMES_PER_LEVEL = 4


@contextlib.contextmanager
def room_for_depth(depth: int, *, margin: int = 500) -> Iterator[None]:
    """Room for walking ``depth`` levels, with ``margin`` frames for the caller's own stack."""
    limit, needed = sys.getrecursionlimit(), depth * FRAMES_PER_LEVEL + margin
    if needed <= limit:
        yield
        return
    sys.setrecursionlimit(needed)
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)
