"""bench.cpulimit on a stand-in cgroup tree: the quota each hierarchy is given, moving a process in, the
throttling read back, and a clear refusal where no CPU controller can be used."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.cpulimit import CpuLimit, CpuLimitUnavailable


def unified(root: Path, controllers: str = "cpu memory") -> Path:
    root.mkdir(exist_ok=True)
    (root / "cgroup.controllers").write_text(controllers + "\n")
    (root / "cgroup.subtree_control").write_text("memory\n")
    (root / "cgroup.procs").write_text("")
    return root


def test_cgroup_v2_gets_a_cpu_max_of_the_cores_per_100_ms_period(tmp_path: Path) -> None:
    root = unified(tmp_path / "cg")
    limit = CpuLimit("replica-0", 0.15, root=root)
    assert limit.path.parent == root
    assert (limit.path / "cpu.max").read_text() == "15000 100000"
    assert (root / "cgroup.subtree_control").read_text() == "+cpu"  # the cpu controller enabled for children
    limit.add(4242)
    assert (limit.path / "cgroup.procs").read_text() == "4242"
    (limit.path / "cpu.stat").write_text("usage_usec 900000\nnr_throttled 12\nthrottled_usec 2500000\n")
    assert limit.throttled_seconds() == 2.5


def test_cgroup_v1_gets_a_cfs_quota_and_period(tmp_path: Path) -> None:
    cpu = tmp_path / "cpu"
    cpu.mkdir()
    (cpu / "cpu.cfs_quota_us").write_text("-1")
    (cpu / "cgroup.procs").write_text("")
    limit = CpuLimit("replica-1", 2, root=tmp_path)
    assert limit.path.parent == cpu
    assert (limit.path / "cpu.cfs_period_us").read_text() == "100000"
    assert (limit.path / "cpu.cfs_quota_us").read_text() == "200000"
    (limit.path / "cpu.stat").write_text("nr_periods 10\nnr_throttled 3\nthrottled_time 1500000000\n")
    assert limit.throttled_seconds() == 1.5


def test_a_tiny_limit_is_raised_to_the_kernels_one_millisecond_floor(tmp_path: Path) -> None:
    limit = CpuLimit("r", 0.001, root=unified(tmp_path / "cg"))
    assert (limit.path / "cpu.max").read_text() == "1000 100000"


def test_close_moves_what_is_left_back_to_the_root_and_removes_the_group(tmp_path: Path) -> None:
    root = unified(tmp_path / "cg")
    limit = CpuLimit("r", 0.5, root=root)
    limit.add(77)
    (limit.path / "cpu.max").unlink()  # a real cgroup's files vanish with it; the stand-in's must go by hand
    limit.close()
    assert (root / "cgroup.procs").read_text() == "77"
    assert (limit.path / "cgroup.procs").exists()  # not empty: a plain directory cannot be removed; a cgroup can


def test_no_cpu_controller_is_refused_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(CpuLimitUnavailable, match="no cpu controller"):
        CpuLimit("r", 0.5, root=unified(tmp_path / "cg", controllers="memory pids"))
    with pytest.raises(CpuLimitUnavailable, match="neither cgroup v2 nor the v1 cpu controller"):
        CpuLimit("r", 0.5, root=tmp_path / "empty")
    with pytest.raises(ValueError, match="positive"):
        CpuLimit("r", 0, root=tmp_path)
