"""``make stack-test``: the scale-out stack of ``compose.yaml``, built and run here.

``python -m testkit.stack_test`` brings up the README's ``compose.yaml`` with podman-compose
or docker compose (two replicas sharing one data volume, the Chroma server, the llama.cpp
server and the nginx proxy, every image built from ``BASE``), then, printing a figure per step:

1. a signed Slack event sent to the proxy is answered in its thread, by the llama.cpp server,
   with its citation, through a fake Slack Web API on the host (the containers reach it at
   ``host.containers.internal``);
2. a second question: the replica answering it is killed (SIGKILL) while its model writes,
   and the question is still answered exactly once (its restart, or the other replica after
   ``DEAD_AFTER_S``, finds it in the shared journal).

Every image is built first; then the stack runs with **the network off**: it runs on a network
the test makes, and an iptables rule on the host rejects whatever its containers send beyond
it (they still reach each other and the host, where the fake Slack API listens). Each replica
is shown unable to reach the outside before the first question. ``--network-on`` skips this
(it needs root and iptables).

For step 2 the replicas' model is a held server on the host (``FOOTNOTE_LLM_URL``), so the
test decides when the answer comes. Test tooling: never part of an image.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import click

from testkit.image_test import _cpu, _status, _wait, finals_in, fit_rlimits, step
from testkit.servers import ROOT, free_port
from testkit.slack import FakeSlack, HeldModel, post_mention

SECRET = "stack-test-secret"
QUESTION = "How fast must a SEV1 page be acknowledged?"
HOST = "host.containers.internal"  # the host, as a container on podman's network sees it
OUTSIDE = ("pypi.org", 443)  # what a container must not reach with the network off
_CANARY = (
    "import socket, sys\n"
    "try:\n    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)\n"
    "except OSError as e:\n    print(type(e).__name__, e)\nelse:\n    print('reached')\n"
)


def _compose() -> list[str]:
    if shutil.which("podman-compose"):
        return ["podman-compose"]
    if shutil.which("docker"):
        return ["docker", "compose"]
    raise click.ClickException("stack-test needs podman-compose or docker compose")


def _compose_engine() -> str:
    return "podman" if _compose()[0] == "podman-compose" else "docker"


CNI_DIRS = ("/usr/lib/cni", "/usr/libexec/cni", "/opt/cni/bin")


def _names_resolve(engine: str) -> None:
    """The replicas reach "chroma" and "llm" by name: podman's CNI networks resolve names
    only with the dnsname plugin, a package of its own that podman does not pull in (Debian 12:
    golang-github-containernetworking-plugin-dnsname); without it every replica would wait
    on "chroma" until the test timed out."""
    if engine != "podman":
        return
    backend = subprocess.run(
        [engine, "info", "--format", "{{.Host.NetworkBackend}}"], capture_output=True, text=True, check=False
    ).stdout.strip()
    if backend == "cni" and not any((Path(d) / "dnsname").exists() for d in CNI_DIRS):
        raise click.ClickException(
            "podman's CNI networks here resolve no container names (no dnsname plugin in "
            f"{', '.join(CNI_DIRS)}): apt-get install golang-github-containernetworking-plugin-dnsname"
        )


class Stack:
    def __init__(self, project: str, env: dict[str, str], files: list[Path]) -> None:
        self.cmd = [*_compose(), "-p", project, *[x for f in files for x in ("-f", str(f))]]
        self.env = {**os.environ, **env}
        self.engine = _compose_engine()

    def __call__(self, *args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
        res = subprocess.run(
            [*self.cmd, *args], env=self.env, capture_output=True, text=True, timeout=timeout, check=False, cwd=ROOT
        )
        if res.returncode != 0:
            raise AssertionError(f"{' '.join(self.cmd[:1] + list(args))} failed: {(res.stdout + res.stderr)[-1500:]}")
        return res

    def containers(self) -> dict[str, str]:
        """service name -> container id, of this project's running containers."""
        out = subprocess.run(
            [self.engine, "ps", "--format", "{{.ID}} {{.Names}}"], capture_output=True, text=True, check=True
        ).stdout
        return {name: cid for cid, name in (line.split(maxsplit=1) for line in out.splitlines() if line.strip())}

    def logs(self) -> str:
        """The last lines of every container's log, for a failure's report."""
        out = []
        for name, cid in sorted(self.containers().items()):
            res = subprocess.run([self.engine, "logs", cid], capture_output=True, text=True)
            lines = [x for x in (res.stdout + res.stderr).splitlines() if "httpx" not in x and "GET /" not in x]
            out.append(f"--- {name}\n" + "\n".join(lines[-30:]))
        return "\n".join(out)

    def address(self, container: str) -> str:
        fmt = "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}"
        out = subprocess.run([self.engine, "inspect", "--format", fmt, container], capture_output=True, text=True)
        return out.stdout.strip()


