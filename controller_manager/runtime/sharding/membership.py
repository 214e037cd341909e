"""Who is in the ring: the label keys sharding writes, each member's shard Lease, and which Leases are live.

Label and annotation keys (``<ring>`` is ``--sharding-ring-name``, by default the leader Lease's name):
- ``controller-manager.io/ring: <ring>`` on every shard Lease: the sharder lists the ring's members by it.
- ``shard.controller-manager.io/<ring>: <member>`` on every sharded object: the member whose informers see it
  (roots are labelled by the sharder; what a controller creates copies its owner's label at creation).
- ``drain.controller-manager.io/<ring>: "true"`` on a root that is moving between two live members: its owner
  stops syncing it and acknowledges by removing both labels; only then does the sharder label the new owner.
- ``sharding.controller-manager.io/handover: "<plural>=<resourceVersion>,..."`` on a root, written with its
  new shard label: the resourceVersions of the last relabelled dependents per kind, which the new owner's
  informers must have reached before it syncs anything of that root.
- ``sharding.controller-manager.io/previous-shard: <member>`` on a root, written by the member acknowledging its
  drain: the sharder finds the dependents to relabel by that member's label.
- ``sharding.controller-manager.io/moving-to: <member>`` on a root while the sharder relabels its dependents for
  that member: a sharder that takes over after a crash in between finds them by that label too.

Liveness (:class:`MembershipTracker`) is judged as leader election judges another holder: a member is live
while its Lease names itself and its record has changed within ``leaseDurationSeconds`` on the *observer's*
monotonic clock (timestamps in the Lease are never compared with the local clock). A member whose Lease
stops changing for that long is ``expired``: the sharder then writes itself into the Lease
(:data:`SHARDER_IDENTITY`), which the member's next renewal finds, so the member has lost it for good
(``LeadershipLost``) and was fenced from writing since its renew deadline passed. Only then is it ``dead``
and its objects move. A Lease released on a clean stop (empty holder) is ``dead`` at once: its member
stopped every sync before releasing it.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from controller_manager.runtime.leaderelection import LeaderElectionConfig, LeaderElectionRecord

RING_LABEL = "controller-manager.io/ring"
SHARD_LABEL_PREFIX = "shard.controller-manager.io/"
DRAIN_LABEL_PREFIX = "drain.controller-manager.io/"
HANDOVER_ANNOTATION = "sharding.controller-manager.io/handover"
PREVIOUS_ANNOTATION = "sharding.controller-manager.io/previous-shard"  # written by a drain's acknowledgement
MOVING_ANNOTATION = "sharding.controller-manager.io/moving-to"  # an assignment in progress
SHARDER_IDENTITY = "controller-manager.io/sharder"  # written into an expired member's Lease to fence it
MEMBER_NAME_MAX = 63  # a label value


def shard_label(ring: str) -> str:
    return SHARD_LABEL_PREFIX + ring


def drain_label(ring: str) -> str:
    return DRAIN_LABEL_PREFIX + ring


def member_name(hostname: str, suffix: str | None = None) -> str:
    """A fresh member name: a label value and a Lease name (``<host>-<8 hex>``; new for every process, so a
    restarted replica joins as a new member and never inherits a state it did not see)."""
    host = re.sub(r"[^a-z0-9-]+", "-", hostname.lower()).strip("-")[:40] or "member"
    return f"{host}-{suffix or secrets.token_hex(4)}"


def shard_lease_config(ring: str, member: str, *, namespace: str, lease_duration: float, renew_deadline: float,
                       retry_period: float) -> LeaderElectionConfig:
    """The member's own Lease, renewed by the same elector as the leader Lease. It is never re-created once
    held: a vanished or taken-over shard Lease is lost, as a leader Lease held by another is."""
    return LeaderElectionConfig(namespace=namespace, name=member, identity=member, lease_duration=lease_duration,
                                renew_deadline=renew_deadline, retry_period=retry_period, release_on_cancel=True,
                                labels={RING_LABEL: ring}, recreate_after_loss=False)


class MemberState(Enum):
    READY = "ready"  # renewing: in the ring
    EXPIRED = "expired"  # stopped renewing: out of the ring, but its objects wait until the sharder fenced it
    DEAD = "dead"  # released, or fenced by the sharder: its objects move at once


@dataclass(slots=True)
class _Observed:
    record: LeaderElectionRecord
    since: float  # observer's monotonic time the record last changed


class MembershipTracker:
    """The ring's members as one observer (the sharder) sees their Leases; times are the observer's clock."""

    def __init__(self, ring: str) -> None:
        self.ring = ring
        self._members: dict[str, _Observed] = {}

    def observe(self, lease: Mapping[str, Any], now: float) -> None:
        """A Lease of this ring was added or changed (others are ignored)."""
        metadata = lease.get("metadata") or {}
        if (metadata.get("labels") or {}).get(RING_LABEL) != self.ring:
            return
        name = str(metadata.get("name") or "")
        record = LeaderElectionRecord.from_spec(lease.get("spec"))
        seen = self._members.get(name)
        if seen is None or seen.record != record:
            self._members[name] = _Observed(record, now)

    def forget(self, name: str) -> None:
        """The member's Lease was deleted."""
        self._members.pop(name, None)

    def state(self, name: str, now: float) -> MemberState:
        seen = self._members.get(name)
        if seen is None:
            return MemberState.DEAD  # no Lease: nothing can renew it into being (shard Leases are not re-created)
        holder = seen.record.holder_identity
        if holder != name:
            return MemberState.DEAD  # released ("") or taken over by the sharder
        if now - seen.since < seen.record.lease_duration_seconds:
            return MemberState.READY
        return MemberState.EXPIRED

    def names(self) -> list[str]:
        return sorted(self._members)

    def live(self, now: float) -> frozenset[str]:
        """The members in the ring now."""
        return frozenset(n for n in self._members if self.state(n, now) is MemberState.READY)

    def expired(self, now: float) -> list[str]:
        """Members to fence (write :data:`SHARDER_IDENTITY` into their Lease) before their objects move."""
        return sorted(n for n in self._members if self.state(n, now) is MemberState.EXPIRED)

    def dead_for(self, name: str, now: float) -> float | None:
        """Seconds since a dead member's Lease last changed (its release, or the sharder's takeover); None if it is
        not dead or has no Lease."""
        seen = self._members.get(name)
        if seen is None or self.state(name, now) is not MemberState.DEAD:
            return None
        return now - seen.since

    def next_change(self, now: float) -> float | None:
        """Seconds until a live member would expire if its Lease stays as it is (when to look again)."""
        waits = [seen.since + seen.record.lease_duration_seconds - now for n, seen in self._members.items()
                 if self.state(n, now) is MemberState.READY]
        return max(0.0, min(waits)) if waits else None
