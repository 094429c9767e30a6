# Every target installs what it needs first, so each works on a fresh clone with Python 3.11+.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BUF_VERSION := 1.75.0
BUF := .tools/node_modules/.bin/buf

.PHONY: install run demo test test-fast lint proto breaking bench bench-smoke bench-llm bench-cost bench-tokens bench-outputs bench-galera bench-latency clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is required"'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $@

$(BUF):
	npm install --prefix .tools --no-audit --no-fund --silent @bufbuild/buf@$(BUF_VERSION)

run: install
	$(PY) -m devtools.devstack run

demo: install
	$(PY) -m devtools.devstack demo

test: install
	$(PY) -m pytest

# The fast tier: no MariaDB, no processes (state machine, registry, retry policy, validation, the
# job and protocol services over the in-memory unit of work, SQLite store tests). Under a minute.
test-fast: install
	$(PY) -m pytest -m "not mysql and not slow"

lint: install $(BUF)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	$(VENV)/bin/lint-imports
	$(BUF) lint
	$(PY) scripts/gen_protos.py --check
	$(PY) scripts/check_code_text.py
	$(PY) scripts/check_folder_cycles.py

# Compares the contract with main: run it on a branch before merging a .proto change.
breaking: $(BUF)
	$(BUF) breaking --against '.git#branch=main'

# Throughput, peer, latency and scale: one table and bench/results/latest.json (docs/performance.md).
bench: install
	$(PY) -m bench

# Every phase of `make bench` with tiny counts (bench/sizes.py): in CI, so that a phase that hangs
# or errors fails the build. Writes bench/results/smoke.json; its figures measure nothing.
bench-smoke: install
	AIJOB_BENCH_SMOKE=1 timeout 300 $(PY) -m bench

# The LLM storms: a rate-limited model (three users), an overloaded one, a primary's outage.
bench-llm: install
	$(PY) -m bench.llm_storm
	$(PY) -m bench.llm_overload
	$(PY) -m bench.llm_outage

# Jobs that wait for the cheap hours: what background jobs cost across a peak window.
bench-cost: install
	$(PY) -m bench.cost

# The token bill: a learner's work as a plain client calls DeepSeek and as the engine does.
bench-tokens: install
	$(PY) -m bench.tokens

# Partial outputs: StreamOutput callers' database cost and a resumed attempt's tokens.
bench-outputs: install
	$(PY) -m bench.outputs

# Enqueue -> lease latency with one idle runtime (MariaDB at AIJOB_BENCH_MYSQL_URL).
# Galera: failover time, cluster drain against one MariaDB.
bench-galera: install
	$(PY) -m bench.galera

bench-latency: install
	$(PY) -m bench.lease_latency

proto: install
	$(PY) scripts/gen_protos.py

clean:
	rm -rf $(VENV) .tools .mypy_cache .ruff_cache .pytest_cache aijob.db aijob.db-*
