"""A CPU limit for one benchmark process, as a pod's ``resources.limits.cpu`` sets one: a cgroup CPU quota.

Why: kube-sim is one Python process and, on its own core, caps a workload at roughly a hundred pods a second. A
benchmark of the daemon's scale-out (``bench.sharding``) must have the replicas, not kube-sim, be the limit, which
on any machine means giving each replica less CPU than kube-sim: exactly how replicas run in a cluster, as pods
with a CPU limit. The kernel's CFS bandwidth control enforces it the way the kubelet's does: ``cores`` x 100 ms of
CPU time in every 100 ms period.

Guarantees:
- ``CpuLimit(name, cores)`` makes a cgroup of its own (cgroup v2 where ``/sys/fs/cgroup`` is the unified
  hierarchy, the v1 ``cpu`` controller otherwise), sets the quota, and ``add(pid)`` moves a process into it;
  ``close()`` removes the cgroup (its processes must have exited, or they are moved back to the root first).
- Where no writable cgroup with a CPU controller exists (not root, a read-only mount), construction raises
  ``CpuLimitUnavailable`` saying why: a benchmark asked for a limit must not run without one.
- ``throttled_seconds()``: how long the kernel held the group's processes back for the quota (``cpu.stat``),
  which tells the limit was what bounded the run.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

PERIOD_US = 100_000  # the kubelet's CFS period
ROOT = Path("/sys/fs/cgroup")


class CpuLimitUnavailable(RuntimeError):
    pass


class CpuLimit:
    def __init__(self, name: str, cores: float, *, root: Path = ROOT) -> None:
        if cores <= 0:
            raise ValueError(f"a CPU limit must be positive, not {cores}")
        self.cores = cores
        quota = max(1_000, round(cores * PERIOD_US))  # the kernel's floor is 1 ms
        unified = (root / "cgroup.controllers").exists()
        try:
            if unified:
                if "cpu" not in (root / "cgroup.controllers").read_text().split():
                    raise CpuLimitUnavailable(f"{root}: no cpu controller in this cgroup v2 hierarchy")
                if "cpu" not in (root / "cgroup.subtree_control").read_text().split():
                    (root / "cgroup.subtree_control").write_text("+cpu")
                self.path = root / f"bench-{name}-{os.getpid()}"
                self.path.mkdir()
                (self.path / "cpu.max").write_text(f"{quota} {PERIOD_US}")
            else:
                base = root / "cpu"
                if not (base / "cpu.cfs_quota_us").exists():
                    raise CpuLimitUnavailable(f"{root}: neither cgroup v2 nor the v1 cpu controller is mounted")
                self.path = base / f"bench-{name}-{os.getpid()}"
                self.path.mkdir()
                (self.path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
                (self.path / "cpu.cfs_quota_us").write_text(str(quota))
        except PermissionError as e:
            raise CpuLimitUnavailable(f"cannot make a cgroup under {root} ({e.strerror}): run as root") from e
        except OSError as e:
            raise CpuLimitUnavailable(f"cannot make a CPU-limited cgroup under {root}: {e}") from e
        self._root_procs = root / "cgroup.procs" if unified else root / "cpu" / "cgroup.procs"

    def add(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(str(pid))

    def throttled_seconds(self) -> float:
        """Time the group was held back by its quota: v2 ``throttled_usec``, v1 ``throttled_time`` (ns)."""
        stats = dict(line.split() for line in (self.path / "cpu.stat").read_text().splitlines() if line.strip())
        if "throttled_usec" in stats:
            return int(stats["throttled_usec"]) / 1e6
        return int(stats.get("throttled_time", 0)) / 1e9

    def close(self) -> None:
        with contextlib.suppress(OSError):
            for pid in (self.path / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    self._root_procs.write_text(pid)
        with contextlib.suppress(OSError):
            self.path.rmdir()
