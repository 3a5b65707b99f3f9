PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo
DOCS_STAMP := $(VENV)/.installed-docs

# The supported Pythons besides $(PYTHON) (3.11): `make test-pythons` runs the
# test suite on each, in its own venv (.venv-3.12, .venv-3.13), with the
# interpreter pyenv has for it.
OTHER_PYTHONS ?= 3.12 3.13
PYENV ?= $(or $(shell command -v pyenv),$(HOME)/.pyenv/bin/pyenv)

.PHONY: test pytest test-pythons lint types demo docs bench fuzz clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# The dev extra pulls the workers extra (taskiq, taskiq-redis, asyncpg): the
# tests of the PostgreSQL ledger and of the workers need them.
$(STAMP): $(PY) pyproject.toml
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -m pip install --quiet --upgrade --target $(VENV)/arq-packages 'arq>=0.26'  # the arq extra, apart: tests/recipes/test_arq.py says why
	touch $(STAMP)

# The demo needs the package alone: no extra and no pip upgrade, so that a
# fresh clone runs it in seconds (the dev extra is for `make test`).
$(DEMO_STAMP): $(PY) pyproject.toml
	$(PY) -m pip install --quiet -e .
	touch $(DEMO_STAMP)

$(DOCS_STAMP): $(PY) pyproject.toml
	$(PY) -m pip install --quiet -e '.[docs]'
	touch $(DOCS_STAMP)

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

types: $(STAMP)
	$(PY) -m mypy --strict campaignkit tests benchmarks

pytest: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

test: lint types pytest

# ruff and mypy read the code, not the interpreter: they run once, in `make test`.
test-pythons:
	for version in $(OTHER_PYTHONS); do \
		prefix=$$($(PYENV) prefix $$version) || exit 1; \
		$(MAKE) pytest VENV=.venv-$$version PYTHON=$$prefix/bin/python || exit 1; \
	done

demo: $(DEMO_STAMP)
	$(VENV)/bin/campaignkit demo

# Material for MkDocs prints a banner about MkDocs 2.0 on every build.
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

bench: $(STAMP)
	$(PY) -m benchmarks

clean:
	rm -rf $(VENV) .venv-* site .mypy_cache .ruff_cache .pytest_cache

FUZZ_SECONDS ?= 60

fuzz: $(STAMP)
	$(PY) -m pip install --quiet atheris
	$(PY) fuzz/seeds.py .fuzz-corpus
	$(PY) fuzz/fuzz_decoder.py .fuzz-corpus -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=4096
