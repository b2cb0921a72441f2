# Developer entry points. `make run` and `make test` are the README's quick start.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install run test test-all lint typecheck bench check-assignments clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

## Grade the shipped example submissions (the main job, on embedded defaults).
run: $(STAMP)
	$(BIN)/autograde assignments list
	$(BIN)/autograde grade --assignment attention examples/attention_causal_leak.py

## The default test run: fast unit and integration tests plus the slow corpus and hostile suites.
test: $(STAMP)
	$(BIN)/pytest -m "not docker and not browser"

test-all: $(STAMP)
	$(BIN)/pytest -m ""

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy service grader sandbox assignments

check-assignments: $(STAMP)
	$(BIN)/autograde assignments check attention
	$(BIN)/autograde assignments check multi-head-attention

bench: $(STAMP)
	$(BIN)/python benchmarks/grading_phases.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info

## The Docker sandbox: its image (built offline if need be, reused when up to date) and the
## tests that need an engine (scripts/ensure-docker.sh starts one where there is none).
.PHONY: sandbox-image test-docker
sandbox-image:
	bash sandbox/image/build.sh

test-docker: $(STAMP) sandbox-image
	$(BIN)/pytest -m docker tests/sandbox
