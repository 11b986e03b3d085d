"""Several threads and several processes writing one database file; a writer killed mid-run."""

from __future__ import annotations

import os
import queue
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from explorer.storage import SQLiteStore

WRITER = Path(__file__).with_name("_writer.py")


class Writer:
    """A ``_writer.py`` process whose stdout lines can be awaited with a timeout."""

    def __init__(self, db: Path, runs: list[int], tag: str, *args: str) -> None:
        cmd = [sys.executable, str(WRITER), str(db), "--runs", ",".join(map(str, runs))]
        self.proc = subprocess.Popen(
            [*cmd, "--tag", tag, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put(None)

    def wait_for(self, text: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            if line is None:
                raise AssertionError(f"writer exited before {text!r}: {self.stderr()}")
            if line == text:
                return

    def stderr(self) -> str:
        self.proc.wait(timeout=60)
        assert self.proc.stderr is not None
        return self.proc.stderr.read()

    def finish(self) -> None:
        assert self.proc.wait(timeout=120) == 0, self.stderr()

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:  # a failed test must not leave a writer running
            self.proc.kill()
            self.proc.wait(timeout=30)


def _check_batches(trials, expected_size: int) -> dict[tuple[str, int], list]:
    """Every (writer, batch) group is complete and occupies contiguous seqs of one run."""
    groups = defaultdict(list)
    for t in trials:
        groups[(t.candidate.decisions["tag"], t.candidate.decisions["batch"])].append(t)
    for key, members in groups.items():
        assert len(members) == expected_size, key
        assert [m.candidate.decisions["index"] for m in members] == list(range(expected_size))
        assert len({m.run_id for m in members}) == 1
        seqs = [m.seq for m in members]
        assert seqs == list(range(seqs[0], seqs[0] + expected_size)), key
    return groups


def _integrity(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        conn.close()


def test_two_processes_appending_to_one_file_lose_nothing(
    db_path, workload, other_workload, target
):
    with SQLiteStore(db_path) as store:
        shared = store.create_run(workload, target, "random").id
        own = {
            "A": store.create_run(workload, target, "random").id,
            "B": store.create_run(other_workload, target, "random").id,
        }
    go = db_path.parent / "go"
    batches, size = 40, 25
    with (
        Writer(db_path, [shared, own["A"]], "A", "--batches", str(batches), "--size", str(size),
               "--go", str(go)) as a,
        Writer(db_path, [shared, own["B"]], "B", "--batches", str(batches), "--size", str(size),
               "--go", str(go)) as b,
    ):  # fmt: skip
        a.wait_for("ready")
        b.wait_for("ready")
        go.touch()  # both start writing at the same moment
        a.finish()
        b.finish()

    with SQLiteStore(db_path) as store:
        trials = store.trials()
        assert len(trials) == 2 * batches * size
        assert len({t.id for t in trials}) == len(trials)
        assert store.count_trials(run_id=shared) == batches * size
        for run_id in (shared, *own.values()):
            assert [t.seq for t in store.trials(run_id=run_id)] == list(
                range(store.count_trials(run_id=run_id))
            )
        groups = _check_batches(trials, size)
        assert len(groups) == 2 * batches
        # The writers really overlapped in time (else this test would not test concurrency).
        spans = {
            tag: (min(t.created_at for t in ts), max(t.created_at for t in ts))
            for tag in "AB"
            for ts in [[t for t in trials if t.candidate.decisions["tag"] == tag]]
        }
        assert spans["A"][0] < spans["B"][1] and spans["B"][0] < spans["A"][1]
    assert _integrity(db_path) == "ok"


def test_threads_appending_through_one_store_lose_nothing(db_path, workload, target, make_trial):
    with SQLiteStore(db_path) as store:
        shared = store.create_run(workload, target, "random").id
        own = [store.create_run(workload, target, "random").id for _ in range(4)]

        def work(n: int) -> list[int]:
            ids = []
            for b in range(15):
                run_id = shared if b % 2 else own[n]
                batch = [make_trial(workload, target, decisions={"tag": str(n), "batch": b,
                                                                  "index": i, "size": 6})
                         for i in range(6)]  # fmt: skip
                ids += [r.id for r in store.add_trials(run_id, batch)]
            return ids

        with ThreadPoolExecutor(4) as pool:
            ids = [i for result in pool.map(work, range(4)) for i in result]
        trials = store.trials()
        assert sorted(ids) == [t.id for t in trials] and len(set(ids)) == 4 * 15 * 6
        for run_id in (shared, *own):
            seqs = [t.seq for t in store.trials(run_id=run_id)]
            assert seqs == list(range(len(seqs)))
        assert store.count_trials(run_id=shared) == 4 * 7 * 6
        _check_batches(trials, 6)


def test_a_writer_killed_mid_run_leaves_complete_batches_and_a_sound_file(
    db_path, workload, target
):
    with SQLiteStore(db_path) as store:
        run_id = store.create_run(workload, target, "random").id
    size = 400  # big batches: a good share of the time is spent inside a transaction
    rng = random.Random(7)
    for round_ in range(4):
        with Writer(db_path, [run_id], f"r{round_}", "--forever", "--size", str(size)) as writer:
            writer.wait_for("committed 1")
            t0 = time.monotonic()
            writer.wait_for("committed 2")
            time.sleep(rng.uniform(0, time.monotonic() - t0))  # somewhere within a later batch
            os.kill(writer.proc.pid, signal.SIGKILL)
            assert writer.proc.wait(timeout=30) == -signal.SIGKILL

        with SQLiteStore(db_path) as store:  # opens (and recovers) what the writer left
            trials = store.trials(run_id=run_id)
            assert [t.seq for t in trials] == list(range(len(trials)))
            groups = _check_batches(trials, size)
            batches = sorted(b for tag, b in groups if tag == f"r{round_}")
            assert len(batches) >= 3 and batches == list(range(len(batches)))
        assert _integrity(db_path) == "ok"


def test_several_stores_creating_one_new_file_at_once(db_path, workload, target):
    barrier = threading.Barrier(4)

    def open_and_write(n: int) -> int:
        barrier.wait()  # all four find the file missing, then race to create it
        with SQLiteStore(db_path) as store:
            return store.create_run(workload, target, f"s{n}").id

    for _ in range(3):
        db_path.unlink(missing_ok=True)
        for side in db_path.parent.glob("records.db-*"):
            side.unlink()
        with ThreadPoolExecutor(4) as pool:
            ids = list(pool.map(open_and_write, range(4)))
        assert sorted(ids) == [1, 2, 3, 4]
        assert _integrity(db_path) == "ok"
