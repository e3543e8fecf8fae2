# Two commands set everything up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip

.PHONY: run test install install-dev lint clean vsix

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(PIP) install --quiet -e .
	touch $@

# VRAMGuard's tests need torch: the CPU build pinned here is a local file on the project's machines
# (an unpinned `torch` would download a multi-gigabyte CUDA build).
$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(PIP) install --quiet -e '.[dev]'
	$(PIP) install --quiet torch==2.13.0
	touch $(VENV)/.installed $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

# The main job: check the bundled examples (the buggy scripts report findings, their fixed twins none).
# Exit status 1 only means "findings were reported", which is the point of the demo.
run: install
	@$(BIN)/trainlint check examples/buggy examples/fixed; status=$$?; test $$status -le 1

# The VS Code extension's checks drive the real server through the client library's transport;
# TRAINLINT_PYTHON must be absolute (npm runs inside vscode-extension/).
test: install-dev
	$(BIN)/python -m pytest -q -n 2 --dist loadfile
	cd vscode-extension && npm ci --no-audit --no-fund && npm run typecheck && npm run lint && TRAINLINT_PYTHON=$(CURDIR)/$(BIN)/python npm test

# The VS Code extension package (vscode-extension/trainlint-<version>.vsix).
vsix:
	cd vscode-extension && npm ci --no-audit --no-fund && npm run package

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
