# Every target creates what it needs: a fresh clone with python3, pip and make is enough.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install lint test test-fast demo image bench bench-quick clean

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

test: $(STAMP)
	$(BIN)/pytest -n 2 --dist loadgroup

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

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis build dist *.egg-info
