"""What every printer shares: the column and printer types, and the cell formats of
``pkg/printers/internalversion/printers.go`` (ages, label selectors, container lists, "+ N more...").

A printer reads an object in its stored (v1, defaulted) JSON form; ``now`` is kube-sim's clock, never the
machine's, so ages follow a FakeClock in tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from controller_manager.api import quantity, selectors
from controller_manager.api.meta import parse_time

Obj = dict[str, Any]
Cells = Callable[[Obj, float], list[Any]]


@dataclass(frozen=True, slots=True)
class Column:
    """One ``metav1.TableColumnDefinition``; priority 1 columns are the ones ``-o wide`` adds."""

    name: str
    type: str = "string"
    format: str = ""
    priority: int = 0
    description: str = ""

    def definition(self) -> Obj:
        return {"name": self.name, "type": self.type, "format": self.format, "description": self.description,
                "priority": self.priority}


@dataclass(frozen=True, slots=True)
class Printer:
    """The columns of one kind and how to fill them; ``conditions`` gives a row's ``conditions`` (pods),
    ``order`` sorts a list before printing (flow schemas)."""

    columns: tuple[Column, ...]
    cells: Cells
    conditions: Callable[[Obj], list[Obj] | None] | None = None
    order: Callable[[list[Obj]], list[Obj]] | None = None


NAME = Column("Name", format="name", description="Name of the object.")
AGE = Column("Age", description="Time since the object was created.")
CONTAINERS = Column("Containers", priority=1, description="Names of each container in the template.")
IMAGES = Column("Images", priority=1, description="Images referenced by each container in the template.")
SELECTOR = Column("Selector", priority=1, description="Label selector of the pods.")


def human_duration(seconds: float) -> str:
    """apimachinery's ``duration.HumanDuration``: two or three significant figures, truncating."""
    s = int(seconds)  # toward zero, as Go's int(d.Seconds())
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rem = s % 60
        return f"{minutes}m" if rem == 0 else f"{minutes}m{rem}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        rem = minutes % 60
        return f"{hours}h" if rem == 0 else f"{hours}h{rem}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rem = hours % 24
        return f"{hours // 24}d" if rem == 0 else f"{hours // 24}d{rem}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


def since(timestamp: Any, now: float) -> str:
    """``translateTimestampSince``: the age of a timestamp, ``<unknown>`` for an unset one."""
    ts = parse_time(timestamp) if isinstance(timestamp, str) else None
    return "<unknown>" if ts is None else human_duration(now - ts)


def meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def spec(obj: Obj) -> Obj:
    return obj.get("spec") or {}


def status(obj: Obj) -> Obj:
    return obj.get("status") or {}


def name(obj: Obj) -> str:
    return str(meta(obj).get("name") or "")


def age(obj: Obj, now: float) -> str:
    return since(meta(obj).get("creationTimestamp"), now)


def count(value: Any) -> int:
    """``int64(len(x))`` of an optional list or map."""
    return len(value) if isinstance(value, (list, dict)) else 0


def integer(value: Any) -> int:
    """An int32/int64 field; unset is Go's zero."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def format_labels(labels: Mapping[str, str] | None) -> str:
    """``labels.FormatLabels``: ``a=b,c=d`` sorted by key, ``<none>`` for none."""
    return str(selectors.from_set(labels or {})) or "<none>"


def format_label_selector(selector: Mapping[str, Any] | None) -> str:
    """``metav1.FormatLabelSelector``: the selector's string form, ``<none>`` if empty, ``<error>`` if bad."""
    try:
        return str(selectors.from_label_selector(selector)) or "<none>"
    except selectors.InvalidSelector:
        return "<error>"


def container_cells(containers: Iterable[Obj] | None) -> tuple[str, str]:
    """``layoutContainerCells``: the containers' names and images, each comma-joined."""
    items = list(containers or [])
    return ",".join(str(c.get("name") or "") for c in items), ",".join(str(c.get("image") or "") for c in items)


def pod_template_containers(template: Obj | None) -> list[Obj]:
    return list(spec(template or {}).get("containers") or [])


def list_with_more(items: list[str], total: int, limit: int) -> str:
    """``listWithMoreString``: at most ``limit`` items, then `` + N more...``; ``<unset>`` for none."""
    text = ",".join(items[:limit])
    if total > limit:
        return f"{text} + {total - limit} more..."
    return text or "<unset>"


def bool_ptr(value: Any) -> str:
    """``printBoolPtr``: True / False, ``<unset>`` for nil."""
    if value is None:
        return "<unset>"
    return "True" if value else "False"


def quantity_string(value: Any) -> str:
    """``Quantity.String()`` of a stored quantity (already canonical; unset is ``0``)."""
    if value is None or value == "":
        return "0"
    try:
        return quantity.canonicalize(value)
    except ValueError:
        return str(value)


def int_or_string(value: Any) -> str:
    """``intstr.IntOrString.String()``."""
    return str(value)


def condition_status(conditions: Any, type_: str) -> str | None:
    """The status of the first condition of a type, None if there is none."""
    for c in conditions or []:
        if isinstance(c, dict) and c.get("type") == type_:
            return str(c.get("status") or "")
    return None
