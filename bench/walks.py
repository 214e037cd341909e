"""Count what the informer stores hand out: how many cached objects a piece of code walks.

``with StoreWalks() as walks: ...`` counts, for every :class:`Store` read that returns a collection (``list``,
``keys``, ``by_index``, ``index_keys``, iteration), one call and as many objects as it returned. A handler or a
sync whose count grows with the cluster (not with its own objects) is an O(n) walk; counting is exact and does
not depend on the machine's speed, so regression tests assert on it instead of on time.
"""

from __future__ import annotations

import functools
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any

from controller_manager.runtime.informers.store import Store

_COLLECTION_READS = ("list", "keys", "by_index", "index_keys", "index_values", "__iter__")


class StoreWalks:
    """Counts objects handed out by every Store while the block runs (not re-entrant)."""

    def __init__(self) -> None:
        self.calls = 0
        self.objects = 0
        self.by_read: Counter[str] = Counter()
        # objects handed out, by the function that asked (module:qualified name)
        self.by_caller: Counter[str] = Counter()
        self._saved: dict[str, Callable[..., Any]] = {}

    def reset(self) -> None:
        self.calls = 0
        self.objects = 0
        self.by_read.clear()
        self.by_caller.clear()

    def __enter__(self) -> StoreWalks:
        for name in _COLLECTION_READS:
            original = getattr(Store, name)
            self._saved[name] = original
            setattr(Store, name, self._counting(name, original))
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        for name, original in self._saved.items():
            setattr(Store, name, original)
        self._saved.clear()

    def _counting(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        walks = self

        if name == "__iter__":
            @functools.wraps(original)
            def iterate(store: Store) -> Iterator[str]:
                keys = store.keys()  # counted as a keys() walk
                return iter(keys)
            return iterate

        @functools.wraps(original)
        def counted(store: Store, *args: Any, **kwargs: Any) -> Any:
            result = original(store, *args, **kwargs)
            walks.calls += 1
            walks.objects += len(result)
            walks.by_read[name] += len(result)
            caller = sys._getframe(1)
            if caller.f_code.co_name == "iterate":  # a walk by iteration: name the iterating code
                caller = caller.f_back or caller
            walks.by_caller[f"{caller.f_globals.get('__name__')}:{caller.f_code.co_qualname}"] += len(result)
            return result
        return counted
