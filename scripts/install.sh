#!/usr/bin/env sh
# Install Footnote into a virtualenv. The one install path: `make install` (and so CI)
# and the Dockerfile's builder stage both run this script.
#
#   scripts/install.sh VENV [EXTRAS] [editable|deps|app]
#
# deps: only the dependencies pyproject.toml names (no code of Footnote's needed yet); app:
# only Footnote itself, into a venv that has them. The Dockerfile runs the two in layers of
# their own, so a change to Footnote's code does not compile llama.cpp again.
#
# PY            the Python 3.11 to build the venv from (default python3.11)
# TORCH_INDEX   optional index for a CPU-only torch wheel (the Docker build sets it;
#               on our CI machines torch 2.13.0 CPU is already on disk for pip)
set -eu
VENV=${1:?usage: scripts/install.sh VENV [EXTRAS] [editable]}
EXTRAS=${2:-}
MODE=${3:-}
PY=${PY:-python3.11}
command -v "$PY" >/dev/null 2>&1 || { echo "need $PY (Python 3.11); set PY=/path/to/python3.11" >&2; exit 1; }
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/pip" install --quiet --upgrade pip setuptools wheel
# llama-cpp-python compiles llama.cpp from source (there is no wheel for it on PyPI), and
# that build dominates a fresh install: build on every core.
CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}
# Footnote never uses llama.cpp's multimodal library (mtmd/llava: loaded only by image
# chat handlers), so it is not built.
CMAKE_ARGS=${CMAKE_ARGS:--DLLAVA_BUILD=OFF}
export CMAKE_BUILD_PARALLEL_LEVEL CMAKE_ARGS
if [ -n "${TORCH_INDEX:-}" ]; then
  "$VENV/bin/pip" install --quiet --index-url "$TORCH_INDEX" "torch==2.13.0"
fi
TARGET="."
[ -n "$EXTRAS" ] && TARGET=".[$EXTRAS]"
case "$MODE" in
  editable) "$VENV/bin/pip" install -e "$TARGET" ;;
  deps)
    # pyproject.toml's [project] dependencies, read with the standard library's TOML reader.
    "$VENV/bin/python" -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' >"$VENV/footnote-deps.txt"
    "$VENV/bin/pip" install -r "$VENV/footnote-deps.txt"
    rm -f "$VENV/footnote-deps.txt"
    exit 0 ;;
  app) "$VENV/bin/pip" install --no-deps "$TARGET" ;;
  *) "$VENV/bin/pip" install "$TARGET" ;;
esac
"$VENV/bin/footnote" --help >/dev/null
