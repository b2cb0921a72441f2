# Developer entry points. `make run` and `make test` are the README's quick start.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install run grade-example test test-fast lint docs docs-build bench check-assignments clean \
	docker-engine

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

## The grading service on its embedded defaults (SQLite, a SQLite queue, a real worker, demo
## users): prints the URL and credentials. AUTOGRADE_DATABASE_URL / AUTOGRADE_BROKER_URL switch
## it to PostgreSQL and Redis.
run: $(STAMP)
	$(BIN)/autograde run-embedded

## Grade the shipped example submission locally, without the service.
grade-example: $(STAMP)
	$(BIN)/autograde assignments list
	$(BIN)/autograde grade --assignment multi-head-attention --seed 1 examples/mha_causal_leak.py

## Everything this machine can run: it starts a Docker engine and builds the sandbox image
## first (outside CI, docker tests skip loudly when that is impossible; in CI they fail).
test: $(STAMP) docker-engine browser
	$(BIN)/pytest -m "" -n 0 --durations=40

## The fast part only (what plain `pytest` runs): no slow, docker or browser tests.
test-fast: $(STAMP)
	$(BIN)/pytest

## Debian's Chromium for the browser tests (outside CI they skip loudly without it).
.PHONY: browser
browser:
	@bash scripts/ensure-browser.sh || echo "!! Chromium could not be installed: browser tests will be skipped (they fail in CI)"

docker-engine:
	@if bash scripts/ensure-docker.sh; then $(MAKE) --no-print-directory sandbox-image; \
	else echo "!! no Docker engine could be started: docker tests will be skipped (they fail in CI)"; fi

lint: $(STAMP)
	$(BIN)/ruff check grader sandbox assignments service devkit benchmarks tests
	$(BIN)/mypy grader sandbox assignments service devkit
	for hidden in assignments/*/hidden; do $(BIN)/mypy "$$hidden"/*.py || exit 1; done

## The documentation site (docs/, mkdocs.yml), served with live reload at http://127.0.0.1:8001
## (8000 is `make run`'s).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr 127.0.0.1:8001

## The site built strictly into site/: a broken link or anchor fails it (CI runs this).
docs-build: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

check-assignments: $(STAMP)
	$(BIN)/autograde assignments check attention
	$(BIN)/autograde assignments check multi-head-attention

bench: $(STAMP)
	$(BIN)/python benchmarks/grading_phases.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info site

## The Docker sandbox: its image (built offline if need be, reused when up to date) and the
## tests that need an engine (scripts/ensure-docker.sh starts one where there is none).
.PHONY: sandbox-image test-docker
sandbox-image:
	bash sandbox/image/build.sh

test-docker: $(STAMP) sandbox-image
	$(BIN)/pytest -m docker
