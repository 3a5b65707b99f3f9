VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test lint types demo bench fuzz clean

$(PY):
	python3 -m venv $(VENV)

# The dev extra pulls the workers extra (taskiq, taskiq-redis, asyncpg): the
# tests of the PostgreSQL ledger and of the workers need them.
$(STAMP): $(PY) pyproject.toml
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -m pip install --quiet --upgrade --target $(VENV)/arq-packages 'arq>=0.26'  # the arq extra, apart: tests/recipes/test_arq.py says why
	touch $(STAMP)

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

types: $(STAMP)
	$(PY) -m mypy --strict campaignkit tests benchmarks

test: lint types
	$(PY) -m pytest

demo: $(STAMP)
	$(VENV)/bin/campaignkit demo

bench: $(STAMP)
	$(PY) -m benchmarks

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache

FUZZ_SECONDS ?= 60

fuzz: $(STAMP)
	$(PY) -m pip install --quiet atheris
	$(PY) fuzz/seeds.py .fuzz-corpus
	$(PY) fuzz/fuzz_decoder.py .fuzz-corpus -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=4096
