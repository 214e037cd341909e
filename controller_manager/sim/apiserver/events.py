"""core/v1 Events and events.k8s.io/v1 Events: two views of one store, converted as upstream converts them.

Events are stored in the core/v1 form. The events.k8s.io/v1 view renames fields the way
``pkg/apis/events/v1/conversion.go`` does: regarding <-> involvedObject, note <-> message,
reportingController <-> reportingComponent, deprecatedSource <-> source,
deprecatedFirstTimestamp/LastTimestamp/Count <-> firstTimestamp/lastTimestamp/count; eventTime, series,
action, reason, type, related and reportingInstance keep their names. Conversions are pure.
"""

from __future__ import annotations

from typing import Any

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
_CORE_ORDER = ("involvedObject", "reason", "message", "source", "firstTimestamp", "lastTimestamp", "count", "type",
               "eventTime", "series", "action", "related", "reportingComponent", "reportingInstance")
_V1_ORDER = ("eventTime", "series", "reportingController", "reportingInstance", "action", "reason", "regarding",
             "related", "note", "type", "deprecatedSource", "deprecatedFirstTimestamp", "deprecatedLastTimestamp",
             "deprecatedCount")
_V1_TO_CORE = dict(_RENAMES)
_CORE_TO_V1 = {core: v1 for v1, core in _RENAMES}


def _ordered(fields: Obj, order: tuple[str, ...]) -> Obj:
    out = {k: fields[k] for k in order if k in fields}
    out.update({k: v for k, v in fields.items() if k not in out})
    return out


def to_core(event: Obj) -> Obj:
    """An events.k8s.io/v1 Event as the core/v1 Event it is stored as."""
    body = {_V1_TO_CORE.get(k, k): v for k, v in event.items() if k not in ("kind", "apiVersion")}
    return normalize_core(body)


def to_v1(event: Obj) -> Obj:
    """A stored core/v1 Event as events.k8s.io/v1 shows it."""
    body = {}
    for key, value in event.items():
        if key in ("kind", "apiVersion", "metadata"):
            continue
        name = _CORE_TO_V1.get(key, key)
        if value in (None, "", {}) and name not in ("eventTime",):
            continue  # omitempty on the events.k8s.io side
        if name == "deprecatedCount" and value == 0:
            continue
        body[name] = value
    body.setdefault("eventTime", None)
    return {"kind": "Event", "apiVersion": "events.k8s.io/v1", "metadata": event.get("metadata", {}),
            **_ordered(body, _V1_ORDER)}


def normalize_core(event: Obj) -> Obj:
    """A core/v1 Event with the fields Go always serialises present (zero times as null)."""
    body = {k: v for k, v in event.items() if k not in ("kind", "apiVersion", "metadata")}
    body.setdefault("involvedObject", {})
    body.setdefault("source", {})
    for key in ("firstTimestamp", "lastTimestamp", "eventTime"):
        body.setdefault(key, None)
    body.setdefault("reportingComponent", "")
    body.setdefault("reportingInstance", "")
    return {"kind": "Event", "apiVersion": "v1", "metadata": event.get("metadata", {}), **_ordered(body, _CORE_ORDER)}
