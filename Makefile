# Every target creates what it needs: a fresh clone with python3, pip and make is enough.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install lint test test-fast test-image demo image bench bench-quick chaos chaos-quick clean test-sharding bench-sharding

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check controller_manager tests bench tools
	$(BIN)/mypy
	$(BIN)/lint-imports

# PYTHONDONTWRITEBYTECODE emptied: pytest caches its assertion-rewritten test modules only where bytecode may be
# written; without that cache every worker re-rewrites all ~270 of them (~25 CPU-seconds each, every run).
test: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -n 2 --dist loadgroup -m "not image and not chaos and not sharding"

# The Dockerfile's image built (buildah) and run (podman) against kube-sim: ~9 minutes from an empty image
# store, so not part of `make test`. Needs root and Debian (installs buildah, podman, runc, debootstrap).
test-image: $(STAMP)
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq buildah podman runc debootstrap >/dev/null
	$(BIN)/pytest -m image

test-fast: $(STAMP)
	$(BIN)/pytest -x -q -m "not e2e"

demo: $(STAMP)
	$(BIN)/python -m controller_manager.demo

# The Dockerfile's image, built with buildah on a base made from Debian packages (tools/image.py; root, Debian).
image: $(STAMP)
	$(BIN)/python -m tools.image

bench: $(STAMP)
	$(BIN)/python -m bench

bench-quick: $(STAMP)
	$(BIN)/python -m bench --quick

# The chaos soak (bench/chaos.py): CHAOS_MINUTES (default 60) of faults, kills, pauses and churn; exit 1 on any
# violated invariant or a cluster that does not converge. CHAOS_CALM_MINUTES (default 0) adds a stretch of churn
# and API faults with no replica touched, reporting each replica's RSS trend over it. `make chaos-quick`: the
# seeded 2-minute profile as a test (about 3 CPU-minutes, so outside `make test`; CI runs it after it).
CHAOS_MINUTES ?= 60
chaos: $(STAMP)
	$(BIN)/python -m bench.chaos --minutes $(CHAOS_MINUTES) --workdir chaos-run

chaos-quick: $(STAMP)
	$(BIN)/pytest -m chaos tests/bench/test_chaos.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis build dist *.egg-info chaos-run

# The scalability envelope (bench/envelope.py): kube-sim at ENVELOPE_PROFILE's size (full: 5,000 nodes and
# 150,000 pods; reduced: 1,000 and 30,000; smoke: 100 and 2,000), every default controller, churn, cache-sync
# comparison (streaming vs paged lists). Hours at full size: never part of `make test`.
.PHONY: bench-envelope
ENVELOPE_PROFILE ?= reduced
bench-envelope: $(STAMP)
	$(BIN)/python -m bench.envelope --profile $(ENVELOPE_PROFILE)
# Sharding end to end (tests/e2e/test_sharding.py): kube-sim and four replicas with --sharding=true (spread,
# SIGKILL hand-over, join by draining, no duplicate pod); about a minute, so outside `make test`.
test-sharding: $(STAMP)
	$(BIN)/pytest -m sharding tests/e2e/test_sharding.py

# Sharding's scale-out (bench/sharding.py): the same Deployments created and rolled out with 1, 2 and 3 replicas
# running --sharding=true; pods/s, and CPU, RSS and syncs per replica.
bench-sharding: $(STAMP)
	$(BIN)/python -m bench.sharding

# What breaks at scale (bench/scale_paths.py): every default controller in process on stores filled with 500 nodes /
# 15,000 pods, then 5,000 / 150,000 (each size in its own process, ~10 minutes in all on 2 cores); per event, per
# sync and per periodic pass: CPU time and cached objects walked, side by side. Not part of `make test`.
.PHONY: bench-scale-paths
bench-scale-paths: $(STAMP)
	$(BIN)/python -m bench.scale_paths
# kube-sim's own cost at size (bench/simscale.py): for each of SIMSCALE_NODES, kube-sim alone, its idle CPU
# (heartbeats) and the CPU, RSS and sustained rate of SIMSCALE_PODS pods created at 50/s, bound and Running.
.PHONY: bench-simscale
SIMSCALE_NODES ?= 100,1000,5000
SIMSCALE_PODS ?= 3000
bench-simscale: $(STAMP)
	$(BIN)/python -m bench.simscale --nodes $(SIMSCALE_NODES) --pods $(SIMSCALE_PODS)
# The garbage collector's attempt-to-delete queue under Job-like foreground deletions (bench/gcburst.py): kube-sim and
# the collector in one process, a busy event loop standing for the other controllers; queue waits, reads, graph
# changes. About 30 s; not part of `make test`.
.PHONY: bench-gc-burst
bench-gc-burst: $(STAMP)
	$(BIN)/python -m bench.gcburst
# kube-sim's memory per stored pod (bench/simmemory.py): SIMMEMORY_PODS pods created over HTTP, bound and Running in
# an in-process kube-sim, then RSS per pod and the reachable bytes of each of its structures. Not part of `make test`.
.PHONY: bench-simmemory
SIMMEMORY_PODS ?= 10000
bench-simmemory: $(STAMP)
	$(BIN)/python -m bench.simmemory --pods $(SIMMEMORY_PODS)
