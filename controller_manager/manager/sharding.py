"""The manager's side of ``--sharding=true``: this replica's shard Lease, and which controllers it shards.

Guarantees:
- :class:`ShardMembership` holds this process's own shard Lease (``<ring>`` label, name = member name, fresh per
  process) through ``runtime.leaderelection``'s elector with the leader-election timings: acquired before any
  sharded controller starts, renewed until cancelled (then released, after the controllers have stopped);
  losing it raises ``LeadershipLost`` exactly like the leader Lease (the process exits 1). Renewed on a thread
  of its own, as the leader Lease (``manager.leader.hold_lease``).
- :data:`SHARDED_CONTROLLERS` are the controllers every replica runs on its own objects (informers selecting its
  shard label for the sharded kinds, ``runtime.sharding.kinds``), with their keys' kinds for the gate. Every
  other enabled controller runs only on the leader, on unfiltered informers, with the sharder beside them.
- Fencing: the sharded controllers and the events of every controller write through a client fenced by the
  shard Lease (no write once its renewal is older than the renew deadline; no sync while a renewal is overdue).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Mapping

from controller_manager.api.resources import (
    CRONJOBS,
    DAEMONSETS,
    DEPLOYMENTS,
    JOBS,
    PODS,
    REPLICASETS,
    STATEFULSETS,
    Resource,
)
from controller_manager.client import ApiClient
from controller_manager.clock import Clock
from controller_manager.manager.leader import election_thread, hold_lease
from controller_manager.manager.options import Options
from controller_manager.runtime import leaderelection
from controller_manager.runtime.sharding.kinds import is_sharded
from controller_manager.runtime.sharding.membership import member_name, shard_label, shard_lease_config

HEALTH_TOLERANCE = 20.0  # as the leader Lease's healthz adaptor

# controller name -> (the kind its queue's keys name, kinds named by key prefixes)
SHARDED_CONTROLLERS: Mapping[str, tuple[Resource, Mapping[str, Resource]]] = {
    "deployment-controller": (DEPLOYMENTS, {}),
    "replicaset-controller": (REPLICASETS, {}),
    "statefulset-controller": (STATEFULSETS, {}),
    "daemonset-controller": (DAEMONSETS, {}),
    "job-controller": (JOBS, {"pod:": PODS}),
    "cronjob-controller": (CRONJOBS, {}),
}


def ring_name(options: Options) -> str:
    return options.sharding_ring_name or options.leader_elect_resource_name


class ShardMembership:
    def __init__(self, client: ApiClient, options: Options, clock: Clock, *, member: str | None = None) -> None:
        self.ring = ring_name(options)
        self.member = member or member_name(socket.gethostname())
        config = shard_lease_config(self.ring, self.member, namespace=options.leader_elect_resource_namespace,
                                    lease_duration=options.leader_elect_lease_duration,
                                    renew_deadline=options.leader_elect_renew_deadline,
                                    retry_period=options.leader_elect_retry_period)
        self._thread = election_thread(clock, "shard-lease")
        self.elector = leaderelection.LeaderElector(client, config, clock,
                                                    notify=self._thread.notify if self._thread is not None else None)
        self._client = client
        self._held = asyncio.Event()

    def selector(self, res: Resource) -> str | None:
        """The label selector of this member's informers for ``res`` (None: not a sharded kind)."""
        return f"{shard_label(self.ring)}={self.member}" if is_sharded(res) else None

    async def run(self) -> None:
        # raises LeadershipLost; cancelled, releases the Lease
        await hold_lease(self.elector, self._held, self._thread, self._client)

    async def wait_held(self) -> None:
        await self._held.wait()

    def health(self) -> str | None:
        return self.elector.check(HEALTH_TOLERANCE)

    def describe(self) -> str:
        return f"shard {self.member} in ring {self.ring}"
