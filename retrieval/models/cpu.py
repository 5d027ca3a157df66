"""What the CPU can do: its model, vector instructions and cores, read from
/proc/cpuinfo (never by importing torch), and which library versions are installed.
Every runtime choice (embedder, language model weights) is keyed by them and every
benchmark figure is printed with the CPU.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import os
import platform
import sys
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class CpuInfo:
    """What the CPU can do, for choosing a runtime and for every benchmark figure."""

    model: str
    capability: str  # PyTorch's vector ISA: AVX2, AVX512, ...
    flags: frozenset[str] = field(default_factory=frozenset)
    cores: int = 1

    @property
    def native_bf16(self) -> bool:
        return bool({"avx512_bf16", "amx_bf16"} & self.flags)

    def describe(self) -> str:
        extras = [f for f in ("avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16") if f in self.flags]
        bf16 = "native bf16" if self.native_bf16 else "no native bf16"
        return f"{self.model}, {self.cores} cores, {self.capability} ({', '.join(extras) or 'no AVX-512'}; {bf16})"

    def key(self) -> str:
        return hashlib.sha1(f"{self.model}|{sorted(self.flags)}|{self.cores}".encode()).hexdigest()[:12]


@functools.cache
def cpu_info() -> CpuInfo:
    model, flags = platform.processor() or platform.machine(), frozenset[str]()
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("model name") and ":" in line:
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and ":" in line:
                flags = frozenset(line.split(":", 1)[1].split())
                break
    return CpuInfo(model, _vector_isa(flags), flags, os.cpu_count() or 1)


def _vector_isa(flags: frozenset[str]) -> str:
    """PyTorch's name for the CPU's vector ISA: from torch when it is loaded anyway, else
    from the flags by torch's own rule (importing torch just for this costs ~300 MB)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        with contextlib.suppress(Exception):
            return str(torch.backends.cpu.get_cpu_capability())
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        return "AVX512"
    if "avx2" in flags:
        return "AVX2"
    return "DEFAULT" if flags else "unknown"


def installed_version(dist: str) -> str:
    """A library's installed version from its package metadata ("none" when absent):
    importing torch or llama_cpp just to read ``__version__`` costs seconds."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "none"


def rss_mb(pid: int | None = None) -> float:
    """A process's resident memory now, in MB (``VmRSS``; this process by default; 0 where
    ``/proc`` is missing or the process is gone)."""
    try:
        for line in Path(f"/proc/{pid or 'self'}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return 0.0
