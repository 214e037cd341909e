"""A per-object cache of parsed label selectors, keyed by ``namespace/name`` and resourceVersion.

Controllers that match pods against their owner's ``spec.selector`` on every event (ReplicaSet, Job) parse
each selector once per resourceVersion instead of once per pod.

Guarantees:
- :meth:`SelectorCache.get` returns the parse of ``obj["spec"]["selector"]`` (a ``metav1.LabelSelector`` unless
  another ``parse`` is given, e.g. a ReplicationController's plain map), or None when it is invalid (an invalid
  selector is cached as None too, so it is not re-parsed until the object changes).
- A cached parse is reused only while the object's ``metadata.resourceVersion`` is the one it was parsed at;
  an object without a resourceVersion is parsed every time.
- :meth:`SelectorCache.forget` drops a key (call it when the object is deleted). Synchronous, no locks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from controller_manager.api.meta import key_of, meta
from controller_manager.api.selectors import InvalidSelector, Selector, from_label_selector

__all__ = ["SelectorCache"]


class SelectorCache:
    """Parsed ``spec.selector`` of objects by key, valid for one resourceVersion each."""

    def __init__(self, parse: Callable[[Any], Selector] = from_label_selector) -> None:
        self._parse = parse
        self._entries: dict[str, tuple[object, Selector | None]] = {}

    def get(self, obj: Mapping[str, Any]) -> Selector | None:
        """The object's selector, parsed once per resourceVersion; None if it is invalid."""
        key, rv = key_of(obj), meta(obj).get("resourceVersion")
        cached = self._entries.get(key)
        if cached is not None and rv is not None and cached[0] == rv:
            return cached[1]
        try:
            selector: Selector | None = self._parse((obj.get("spec") or {}).get("selector"))
        except (InvalidSelector, TypeError, ValueError, AttributeError):
            selector = None
        self._entries[key] = (rv, selector)
        return selector

    def forget(self, key: str) -> None:
        """Drop the entry of ``key`` (if any)."""
        self._entries.pop(key, None)
