"""``python -m bench.startup``: how soon `footnote serve` listens and answers (issue 33).

Starts ``footnote serve --http`` as its own process on a new data dir (a new machine:
nothing measured, no index), sends a signed mention the moment the port accepts a
connection, and times the ack, the first visible sign (the placeholder) and the final
answer at a fake Slack Web API on 127.0.0.1. Then stops it (SIGTERM), starts it again on
the same data dir (a restart) and does the same with another question. Prints the CPU.
Figures only; it never passes or fails. The model is the configured one (the packaged
default unless FOOTNOTE_LLM_* says otherwise).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import click

from retrieval.models import cpu_info
from testkit.servers import free_port
from testkit.slack import FakeSlack, signed_post

SECRET = "bench-startup"
ROOT = Path(__file__).resolve().parent.parent


def _listening(port: int, proc: subprocess.Popen[bytes], timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise click.ClickException(f"footnote serve exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.01)
    raise click.ClickException(f"footnote serve did not listen within {timeout:.0f} s")


def _wait(check: Callable[[FakeSlack], bool], fake: FakeSlack, timeout: float) -> float | None:
    """When (monotonic) ``check`` first held, or None."""
    return time.monotonic() if fake.wait_for(check, timeout) else None


def _one_start(env: dict[str, str], fake: FakeSlack, question: str, ts: str, log: Path) -> dict[str, float | None]:
    port = free_port()
    args = [sys.executable, "-m", "bot.cli", "serve", "--http", str(port), "--host", "127.0.0.1"]
    t0 = time.monotonic()
    with log.open("ab") as out:
        proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        _listening(port, proc, 600)
        listen = time.monotonic() - t0
        fake.user_message("C1", ts, f"<@UBOT> {question}")
        event = {
            "type": "event_callback", "event_id": f"Ev{ts}", "team_id": "T1", "api_app_id": "A1",
            "event": {"type": "app_mention", "user": "U1", "text": f"<@UBOT> {question}", "ts": ts, "channel": "C1"},
        }  # fmt: skip
        sent = time.monotonic()
        status, _ = signed_post(f"http://127.0.0.1:{port}/slack/events", json.dumps(event), "application/json", SECRET)
        ack = time.monotonic() - sent
        sign = _wait(lambda s: any(p.get("thread_ts") == ts for p in s.of("chat.postMessage")), fake, 60)
        final = _wait(lambda s: any(_in(s, f, ts) for f in s.finals()), fake, 900)
        finals = [f for f in fake.finals() if _in(fake, f, ts)]
        click.echo(f"  answer: {'cited' if finals and '[1]' in json.dumps(finals[-1].get('blocks')) else 'not cited'}")
        return {
            "listen_s": listen,
            "ack_s": ack if status == 200 else None,
            "sign_s": None if sign is None else sign - sent,
            "answer_s": None if final is None else final - sent,
            "answer_from_start_s": None if final is None else final - t0,
        }
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)


def _in(fake: FakeSlack, final: dict[str, object], thread: str) -> bool:
    """Whether a final message belongs to ``thread``: an update of its placeholder or of the
    streamed message that replaced it, or a reply in it."""
    posted = fake.of("chat.postMessage") + fake.of("chat.startStream")
    placeholders = {p.get("_ts") for p in posted if p.get("thread_ts") == thread}
    return final.get("ts") in placeholders or final.get("thread_ts") == thread


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--docs",
    "docs_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=ROOT / "examples" / "docs",
    show_default=True,
    help="The drive the server reads.",
)
@click.option("--question", default="How fast must a SEV1 page be acknowledged?", show_default=True)
def main(docs_dir: Path, question: str) -> None:
    """Time `footnote serve` from start to listening, ack, first sign and answer: on a new
    data dir (a new machine), then after a restart on the same one. Prints the CPU."""
    fake = FakeSlack()
    tmp = Path(tempfile.mkdtemp(prefix="footnote-startup-"))
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "FOOTNOTE_DATA_DIR": str(tmp / "data"),
        "FOOTNOTE_DOCS_DIR": str(docs_dir.resolve()),
        "FOOTNOTE_SYNC_MINUTES": "0",
        "FOOTNOTE_SLACK_API_URL": fake.url,
        "SLACK_BOT_TOKEN": "xoxb-bench",
        "SLACK_SIGNING_SECRET": SECRET,
    }
    env.pop("SLACK_APP_TOKEN", None)
    n_docs = sum(1 for p in docs_dir.rglob("*") if p.is_file())
    click.echo(f"CPU          {cpu_info().describe()}")
    click.echo(f"drive        {docs_dir} ({n_docs} files); log {tmp / 'serve.log'}")
    try:
        for label, ts in (("first start (new data dir)", "9100.1"), ("restart (same data dir)", "9200.1")):
            got = _one_start(env, fake, question, ts, tmp / "serve.log")
            shown = "  ".join(f"{k} {'-' if v is None else f'{v:.2f}'}" for k, v in got.items())
            click.echo(f"{label:28} {shown}")
    finally:
        fake.close()


if __name__ == "__main__":
    main(prog_name="python -m bench.startup")
