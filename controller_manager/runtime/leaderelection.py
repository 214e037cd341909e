"""Leader election on a coordination.k8s.io/v1 Lease: client-go's ``tools/leaderelection`` (LeaseLock).

Guarantees:
- ``await acquire()`` tries to take or renew the Lease at once, then every ``retry_period`` jittered by
  up to 1.2x more (client-go's JitterFactor), and returns once this process holds it.
- ``await renew_loop()`` renews every ``retry_period``; when a renewal has not succeeded within
  ``renew_deadline`` (each try bounded by that deadline too), or at once when a renewal finds the Lease
  held by another identity, it raises ``LeadershipLost``. Cancelled, it
  releases the Lease if ``release_on_cancel``.
- Another holder's Lease is taken over only once *this process* has watched its record stay unchanged
  for the Lease's ``leaseDurationSeconds`` (timed on the local monotonic clock); the record's own
  timestamps are never compared with the local clock, so clock skew between hosts does not matter.
- Writes are optimistic: an update carries the resourceVersion last read, so a 409 Conflict means someone
  else wrote first and this round is lost. A missing Lease is created (AlreadyExists: someone else won).
  ``leaseTransitions`` is bumped whenever the holder changes; renewals keep ``acquireTime``.
- ``release()`` (only while this process holds the Lease) writes ``holderIdentity: ""``,
  ``leaseDurationSeconds: 1`` and fresh times, so a candidate takes over on its next try. A 409 (a renewal
  cancelled in flight had already been applied, so the resourceVersion is stale) is answered by reading the
  Lease again and retrying while it still names this process.
- Fencing, which client-go lacks (a leader paused past its lease wakes up and acts for up to its renew
  deadline beside the new leader): judged on the local monotonic clock from when the last successful
  acquire or renewal was *sent* (no candidate can have taken over earlier than a lease duration after that),
  :meth:`LeaderElector.may_write` turns false ``renew_deadline`` seconds after it, and
  :meth:`LeaderElector.intake_open` (may a worker start a new sync?) as soon as a renewal is overdue
  (``2 * retry_period`` without one) until the next one succeeds. A process woken from a pause longer than
  either finds both closed before its first write, then loses the Lease on its next renewal attempt.
- The elector may run on a thread of its own (``runtime.election_thread``, so a busy loop cannot delay its
  renewals): whatever must happen on its owner's loop (waking :meth:`LeaderElector.wait_for_intake`, Events,
  ``on_new_leader``) goes through ``notify``; :meth:`may_write` and :meth:`intake_open` only read two fields.
- ``leader_election_master_status{name}`` is 1 while leading, 0 otherwise; ``on_new_leader`` is called
  whenever the observed holder changes; transitions are logged (and recorded as Lease events if given a
  recorder, as kube-controller-manager does: "<identity> became leader").
"""

from __future__ import annotations

import asyncio
import random
import socket
import uuid
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar

import structlog
from prometheus_client import Counter, Gauge

from controller_manager.api.meta import format_micro_time
from controller_manager.api.resources import LEASES, Resource
from controller_manager.client.errors import ApiError, Conflict, NotFound
from controller_manager.clock import Clock
from controller_manager.runtime.events import EventRecorder

JITTER_FACTOR = 1.2
RELEASE_ATTEMPTS = 3

MASTER_STATUS = Gauge(
    "leader_election_master_status",
    "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. "
    "'name' is the string used to identify the lease. Please make sure to group by name.",
    ["name"],
)
SLOWPATH_TOTAL = Counter(
    "leader_election_slowpath_total",
    "Total number of slow path exercised in renewing leader leases. 'name' is the string used to identify the "
    "lease. Please make sure to group by name.",
    ["name"],
)

T = TypeVar("T")


class LeadershipLost(Exception):
    """The Lease could not be renewed within the renew deadline: stop acting as leader now."""


class LeaseClient(Protocol):
    """What the elector needs from the API client (``controller_manager.client.ApiClient`` has it)."""

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]: ...

    async def create(self, res: Resource, obj: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]: ...

    async def update(self, res: Resource, obj: Mapping[str, Any]) -> dict[str, Any]: ...


def default_identity() -> str:
    """``<hostname>_<uuid4>``, as kube-controller-manager builds its lock identity."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass(frozen=True)
class LeaderElectionConfig:
    namespace: str
    name: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    release_on_cancel: bool = True
    # Labels the Lease carries (written at creation and kept on every update): shard Leases name their ring.
    labels: Mapping[str, str] = field(default_factory=dict)
    # False: once this elector has held the Lease, finding it gone is a loss, never a reason to create it again
    # (a shard Lease the sharder deleted must not come back under a member that missed the hand-over).
    recreate_after_loss: bool = True

    def __post_init__(self) -> None:
        # client-go's NewLeaderElector checks, same messages.
        if self.lease_duration <= self.renew_deadline:
            raise ValueError("leaseDuration must be greater than renewDeadline")
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise ValueError("renewDeadline must be greater than retryPeriod*JitterFactor")
        if self.lease_duration < 1:
            raise ValueError("leaseDuration must be greater than zero")
        if self.retry_period <= 0:
            raise ValueError("retryPeriod must be greater than zero")
        if not self.identity:
            raise ValueError("Lock identity is empty")


@dataclass(frozen=True, slots=True)
class LeaderElectionRecord:
    """The Lease spec fields leader election reads and writes (times kept as the API's strings)."""

    holder_identity: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str = ""
    renew_time: str = ""
    leader_transitions: int = 0

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any] | None) -> LeaderElectionRecord:
        spec = spec or {}
        return cls(
            holder_identity=spec.get("holderIdentity") or "",
            lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=spec.get("acquireTime") or "",
            renew_time=spec.get("renewTime") or "",
            leader_transitions=int(spec.get("leaseTransitions") or 0),
        )

    def to_spec(self) -> dict[str, Any]:
        return {
            "holderIdentity": self.holder_identity,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "acquireTime": self.acquire_time,
            "renewTime": self.renew_time,
            "leaseTransitions": self.leader_transitions,
        }


class LeaderElector:
    """Campaigns for, holds and releases one Lease on behalf of ``config.identity``."""

    def __init__(
        self,
        client: LeaseClient,
        config: LeaderElectionConfig,
        clock: Clock,
        *,
        on_new_leader: Callable[[str], None] | None = None,
        events: EventRecorder | None = None,
        rng: random.Random | None = None,
        notify: Callable[[Callable[[], None]], None] | None = None,
    ) -> None:
        self.config = config
        self._client = client
        self._clock = clock
        self._on_new_leader = on_new_leader
        self._events = events
        self._rng = rng or random.Random()
        # Runs a callback on the owner's event loop: the elector may run on a thread of its own
        # (runtime.election_thread) while intake waiters, the event recorder and the hooks live on the owner's.
        self._notify = notify or _at_once
        self._lease: dict[str, Any] | None = None  # last Lease read or written (carries resourceVersion)
        self._observed = LeaderElectionRecord()
        self._observed_time = float("-inf")  # local monotonic time the observed record last changed
        self._reported_leader = ""
        self._leading = False
        self._renew_sent = float("-inf")  # monotonic time the last successful acquire/renew was sent
        self._renewed = asyncio.Event()  # set (and replaced) on every successful acquire/renew
        self._describe = f"{config.namespace}/{config.name}"
        self._log = structlog.get_logger("controller_manager.leaderelection").bind(
            lease=self._describe, identity=config.identity
        )
        MASTER_STATUS.labels(config.name).set(0)

    # -- public surface -----------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        """True from a successful ``acquire`` until the Lease is lost or released."""
        return self._leading

    @property
    def leader(self) -> str:
        """The holder identity last observed ("" if none yet)."""
        return self._observed.holder_identity

    def may_write(self) -> bool:
        """Whether this process may still send writes as the leader: it leads and its last successful
        renewal was sent less than ``renew_deadline`` seconds ago (the rest of the lease duration is the
        margin for writes already in flight)."""
        return self._leading and self._clock.monotonic() - self._renew_sent < self.config.renew_deadline

    def intake_open(self) -> bool:
        """Whether a worker may start a new sync: leading and the last renewal is not overdue."""
        return self._leading and self._clock.monotonic() - self._renew_sent < 2 * self.config.retry_period

    async def wait_for_intake(self) -> None:
        """Return once :meth:`intake_open` (at once when it is); waits for the next successful renewal."""
        while not self.intake_open():
            await self._renewed.wait()

    async def acquire(self) -> None:
        """Return once this process holds the Lease (tries at once, then every jittered retry period)."""
        self._log.info(f"attempting to acquire leader lease {self._describe}...")
        while True:
            succeeded = await self.try_acquire_or_renew()
            self._maybe_report_transition()
            if succeeded:
                self._set_leading(True)
                self._record_event("became leader")
                self._log.info(f"successfully acquired lease {self._describe}")
                return
            self._log.debug(f"failed to acquire lease {self._describe}", holder=self._observed.holder_identity)
            period = self.config.retry_period
            await self._clock.sleep(period + self._rng.random() * JITTER_FACTOR * period)

    async def renew_loop(self) -> None:
        """Keep renewing; raise ``LeadershipLost`` once a renewal misses the renew deadline."""
        try:
            while True:
                renewed = await self._renew_within(self.config.renew_deadline)
                self._maybe_report_transition()
                if not renewed:
                    self._set_leading(False)
                    self._record_event("stopped leading")
                    self._log.error(f"failed to renew lease {self._describe}: timed out waiting for the condition")
                    raise LeadershipLost(f"failed to renew lease {self._describe} within {self.config.renew_deadline}s")
                self._log.debug(f"successfully renewed lease {self._describe}")
                await self._clock.sleep(self.config.retry_period)
        except asyncio.CancelledError:
            if self.config.release_on_cancel and self._leading:
                await self._bounded(self.release(), self.config.renew_deadline)
            raise

    async def release(self) -> bool:
        """Give the Lease up if this process holds it; True when it no longer holds it."""
        if not self._observed_is_me() or self._lease is None:
            return True
        for attempt in range(RELEASE_ATTEMPTS):
            stamp = format_micro_time(self._clock.now())
            record = LeaderElectionRecord("", 1, stamp, stamp, self._observed.leader_transitions)
            try:
                await self._update(record)
                break
            except Conflict as err:
                # Our resourceVersion is stale (e.g. a renewal cancelled in flight had been applied): read
                # the Lease again, and release it only if it still names us.
                self._log.info("Failed to release lock, reading it again", error=str(err), attempt=attempt + 1)
                try:
                    self._lease = await self._client.get(LEASES, self.config.name, self.config.namespace)
                except (ApiError, OSError, TimeoutError) as read_err:
                    self._log.error("Failed to release lock", error=str(read_err))
                    return False
                current = LeaderElectionRecord.from_spec(self._lease.get("spec"))
                if current.holder_identity != self.config.identity:
                    self._set_observed(current)
                    self._stop_leading()
                    return True
            except (ApiError, OSError, TimeoutError) as err:
                self._log.error("Failed to release lock", error=str(err))
                return False
        else:
            self._log.error("Failed to release lock: the Lease kept changing", attempts=RELEASE_ATTEMPTS)
            return False
        self._set_observed(record)
        self._stop_leading()
        self._log.info(f"released lease {self._describe}")
        return True

    def _stop_leading(self) -> None:
        if self._leading:
            self._set_leading(False)
            self._record_event("stopped leading")

    def check(self, max_tolerable_expired_lease: float) -> str | None:
        """Healthz: None when fine; a reason when leading but not renewed for lease duration + tolerance."""
        if not self._leading:
            return None
        if self._clock.monotonic() - self._observed_time > self.config.lease_duration + max_tolerable_expired_lease:
            return f"failed election to renew leadership on lease {self.config.name}"
        return None

    async def try_acquire_or_renew(self) -> bool:
        """One round of client-go's tryAcquireOrRenew; True when this process holds the Lease after it."""
        stamp = format_micro_time(self._clock.now())
        record = LeaderElectionRecord(self.config.identity, int(self.config.lease_duration), stamp, stamp, 0)

        # 1. The leader updates optimistically, assuming the record it saw last is still current.
        if self._observed_is_me() and self._lease_valid() and self._lease is not None:
            optimistic = replace(
                record,
                acquire_time=self._observed.acquire_time,
                leader_transitions=self._observed.leader_transitions,
            )
            sent = self._clock.monotonic()
            try:
                await self._update(optimistic)
            except (ApiError, OSError, TimeoutError) as err:
                self._log.info("Failed to update lock optimistically, falling back to slow path", error=str(err))
            else:
                self._set_observed(optimistic)
                self._mark_renewed(sent)
                return True

        # 2. Read the Lease, or create it.
        try:
            lease = await self._client.get(LEASES, self.config.name, self.config.namespace)
        except NotFound:
            if self._lease is not None and not self.config.recreate_after_loss:
                self._log.info(f"lease {self._describe} is gone and is not created again")
                self._set_observed(LeaderElectionRecord())
                return False
            sent = self._clock.monotonic()
            try:
                self._lease = await self._client.create(LEASES, self._new_lease(record), self.config.namespace)
            except (ApiError, OSError, TimeoutError) as err:
                self._log.info("error initially creating leader election record", error=str(err))
                return False
            self._set_observed(record)
            self._mark_renewed(sent)
            return True
        except (ApiError, OSError, TimeoutError) as err:
            self._log.info(f"error retrieving resource lock {self._describe}", error=str(err))
            return False
        self._lease = lease

        # 3. Only a change in the record restarts the clock on someone else's lease.
        current = LeaderElectionRecord.from_spec(lease.get("spec"))
        if current != self._observed:
            self._set_observed(current)
        if current.holder_identity and self._lease_valid() and not self._observed_is_me():
            self._log.debug(f"lock is held by {current.holder_identity} and has not yet expired")
            return False

        # 4. Take it over, or renew it through the slow path.
        if self._observed_is_me():
            record = replace(record, acquire_time=current.acquire_time, leader_transitions=current.leader_transitions)
            SLOWPATH_TOTAL.labels(self.config.name).inc()
        else:
            record = replace(record, leader_transitions=current.leader_transitions + 1)
        sent = self._clock.monotonic()
        try:
            await self._update(record)
        except (ApiError, OSError, TimeoutError) as err:
            self._log.info("Failed to update lock", error=str(err))
            return False
        self._set_observed(record)
        self._mark_renewed(sent)
        return True

    # -- internals -----------------------------------------------------------------------------------------

    async def _renew_within(self, deadline: float) -> bool:
        """Try to renew at once, then every retry period, until ``deadline`` seconds have passed."""
        give_up_at = self._clock.monotonic() + deadline
        while True:
            remaining = give_up_at - self._clock.monotonic()
            if remaining <= 0:
                return False
            if await self._bounded(self.try_acquire_or_renew(), remaining):
                return True
            if self._observed.holder_identity not in ("", self.config.identity):
                return False  # the Lease names someone else: lost for certain, no need to wait for the deadline
            remaining = give_up_at - self._clock.monotonic()
            if remaining <= 0:
                return False
            await self._clock.sleep(min(self.config.retry_period, remaining))

    async def _bounded(self, work: Coroutine[Any, Any, T], timeout: float) -> T | None:
        """``work``'s result, or None if ``timeout`` seconds pass first on the clock (work is then cancelled)."""
        task = asyncio.create_task(work, name=f"leaderelection-{self.config.name}-attempt")
        timer = asyncio.create_task(self._clock.sleep(timeout), name=f"leaderelection-{self.config.name}-deadline")
        try:
            await asyncio.wait({task, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            if not task.done():
                task.cancel()
            await asyncio.gather(task, timer, return_exceptions=True)
        if task.cancelled():
            return None
        error = task.exception()
        if error is not None:
            self._log.error("leader election attempt failed", error=repr(error))
            return None
        return task.result()

    async def _update(self, record: LeaderElectionRecord) -> None:
        assert self._lease is not None
        lease = {**self._lease, "spec": record.to_spec()}
        labels = self.config.labels
        if labels:
            metadata = lease.get("metadata") or {}
            current = metadata.get("labels") or {}
            if any(current.get(k) != v for k, v in labels.items()):
                lease["metadata"] = {**metadata, "labels": {**current, **labels}}
        self._lease = await self._client.update(LEASES, lease)

    def _new_lease(self, record: LeaderElectionRecord) -> dict[str, Any]:
        return {
            "apiVersion": LEASES.api_version,
            "kind": LEASES.kind,
            "metadata": {"name": self.config.name, "namespace": self.config.namespace,
                         **({"labels": dict(self.config.labels)} if self.config.labels else {})},
            "spec": record.to_spec(),
        }

    def _mark_renewed(self, sent: float) -> None:
        self._renew_sent = sent
        self._notify(self._wake_intake)

    def _wake_intake(self) -> None:
        renewed, self._renewed = self._renewed, asyncio.Event()
        renewed.set()

    def _set_observed(self, record: LeaderElectionRecord) -> None:
        self._observed = record
        self._observed_time = self._clock.monotonic()

    def _observed_is_me(self) -> bool:
        return self._observed.holder_identity == self.config.identity

    def _lease_valid(self) -> bool:
        return self._observed_time + self._observed.lease_duration_seconds > self._clock.monotonic()

    def _set_leading(self, leading: bool) -> None:
        self._leading = leading
        MASTER_STATUS.labels(self.config.name).set(1 if leading else 0)

    def _maybe_report_transition(self) -> None:
        holder = self._observed.holder_identity
        if holder == self._reported_leader:
            return
        self._reported_leader = holder
        self._log.info("new leader observed", leader=holder or None)
        hook = self._on_new_leader
        if hook is not None:
            def call() -> None:
                try:
                    hook(holder)
                except Exception:
                    self._log.exception("on_new_leader hook failed")

            self._notify(call)

    def _record_event(self, what: str) -> None:
        if self._events is None or self._lease is None:
            return
        subject = {"apiVersion": LEASES.api_version, "kind": LEASES.kind, "metadata": self._lease.get("metadata", {})}
        events, message = self._events, f"{self.config.identity} {what}"
        self._notify(lambda: events.event(subject, "Normal", "LeaderElection", message))


def _at_once(callback: Callable[[], None]) -> None:
    callback()
