"""core/v1 Events and events.k8s.io/v1 Events: two views of one store, converted as upstream converts them.

Events are stored in the core/v1 form. The events.k8s.io/v1 view renames fields the way
``pkg/apis/events/v1/conversion.go`` does: regarding <-> involvedObject, note <-> message,
reportingController <-> reportingComponent, deprecatedSource <-> source,
deprecatedFirstTimestamp/LastTimestamp/Count <-> firstTimestamp/lastTimestamp/count; eventTime, series,
action, reason, type, related and reportingInstance keep their names. Conversions are pure.
"""

from __future__ import annotations

import functools
from typing import Any

from controller_manager.sim.apiserver import gojson, schema

Obj = dict[str, Any]

# (events.k8s.io/v1 name, core/v1 name)
_RENAMES = (
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
)
_V1_TO_CORE = dict(_RENAMES)
_CORE_TO_V1 = {core: v1 for v1, core in _RENAMES}


def to_core(event: Obj) -> Obj:
    """An events.k8s.io/v1 Event as the core/v1 Event it is stored as (written out by the store)."""
    body = {_V1_TO_CORE.get(k, k): v for k, v in event.items() if k not in ("kind", "apiVersion", "metadata")}
    return {"kind": "Event", "apiVersion": "v1", "metadata": event.get("metadata", {}), **body}


def to_v1(event: Obj) -> Obj:
    """A stored core/v1 Event as events.k8s.io/v1 shows it, with that type's Go serialization rules."""
    body = {_CORE_TO_V1.get(k, k): v for k, v in event.items() if k not in ("kind", "apiVersion", "metadata")}
    v1 = {"kind": "Event", "apiVersion": "events.k8s.io/v1", "metadata": event.get("metadata", {}), **body}
    return gojson.normalize(v1, _v1_struct())


@functools.cache
def _v1_struct() -> schema.Struct:
    struct = schema.kind("events.k8s.io/v1", "Event")
    assert struct is not None
    return struct
