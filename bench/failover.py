"""Fail-over at size: a standby replica takes over from a leader killed with SIGKILL, on the cluster as it stands.

Protocol (:func:`measure`): the leader runs with leader election on; a standby is started with the same Lease
flags (an operator's: kube-controller-manager's defaults, 15 s lease / 10 s renew deadline / 2 s retry, unless
the profile says otherwise) and waited for until it is ready and campaigning ("waiting to acquire the lease"
in its log; a standby runs no informers, as upstream's does not, so there is no cache to sync before), then for
two retry periods more, so its view of the Lease comes from one of the leader's renewals and not from its own
start. Then the leader is sent SIGKILL (it releases nothing), and at once one Deployment is scaled by one
replica (the probe).

Measured, each from the kill (the bench's ``time.time()``; kube-sim and the daemon run on the same machine and
read the same clock): the standby's first successful Lease write (its ``stageTimestamp`` in kube-sim's audit log:
the Lease is held), its "informer caches synced" log line, its first write of any other resource than Leases,
Events and access or token reviews (``requestReceivedTimestamp``: what the controllers sent first), and its first
write of the probe Deployment's ReplicaSet (the probe acted on; also given from the probe's own commit). Both
replicas are one user with one User-Agent in the audit log, and the dead leader's last requests can arrive just
after the kill, so only writes received after the standby's Lease write count as the standby's.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import procs
from bench.reaction import WRITE_VERBS, Request, log_end, read_audit
from controller_manager.api.resources import DEPLOYMENTS, LEASES, REPLICASETS
from controller_manager.client import ApiClient, ApiError
from controller_manager.manager.options import DEFAULT_LEASE_NAME

LEASE_NAMESPACE = "kube-system"
NOT_CONTROLLER_WRITES = frozenset({"leases", "events", "tokenreviews", "subjectaccessreviews",
                                   "selfsubjectaccessreviews", "selfsubjectrulesreviews", "localsubjectaccessreviews"})


@dataclass(frozen=True)
class LeaseFlags:
    duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def args(self) -> tuple[str, ...]:
        return (f"--leader-elect-lease-duration={self.duration:g}s",
                f"--leader-elect-renew-deadline={self.renew_deadline:g}s",
                f"--leader-elect-retry-period={self.retry_period:g}s")


@dataclass(frozen=True)
class Probe:
    namespace: str
    deployment: str


def first(requests: list[Request], after: float, want: Callable[[Request], bool]) -> Request | None:
    """The first request received after ``after`` (in receipt order) that ``want`` accepts."""
    return min((r for r in requests if r.received > after and want(r)), key=lambda r: r.received, default=None)


def lease_won(requests: list[Request], after: float, name: str = DEFAULT_LEASE_NAME) -> Request | None:
    """The first successful write of the leader-election Lease received after ``after``."""
    return first(requests, after, lambda r: r.resource == "leases" and r.namespace == LEASE_NAMESPACE
                 and r.verb in ("create", "update", "patch") and 200 <= r.code < 300
                 and (r.name == name or r.verb == "create"))


def controller_write(requests: list[Request], after: float) -> Request | None:
    """The daemon's first write after ``after`` of anything its controllers own (not its Lease, Events or
    reviews of access and tokens, which the manager sends itself)."""
    return first(requests, after, lambda r: r.by_daemon and r.verb in WRITE_VERBS
                 and r.resource not in NOT_CONTROLLER_WRITES)


def replicaset_write(requests: list[Request], after: float, probe: Probe) -> Request | None:
    """The daemon's first write after ``after`` of the probe Deployment's ReplicaSet (``<deployment>-<hash>``)."""
    return first(requests, after, lambda r: r.by_daemon and r.resource == "replicasets" and not r.subresource
                 and r.namespace == probe.namespace and r.verb in ("update", "patch")
                 and r.name.rpartition("-")[0] == probe.deployment)


Found = Request | None


def takeover(requests: list[Request], killed: float, probe: Probe) -> tuple[Found, Found, Found, Found]:
    """From the audit log after the kill: the standby's Lease write, its first controller write, the probe's
    scale and the standby's answer to it. The dead leader's last requests may still arrive just after the kill
    (they were on the wire), and the log cannot tell the replicas apart (one user, one User-Agent): the
    standby's writes are those received once it held the Lease."""
    lease_write = lease_won(requests, killed)
    if lease_write is None:
        return None, None, None, None
    first_write = controller_write(requests, lease_write.completed)
    probe_scale = first(requests, killed, lambda r: not r.by_daemon and r.resource == "deployments"
                        and r.subresource == "scale" and r.verb == "update" and r.name == probe.deployment)
    answer = replicaset_write(requests, max(lease_write.completed, probe_scale.completed), probe) \
        if probe_scale else None
    return lease_write, first_write, probe_scale, answer


