# Two promises: `make run` starts the server, `make test` runs lint, types and tests.
# Both bootstrap .venv on first use, so a fresh machine needs only Python 3.11+ and make.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: run test lint types pytest install bench bench-smoke fairness-stats fuzz clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/baccarat serve $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check server tests bench tools
	$(BIN)/ruff format --check server tests bench tools

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

# RNG statistics of the committed shoe (docs/fairness.md, "RNG statistics"): 10,000 eight-deck
# shoes through bac-shoe-v1 and the table's rules, about two minutes on one core; exit 1 if
# a p-value is below 0.001. More or a fixed seed: ARGS="--shoes 20000 --seed demo --json".
fairness-stats: $(STAMP)
	$(BIN)/python bench/fairness_stats.py $(ARGS)

# The long fuzz run (issue 7): FUZZ_EXAMPLES examples per test (about 4 frames each) through
# decode/parse and a live node on each engine; prints frames and time per engine. Narrow it
# with e.g. FUZZ_ARGS="-k memory". `make test` runs a quick pass of the same tests.
FUZZ_EXAMPLES ?= 25000
fuzz: $(STAMP)
	BACCARAT_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/pytest tests/fuzz -s --timeout 0 $(FUZZ_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis
