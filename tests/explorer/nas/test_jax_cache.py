"""The programs XLA compiles for a Fisher Potential are kept on disk and read by the next
process (explorer.nas._jax), each process a real one, as two `explorer nas` runs are."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from explorer.nas import JAX_CACHE_ENV

pytest.importorskip("jax")

# The stem and first block of the CIFAR ResNet-18: compiled in seconds, not the whole network's
# 20 (what the cache is for).
SCRIPT = """
import dataclasses, json, warnings
warnings.simplefilter("error")  # a warning about the cache would fail the run
from explorer.nas import fisher_potential, get_network
net = get_network("resnet18_cifar", width=2)
net = dataclasses.replace(net, blocks=net.blocks[:1])
fp = fisher_potential(net, batch_size=8, seed=0)
print(json.dumps([fp.total, *fp.blocks, fp.loss]))
"""


def fisher(env: dict[str, str]) -> list[float]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return json.loads(done.stdout)


def entries(folder: Path) -> dict[str, bytes]:
    """The compiled programs kept in ``folder`` (not the times they were last read)."""
    if not folder.exists():
        return {}
    return {p.name: p.read_bytes() for p in folder.glob("*-cache")}


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")}
    return {**env, JAX_CACHE_ENV: str(tmp_path / "jax")}


def test_a_second_process_reads_the_programs_the_first_compiled(tmp_path, env):
    cache = tmp_path / "jax"
    first = fisher(env)
    kept = entries(cache)
    assert any(name.startswith("jit_") for name in kept), sorted(kept)
    assert fisher(env) == first  # the same numbers, from the kept programs:
    assert entries(cache) == kept  # nothing compiled again, nothing rewritten


def test_damaged_entries_are_compiled_again_without_a_word(tmp_path, env):
    cache = tmp_path / "jax"
    first = fisher(env)
    for path in cache.glob("*-cache"):
        path.write_bytes(path.read_bytes()[:50])  # cut short, as a full disk leaves one
    assert fisher(env) == first  # warnings are errors in the script: none was raised


def test_jax_s_own_cache_setting_is_the_user_s_and_is_kept(tmp_path, env):
    own = tmp_path / "users-own"
    users = {"JAX_COMPILATION_CACHE_DIR": str(own)}
    users["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"  # keep even the small programs
    fisher({**env, **users})
    assert entries(own) and not entries(tmp_path / "jax")


def test_a_cache_folder_that_cannot_be_used_costs_time_not_the_result(tmp_path, env):
    """A file where the folder should be, or a folder below it: nothing kept, nothing said."""
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    first = fisher(env)
    for folder in (a_file, a_file / "below"):
        assert fisher({**env, JAX_CACHE_ENV: str(folder)}) == first
    assert a_file.read_text() == "not a folder"
