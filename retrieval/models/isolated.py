"""Running a measurement that may take the process down in a child process of its own.

llama.cpp picks its matrix kernels by the CPU it finds, and on some machines a form of
the weights faults inside them: on a 2-core Intel Xeon (Sapphire Rapids, AMX, virtualised)
the shipped Q5_0 file and its Q8_0 conversion ended the process with SIGSEGV on the first
probe prompt, while F16 and BF16 answered. A segfault cannot be caught, so each trial runs
in a spawned child: a crash is then a result ("that form is not usable here"), the process
that serves never loads a form that was not seen to answer, and the memory a conversion or
a trial takes is returned when its child ends.
"""

from __future__ import annotations

import multiprocessing
import signal
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, TypeVar

from retrieval.errors import ModelError

T = TypeVar("T")


class Crashed(ModelError):
    """The child ended without a result: killed by a signal, exited, or ran out of time."""


def in_child(fn: Callable[..., T], *args: Any, timeout_s: float) -> T:
    """``fn(*args)`` run in a spawned child (``fn`` and ``args`` must pickle).

    A :class:`~retrieval.errors.ModelError` raised there is raised here with its message;
    a child that dies or gives no result within ``timeout_s`` raises :class:`Crashed`."""
    # spawn, not fork: the parent holds threads (Chroma, ONNX Runtime) a fork would copy mid-lock.
    ctx = multiprocessing.get_context("spawn")
    recv, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_run, args=(send, fn, args), daemon=True)
    child.start()
    send.close()  # the child holds the only writer: its death is an EOF here
    try:
        if not recv.poll(timeout_s):
            raise Crashed(f"no result within {timeout_s:.0f} s")
        ok, value = recv.recv()
    except EOFError:
        child.join(10)
        raise Crashed(f"the process crashed ({_ending(child.exitcode)})") from None
    finally:
        recv.close()
        if child.is_alive():
            child.kill()
        child.join()
    if not ok:
        raise ModelError(value)
    result: T = value
    return result


def _run(conn: Connection, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    try:
        outcome: tuple[bool, Any] = (True, fn(*args))
    except Exception as exc:
        outcome = (False, str(exc) if isinstance(exc, ModelError) else f"{type(exc).__name__}: {exc}")
    conn.send(outcome)
    conn.close()


def _ending(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            return signal.Signals(-exitcode).name
        except ValueError:
            return f"signal {-exitcode}"
    return f"exit status {exitcode}"
