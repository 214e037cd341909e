"""core/v1 Events as kube-sim's actors record them (client-go's event recorder, without aggregation).

Guarantees:
- :func:`event_object` builds the Event a recorder would post about an object: named
  ``<object name>.<hex nanoseconds>`` in the object's namespace (``default`` for cluster-scoped
  objects), ``involvedObject`` pointing at the object's kind, name, uid and resourceVersion, ``source``
  and ``reportingComponent``/``reportingInstance`` naming the component (and host, for a kubelet).
- :func:`record` creates it in-process and swallows any failure: events are best effort, as they
  are for client-go's recorder.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import structlog

from controller_manager.api.meta import format_time, meta
from controller_manager.api.resources import EVENTS

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer

__all__ = ["event_object", "record"]

log = structlog.get_logger("kube-sim.recorder")


def event_object(
    obj: Mapping[str, Any], event_type: str, reason: str, message: str, component: str, now: float, seq: int,
    *, host: str | None = None,
) -> dict[str, Any]:
    """A core/v1 Event about ``obj``, named ``<name>.<hex nanos>`` as client-go's recorder names them."""
    m = meta(obj)
    ts = format_time(now)
    involved: dict[str, Any] = {
        "kind": obj.get("kind", "Pod"),
        "apiVersion": obj.get("apiVersion", "v1"),
        "name": m.get("name", ""),
        "uid": m.get("uid", ""),
        "resourceVersion": m.get("resourceVersion", ""),
    }
    namespace = m.get("namespace") or "default"
    if m.get("namespace"):
        involved["namespace"] = m["namespace"]
    source: dict[str, Any] = {"component": component}
    if host:
        source["host"] = host
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{m.get('name', '')}.{int(now * 1e9) + seq:x}", "namespace": namespace},
        "involvedObject": involved,
        "reason": reason,
        "message": message,
        "type": event_type,
        "source": source,
        "firstTimestamp": ts,
        "lastTimestamp": ts,
        "count": 1,
        "reportingComponent": component,
        "reportingInstance": host or component,
    }


# The manager name each component's writes are recorded under in managedFields: its binary's User-Agent
# prefix (the scheduler reports events as "default-scheduler" but its client is kube-scheduler).
FIELD_MANAGERS = {"default-scheduler": "kube-scheduler"}


def record(api: ApiServer, event: dict[str, Any]) -> None:
    """Create ``event``; a refusal (namespace gone, server closing) is logged at debug level and dropped."""
    component = str((event.get("source") or {}).get("component") or event.get("reportingComponent") or "")
    try:
        api.create(EVENTS, event, namespace=event["metadata"]["namespace"],
                   field_manager=FIELD_MANAGERS.get(component, component))
    except Exception as exc:
        log.debug("event dropped", reason=event.get("reason"), error=str(exc))
