"""Smoke test: every benchmark runs end to end at its smallest scale (numbers are not checked, only shapes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import convergence, ingest, latency, memory, workqueue
from bench.report import Figure, markdown, table, write_json


def _check(figures: list[Figure], benchmark: str) -> None:
    assert figures
    for f in figures:
        assert f.benchmark == benchmark
        assert f.value == f.value
        assert f.value >= 0
        assert f.met in (True, False, None)
    assert all(f.name in table(figures) for f in figures)
    assert markdown(figures).count("\n") == len(figures) + 1


async def test_ingest() -> None:
    _check(await ingest.run(events=200, k8s_events=20, rounds=1), "ingest")


def test_memory() -> None:
    _check(memory.run(pods=300, model_pods=50, traced_pods=100), "memory")


async def test_workqueue() -> None:
    _check(await workqueue.run(ops=2_000, rounds=1), "workqueue")


@pytest.mark.timeout(90)
async def test_convergence_and_idle() -> None:
    figures = await convergence.run(replicas=6, many=2, each=2, idle_pods=12, idle_seconds=0.2, nodes=2)
    _check([f for f in figures if f.benchmark == "convergence"], "convergence")
    _check([f for f in figures if f.benchmark == "idle"], "idle")


@pytest.mark.timeout(90)
async def test_latency() -> None:
    _check(await latency.run(samples=4, load_rate=100.0, replicas=2, load_pods=5, nodes=1), "latency")


def test_results_json(tmp_path: Path) -> None:
    figures = [Figure("x", "a figure", 2.0, "s", 4.0, "ref", "<= 3 s", lambda v, _r: v <= 3)]
    write_json(tmp_path / "r.json", figures, quick=True, errors={})
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["figures"][0]["ratio"] == 0.5
    assert doc["figures"][0]["met"] is True
    assert doc["quick"] is True
