# Every target creates what it needs: a fresh clone with python3, pip and make is enough.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install lint test test-fast test-image demo image bench bench-quick chaos chaos-quick clean

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
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -n 2 --dist loadgroup -m "not image and not chaos"

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
# violated invariant or a cluster that does not converge. `make chaos-quick`: the seeded 2-minute profile as a
# test (about 3 CPU-minutes, so outside `make test`).
CHAOS_MINUTES ?= 60
chaos: $(STAMP)
	$(BIN)/python -m bench.chaos --minutes $(CHAOS_MINUTES) --workdir chaos-run

chaos-quick: $(STAMP)
	$(BIN)/pytest -m chaos tests/bench/test_chaos.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis build dist *.egg-info chaos-run
