"""Verdicts that survive a busy machine (issue 21), checked beside two CPU burners.

Each test reproduces a run seen on main under load: a correct kernel that exited 1 because its
timing was noisy, a tune that called the unscheduled program its answer while its own trials
were 8x faster, an expression's tune with "no successful trial". The burners (``burners``
fixture) hold both cores of the test machine for the whole test.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from explorer.measure import Candidate, LocalMeasurer, fastest_round
from explorer.search._baseline import baseline_candidate
from explorer.session import ScheduleSession
from explorer.storage import get_store, summarize_run
from explorer.target import Target
from explorer.types import MeasureStatus
from explorer.workloads import get_workload

# Timing-sensitive: run alone after the parallel part of `make test` (the `serial` marker).
pytestmark = [pytest.mark.serial, pytest.mark.timeout(900)]

CONV = {
    "N": 1, "CI": 32, "H": 30, "W": 30, "CO": 32, "KH": 3, "KW": 3,
    "stride": 2, "padding": 0, "dilation": 2,
}  # fmt: skip


def explorer(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "explorer", *args], capture_output=True, text=True, timeout=timeout
    )


def params(values: dict[str, int]) -> list[str]:
    return [arg for k, v in values.items() for arg in ("-p", f"{k}={v}")]


def rows_of(db) -> str:
    """Every trial of the database, one line each: what a failed verdict is read from."""
    with get_store(db, read_only=True) as store:
        return "".join(
            f"\n{r.id} {r.status.value} again={r.is_remeasure} hash={r.trace_hash % 10**6} "
            f"{[f'{x * 1e6:.3g}us' for x in r.run_secs]}"
            for r in store.trial_rows()
        )


def test_a_correct_kernel_exits_0_on_a_busy_machine(burners, tmp_path):
    # It exited 1 in 2 of 3 runs ("noisy ... matches NumPy"): scripts using && failed at random.
    db = tmp_path / "records.db"
    for _ in range(3):
        out = explorer("measure", "matmul", *params({"M": 64, "N": 64, "K": 64}), "--db", str(db))
        assert out.returncode == 0, out.stdout + out.stderr
        assert out.stdout.startswith("ok: ") and "matches NumPy" in out.stdout, out.stdout
    with get_store(db, read_only=True) as store:
        assert [t.status for t in store.trials()] == [MeasureStatus.OK] * 3


def test_a_busy_machine_does_not_flip_a_tunes_verdict(burners, tmp_path):
    """The issue's conv2d: an `ok` trial at 0.65 ms against 5.56 ms unscheduled, and "no
    schedule beat the unscheduled program" (then --save-trace saved the unscheduled program).
    The verdict must agree with a paired re-timing afterwards (within 1.5x)."""
    db, saved = tmp_path / "records.db", tmp_path / "best.json"
    out = explorer(
        "tune", "conv2d", *params(CONV), "--strategy", "random", "--trials", "16",
        "--db", str(db), "--save-trace", str(saved), "-q",
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "x faster than unscheduled" in out.stdout, out.stdout + rows_of(db)
    workload, target = get_workload("conv2d", **CONV), Target.local_cpu()
    base = baseline_candidate(workload, target)
    best = Candidate(workload, target, json.loads(saved.read_text()))
    assert best.trace != base.trace  # the saved trace is a schedule, not the unscheduled program
    with get_store(db, read_only=True) as store:
        (run,) = store.runs()
        summary = summarize_run(run.id, store.trial_rows(run_id=run.id))
    assert summary.is_confirmed and summary.speedup_over_baseline is not None
    # The re-timing is itself a measurement beside the burners: a 2-thread schedule can spend
    # whole stretches waiting for a burner's time slice (a CI run read its every repeat of 3
    # rounds at 1.9 ms or more, against 0.12 ms before), so it takes ten rounds, read by their
    # fastest repeat like the run's own verdict (a round of this conv2d takes ~0.2 s).
    with LocalMeasurer() as m:
        best_rounds, base_rounds = m.measure_paired([best, base], rounds=10)
    paired = fastest_round(base_rounds) / fastest_round(best_rounds)
    readings = "\n".join(
        f"{name}: " + " ".join(f"{(r.fastest_secs or 0) * 1e6:.0f}us" for r in rounds)
        for name, rounds in (("chosen", best_rounds), ("unscheduled", base_rounds))
    )
    assert paired > 1, (
        f"the schedule the run chose is not faster, re-timed side by side\n{readings}\n"
        + out.stdout
        + rows_of(db)
    )
    assert 1 / 1.5 <= summary.speedup_over_baseline / paired <= 1.5, (summary, readings)


def test_a_five_input_expression_tunes_to_a_success(burners, tmp_path):
    # A kernel of microseconds whose every timing spread wide: "no successful trial", exit 1,
    # although it ran and matched NumPy.
    out = explorer(
        "tune", "expr", "--expr", "F[i, j] = A[i, j] * B[j] + C[i] * D[i, j] - E[j]",
        "--shape", "A=64x128", "--shape", "B=128", "--shape", "C=64", "--shape", "D=64x128",
        "--shape", "E=128", "--trials", "4", "--db", str(tmp_path / "records.db"), "-q",
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "best: " in out.stdout and "no successful trial" not in out.stdout, out.stdout


def test_a_2_thread_kernel_reads_its_cost_beside_burners_of_its_own_session(shared_burners):
    """Burners in the caller's session (its scheduling group under Linux's autogroup) took
    turns with the kernel's worker thread: this schedule of matmul 256 read 0.31 ms in one
    measurement and 4-5 ms in the next, 0.29 ms quiet (the runner now has a session of its
    own). The quiet reading is taken with the burners stopped (SIGSTOP), then they run."""
    session = ScheduleSession(get_workload("matmul", M=256, N=256, K=256))
    session.apply("split", loop="i", factors=[None, 32])
    session.apply("split", loop="j", factors=[None, 64])
    session.apply("reorder", loops=["i_0", "j_0", "k", "i_1", "j_1"])
    session.apply("vectorize", loop="j_1")
    session.apply("parallel", loop="i_0")
    cand = session.candidate()
    for pid in shared_burners:
        os.kill(pid, signal.SIGSTOP)  # quiet for the reference reading
    with LocalMeasurer() as m:
        (quiet,) = m.measure([cand])
        for pid in shared_burners:
            os.kill(pid, signal.SIGCONT)
        busy = [m.measure([cand])[0] for _ in range(5)]
    assert quiet.is_ok and all(r.is_ok for r in busy), [r.error_msg for r in (quiet, *busy)]
    readings = [f"{r.median_secs * 1e3:.3f} ms" for r in busy]
    assert max(r.median_secs for r in busy) <= 1.5 * quiet.median_secs, (
        f"quiet {quiet.median_secs * 1e3:.3f} ms; beside the burners {readings}"
    )


def test_a_tiny_tune_beside_burners_of_its_own_session_reads_tight_repeats(
    shared_burners, tmp_path
):
    """`explorer tune matmul 8 --trials 2` beside burners of its own session took 50 s
    instead of 5 and stored repeats of one 0.8 us schedule at 1.6 us to 4 ms: each 2-thread
    call waited for a burner's time slice. Every reading's repeats must agree within 2x, give
    or take a microsecond: a wait for a time slice costs far more, while a 30 ns baseline's
    repeats once read 29-65 ns on a slow 2-core VM (a cache miss, not a wait)."""
    db = tmp_path / "records.db"
    out = explorer(
        "tune", "matmul", *params({"M": 8, "N": 8, "K": 8}), "--trials", "2", "--batch", "2",
        "--db", str(db), "-q",
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    with get_store(db, read_only=True) as store:
        rows = [r for r in store.trial_rows() if r.run_secs]
    assert len(rows) >= 4, rows_of(db)  # 2 trials, the baseline and their re-timing
    assert all(max(r.run_secs) <= 2 * min(r.run_secs) + 1e-6 for r in rows), rows_of(db)
