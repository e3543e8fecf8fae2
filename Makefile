# Two commands set everything up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
VSIX := vscode-extension/trainlint-$(shell sed -n 's/^  "version": "\(.*\)",$$/\1/p' vscode-extension/package.json).vsix

.PHONY: run test install install-dev lint clean vsix vscode-e2e-deps debian-packages readme-images FORCE

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

# setuptools' strict editable mode: the package-dir mapping (analysis/ is trainlint.analysis, ...)
# becomes a tree of links in build/__editable__.trainlint-*/ that type checkers follow; the default
# mode's import hook they cannot. An edit needs nothing (a link points at the file), but the tree
# does not grow by itself: when the package's list of files changes (a module added, renamed or
# removed), the links are made again, without the dependencies (a few seconds).
# setuptools' warnings about the editable install go to a log that is shown only when pip fails.
EDITABLE := --config-settings editable_mode=strict -e
QUIET_BUILD := > $(VENV)/install.log 2>&1 || { cat $(VENV)/install.log; exit 1; }
RELINK := $(PIP) install --quiet --no-deps $(EDITABLE) . $(QUIET_BUILD)
# (the calibration scripts and their measurements are not part of the package)
PACKAGE_FILES = $(sort $(shell find trainlint analysis estimator server -path estimator/calibration -prune -o \
	\( -name '*.py' -o -name '*.json' -o -name py.typed \) -print))

# Rewritten only when the list changes, so that its date says when a file was last added or removed.
$(VENV)/.package-files: FORCE | $(BIN)/python
	@echo '$(PACKAGE_FILES)' | cmp -s - $@ || echo '$(PACKAGE_FILES)' > $@

# A changed pyproject.toml (or a first install) installs everything; a changed file list relinks.
$(VENV)/.installed: pyproject.toml $(VENV)/.package-files | $(BIN)/python
	$(if $(filter pyproject.toml,$?),$(PIP) install --quiet $(EDITABLE) . $(QUIET_BUILD),$(RELINK))
	touch $@

# VRAMGuard's tests need torch, and only its CPU build: PyPI's Linux wheel is the multi-gigabyte CUDA
# build. A wheel pip finds without an index (the project's machines keep one) is taken first, else
# PyTorch's CPU wheel index (TORCH_INDEX_URL).
TORCH_VERSION := 2.13.0
TORCH_INDEX_URL ?= https://download.pytorch.org/whl/cpu
INSTALL_TORCH := { { $(PIP) install --quiet --no-deps --no-index torch==$(TORCH_VERSION) 2>/dev/null && \
	$(PIP) install --quiet torch==$(TORCH_VERSION); } || $(PIP) install --quiet --index-url $(TORCH_INDEX_URL) torch==$(TORCH_VERSION); }
$(VENV)/.installed-dev: pyproject.toml $(VENV)/.package-files | $(BIN)/python
	$(if $(filter pyproject.toml,$?),$(PIP) install --quiet $(EDITABLE) '.[dev]' $(QUIET_BUILD) && $(INSTALL_TORCH),$(RELINK))
	touch $(VENV)/.installed $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

# The main job: check the bundled examples (the buggy scripts report findings, their fixed twins none).
# Exit status 1 only means "findings were reported", which is the point of the demo.
run: install
	@$(BIN)/trainlint check examples/buggy examples/fixed; status=$$?; test $$status -le 1

# The lint and type gate, run by `make test` before the tests: ruff on the repository and pyright on
# the package (both as pyproject.toml configures them; pyright resolves trainlint.* through the
# strict editable install, so it runs with the venv's interpreter).
lint: install-dev
	$(BIN)/ruff check --quiet .
	$(BIN)/pyright --pythonpath $(BIN)/python

# The VS Code extension's checks drive the real server through the client library's transport;
# TRAINLINT_PYTHON must be absolute (npm runs inside vscode-extension/). tests/test_vscode.py runs the
# .vsix in a real VS Code (code-server) driven by a headless Chromium: vscode-e2e-deps installs those.
# pytest runs as the venv's script, not `python -m pytest`: -m would put this folder first on sys.path,
# and its trainlint/ (without analysis/, estimator/, server/) would be imported instead of the install.
test: install-dev lint vscode-e2e-deps $(VSIX)
	$(BIN)/pytest -q -n 2 --dist loadgroup --durations=25
	cd vscode-extension && npm ci --no-audit --no-fund && npm run typecheck && npm run lint && TRAINLINT_PYTHON=$(CURDIR)/$(BIN)/python npm test

# The VS Code extension package (vscode-extension/trainlint-<version>.vsix), rebuilt when its sources change.
$(VSIX): vscode-extension/package.json vscode-extension/package-lock.json vscode-extension/README.md $(wildcard vscode-extension/src/*.ts)
	cd vscode-extension && npm ci --no-audit --no-fund && npm run package
vsix: $(VSIX)

# What tests/test_vscode.py needs besides the dev extra (selenium): Debian's Chromium and its driver,
# and code-server with the Node.js major version it requires, from npm (tests/vscode/package.json).
# code-server's postinstall builds VS Code's native modules (libkrb5-dev for kerberos) against that
# Node.js's own headers (npm_config_nodedir: the machine's npm config may name another Node.js's).
E2E := tests/vscode
E2E_DEBIAN_PACKAGES := chromium chromium-driver build-essential pkg-config libkrb5-dev
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

vscode-e2e-deps: debian-packages $(E2E)/node_modules/.installed

# Installs only the packages that are missing, so a second run does nothing.
debian-packages:
	@missing="$$(for package in $(E2E_DEBIAN_PACKAGES); do \
		dpkg-query -W -f='$${db:Status-Status}' $$package 2>/dev/null | grep -qx installed || echo $$package; done)"; \
	if [ -n "$$missing" ]; then \
		echo "Installing Debian packages:" $$missing; \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

$(E2E)/node_modules/.installed: $(E2E)/package.json $(E2E)/package-lock.json | debian-packages
	cd $(E2E) && npm ci --ignore-scripts --no-audit --no-fund
	cd $(E2E) && node_dir="$$(dirname "$$(dirname "$$(readlink -f node_modules/.bin/node)")")" && \
		PATH="$$node_dir/bin:$$PATH" npm_config_nodedir="$$node_dir" npm rebuild --foreground-scripts > node_modules/.build.log 2>&1 || \
		{ tail -40 node_modules/.build.log; echo "code-server's install failed: $(E2E)/node_modules/.build.log"; exit 1; }
	touch $@

# Refreshes the README's VS Code screenshots (docs/images/) from a run of the end-to-end test.
readme-images: install-dev vscode-e2e-deps $(VSIX)
	TRAINLINT_README_IMAGES=1 $(BIN)/pytest -q tests/test_vscode.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache $(E2E)/node_modules
