# The two commands a newcomer needs: `make lab` and `make test`. Everything else is set up by them.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: lab test test-fast lint bench bench-quick venv clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[lab,dev]"
	touch $(STAMP)

venv: $(STAMP)

## Open JupyterLab on the tour notebook (local CPU target, embedded SQLite database).
# JupyterLab refuses to start as root unless told to (containers and CI machines run as root).
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root)
lab: $(STAMP)
	$(VENV)/bin/jupyter lab $(ROOT_FLAG) --ServerApp.ip=127.0.0.1 notebooks/00_tour.ipynb

## The whole test suite (what CI runs).
test: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check explorer widgets tests benchmarks

## Benchmarks: ratios against baselines measured in the same run (slow: tens of minutes).
bench: $(STAMP)
	$(PY) benchmarks/bench_import.py
	$(PY) benchmarks/bench_measure.py --trials 128 --ms-trials 32
	$(PY) benchmarks/bench_storage.py
	$(PY) benchmarks/bench_search.py

## A few-minute variant to run after every change to search or measurement code.
bench-quick: $(STAMP)
	$(PY) benchmarks/bench_measure.py --trials 32 --ms-trials 8
	$(PY) benchmarks/bench_storage.py --runs 4
	$(PY) benchmarks/bench_search.py --quick

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache bench_results