class NetworkOff:
    """The stack's own network, cut from the world: a rule at the top of the host's FORWARD
    chain rejects what its containers send beyond its subnet. Traffic to the host itself
    (the fake Slack API, podman's DNS) is not forwarded, so it still flows."""

    def __init__(self, engine: str, name: str) -> None:
        if shutil.which("iptables") is None or os.geteuid() != 0:
            raise click.ClickException("the network-off run needs root and iptables (or pass --network-on)")
        self.engine, self.name = engine, name
        subprocess.run([engine, "network", "create", name], check=True, capture_output=True)
        (info,) = json.loads(
            subprocess.run([engine, "network", "inspect", name], capture_output=True, text=True).stdout
        )
        configs = info.get("subnets") or info.get("IPAM", {}).get("Config") or []  # podman, docker
        self.subnet = next(c.get("subnet") or c.get("Subnet") for c in configs)
        self.rule = ["FORWARD", "-s", self.subnet, "!", "-d", self.subnet, "-j", "REJECT"]
        self.rule += ["-m", "comment", "--comment", name]

    def __enter__(self) -> NetworkOff:
        subprocess.run(["iptables", "-I", self.rule[0], "1", *self.rule[1:]], check=True)
        return self

    def __exit__(self, *exc: object) -> None:
        subprocess.run(["iptables", "-D", *self.rule], check=False)
        subprocess.run([self.engine, "network", "rm", "-f", self.name], check=False, capture_output=True)

    def probe(self, container: str) -> str:
        """What ``container`` gets when it tries to reach the outside (an error, or 'reached')."""
        cmd = [self.engine, "exec", container, "python", "-c", _CANARY, *map(str, OUTSIDE)]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip()


def _event(port: int, slack: FakeSlack, event_id: str, ts: str) -> int:
    return post_mention(f"http://127.0.0.1:{port}", slack, event_id, ts, QUESTION, SECRET)


def _override(root: Path, slack: FakeSlack, model: HeldModel | None, network: str | None) -> Path:
    """The test's settings for both replicas: the fake Slack API (and the held model), and
    every service on ``network`` (made by the test: see :class:`NetworkOff`)."""
    env = {
        "FOOTNOTE_SLACK_API_URL": f"http://{HOST}:{slack.port}/api/",
        "FOOTNOTE_SYNC_MINUTES": "0",
        "FOOTNOTE_GATE_THRESHOLD": "0.70",  # on the three-file drive the question reaches the model
        "FOOTNOTE_GATE_POINT_THRESHOLD": "1.0",
    }
    if model is not None:
        env["FOOTNOTE_LLM_URL"] = f"http://{HOST}:{model.port}"
    path = root / "stack-test.yaml"
    services: dict[str, object] = {name: {"environment": env} for name in ("footnote-1", "footnote-2")}
    override: dict[str, object] = {"services": services}
    if network is not None:
        override["networks"] = {"default": {"name": network, "external": True}}
    path.write_text(json.dumps(override))  # JSON is YAML
    return path


def _bring_up(stack: Stack, port: int) -> float:
    t0 = time.monotonic()
    stack("up", "-d")
    _wait(lambda: _status(f"http://127.0.0.1:{port}/readyz") == 200, 900, "/readyz through the proxy")
    return time.monotonic() - t0


def _answered(stack: Stack, port: int, slack: FakeSlack) -> None:
    """Step 1: a signed event through the proxy, answered by the llama.cpp server."""
    t0 = time.monotonic()
    assert _event(port, slack, "EvSTACK1", "800.1") == 200
    _wait(lambda: bool(finals_in(slack, "800.1")), 300, "the answer through the proxy")
    (final,) = finals_in(slack, "800.1")
    assert "[1]" in json.dumps(final.get("blocks")), final
    step("a Slack event through the proxy, answered by llama.cpp", f"{time.monotonic() - t0:.1f} s")


def _replicas(stack: Stack, project: str) -> dict[str, str]:
    """footnote-1 / footnote-2 -> container id (podman names them project_service_1, docker project-service-1)."""
    return {
        re.sub(r"[_-]\d+$", "", name[len(project) + 1 :]): cid
        for name, cid in stack.containers().items()
        if name.startswith(project) and "footnote-" in name[len(project) + 1 :]
    }


