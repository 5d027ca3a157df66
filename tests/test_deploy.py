"""The Dockerfile and compose file: linted, and checked for the rules a deploy relies on.

CI runs no container engine (`make image-test` builds and runs the image; too slow for CI),
so the image's install step is the same script that `make install` (and therefore CI)
runs; these tests hold the two together.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def _instructions() -> list[tuple[str, str]]:
    joined = re.sub(r"\\\n", " ", DOCKERFILE)
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            op, _, rest = line.partition(" ")
            out.append((op.upper(), rest.strip()))
    return out


def test_hadolint_passes() -> None:
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    res = subprocess.run([hadolint, "--no-color", "Dockerfile"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr


def test_dockerfile_is_multi_stage_slim_non_root_and_offline() -> None:
    ins = _instructions()
    froms = [rest for op, rest in ins if op == "FROM"]
    assert len(froms) >= 2 and froms[0] == "${BASE} AS builder" and froms[-1] == "${BASE} AS runtime"
    assert ("ARG", "BASE=python:3.11-slim") in ins[: ins.index(("FROM", froms[0]))]  # the default base
    final = ins[max(i for i, (op, _) in enumerate(ins) if op == "FROM") :]
    ops = dict(final)
    assert re.fullmatch(r"\d+", ops["USER"]) and ops["USER"] != "0"
    assert json.loads(ops["VOLUME"]) == ["/data", "/docs"]
    assert "/healthz" in ops["HEALTHCHECK"]
    assert json.loads(ops["ENTRYPOINT"]) == ["footnote"] and json.loads(ops["CMD"]) == ["serve"]
    assert "HF_HUB_OFFLINE=1" in ops["ENV"] and "--from=builder" in ops["COPY"]
    assert not any(op == "RUN" and ("cmake" in rest or "pip " in rest) for op, rest in final)  # no build in runtime


def test_the_image_installs_with_the_same_script_as_make_install() -> None:
    runs = [rest for op, rest in _instructions() if op == "RUN" and "install.sh" in rest]
    # The dependencies in a layer before Footnote's code is copied, Footnote after it.
    assert [r.rsplit("install.sh", 1)[1] for r in runs] == [' /opt/venv "" deps', ' /opt/venv "" app']
    order = [(op, rest) for op, rest in _instructions() if op in ("RUN", "COPY")]
    deps = next(i for i, (op, rest) in enumerate(order) if op == "RUN" and rest.endswith("deps"))
    assert all(not rest.startswith(("bot", "retrieval", "config")) for _, rest in order[:deps])
    assert "scripts/install.sh $(VENV) dev editable" in (ROOT / "Makefile").read_text()
    assert subprocess.run(["sh", "-n", str(ROOT / "scripts" / "install.sh")], check=False).returncode == 0
    copied = " ".join(rest for op, rest in _instructions() if op == "COPY")
    for needed in ("pyproject.toml", "bot", "retrieval", "config", "scripts/install.sh"):
        assert needed in copied


def test_compose_runs_two_replicas_against_one_chroma_and_one_model_server() -> None:
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    services = compose["services"]
    assert {"footnote-1", "footnote-2", "chroma", "llm", "proxy"} == set(services)
    for name in ("footnote-1", "footnote-2"):
        bot = services[name]
        assert bot["hostname"] == name  # the journal's owner, stable across restarts
        assert bot["environment"]["FOOTNOTE_CHROMA_URL"] == "http://chroma:8000"
        assert bot["environment"]["FOOTNOTE_LLM_URL"] == "${FOOTNOTE_LLM_URL:-http://llm:8080}"
        assert "footnote-data:/data" in bot["volumes"]
    # llama-cpp-python's server, on the kernels that run on the host's CPU (footnote model-server)
    assert services["llm"]["entrypoint"][:2] == ["footnote", "model-server"]
    assert "0.0.0.0" in services["llm"]["entrypoint"] and "8080" in services["llm"]["entrypoint"]
    assert services["chroma"]["entrypoint"][:2] == ["chroma", "run"]  # the server of the client's chromadb
    # Every image is built here, from BASE: nothing comes from another registry.
    for name, svc in services.items():
        assert svc["image"].startswith("localhost/") and svc["build"]["args"]["BASE"].startswith("${BASE:-"), name
    conf = (ROOT / "deploy" / "nginx.conf").read_text()
    assert "footnote-1:3000" in conf and "footnote-2:3000" in conf
