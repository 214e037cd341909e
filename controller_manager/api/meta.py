"""Object-metadata helpers: keys, controller references, API timestamps.

Objects are the API's JSON as plain dicts and are never mutated here.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

import orjson

Obj = Mapping[str, Any]
_T = TypeVar("_T")


def meta(obj: Obj) -> Mapping[str, Any]:
    m = obj.get("metadata")
    # ``type(m) is dict`` first: the ABC check alone costs more than the rest of most callers.
    return m if type(m) is dict or isinstance(m, Mapping) else {}


def deep_copy(value: _T) -> _T:
    """A deep copy of API JSON (dicts, lists, strings, numbers, booleans, null): an orjson round trip, ~6x faster
    than ``copy.deepcopy`` on an object. Tuples come back as lists; anything orjson cannot write (a caller's own
    object, an integer beyond 64 bits) falls back to ``copy.deepcopy``."""
    try:
        copied: _T = orjson.loads(orjson.dumps(value))
    except TypeError:
        return copy.deepcopy(value)
    return copied


def key_of(obj: Obj) -> str:
    """``namespace/name`` for namespaced objects, ``name`` for cluster-scoped ones (client-go's key)."""
    m = meta(obj)
    ns = m.get("namespace")
    name = m.get("name", "")
    return f"{ns}/{name}" if ns else str(name)


def split_key(key: str) -> tuple[str, str]:
    """``("ns", "name")`` from ``ns/name``; ``("", "name")`` for a cluster-scoped key."""
    ns, sep, name = key.partition("/")
    return (ns, name) if sep else ("", ns)


def controller_ref(obj: Obj) -> Mapping[str, Any] | None:
    """The ownerReference with ``controller: true``, if any."""
    refs = meta(obj).get("ownerReferences") or ()
    for ref in refs:
        if (type(ref) is dict or isinstance(ref, Mapping)) and ref.get("controller") is True:
            return ref
    return None


def is_being_deleted(obj: Obj) -> bool:
    return meta(obj).get("deletionTimestamp") is not None


_last_time: tuple[int, str] = (-1, "")


def format_time(ts: float) -> str:
    """RFC 3339 with second precision, as metav1.Time serialises (``2024-05-01T10:00:00Z``)."""
    global _last_time
    frac, whole = math.modf(ts)  # the second datetime.fromtimestamp lands on (microseconds rounded half-even)
    micros = round(frac * 1e6)
    second = int(whole) + (micros >= 1_000_000) - (micros < 0)
    last = _last_time
    if last[0] == second:  # a busy server stamps many writes within one second
        return last[1]
    text = datetime.fromtimestamp(second, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    _last_time = (second, text)
    return text


def format_micro_time(ts: float) -> str:
    """RFC 3339 with microseconds, as metav1.MicroTime serialises (Lease renewTime, events.k8s.io eventTime).
    What ``datetime.fromtimestamp(ts).strftime`` gives, for the price of the seconds' text (a kubelet renews its
    Lease every 10 s: at 5,000 nodes, 500 of these a second)."""
    frac, whole = math.modf(ts)
    micros = round(frac * 1e6)  # half-even, as datetime.fromtimestamp rounds
    second = int(whole) + (micros >= 1_000_000) - (micros < 0)
    return f"{format_time(second)[:-1]}.{micros % 1_000_000:06d}Z"


def parse_time(value: str | None) -> float | None:
    """Epoch seconds of an RFC 3339 timestamp (either precision); None for None/empty/unparsable."""
    if not value:
        return None
    text = value.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None
