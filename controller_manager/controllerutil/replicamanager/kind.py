"""What distinguishes one kind the replica manager serves from another (upstream's ``NewBaseController`` arguments
and the RC<->RS conversion of ``pkg/controller/replication/conversion.go``, as data).

Guarantees:
- A :class:`ReplicaKind` is immutable and names everything kind-specific: the resource (its group, version and
  kind go into owner references, events' involvedObject and the status write), the event source component,
  how ``spec.selector`` is read, whether ``status.terminatingReplicas`` exists, and the log name.
- :func:`label_selector` reads a ``metav1.LabelSelector`` (ReplicaSet); :func:`map_selector` reads a plain
  ``map[string]string`` as upstream's conversion does: absent -> matches nothing, else ``matchLabels``
  (keys and values validated the same way).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from controller_manager.api.resources import Resource
from controller_manager.api.selectors import Selector, from_label_selector

__all__ = ["ReplicaKind", "label_selector", "map_selector"]


def label_selector(selector: Any) -> Selector:
    """A ReplicaSet's ``spec.selector`` (``metav1.LabelSelectorAsSelector``)."""
    return from_label_selector(selector)


def map_selector(selector: Any) -> Selector:
    """A ReplicationController's ``spec.selector``: the map becomes ``matchLabels``; None matches nothing."""
    if selector is None:
        return from_label_selector(None)
    if not isinstance(selector, Mapping):
        raise TypeError(f"selector must be a map of strings, got {type(selector).__name__}")
    return from_label_selector({"matchLabels": selector})


@dataclass(frozen=True)
class ReplicaKind:
    """One kind of pod-replica owner: ReplicaSet (apps/v1) or ReplicationController (v1)."""

    resource: Resource
    # The event source component and controller name: "replicaset-controller", "replication-controller".
    component: str
    # Parses the raw ``spec.selector``; raises (InvalidSelector, TypeError, ValueError) when it is invalid.
    parse_selector: Callable[[Any], Selector]
    # ReplicaSetControllerFeatures.EnableStatusTerminatingReplicas: the kind's status has terminatingReplicas.
    status_terminating_replicas: bool
    # structlog logger name of the status helpers.
    logger_name: str

    @property
    def kind(self) -> str:
        return self.resource.kind
