# Two promises: `make run` starts the server, `make test` runs lint, types and tests.
# Both bootstrap .venv on first use, so a fresh machine needs only Python 3.11+ and make.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: run test lint types pytest install bench bench-smoke clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/baccarat serve $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check server tests bench
	$(BIN)/ruff format --check server tests bench

types: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/pytest $(PYTEST_ARGS)

test: lint types pytest

# Benchmarks (docs/benchmarks.md): servers, peers and Redis are started by the scripts, on
# loopback, pinned apart from the generator. `bench` is the full run (under 10 minutes; run it
# on a quiet machine); `bench-smoke` a small one that proves the harness in about a minute.
BENCH_STAMP := $(VENV)/.bench-stamp

$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(BIN)/python bench/run.py
	$(BIN)/python bench/bench_redis_bets.py

bench-smoke: $(BENCH_STAMP)
	$(BIN)/python bench/run.py --smoke

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis
