"""``make image-test``: the image a team deploys, run here the way they run it.

``python -m testkit.image_test --image localhost/footnote:latest`` (podman or docker,
whichever is installed, podman first) checks, printing a figure for each step:

1. the image's size, and that it runs as a non-root user;
2. with **no network**: ``footnote index`` on a mounted drive, then the demo question:
   pointed at its passage on so small a drive, confirmed (``footnote confirm``, what the
   "This answers it" button records), and then answered with its citation;
3. ``footnote serve --http`` with a read-only root filesystem, only the data volume
   writable: ``/healthz`` and ``/readyz`` from the host, the time from start to ready on a
   new volume, a signed Slack event answered in its thread through a fake Slack Web API on
   the host's loopback, the image's HEALTHCHECK, and the serving RSS inside the container;
4. a question in flight when the container gets SIGTERM: it stops within the grace period,
   and after a restart (time to ready again) the question is answered exactly once, from
   the journal on the volume.

The serving steps share the host's network (the container reaches the fake Slack API and a
held model server on 127.0.0.1, so the test decides when the model answers); step 2 proves
that nothing is fetched at run time. Test tooling: never part of the image.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from testkit.servers import ROOT, free_port
from testkit.slack import FakeSlack, HeldModel, post_mention

QUESTION = "How fast do I have to acknowledge a SEV1 page?"
SECRET = "image-test-secret"
UID = 10001  # the image's user
GRACE_S = 20  # what `stop` allows before SIGKILL


def _cpu() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return f"{line.split(':', 1)[1].strip()}, {os.cpu_count()} cores"
    return f"{os.cpu_count()} cores"


class Engine:
    """podman or docker, as the command line a team would type."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.podman = Path(path).name == "podman"

    def __call__(self, *args: str, check: bool = True, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        res = subprocess.run([self.path, *args], capture_output=True, text=True, timeout=timeout, check=False)
        if check and res.returncode != 0:
            raise AssertionError(f"{Path(self.path).name} {' '.join(args[:3])}… failed: {res.stderr.strip()[-400:]}")
        return res

    def read_only(self) -> list[str]:
        """A read-only root filesystem with nothing writable but the volumes (podman adds
        writable tmpfs mounts on /tmp and /run by default; docker adds none)."""
        return ["--read-only", "--read-only-tmpfs=false"] if self.podman else ["--read-only"]


_PROCESSES = (65536, 16384, 4096)  # tried in turn: the highest this host lets a container have


def fit_rlimits(engine: str, image: str, scratch: Path) -> str | None:
    """Let podman start containers on a host that is itself a container.

    podman, run as root, raises each container's open-files and processes limits to
    1048576; where the host may not grant that, every ``podman run`` fails ("error setting
    rlimit"). Then this run and its children (podman-compose too) read a containers.conf
    in ``scratch`` (``CONTAINERS_CONF``) that keeps the host's open-files limit and the
    highest processes limit a probe container accepts. Returns what it set, or None when
    nothing needed to change (docker, or podman that can)."""
    if Path(engine).name != "podman" or "CONTAINERS_CONF" in os.environ:
        return None
    probe = [engine, "run", "--rm", "--network=none", "--entrypoint", "/bin/true", image]
    if "rlimit" not in subprocess.run(probe, capture_output=True, text=True, check=False).stderr:
        return None
    conf = scratch / "containers.conf"
    files = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    for n in _PROCESSES:
        conf.write_text(f'[containers]\ndefault_ulimits = ["nofile={files}:{files}", "nproc={n}:{n}"]\n')
        env = {**os.environ, "CONTAINERS_CONF": str(conf)}
        if subprocess.run(probe, capture_output=True, text=True, check=False, env=env).returncode == 0:
            os.environ["CONTAINERS_CONF"] = str(conf)  # this harness's run and its children only
            return f"open files {files}, processes {n}"
    raise AssertionError(f"podman cannot set a container's rlimits here, even with {conf}: {conf.read_text()}")


def step(name: str, figure: str) -> None:
    click.echo(f"  ok  {name:58} {figure}")


def _wait(check: Callable[[], bool], timeout: float, what: str) -> float:
    """Seconds until ``check`` holds (polled: the container is another process)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if check():
            return time.monotonic() - t0
        time.sleep(0.25)
    raise AssertionError(f"{what}: not within {timeout:.0f} s")


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=3) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
    except OSError:
        return 0


def _volume(root: Path, name: str, owner: int | None = UID) -> Path:
    path = root / name
    path.mkdir(parents=True)
    if owner is not None:
        os.chown(path, owner, owner)
    return path


def offline(eng: Engine, image: str, docs: Path, data: Path) -> None:
    """Index and answer with no network at all."""
    base = ["run", "--rm", "--network=none", *eng.read_only(), "-v", f"{docs}:/docs:ro", "-v", f"{data}:/data"]
    t0 = time.monotonic()
    eng(*base, image, "index", "/docs")
    step("footnote index, no network", f"{time.monotonic() - t0:.1f} s")
    first = json.loads(eng(*base, image, "ask", "--json", QUESTION).stdout)
    if first["outcome"] == "pointed":  # a seven-file drive points until a teammate confirms
        source = next(p for p in first["pointers"] if "5 minutes" in p["quote"])
        eng(*base, image, "confirm", QUESTION, "--source", source["locator"] if "#" in source["url"] else source["url"])
        step("the demo question pointed at its passage, confirmed", source["doc"])
    t0 = time.monotonic()
    answer = json.loads(eng(*base, image, "ask", "--json", QUESTION).stdout)
    took = time.monotonic() - t0
    assert answer["outcome"] == "answered", answer
    (cited, *_) = answer["citations"]
    assert "[1]" in answer["answer"] and "5 minutes" in cited["quote"], answer
    step(
        "the demo question answered with its citation, no network", f"{cited['doc']} {cited['locator']} ({took:.1f} s)"
    )


class Serving:
    """``footnote serve --http`` in a container on the host's network."""

    def __init__(self, eng: Engine, image: str, docs: Path, data: Path, slack: FakeSlack, model: HeldModel) -> None:
        self.eng, self.port, self.name = eng, free_port(), f"footnote-image-test-{os.getpid()}"
        env = {
            "FOOTNOTE_SLACK_API_URL": slack.url,
            "FOOTNOTE_LLM_URL": model.url,
            "SLACK_BOT_TOKEN": "xoxb-image-test",
            "SLACK_SIGNING_SECRET": SECRET,
            "FOOTNOTE_SYNC_MINUTES": "0",
            "FOOTNOTE_HTTP_PORT": str(self.port),  # what the image's HEALTHCHECK probes
            "FOOTNOTE_SHUTDOWN_GRACE_S": "5",
            "FOOTNOTE_GATE_THRESHOLD": "0.70",  # the question reaches the (held) model
            "FOOTNOTE_GATE_POINT_THRESHOLD": "1.0",
        }
        self.args = [
            "run", "-d", "--name", self.name, "--network=host", *eng.read_only(),
            "-v", f"{docs}:/docs:ro", "-v", f"{data}:/data",
            *[x for k, v in env.items() for x in ("-e", f"{k}={v}")],
            image, "serve", "--http", str(self.port), "--host", "127.0.0.1",
        ]  # fmt: skip
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> float:
        """Start (or start again) the container; seconds until /readyz says ready."""
        t0 = time.monotonic()
        if self._exists():
            self.eng("start", self.name)
        else:
            self.eng(*self.args)
        _wait(lambda: _status(f"{self.url}/readyz") == 200 or not self._running(), 600, "/readyz")
        assert self._running(), self.logs()
        return time.monotonic() - t0

    def _exists(self) -> bool:
        return self.eng("inspect", self.name, check=False).returncode == 0

    def _running(self) -> bool:
        res = self.eng("inspect", "--format", "{{.State.Running}}", self.name, check=False)
        return res.stdout.strip() == "true"

    def exec(self, *cmd: str) -> subprocess.CompletedProcess[str]:
        return self.eng("exec", self.name, *cmd, check=False)

    def logs(self) -> str:
        res = self.eng("logs", self.name, check=False)
        return (res.stdout + res.stderr)[-2000:]

    def event(self, slack: FakeSlack, event_id: str, ts: str) -> int:
        return post_mention(self.url, slack, event_id, ts, QUESTION, SECRET)

    def stop(self) -> tuple[float, int]:
        """SIGTERM (then SIGKILL after the grace period): seconds, and the exit code."""
        t0 = time.monotonic()
        self.eng("stop", "-t", str(GRACE_S), self.name)
        took = time.monotonic() - t0
        code = self.eng("inspect", "--format", "{{.State.ExitCode}}", self.name).stdout.strip()
        return took, int(code)

    def remove(self) -> None:
        self.eng("rm", "-f", self.name, check=False)


_RSS = (
    "import glob,re\n"
    "kb=0\n"
    "for f in glob.glob('/proc/[0-9]*/status'):\n"
    "    try: m=re.search(r'VmRSS:\\s+(\\d+)', open(f).read())\n"
    "    except OSError: continue\n"
    "    kb+=int(m.group(1)) if m else 0\n"
    "print(kb)"
)


def finals_in(slack: FakeSlack, thread: str) -> list[dict[str, Any]]:
    """The final answers posted for the message ``thread``: into its placeholder, or into the
    stream that replaced it (a streaming model's answer)."""
    mine = {
        p["_ts"]
        for m in ("chat.postMessage", "chat.startStream")
        for p in slack.of(m)
        if p.get("thread_ts") == thread and not p.get("blocks")
    }
    return [f for f in slack.finals() if f.get("ts") in mine]


def serving(eng: Engine, image: str, docs: Path, data: Path) -> None:
    slack, model = FakeSlack(), HeldModel()
    box = Serving(eng, image, docs, data, slack, model)
    try:
        ready = box.start()
        step("serve --http: /healthz and /readyz from the host, new volume", f"ready in {ready:.1f} s")
        assert _status(f"{box.url}/healthz") == 200
        uid = box.exec("python", "-c", "import os; print(os.getuid())").stdout.strip()
        assert uid == str(UID), uid
        assert box.exec("python", "-c", "open('/opt/venv/x', 'w')").returncode != 0  # the root fs is read-only
        assert box.exec("python", "-c", "open('/tmp/x', 'w')").returncode != 0  # and so is /tmp
        assert box.exec("python", "-c", "open('/data/x', 'w')").returncode == 0  # only the volume is writable
        step("runs as a non-root user, root fs read-only, /data writable", f"uid {uid}")
        model.released.set()
        assert box.event(slack, "EvIMG1", "700.1") == 200
        _wait(lambda: bool(finals_in(slack, "700.1")), 120, "the answer in its thread")
        assert "[1]" in json.dumps(finals_in(slack, "700.1")[0].get("blocks"))
        step("a signed Slack event answered in its thread", f"{len(slack.calls)} Web API calls")
        if eng.podman:
            health = eng("healthcheck", "run", box.name, check=False)
            assert health.returncode == 0, health.stdout + health.stderr
        else:  # docker runs the check itself: interval 30 s after a 20 s start period
            _wait(
                lambda: eng("inspect", "--format", "{{.State.Health.Status}}", box.name).stdout.strip() == "healthy",
                120,
                "healthy",
            )
        step("the image's HEALTHCHECK", "healthy")
        rss = int(box.exec("python", "-c", _RSS).stdout.strip() or 0)
        step("RSS inside the container, serving", f"{rss / 1024:.0f} MB")

        model.released.clear()
        n = model.requests
        assert box.event(slack, "EvIMG2", "701.1") == 200
        assert model.wait_requests(n + 1)  # the model is writing the answer...
        took, code = box.stop()  # ...when the container is told to stop
        assert code == 0 and took < GRACE_S, (took, code, box.logs())
        assert finals_in(slack, "701.1") == []
        step("SIGTERM mid-answer: stopped cleanly", f"{took:.1f} s, exit {code}")
        model.released.set()
        again = box.start()
        _wait(lambda: bool(finals_in(slack, "701.1")), 180, "the journal's answer after the restart")
        assert len(finals_in(slack, "701.1")) == 1 and len(finals_in(slack, "700.1")) == 1
        step("restarted: the question in flight answered exactly once", f"ready again in {again:.1f} s")
        box.stop()
    except Exception:
        click.echo(box.logs(), err=True)
        raise
    finally:
        box.remove()
        model.close()
        slack.close()


def _engine(choice: str | None) -> Engine:
    path = choice or shutil.which("podman") or shutil.which("docker")
    if not path:
        raise click.ClickException("image-test needs podman or docker")
    return Engine(path)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--image", default="localhost/footnote:latest", show_default=True, help="The image to test.")
@click.option("--engine", default=None, help="podman or docker (default: whichever is installed, podman first).")
@click.option(
    "--docs", type=click.Path(exists=True, file_okay=False, path_type=Path), default=ROOT / "examples" / "docs"
)
def main(image: str, engine: str | None, docs: Path) -> None:
    eng = _engine(engine)
    click.echo(f"image-test: {image} with {Path(eng.path).name} on {_cpu()}")
    size = eng("image", "inspect", "--format", "{{.Size}}", image).stdout.strip()
    user = eng("image", "inspect", "--format", "{{.Config.User}}", image).stdout.strip()
    assert user and user not in ("0", "root"), user
    step("image size; its user", f"{int(size) / 1e9:.2f} GB; uid {user}")
    with tempfile.TemporaryDirectory(prefix="footnote-image-") as tmp:
        root = Path(tmp)
        fitted = fit_rlimits(eng.path, image, root)
        if fitted:
            step("podman may not raise rlimits here: containers.conf keeps", fitted)
        drive = root / "docs"
        shutil.copytree(docs, drive)
        os.chmod(root, 0o755)
        offline(eng, image, drive, _volume(root, "offline-data"))
        serving(eng, image, drive, _volume(root, "serve-data"))
    click.echo("image-test: passed")


if __name__ == "__main__":
    main()
