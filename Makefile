# The README's two commands: `make serve` and `make test`. Each makes its own virtualenv
# (.venv), installs what it needs there, and is safe to run again.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: serve test lint bench install install-test console

serve: install
	$(BIN)/flask --app wsgi db upgrade
	$(BIN)/gunicorn -c gunicorn.conf.py wsgi:app

# The suite runs in TEST_WORKERS processes (pytest-xdist; one file stays in one process, so
# its module fixtures are made once): its time goes mostly to waiting on PostgreSQL,
# gunicorn, Celery workers and Chromium, so more processes than cores keep a 2-core machine
# busy: two left it half idle (CPU ~310 s in a 640 s run); on 2026-11-27's suite three took
# 8 min 20 s and four 7 min 54 s on the same quiet machine; on 2026-11-28's (an AMD EPYC of
# 2 cores, ~930 s of CPU) four took 592 s and five 552 s. TEST_WORKERS=0: one process.
# --no-loadscope-reorder: files go out in the suite's order (slow files first, see
# tests/conftest.py), not xdist's default of the files with the most tests first.
TEST_WORKERS ?= 5

# PYTHONDONTWRITEBYTECODE emptied: each of the suite's processes (its four, and every
# gunicorn, Celery worker and flask command a test starts) compiled Quarry's modules and
# pytest rewrote every test module anew when an environment kept Python from caching
# bytecode (4 s of CPU per test process at collection alone); __pycache__ is git-ignored.
# --durations: the slowest tests are listed at the end of every run, where the time goes.
test: install-test
	$(BIN)/ruff check app tests bench migrations wsgi.py gunicorn.conf.py
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder \
		--durations=30

lint: install-test
	$(BIN)/ruff check app tests bench migrations wsgi.py gunicorn.conf.py

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

# The installs go through uv (from PyPI, into the virtualenv itself): the same packages and
# versions as pip resolves, in a third of its time (a fresh `.[test]` install: 45 s against
# pip's 127 s on 2026-11-28's machine). --compile-bytecode as pip does: compiled later, on
# import, mindsdb_sdk's invalid escape sequences fail the suite, which turns warnings into
# errors. Where uv cannot install (no wheel of it for the platform, say), pip does it all.
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet 'uv>=0.9,<1' || true

PIP_INSTALL = if [ -x $(BIN)/uv ]; then $(BIN)/uv pip install --quiet --compile-bytecode \
	--python $(BIN)/python $(1) \
	|| $(BIN)/python -m pip install --quiet $(1); else $(BIN)/python -m pip install --quiet $(1); fi

$(VENV)/.installed: setup.cfg setup.py pyproject.toml | $(BIN)/python
	@echo "Installing Quarry and its dependencies into $(VENV) (the first time: a minute or so)"
	$(call PIP_INSTALL,-e .)
	touch $@

$(VENV)/.installed-test: setup.cfg setup.py pyproject.toml | $(BIN)/python
	@echo "Installing Quarry, its dependencies and the test tools into $(VENV) (the first time: a minute or so)"
	$(call PIP_INSTALL,-e '.[test]')
	touch $@ $(VENV)/.installed

# Rebuild the console's committed bundle (app/console/static/) from web/: needs node and npm.
console:
	npm --prefix web ci --no-audit --no-fund
	npm --prefix web run build
