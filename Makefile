# One entry point for people and CI. `make demo` and `make test` work on a fresh clone.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
TASK   ?= What is (17 * 23) + 4?

.PHONY: setup demo dev test lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

setup: $(VENV)/.installed

demo: setup  ## run one task end to end on the embedded stack
	$(BIN)/python starter.py run "$(TASK)"

dev: setup  ## embedded stack + worker + Web UI (http://localhost:8233) until Ctrl-C
	$(BIN)/python starter.py dev

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy .

test: lint  ## lint, type-check, then every test (unit, workflow, end-to-end)
	$(BIN)/pytest -q

clean:
	rm -rf $(VENV) .reactive-temporal .pytest_cache .mypy_cache .ruff_cache