def _killed_mid_answer(stack: Stack, project: str, port: int, slack: FakeSlack, model: HeldModel) -> None:
    """Step 2: the replica whose model is writing is killed; the question is answered once."""
    n = model.requests
    assert _event(port, slack, "EvSTACK2", "801.1") == 200
    assert model.wait_requests(n + 1)  # a replica's model is writing the answer...
    replicas = _replicas(stack, project)
    answering = next(s for s, cid in replicas.items() if model.peers[-1] in stack.address(cid).split())
    subprocess.run([stack.engine, "kill", "-s", "KILL", replicas[answering]], check=True, capture_output=True)
    t0 = time.monotonic()
    model.released.set()
    _wait(lambda: bool(finals_in(slack, "801.1")), 300, "the answer after the replica's death")
    took = time.monotonic() - t0
    assert len(finals_in(slack, "801.1")) == 1 and len(finals_in(slack, "800.1")) == 1
    step(f"{answering} killed mid-answer: answered exactly once", f"{took:.0f} s after the kill")


def _cut_off(off: NetworkOff | None, stack: Stack, project: str) -> None:
    """With the network off, no replica reaches the outside (shown, not assumed)."""
    if off is None:
        return
    seen = {name: off.probe(cid) for name, cid in sorted(_replicas(stack, project).items())}
    assert seen and not any(v == "reached" for v in seen.values()), seen
    got = "; ".join(f"{k}: {v}" for k, v in seen.items())
    step("the network off", f"{off.subnet} reaches nothing beyond itself ({OUTSIDE[0]}:{OUTSIDE[1]} from {got})")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--base", default="localhost/debian:bookworm", show_default=True, help="BASE of every image.")
@click.option(
    "--network-on", is_flag=True, help="Run the stack with the host's network (the default cuts it: root, iptables)."
)
def main(base: str, network_on: bool) -> None:
    click.echo(f"stack-test: compose.yaml with {_compose()[0]} on {_cpu()}")
    engine = _compose_engine()
    _names_resolve(engine)
    project = f"footnote-stack-{os.getpid()}"
    with tempfile.TemporaryDirectory(prefix="footnote-stack-") as tmp:
        root = Path(tmp)
        fitted = fit_rlimits(engine, base, root)
        if fitted:
            step("podman may not raise rlimits here: containers.conf keeps", fitted)
        shutil.copytree(ROOT / "examples" / "docs", root / "docs")
        port = free_port()
        env = {
            "BASE": base,
            "DOCS": str(root / "docs"),
            "PORT": str(port),
            "SLACK_BOT_TOKEN": "xoxb-stack-test",
            "SLACK_SIGNING_SECRET": SECRET,
        }
        t0 = time.monotonic()
        Stack(project, env, [ROOT / "compose.yaml"])("build", "proxy")  # before the network goes off
        step("the proxy's image built (Footnote's: make image)", f"{time.monotonic() - t0:.0f} s")
        off = None if network_on else NetworkOff(engine, f"{project}-net")
        with off or contextlib.nullcontext():
            _run(project, env, root, port, off)
    click.echo("stack-test: passed")


def _run(project: str, env: dict[str, str], root: Path, port: int, off: NetworkOff | None) -> None:
    slack = FakeSlack(host="0.0.0.0")
    net = off.name if off else None
    first = Stack(project, env, [ROOT / "compose.yaml", _override(root, slack, None, net)])
    try:
        up = _bring_up(first, port)
        step("the stack up (two replicas, Chroma, llama.cpp, proxy)", f"ready through the proxy in {up:.0f} s")
        _cut_off(off, first, project)
        _answered(first, port, slack)
    except Exception:
        click.echo(first.logs(), err=True)
        click.echo(f"fake Slack saw: {[m for m, _ in slack.calls]}", err=True)
        raise
    finally:
        first("down", "-v", timeout=300)
    model = HeldModel(host="0.0.0.0")
    second = Stack(project, env, [ROOT / "compose.yaml", _override(root, slack, model, net)])
    try:
        _bring_up(second, port)
        _killed_mid_answer(second, project, port, slack, model)
    except Exception:
        click.echo(second.logs(), err=True)
        raise
    finally:
        second("down", "-v", timeout=300)
        model.close()
        slack.close()


if __name__ == "__main__":
    main()
