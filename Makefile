# One entry point for people and CI. `make demo` and `make test` work on a fresh clone.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
TASK   ?= What is (17 * 23) + 4?

.PHONY: setup demo dev test lint lock clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# Exactly the locked, hash-checked versions; then the project itself, with no further resolution.
$(VENV)/.installed: requirements-test.lock pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --require-hashes -r requirements-test.lock
	$(BIN)/pip install --quiet --no-deps -e .
	touch $@

# The project's bytecode, as the Dockerfile leaves it in the image: where PYTHONDONTWRITEBYTECODE
# is set nothing else writes it, and Temporal's sandbox (REACTIVE_TEMPORAL_SANDBOX_WORKFLOWS=true)
# would compile the workflow modules again for every workflow it starts (hosting/bytecode.py),
# every command its own modules at each start (~0.1 s of `starter.py runs`).
setup: $(VENV)/.installed
	$(BIN)/python -m compileall -q reactive_temporal workflows activities

demo: setup  ## run one task end to end on the embedded stack
	$(BIN)/python starter.py run "$(TASK)"

dev: setup  ## embedded stack + worker + Web UI (http://localhost:8233) until Ctrl-C
	$(BIN)/python starter.py dev

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy .

# Two test processes, each with its own dev server, Postgres and scripted LLM (session
# fixtures); a process that runs out of tests takes some of the other's (worksteal), so one
# slow module at the end does not leave a core idle. The 15 slowest tests are listed at the end.
TEST_PROCESSES ?= 2
test: lint  ## lint, type-check, then every test (unit, workflow, end-to-end)
	$(BIN)/pytest -q -n $(TEST_PROCESSES) --dist worksteal --durations=15

# Re-resolve both lock files from pyproject.toml's bounds, with hashes, for every platform.
# Keeps every pin that still fits; UPGRADE=--upgrade moves everything to the newest versions
# inside the bounds, UPGRADE="--upgrade-package NAME" moves one package.
UV_COMPILE = $(BIN)/uv pip compile pyproject.toml --quiet --universal --python-version 3.11 \
	--generate-hashes $(UPGRADE)
lock: | $(BIN)/python
	$(BIN)/pip install --quiet 'uv>=0.13,<1'
	$(UV_COMPILE) --extra otel -o requirements.lock
	$(UV_COMPILE) --extra test -o requirements-test.lock

clean:
	rm -rf $(VENV) .reactive-temporal .pytest_cache .mypy_cache .ruff_cache
