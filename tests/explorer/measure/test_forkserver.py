"""Workers are forks of one server per caller process, which imported TVM once: what they
inherit (nothing of the caller's script), what they take from the caller at their start (its
environment and folder), and what happens when the server or the caller goes."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest
from _measure_cases import MEMORY_LIMIT

from explorer.core._pool import WorkerPool

HOOKS = "explorer.testing.hooks"


@pytest.fixture
def pool():
    p = WorkerPool(num_build_workers=1, memory_limit_bytes=MEMORY_LIMIT)
    yield p
    p.close()


def _server_of(pool: WorkerPool) -> psutil.Process:
    (pid,) = pool.pids()["run"] or pool.pids()["build"]
    return psutil.Process(pid).parent()


def test_every_pool_of_a_process_forks_its_workers_from_one_server(pool):
    assert pool.call(f"{HOOKS}:getpid", num_threads=1)["ok"]
    server = _server_of(pool)
    assert server.pid != os.getpid() and server.parent().pid == os.getpid()
    assert "explorer.measure._worker" in server.cmdline()  # what it imported before forking
    other = WorkerPool(num_build_workers=1, memory_limit_bytes=MEMORY_LIMIT)
    try:
        assert other.call(f"{HOOKS}:getpid", role="build")["ok"]
        assert _server_of(other).pid == server.pid
    finally:
        other.close()


def test_a_worker_takes_the_callers_environment_and_folder_at_its_start(
    pool, monkeypatch, tmp_path
):
    assert pool.call(f"{HOOKS}:getpid", num_threads=1)["ok"]  # the server is up before these
    monkeypatch.setenv("EXPLORER_FORK_PROBE", "set after the server started")
    monkeypatch.chdir(tmp_path)
    late = WorkerPool(num_build_workers=1, memory_limit_bytes=MEMORY_LIMIT)
    try:
        got = late.call("os:getenv", "EXPLORER_FORK_PROBE", num_threads=2)["value"]
        assert got == "set after the server started"
        assert late.call("os:getcwd", num_threads=2)["value"] == str(tmp_path)
        # NumPy's BLAS was loaded by the server: the worker sets its thread count itself.
        info = late.call("threadpoolctl:threadpool_info", num_threads=1)["value"]
        assert {lib["num_threads"] for lib in info if lib["user_api"] == "blas"} == {1}, info
    finally:
        late.close()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to bind to one")
def test_a_worker_takes_the_callers_cores_not_those_of_the_thread_that_started_the_server():
    script = textwrap.dedent(
        """
        import os, threading
        from explorer.core._pool import WorkerPool
        pool = WorkerPool(num_build_workers=1, memory_limit_bytes=0)
        replies = []

        def pinned():  # as a thread timing a kernel is
            os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
            replies.append(pool.call("os:sched_getaffinity", 0, num_threads=1))

        thread = threading.Thread(target=pinned)
        thread.start()
        thread.join()
        print(sorted(replies[0]["value"]) == sorted(os.sched_getaffinity(0)))
        pool.close()
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True"]


def test_a_killed_server_takes_its_workers_and_the_next_request_brings_new_ones(pool):
    pid = pool.call(f"{HOOKS}:getpid", num_threads=1)["value"]
    server = _server_of(pool)
    server.kill()
    server.wait(10)
    gone, _ = psutil.wait_procs([psutil.Process(pid)], timeout=15)  # its parent changed
    assert gone
    again = pool.call(f"{HOOKS}:getpid", num_threads=1)
    assert again["ok"] and again["value"] != pid
    assert pool.num_replaced == 1
    assert _server_of(pool).pid != server.pid


def test_a_script_without_a_main_guard_runs_once(tmp_path):
    # multiprocessing's forkserver would run the script again in every worker it starts.
    log = tmp_path / "ran.txt"
    script = tmp_path / "unguarded.py"
    script.write_text(
        textwrap.dedent(
            f"""
            from explorer.core._pool import WorkerPool
            with open({str(log)!r}, "a") as fh:
                fh.write("ran\\n")
            pool = WorkerPool(num_build_workers=1, memory_limit_bytes=0)
            runner = pool.call("os:getpid", num_threads=1)
            builder = pool.call("os:getpid", role="build")
            print(runner["ok"], builder["ok"])
            pool.close()
            """
        )
    )
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True"]
    assert log.read_text() == "ran\n"


def test_a_caller_killed_with_kill_9_leaves_no_server_and_no_worker(tmp_path):
    script = textwrap.dedent(
        """
        import sys, time
        from explorer.core._pool import WorkerPool
        pool = WorkerPool(num_build_workers=1, memory_limit_bytes=0)
        pool.call("os:getpid", num_threads=1)
        print(*pool.pids()["run"], flush=True)
        time.sleep(600)
        """
    )
    caller = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=tmp_path
    )
    try:
        worker = psutil.Process(int(caller.stdout.readline()))
        server = worker.parent()
        assert server.parent().pid == caller.pid
        caller.send_signal(signal.SIGKILL)
        caller.wait(10)
        gone, alive = psutil.wait_procs([server, worker], timeout=15)
        assert not alive, alive
    finally:
        caller.kill()
        caller.wait()
        caller.stdout.close()


def test_a_command_leaves_no_process_behind_when_it_returns(tmp_path):
    explorer = Path(sys.executable).with_name("explorer")
    tiny = ["measure", "matmul", "-p", "M=16", "-p", "N=16", "-p", "K=16", "--db"]
    proc = subprocess.Popen(
        [str(explorer), *tiny, str(tmp_path / "r.db")],
        start_new_session=True,  # its own process group: everything it started is in it
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = proc.communicate(timeout=300)
    assert proc.returncode in (0, 1), err  # 1: a noisy reading on a busy machine
    left = []
    for p in psutil.process_iter(["pid"]):
        with contextlib.suppress(psutil.Error, ProcessLookupError):
            if os.getpgid(p.pid) == proc.pid and p.status() != psutil.STATUS_ZOMBIE:
                left.append(p.cmdline())
    assert not left, left
