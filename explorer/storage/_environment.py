"""What a run records about the machine and software it ran on."""

from __future__ import annotations

import functools
import os
import platform
import socket
import subprocess
from pathlib import Path
from typing import Any

from explorer import _tvm
from explorer.target import Target


def environment() -> dict[str, Any]:
    """The software and hardware a measurement depends on, as a JSON-able dict.

    Stored with every run so that results from different machines, TVM builds or thread settings
    can be told apart later.

    Returns:
        ``tvm_version``, ``ffi_version``, ``python_version``, ``platform``, ``cpu_model``,
        ``target_key`` (of ``Target.local_cpu()``), ``tvm_num_threads`` (the variable, or
        ``None``), ``hostname`` and ``git_commit`` (of this package's checkout, or ``None``
        when it is not a git repository).

    Example:
        >>> from explorer.storage import environment
        >>> sorted(environment())[:3]
        ['cpu_model', 'ffi_version', 'git_commit']
    """
    return {
        "tvm_version": _tvm.TVM_VERSION,
        "ffi_version": _tvm.FFI_VERSION,
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "target_key": Target.local_cpu().key(),
        "tvm_num_threads": os.environ.get("TVM_NUM_THREADS"),
        "hostname": socket.gethostname(),
        "git_commit": _git_commit(),
    }


@functools.cache
def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


@functools.cache
def _git_commit() -> str | None:
    # Cached: the checkout does not change under a running process often enough to pay a
    # subprocess per run.
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    return commit if out.returncode == 0 and commit else None
