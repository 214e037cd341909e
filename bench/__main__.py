"""``python -m bench [--quick] [--only NAME ...]``: run the benchmarks, print the table, write results.json.

Guarantees:
- Every benchmark runs (in the order of the issue) even if an earlier one failed; a failure is printed with its
  traceback, recorded under ``errors`` in the JSON, and makes the exit code 1. Missed targets do not: the
  numbers are reported, not gated.
- ``--quick`` runs each benchmark at a small scale (the whole run in under two minutes), for CI.
- Runs on uvloop, as the daemon and kube-sim do.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import structlog

from bench import apiserver, convergence, ingest, latency, memory, procs, workqueue
from bench.report import Figure, markdown, table, write_json

HERE = Path(__file__).resolve().parent

# name -> (full-scale arguments, quick arguments)
SCALES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "ingest": ({"events": 20_000, "k8s_events": 2_000, "rounds": 3}, {"events": 2_000, "k8s_events": 200, "rounds": 1}),
    "memory": ({"pods": 100_000, "model_pods": 10_000, "traced_pods": 10_000},
               {"pods": 10_000, "model_pods": 2_000, "traced_pods": 2_000}),
    "workqueue": ({"ops": 2_000_000, "rounds": 3}, {"ops": 200_000, "rounds": 1}),
    "convergence": ({"replicas": 1000, "many": 100, "each": 10, "idle_pods": 10_000, "idle_seconds": 30.0},
                    {"replicas": 100, "many": 10, "each": 5, "idle_pods": 500, "idle_seconds": 3.0}),
    "latency": ({"samples": 200, "load_rate": 1000.0}, {"samples": 10, "load_rate": 1000.0}),
    "apiserver": ({"pods": 3000, "concurrency": 8, "watchers": 4}, {"pods": 300, "concurrency": 8, "watchers": 2}),
}


def benchmarks() -> dict[str, Callable[..., Awaitable[list[Figure]]]]:
    async def memory_run(**kwargs: Any) -> list[Figure]:
        return await asyncio.to_thread(memory.run, **kwargs)

    return {"ingest": ingest.run, "memory": memory_run, "workqueue": workqueue.run,
            "convergence": convergence.run, "latency": latency.run, "apiserver": apiserver.run}


async def run_all(names: list[str], quick: bool) -> tuple[list[Figure], dict[str, str]]:
    figures: list[Figure] = []
    errors: dict[str, str] = {}
    runs = benchmarks()
    for name in names:
        full, small = SCALES[name]
        started = time.perf_counter()
        print(f"== {name} ...", flush=True)
        try:
            got = await runs[name](**(small if quick else full))
        except Exception:
            errors[name] = traceback.format_exc()
            print(f"== {name} FAILED\n{errors[name]}", flush=True)
            continue
        figures.extend(got)
        print(table(got), f"\n== {name} took {time.perf_counter() - started:.1f} s\n", flush=True)
    return figures, errors


def quiet_logs() -> None:
    logging.basicConfig(level=logging.WARNING)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--quick", action="store_true", help="small scale, for CI (under two minutes)")
    parser.add_argument("--only", nargs="+", choices=list(SCALES), default=list(SCALES), metavar="NAME",
                        help=f"run only these ({', '.join(SCALES)})")
    parser.add_argument("--output", default=str(HERE / "results.json"), help="where to write the JSON")
    args = parser.parse_args(argv)
    quiet_logs()
    runner = procs.event_loop_runner()
    started = time.perf_counter()
    with runner:
        figures, errors = runner.run(run_all(args.only, args.quick))
    print(table(figures))
    print(f"\n(markdown)\n{markdown(figures)}\n")
    write_json(Path(args.output), figures, quick=args.quick, errors=errors)
    print(f"wrote {args.output}; {len(figures)} figures in {time.perf_counter() - started:.0f} s"
          + (f"; FAILED: {', '.join(errors)}" if errors else ""))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
