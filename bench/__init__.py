"""Benchmarks: speed, memory and scale of the controller manager, each beside the usual Python way.

``python -m bench`` runs every benchmark at full scale, prints a table (figure, reference, ratio, target, met?) and
writes ``bench/results.json``; ``python -m bench --quick`` runs each at small scale in under two minutes (for CI:
it checks that the benchmarks run, not the numbers). See ``bench/RESULTS.md`` for a dated run.
"""
