VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test lint types demo bench clean

$(PY):
	python3 -m venv $(VENV)

$(STAMP): $(PY) pyproject.toml
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

lint: $(STAMP)
	$(PY) -m ruff check .

types: $(STAMP)
	$(PY) -m mypy --strict campaignkit

test: lint types
	$(PY) -m pytest

demo: $(STAMP)
	$(VENV)/bin/campaignkit demo

bench: $(STAMP)
	$(PY) -m benchmarks

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
