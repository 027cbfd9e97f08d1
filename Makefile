# Two promises: `make run` starts the server, `make test` runs lint, types and tests.
# Both bootstrap .venv on first use, so a fresh machine needs only Python 3.11+ and make.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: run test lint types pytest install bench clean

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

# Benchmarks (results go in docs/benchmarks.md); each starts its own redis-server.
bench: $(STAMP)
	$(BIN)/python bench/bench_redis_bets.py
	$(BIN)/python bench/bench_fanout.py --rounds 30

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis
