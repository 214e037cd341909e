"""The manager's side of leader election: a campaign for the Lease named by the ``--leader-elect-*`` flags.

Guarantees:
- :func:`start_campaign` builds ``runtime.leaderelection``'s elector from the flags (lock namespace/name,
  lease duration, renew deadline, retry period) with upstream's identity (``<hostname>_<uuid>``) and
  release-on-cancel, so a clean stop hands the lease over at once instead of making the next leader wait
  a lease duration. Transitions are recorded as Events on the Lease, as kube-controller-manager does.
- :meth:`Campaign.run` acquires, signals :meth:`Campaign.wait_leading`, then renews until cancelled (which
  releases the lease); losing it raises the runtime's ``leaderelection.LeadershipLost`` (the only one).
- :meth:`Campaign.health` is upstream's ``leaderElection`` healthz check: failing when this instance
  leads but has not renewed for longer than the lease duration plus 20 s of tolerance.
"""

from __future__ import annotations

import asyncio

from controller_manager.client import ApiClient
from controller_manager.clock import Clock
from controller_manager.manager.options import Options
from controller_manager.runtime import leaderelection
from controller_manager.runtime.events import EventRecorder

HEALTH_TOLERANCE = 20.0  # upstream's leaderelection.NewLeaderHealthzAdaptor(time.Second * 20)


class Campaign:
    def __init__(self, elector: leaderelection.LeaderElector) -> None:
        self.elector = elector
        self.identity = elector.config.identity
        self._leading = asyncio.Event()

    async def run(self) -> None:
        await self.elector.acquire()
        self._leading.set()
        await self.elector.renew_loop()  # raises LeadershipLost once a renewal misses the renew deadline

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
    return Campaign(leaderelection.LeaderElector(client, config, clock, events=events))
