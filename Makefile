# advisor — every target documents itself: `make help`.
.DEFAULT_GOAL := help
SHELL := /bin/bash

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
UV := $(shell command -v uv 2>/dev/null || echo .uv/bin/uv)
PYTEST_ARGS ?=
HOST ?= 127.0.0.1
PORT ?= 8000

export UV_PROJECT_ENVIRONMENT := $(VENV)

.PHONY: help run test install install-e2e lint format typecheck migrate seed goldens rules-docs new-rule docs-check bench clean

help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.uv/bin/uv:
	$(PYTHON) -m venv .uv && .uv/bin/pip install -q --disable-pip-version-check uv

$(BIN)/advisor: pyproject.toml uv.lock | $(UV)
	$(UV) sync --frozen --inexact --extra dev
	@touch $@

install: $(BIN)/advisor ## Create .venv with the app and everything the tests need (from uv.lock)

install-e2e: install ## Also build the real-LLM-server extra (llama-cpp-python compiles: ~6 min on 2 cores)
	$(UV) sync --frozen --extra dev --extra e2e

.PHONY: llama-server
llama-server: ## Build llama.cpp's own server into .cache/llama-server for the e2e test (cached; ~17 CPU-min the first time)
	scripts/build-llama-server.sh

run: install ## Migrate ./advisor.db (which loads the catalogs), serve on http://127.0.0.1:8000
	$(BIN)/advisor db upgrade
	$(BIN)/advisor serve --host $(HOST) --port $(PORT)

migrate: install ## Apply database migrations and load the catalogs (ADVISOR_DATABASE_URL)
	$(BIN)/advisor db upgrade

seed: install ## (Re)load the shipped hardware, model and quantization catalogs
	$(BIN)/advisor catalog load

test: install ## Run the whole test suite (SQLite and Postgres)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: install ## ruff, mypy --strict, and stale generated files
	$(BIN)/ruff check advisor tests bench migrations
	$(BIN)/ruff format --check advisor tests bench
	$(BIN)/mypy
	$(MAKE) --no-print-directory docs-check

format: install ## Apply ruff fixes and formatting
	$(BIN)/ruff check --fix advisor tests bench
	$(BIN)/ruff format advisor tests bench

goldens: install ## Regenerate the ingest golden files (review the diff like code)
	$(BIN)/python -m tests.ingest_goldens --regen

rules-docs: install ## Regenerate docs/rules.md from the rules
	$(BIN)/python -m advisor.rules.docs --write

new-rule: install ## Scaffold a rule: make new-rule ID=PRE007 [NAME=prefill.snake_name] [ACTION=shorten-prompt]
	@test -n "$(ID)" || { echo "usage: make new-rule ID=XXX000 [NAME=group.snake_name] [ACTION=...]" >&2; exit 2; }
	$(BIN)/python -m advisor.rules.scaffold $(ID) $(if $(NAME),--name $(NAME)) $(if $(ACTION),--action $(ACTION))
	$(BIN)/python -m advisor.rules.docs --write

docs-check: install ## Fail when a generated file (goldens, docs/rules.md) is stale
	@if [ -f tests/ingest_goldens.py ]; then $(BIN)/python -m tests.ingest_goldens --check; fi
	@if [ -f advisor/rules/docs.py ]; then $(BIN)/python -m advisor.rules.docs --check; fi

bench: install ## Run the benchmark suite one at a time and rewrite the summary of docs/benchmarks.md (BENCH=ingest,advise,... for some; needs wrk)
	$(BIN)/python -m bench.run_all $(if $(BENCH),--only $(BENCH))

clean: ## Remove the virtualenv, caches and the local database
	rm -rf $(VENV) .uv .pytest_cache .mypy_cache .ruff_cache advisor.db advisor.db-shm advisor.db-wal
