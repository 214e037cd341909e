"""The factory that hands every controller the same informer per resource, and runs them all.

Guarantees (client-go ``informers.SharedInformerFactory``):
- ``informer(res, metadata_only=...)`` returns one informer per (group/version/plural, metadata_only), however
  many times and by whomever it is asked; ``existing(res)`` returns it only if it was already made. Extra
  indexers are added to that one informer; asking for it with a different transform is an error (the cache
  cannot hold two shapes).
- ``run()`` runs every informer made so far, and every informer made while it runs, each as a named task
  (``informer:<group/version/plural>``) in one ``asyncio.TaskGroup``; cancelling ``run()`` stops and awaits them.
- ``selector_for(res)`` (optional) gives the label selector every informer of ``res`` lists and watches with
  (None: everything): a shard member's factory sees only objects labelled with its shard.
- ``wait_for_cache_sync(timeout)`` is True once every informer made so far has delivered its first list, False
  if the timeout (on the injected clock) passes first.
- ``serve_from(wider)`` (ours, for ``--sharding``'s leader): every informer of this factory for which ``wider``
  has an unfiltered informer of the same resource, shape and transform (made before the call), and every such
  informer this factory makes later, is served from that informer's cache through its own label selector
  (``SharedInformer.follow``; view.py) instead of a list+watch of its own: one copy of each object per process.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping

from controller_manager.api.resources import Resource
from controller_manager.clock import Clock, RealClock

from .informer import SharedInformer
from .reflector import ListWatchClient
from .store import IndexFunc
from .transform import Transform


class SharedInformerFactory:
    def __init__(
        self,
        client: ListWatchClient,
        clock: Clock | None = None,
        resync_period: float = 0.0,
        *,
        rng: random.Random | None = None,
        watch_list: bool = True,
        selector_for: Callable[[Resource], str | None] | None = None,
    ) -> None:
        self._client = client
        # The WatchListClient feature gate (on by default, as in client-go 1.35+): informers list through a watch
        # when the client supports it.
        self._watch_list = watch_list
        self._selector_for = selector_for
        self._clock: Clock = clock or RealClock()
        self._resync_period = resync_period
        self._rng = rng or random.Random()
        self._informers: dict[tuple[str, str, str, bool], SharedInformer] = {}
        self._task_group: asyncio.TaskGroup | None = None
        self._wider: SharedInformerFactory | None = None

    def informer(
        self,
        res: Resource,
        *,
        metadata_only: bool = False,
        transform: Transform | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
    ) -> SharedInformer:
        key = (res.group, res.version, res.plural, metadata_only)
        informer = self._informers.get(key)
        if informer is None:
            informer = SharedInformer(
                self._client,
                res,
                clock=self._clock,
                metadata_only=metadata_only,
                transform=transform,
                indexers=indexers,
                resync_period=self._resync_period,
                rng=random.Random(self._rng.random()),
                watch_list=self._watch_list,
                label_selector=self._selector_for(res) if self._selector_for is not None else None,
            )
            self._informers[key] = informer
            self._offer_source(informer)
            if self._task_group is not None:
                self._start(self._task_group, informer)
            return informer
        if transform is not None and transform is not informer.transform:
            raise ValueError(f"informer {informer.name} already exists with another transform")
        if indexers:
            informer.add_indexers(indexers)
        return informer

    def existing(self, res: Resource, *, metadata_only: bool = False) -> SharedInformer | None:
        """The informer already made for ``res``, if any; never makes one."""
        return self._informers.get((res.group, res.version, res.plural, metadata_only))

    def informers(self) -> list[SharedInformer]:
        return list(self._informers.values())

    def serve_from(self, wider: SharedInformerFactory) -> int:
        """Serve this factory's informers from ``wider``'s caches where it has them (see the guarantees);
        returns how many informers were offered a source."""
        if wider is self:
            raise ValueError("a factory cannot serve its informers from itself")
        self._wider = wider
        return sum(self._offer_source(informer) for informer in self._informers.values())

    def _offer_source(self, informer: SharedInformer) -> bool:
        wider = self._wider
        if wider is None:
            return False
        source = wider.existing(informer.resource, metadata_only=informer.metadata_only)
        if source is None or source.label_selector is not None or source.transform is not informer.transform:
            return False
        informer.follow(source)
        return True

    async def run(self) -> None:
        """Run every informer (made before or during the run) until cancelled."""
        if self._task_group is not None:
            raise RuntimeError("SharedInformerFactory.run() is already running")
        try:
            async with asyncio.TaskGroup() as tg:
                self._task_group = tg
                for informer in self._informers.values():
                    self._start(tg, informer)
                await asyncio.get_running_loop().create_future()  # until cancelled
        finally:
            self._task_group = None

    async def wait_for_cache_sync(self, timeout: float | None = None) -> bool:
        informers = list(self._informers.values())
        if all(i.has_synced for i in informers):
            return True
        if timeout is not None and timeout <= 0:
            return False

        async def all_synced() -> None:
            for informer in informers:
                await informer.wait_for_sync()

        waiter = asyncio.create_task(all_synced(), name="wait-for-cache-sync")
        expired: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def expire() -> None:
            if not expired.done():
                expired.set_result(None)

        handle = self._clock.call_later(timeout, expire) if timeout is not None else None
        try:
            await asyncio.wait((waiter, expired), return_when=asyncio.FIRST_COMPLETED)
        finally:
            if handle is not None:
                handle.cancel()
            if not expired.done():
                expired.cancel()
            if not waiter.done():
                waiter.cancel()
                await asyncio.gather(waiter, return_exceptions=True)
        return all(i.has_synced for i in informers)

    @staticmethod
    def _start(tg: asyncio.TaskGroup, informer: SharedInformer) -> None:
        tg.create_task(informer.run(), name=f"informer:{informer.name}")
