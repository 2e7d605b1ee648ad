# The index of developer commands. `make help` lists them.
.DEFAULT_GOAL := help
VENV := .venv/bin
EXAMPLE ?= examples/grad_of_loss.py

help:  ## list the commands
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

setup:  ## install system packages (as root) and .venv
	@scripts/setup.sh

play: setup  ## set everything up and start the playground on http://127.0.0.1:8000
	$(VENV)/jaxplay serve

example: setup  ## run an example through the engine from the command line
	$(VENV)/jaxplay run $(EXAMPLE) --args "(jnp.ones((3,)),)" --transform grad --transform jit

# pytest keeps its rewritten test modules as bytecode: where the environment forbids
# writing bytecode (PYTHONDONTWRITEBYTECODE), every session rewrote all ~450 (~3 s of CPU).
test test-fast: export PYTHONDONTWRITEBYTECODE :=

# Two test processes (pytest-xdist), each taking whole files in the order they are
# collected, the browser's first (tests/conftest.py's scheduler): one per CPU of a
# 2-CPU machine; TEST_WORKERS=0 runs the suite in this one process.
TEST_WORKERS ?= 2

test: setup  ## run the whole test suite
	$(VENV)/python -m pytest -q -n $(TEST_WORKERS)

# The edit loop's suite: no browser, no Redis or PostgreSQL, no jail, nothing slow
# (the markers: pyproject.toml, tests/conftest.py). `make test` before a commit.
test-fast:  ## the quick tests, for an edit loop (minutes; no browser, services, jail or slow)
	$(VENV)/python -m pytest -q -p no:cacheprovider -m "not (browser or redis or postgres or jail or slow)"

lint: setup  ## ruff lint + format check + mypy + generated docs in step (settings, the houses) + import contracts
	$(VENV)/ruff check .
	$(VENV)/ruff format --check .
	$(VENV)/mypy
	$(VENV)/python scripts/gen_settings_doc.py --check
	$(VENV)/python scripts/draw_houses.py --check
	$(VENV)/lint-imports --no-cache

format: setup  ## apply ruff's formatting and fixes
	$(VENV)/ruff format .
	$(VENV)/ruff check --fix .

golden: setup  ## regenerate the golden files from JAX itself (then review the diff)
	$(VENV)/python -m tests.golden.regenerate

frontend:  ## build the page (frontend/src -> frontend/dist; commit dist)
	scripts/build_frontend.sh

screenshots: setup  ## refresh docs/screenshots from a real browser
	JAXPLAY_SCREENSHOTS=1 $(VENV)/python -m pytest -q tests/browser -k screenshots

deploy-check: setup  ## build every image in docker/ and run the compose stack end to end (root)
	scripts/deploy_check.sh

bench: setup  ## run the benchmarks (timing agreement, warm pool overhead, server load, JAX versions)
	$(VENV)/python benchmarks/engine/timing_agreement.py
	$(VENV)/python benchmarks/pool/pool_overhead.py
	$(VENV)/python benchmarks/server/load_ws.py
	$(VENV)/python benchmarks/pool/versions.py

.PHONY: help setup play test test-fast lint format golden frontend screenshots example bench deploy-check
