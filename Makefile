# Footnote: `make install` sets up .venv; `make demo` indexes and asks; `make test` installs
# everything the tests need (Python packages and system programs) and runs them.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install system-deps demo test lint bench eval image image-test stack-test clean

# The same script builds the Docker image's venv.
install:
	PY=$(PY) scripts/install.sh $(VENV) dev editable

# chromium, chromium-driver, tesseract-ocr: apt-get as root or through sudo, else a clear message.
system-deps:
	scripts/system-deps.sh

# Two questions: one the drive answers, one it only points at (the three outcomes, README).
demo: install
	$(BIN)/footnote index examples/docs
	$(BIN)/footnote ask "Are taxis covered?"
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

# Every development corpus in turn: English (dev, guides) and Danish (danish-dev); EVALS=dev for one.
EVALS ?= dev guides danish-dev
eval:
	@for c in $(EVALS); do d=$(dir $(EVAL))$$c; echo "== $$d"; \
		$(BIN)/footnote eval --docs $$d/docs --questions $$d/questions.jsonl --ood $$d/ood.jsonl \
			$$( [ -f $$d/ood-ticket.jsonl ] && echo --ood $$d/ood-ticket.jsonl ) || exit 1; done

# The image a team deploys, built with podman or docker (scripts/build-image.sh: from a Debian
# base built from Debian's packages unless IMAGE_BASE=python:3.11-slim), then run the way a team
# runs it: offline index and answer, serve --http, Slack, read-only root, SIGTERM and restart,
# HEALTHCHECK (testkit/image_test.py). Not in CI: the build alone takes minutes.
IMAGE ?= localhost/footnote:latest
IMAGE_BASE ?= localhost/debian:bookworm
image:
	scripts/build-image.sh $(IMAGE) $(IMAGE_BASE)

image-test: install image
	$(BIN)/python -m testkit.image_test --image $(IMAGE)

# compose.yaml's scale-out stack (two replicas, Chroma, llama.cpp, nginx), every image built
# from IMAGE_BASE, run with podman-compose or docker compose with the network off (as root:
# an iptables rule cuts the stack's network from the world; testkit/stack_test.py).
stack-test: install image
	$(BIN)/python -m testkit.stack_test --base $(IMAGE_BASE)

clean:
	rm -rf .footnote .pytest_cache
