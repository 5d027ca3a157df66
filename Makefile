# Footnote: `make install` sets up .venv; `make demo` indexes and asks; `make test` runs the tests.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install demo test lint bench eval clean

# The same script builds the Docker image's venv.
install:
	PY=$(PY) scripts/install.sh $(VENV) dev editable

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