async def _until(what: str, deadline: float, check: Any) -> Any:
    """Poll ``check()`` (sync or async) every 0.1 s until it is truthy; TimeoutError naming ``what`` at the
    deadline (time.monotonic())."""
    while True:
        got = check()
        if asyncio.iscoroutine(got):
            got = await got
        if got:
            return got
        if time.monotonic() > deadline:
            raise TimeoutError(f"fail-over: {what}")
        await asyncio.sleep(0.1)


async def measure(workdir: Path, sim: procs.Proc, leader: procs.Proc, client: ApiClient, audit: Path,
                  probe: Probe, lease: LeaseFlags, timeout: float) -> dict[str, Any]:
    """The protocol of the module docstring; ``leader`` is killed, the standby stopped before returning."""
    deadline = time.monotonic() + timeout
    standby = await procs.start_daemon(workdir, sim.extra["kubeconfig"], sim.extra["admin_token"],
                                       log_name="controller-manager-standby.log", leader_elect=True,
                                       extra_args=lease.args(), ready_timeout=timeout)
    try:
        await _until("the standby never campaigned", deadline,
                     lambda: procs.log_time(procs.log_entries(standby.log), procs.LEASE_WAITING) is not None)
        await asyncio.sleep(2 * lease.retry_period)
        if procs.log_time(procs.log_entries(standby.log), procs.LEASE_LEADING) is not None:
            raise RuntimeError("fail-over: the standby leads before the leader was killed")
        holder = ((await client.get(LEASES, DEFAULT_LEASE_NAME, LEASE_NAMESPACE)).get("spec") or {}) \
            .get("holderIdentity")
        scale = await client.get_scale(DEPLOYMENTS, probe.deployment, probe.namespace)
        replicas = int((scale.get("spec") or {}).get("replicas", 0)) + 1
        offset = log_end(audit)  # everything completed from here on is logged after this point
        killed = time.time()
        leader.process.kill()
        await leader.process.wait()
        await client.update_scale(DEPLOYMENTS, probe.deployment, probe.namespace, replicas)

        async def probe_acted() -> bool:
            items = (await client.list(REPLICASETS, probe.namespace, label_selector=f"app={probe.deployment}"))
            return any((rs.get("spec") or {}).get("replicas") == replicas for rs in items.get("items") or ())

        later = deadline + lease.duration
        await _until("the standby never synced its informers", later,
                     lambda: procs.log_time(procs.log_entries(standby.log), procs.SYNC_DONE) is not None)
        await _until("the probe's ReplicaSet was never scaled", later, probe_acted)
        await asyncio.sleep(0.5)  # kube-sim hands its audit lines to the file every 0.1 s
        requests = read_audit(audit, offset)
        entries = procs.log_entries(standby.log)
        lease_write, first_write, probe_scale, probe_answer = takeover(requests, killed, probe)
        became = procs.log_time(entries, procs.LEASE_LEADING)
        synced = procs.log_time(entries, procs.SYNC_DONE)
        sync_started = procs.log_time(entries, procs.SYNC_WAITING)
        new_holder = ((await client.get(LEASES, DEFAULT_LEASE_NAME, LEASE_NAMESPACE)).get("spec") or {}) \
            .get("holderIdentity")
    except ApiError as exc:
        raise RuntimeError(f"fail-over: {exc}") from exc
    finally:
        await standby.stop()

    def since_kill(at: float | None) -> float | None:
        return None if at is None else at - killed

    return {
        "lease": {"duration_s": lease.duration, "renew_deadline_s": lease.renew_deadline,
                  "retry_period_s": lease.retry_period},
        "holder_before": holder, "holder_after": new_holder,
        "lease_held_s": since_kill(lease_write.completed if lease_write else None),
        "became_leader_log_s": since_kill(became),
        "informers_synced_s": since_kill(synced),
        "informer_sync_s": None if synced is None or sync_started is None else synced - sync_started,
        "first_controller_write_s": since_kill(first_write.received if first_write else None),
        "first_controller_write": (f"{first_write.verb} {first_write.resource}"
                                   f"{'/' + first_write.subresource if first_write.subresource else ''}"
                                   if first_write else None),
        "probe_acted_s": since_kill(probe_answer.received if probe_answer else None),
        "probe_commit_to_action_s": (probe_answer.received - probe_scale.completed
                                     if probe_answer and probe_scale else None),
    }

