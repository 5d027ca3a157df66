"""Real engines on 127.0.0.1 for the scale-out tests: a Chroma server and a llama.cpp server.

Each is started as its own process on a free port and stopped at the end.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, proc: subprocess.Popen[bytes], timeout: float = 120.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before answering {url}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"no answer from {url} within {timeout:.0f}s")


class Server:
    def __init__(self, args: list[str], health: str, log: Path, env: dict[str, str] | None = None) -> None:
        self.args, self.health, self.log = args, health, log
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Server:
        out = self.log.open("ab")
        self.proc = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=self.env)
        wait_http(self.health, self.proc)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None


def chroma_server(path: Path, port: int) -> Server:
    chroma = Path(sys.executable).with_name("chroma")
    args = [str(chroma), "run", "--path", str(path), "--host", "127.0.0.1", "--port", str(port)]
    return Server(args, f"http://127.0.0.1:{port}/api/v2/heartbeat", path.with_suffix(".log"))


def llama_server(gguf: Path, port: int, log: Path) -> Server:
    """``footnote model-server``: llama-cpp-python's server, on the kernels that run here."""
    args = [
        sys.executable,
        "-m",
        "bot.cli",
        "model-server",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n-ctx",
        "4096",
    ]
    env = {"FOOTNOTE_LLM_GGUF": str(gguf), "FOOTNOTE_DATA_DIR": str(log.parent / "model-server-data")}
    return Server(args, f"http://127.0.0.1:{port}/v1/models", log, env)
