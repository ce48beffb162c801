# The browser computer. The two commands that matter:
#   make up     build and start one computer, print its addresses
#   make test   install what is needed, then run every test
SHELL := /bin/bash
.DEFAULT_GOAL := help
VENV := .venv
PY := $(VENV)/bin/python
# Native stack paths for `make dev` (the container uses the image's ENV).
DEV := $(CURDIR)/.agentenv

.PHONY: help up down logs dev image image-arm64 engine base wheels venv host-deps clients \
        test test-unit test-k8s test-native test-container test-security bench lint clean

help:
	@echo "make up | down | logs | dev | image | image-arm64 | test | bench | lint"

$(VENV)/.stamp: pyproject.toml requirements/runtime.lock requirements/dev.txt scripts/venv.sh
	scripts/venv.sh

venv: $(VENV)/.stamp

host-deps:
	scripts/host-deps.sh

# The real clients the container tests drive (Puppeteer, browser-use), pinned.
clients:
	scripts/test-clients.sh

engine:
	scripts/engine.sh

base: engine
	scripts/base-image.sh amd64

wheels: venv
	scripts/wheels.sh amd64

# The browser computer's image, and the run store's that `agentenv run` starts.
image: engine venv
	scripts/build.sh amd64
	scripts/store-image.sh

image-arm64: engine venv
	scripts/build.sh arm64

up: image
	scripts/up.sh

down:
	scripts/compose.sh down

logs:
	scripts/compose.sh logs -f --tail=200

dev: host-deps venv
	AGENTENV_IMAGE_DIR=$(CURDIR)/images/browser AGENTENV_VENV=$(CURDIR)/$(VENV) \
	AGENTENV_LOG_DIR=$(DEV)/log AGENTENV_RUN_DIR=$(DEV)/run \
	AGENTENV_PROFILE_DIR=$(DEV)/profile AGENTENV_DOWNLOADS_DIR=$(DEV)/downloads \
	AGENTENV_CHROMIUM_USER= \
	images/browser/launch/supervisord.sh

# Everything: unit, native (Chromium on the host), container, security and arm64 tests.
test: host-deps venv engine clients
	$(PY) -m pytest $(PYTEST_ARGS)

test-unit: venv
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

# The Kubernetes manifests (every layout), rendered and validated offline
# against the API's schemas and the vendored CRDs' (part of test-unit too).
test-k8s: venv
	$(PY) -m pytest tests/unit/test_kubernetes.py tests/unit/test_k8s_fleet.py $(PYTEST_ARGS)

test-native: host-deps venv
	$(PY) -m pytest tests/native $(PYTEST_ARGS)

test-container: venv engine clients
	$(PY) -m pytest tests/integration $(PYTEST_ARGS)

# The attack suite, against the image with users and a control token.
test-security: venv engine
	$(PY) -m pytest tests/security $(PYTEST_ARGS)

bench: host-deps venv engine
	$(PY) -m bench

lint: venv
	$(VENV)/bin/ruff check services tests bench
	$(VENV)/bin/ruff format --check services tests bench
	$(VENV)/bin/mypy services tests bench
	$(VENV)/bin/python scripts/structure.py --strict

clean:
	rm -rf build .agentenv .pytest_cache .mypy_cache .ruff_cache
