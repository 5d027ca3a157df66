# Footnote: `make install` sets up .venv; `make demo` indexes and asks; `make test` installs
# everything the tests need (Python packages and system programs) and runs them.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install system-deps demo test lint bench eval clean

# The same script builds the Docker image's venv.
install:
	PY=$(PY) scripts/install.sh $(VENV) dev editable

# chromium, chromium-driver, tesseract-ocr: apt-get as root or through sudo, else a clear message.
system-deps:
	scripts/system-deps.sh

demo: install
	$(BIN)/footnote index examples/docs
	$(BIN)/footnote ask "How fast do I have to acknowledge a SEV1 page?"

test: install system-deps lint
	$(BIN)/python -m pytest

# ruff (style), mypy (types: pyproject's [tool.mypy]); the import graph is checked by tests/test_architecture.py.
lint:
	$(BIN)/ruff check bot retrieval config bench testkit tests training
	$(BIN)/ruff format --check bot retrieval config bench testkit tests training
	$(BIN)/mypy

# The dev set lives beside the repo in our workspace; point EVAL at your own.
EVAL ?= ../shared/eval/dev

# The benchmarks live in bench/ (tooling: not in the wheel), run from this checkout.
bench:
	$(BIN)/python -m bench --docs $(EVAL)/docs --questions $(EVAL)/questions.jsonl

eval:
	$(BIN)/footnote eval --docs $(EVAL)/docs --questions $(EVAL)/questions.jsonl --ood $(EVAL)/ood.jsonl \
		$(if $(wildcard $(EVAL)/ood-ticket.jsonl),--ood $(EVAL)/ood-ticket.jsonl)

clean:
	rm -rf .footnote .pytest_cache
