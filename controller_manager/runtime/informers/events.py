"""What informer handlers receive: one small frozen dataclass per kind of change.

Guarantees:
- ``Added.obj``, ``Updated.old``/``Updated.new`` and ``Deleted.obj`` are the cached objects themselves (after the
  informer's transform); they are shared with the cache and must never be mutated.
- ``Updated(old=o, new=o)`` with ``old is new`` is a periodic resync, not a change on the server.
- ``Deleted(final_state_unknown=True)`` means the object vanished while the watch was down (found missing by a
  re-list): ``obj`` is the last state the cache knew, not the object's final state on the server. This is
  client-go's ``DeletedFinalStateUnknown`` tombstone, flattened into a flag.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Added:
    obj: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Updated:
    old: dict[str, Any]
    new: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Deleted:
    obj: dict[str, Any]
    final_state_unknown: bool = False


Event = Added | Updated | Deleted

# Handlers run synchronously on the event loop, after the store shows the change; they only enqueue keys.
Handler = Callable[[Event], None]
