"""The manager's side of leader election: a campaign for the Lease named by the ``--leader-elect-*`` flags.

Guarantees:
- :func:`start_campaign` builds ``runtime.leaderelection``'s elector from the flags (lock namespace/name,
  lease duration, renew deadline, retry period) with upstream's identity (``<hostname>_<uuid>``) and
  release-on-cancel, so a clean stop hands the lease over at once instead of making the next leader wait
  a lease duration. Transitions are recorded as Events on the Lease, as kube-controller-manager does.
- :meth:`Campaign.run` acquires, signals :meth:`Campaign.wait_leading`, then renews until cancelled (which
  releases the lease); losing it raises the runtime's ``leaderelection.LeadershipLost`` (the only one).
- The elector runs on a thread of its own with its own client (``runtime.election_thread``) when the clock is
  the real one, so renewals go out on time however busy the main loop is; :func:`hold_lease` is that run, shared
  with the shard Lease. Under a fake clock (tests) it runs on the caller's loop.
- :meth:`Campaign.health` is upstream's ``leaderElection`` healthz check: failing when this instance
  leads but has not renewed for longer than the lease duration plus 20 s of tolerance.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from controller_manager.client import ApiClient
from controller_manager.clock import Clock, RealClock
from controller_manager.manager.options import Options
from controller_manager.runtime import leaderelection
from controller_manager.runtime.election_thread import ElectionThread
from controller_manager.runtime.events import EventRecorder

HEALTH_TOLERANCE = 20.0  # upstream's leaderelection.NewLeaderHealthzAdaptor(time.Second * 20)


class Closable(Protocol):
    async def close(self) -> None: ...


async def hold_lease(
    elector: leaderelection.LeaderElector, held: asyncio.Event, thread: ElectionThread | None, client: Closable
) -> None:
    """Acquire, set ``held``, renew until cancelled (releasing) or lost (``LeadershipLost``): on ``thread``
    when given, whose client is closed there afterwards (it must not be used from the owner's loop)."""
    if thread is None:
        await elector.acquire()
        held.set()
        await elector.renew_loop()
        return
    thread.start()
    try:
        await thread.run(elector.acquire())
        held.set()
        await thread.run(elector.renew_loop())
    finally:
        try:
            await thread.run(client.close())
        finally:
            thread.stop()


def election_thread(clock: Clock, name: str) -> ElectionThread | None:
    """A thread for a Lease's renewals, or None under a fake clock (whose timers live on the test's loop)."""
    return ElectionThread(name) if isinstance(clock, RealClock) else None


class Campaign:
    def __init__(
        self, elector: leaderelection.LeaderElector, client: Closable, thread: ElectionThread | None = None
    ) -> None:
        self.elector = elector
        self.identity = elector.config.identity
        self._client = client
        self._thread = thread
        self._leading = asyncio.Event()

    async def run(self) -> None:
        # raises LeadershipLost once a renewal misses the renew deadline
        await hold_lease(self.elector, self._leading, self._thread, self._client)

    async def wait_leading(self) -> None:
        await self._leading.wait()

    @property
    def is_leader(self) -> bool:
        return self.elector.is_leader

    def health(self) -> str | None:
        return self.elector.check(HEALTH_TOLERANCE)


def start_campaign(
    client: ApiClient, options: Options, clock: Clock, events: EventRecorder | None = None
) -> Campaign:
    config = leaderelection.LeaderElectionConfig(
        namespace=options.leader_elect_resource_namespace,
        name=options.leader_elect_resource_name,
        identity=leaderelection.default_identity(),
        lease_duration=options.leader_elect_lease_duration,
        renew_deadline=options.leader_elect_renew_deadline,
        retry_period=options.leader_elect_retry_period,
        release_on_cancel=True,
    )
    thread = election_thread(clock, "leader-election")
    elector = leaderelection.LeaderElector(client, config, clock, events=events,
                                           notify=thread.notify if thread is not None else None)
    return Campaign(elector, client, thread)
