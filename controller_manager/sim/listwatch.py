"""How kube-sim's in-process actors (scheduler, kubelets) follow the API: list, then watch, forever.

Guarantees:
- :class:`ListWatch` lists a resource, then watches from the list's resourceVersion; whenever the
  watch ends or is refused (410 Gone, a closed stream, an ERROR event) it lists again and hands the
  handler the difference from what it had delivered before, so no change is lost across a drop.
- The handler is called synchronously, in order, with ``("ADDED" | "MODIFIED" | "DELETED", obj)``;
  an exception in it is logged and the watch goes on (one bad object never stops an actor).
- A watch that ends without delivering anything waits ``retry_seconds`` on the injected clock
  before the next attempt, so a failing server is never polled in a tight loop.
- :func:`status_code` reads the HTTP code from whatever an in-process API call raised.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import structlog

from controller_manager.api.meta import key_of, meta
from controller_manager.api.resources import Resource
from controller_manager.clock import Clock

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer

__all__ = ["ListWatch", "status_code"]

log = structlog.get_logger("kube-sim.listwatch")


def status_code(exc: BaseException) -> int | None:
    """The HTTP code of an API StatusError (``exc.status["code"]``), else None."""
    status = getattr(exc, "status", None)
    if isinstance(status, Mapping):
        code = status.get("code")
        return code if isinstance(code, int) else None
    code = getattr(exc, "code", None)
    return code if isinstance(code, int) else None


class ListWatch:
    """List, then watch from the list's resourceVersion; re-list whenever the watch ends or fails.

    ``handler(type, obj)`` is called synchronously for every change; after a re-list it receives
    the difference from what it saw before. ``synced`` is set once the first list has been delivered.
    """

    def __init__(
        self, api: ApiServer, res: Resource, handler: Callable[[str, dict[str, Any]], None], *,
        clock: Clock, name: str, retry_seconds: float = 0.5,
    ) -> None:
        self._api = api
        self._res = res
        self._handler = handler
        self._clock = clock
        self._name = name
        self._retry = retry_seconds
        self._known: dict[str, dict[str, Any]] = {}  # key -> last object delivered (shared, read-only)
        self.synced = asyncio.Event()

    def _deliver(self, kind: str, obj: dict[str, Any]) -> None:
        try:
            self._handler(kind, obj)
        except Exception:  # a bad object must not stop the watch
            log.exception("handler failed", watch=self._name, key=key_of(obj), event=kind)

    def _relisted(self, items: Iterable[dict[str, Any]]) -> None:
        fresh = {key_of(o): o for o in items}
        for key, gone in self._known.items():
            if key not in fresh:
                self._deliver("DELETED", gone)
        for key, obj in fresh.items():
            seen = self._known.get(key)
            if seen is None:
                self._deliver("ADDED", obj)
            elif meta(seen).get("resourceVersion") != meta(obj).get("resourceVersion"):
                self._deliver("MODIFIED", obj)
        self._known = fresh
        self.synced.set()

    async def run(self) -> None:
        """Follow the resource until cancelled."""
        while True:
            try:
                items, rv = self._api.list(self._res)
            except Exception as exc:
                log.warning("list failed", watch=self._name, error=str(exc))
                await self._clock.sleep(self._retry)
                continue
            self._relisted(items)
            try:
                watcher = self._api.watch(self._res, resource_version=rv)
            except Exception as exc:  # 410 Gone and friends: list again
                log.info("watch refused", watch=self._name, error=str(exc))
                await self._clock.sleep(self._retry)
                continue
            delivered = 0
            try:
                async for kind, obj in watcher:
                    if kind == "ERROR":
                        break
                    if kind not in ("ADDED", "MODIFIED", "DELETED"):
                        continue
                    delivered += 1
                    key = key_of(obj)
                    if kind == "DELETED":
                        self._known.pop(key, None)
                    else:
                        self._known[key] = obj
                    self._deliver(kind, obj)
            except Exception as exc:
                log.info("watch ended", watch=self._name, error=str(exc))
            finally:
                watcher.close()
            await asyncio.sleep(0)
            if not delivered:
                await self._clock.sleep(self._retry)  # a watch that ends at once must not spin the loop
