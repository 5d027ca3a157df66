# Footnote: `make install` sets up .venv; `make demo` indexes and asks; `make test` runs the tests.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install demo test lint bench eval clean

$(BIN)/python:
	@command -v $(PY) >/dev/null 2>&1 || { echo "need $(PY) (Python 3.11); set PY=/path/to/python3.11"; exit 1; }
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip setuptools wheel

install: $(BIN)/python
	$(BIN)/pip install -e '.[dev]'

demo: install
	$(BIN)/footnote index examples/docs
	$(BIN)/footnote ask "How fast do I have to acknowledge a SEV1 page?"

test: install
	$(BIN)/python -m pytest

lint:
	$(BIN)/ruff check bot retrieval config tests
	$(BIN)/ruff format --check bot retrieval config tests

# The dev set lives beside the repo in our workspace; point EVAL at your own.
EVAL ?= ../shared/eval/dev

bench:
	$(BIN)/footnote bench --docs $(EVAL)/docs --questions $(EVAL)/questions.jsonl

eval:
	$(BIN)/footnote eval --docs $(EVAL)/docs --questions $(EVAL)/questions.jsonl --ood $(EVAL)/ood.jsonl

clean:
	rm -rf .footnote .pytest_cache
