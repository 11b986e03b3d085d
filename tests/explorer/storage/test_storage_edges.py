"""The record-database commands at their edges (issue 8's contract): a damaged file, hostile
MetaSchedule record lines, paths that do not exist, and trial counts that include re-timings.

Bad input is one plain ``error:`` sentence and exit 2, nothing printed before it, nothing changed
or created. Real SQLite files and the real CLI (``explorer.cli.main``), no mocks.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import logging
import re
import sqlite3

import pytest

from explorer.cli import main
from explorer.errors import StoreError
from explorer.storage import (
    NewTrial,
    SQLiteStore,
    export_csv,
    export_jsonl,
    export_metaschedule,
    import_metaschedule,
)
from explorer.storage._metaschedule import RECORD_FILE
from explorer.target import Target
from explorer.workloads import get_workload

PAGE = 4096
_EXPORTS = {"csv": export_csv, "jsonl": export_jsonl}
CORRUPT = "is corrupt (SQLite's integrity check found:"
RAW_TEXTS = ("Could not decode", "malformed", "Traceback", "list index", "unpack", "ffi.")


def _fill(path, workload, target, make_trial, *, trials=40, remeasures=3):
    """One finished run of ``trials`` trials, then ``remeasures`` re-timings of the first ones."""
    with SQLiteStore(path) as store:
        run = store.create_run(workload, target, "random")
        batch = [make_trial(workload, target, 1e-3 * (i + 1), trace=i % 4) for i in range(trials)]
        store.add_trials(run.id, batch)
        again = [NewTrial(t.candidate, t.result, is_remeasure=True) for t in batch[:remeasures]]
        store.add_trials(run.id, again)
        store.finish_run(run.id)


def _damage_page(path, page: int, fill: int = 0xA5) -> None:
    """Overwrite one page (4096 bytes) of the file; the header page stays intact."""
    with open(path, "r+b") as fh:
        fh.seek(page * PAGE)
        fh.write(bytes([fill]) * PAGE)


def _quick_check(path) -> list[str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [row[0] for row in conn.execute("PRAGMA quick_check").fetchall()]
    except sqlite3.DatabaseError as exc:
        return [str(exc)]
    finally:
        conn.close()


def _cli(capsys, *argv) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _assert_one_error(code, out, err, *needles) -> None:
    assert code == 2, err
    assert out == "", f"printed before the error: {out!r}"
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for needle in needles:
        assert needle in err, err


@pytest.fixture(params=["wal", "delete"])
def damaged(request, db_path, workload, target, make_trial, tmp_path):
    """A healthy database with a MetaSchedule export of it, then one page in its middle
    overwritten (header intact): what a bad sector or a stray write leaves. In WAL mode (as the
    store leaves it) and in rollback-journal mode (as ``explorer backup`` writes it, so that
    the file alone is the database: a store switches it to WAL, a write, when it opens it)."""
    _fill(db_path, workload, target, make_trial)
    with SQLiteStore(db_path, read_only=True) as store:
        export_metaschedule(store, tmp_path / "ms")
    if request.param == "delete":
        with contextlib.closing(sqlite3.connect(db_path)) as conn:
            conn.execute("PRAGMA journal_mode = DELETE").fetchone()
    num_pages = db_path.stat().st_size // PAGE
    _damage_page(db_path, num_pages // 2)
    assert _quick_check(db_path) != ["ok"], "the damage was not in a page SQLite checks"
    return db_path


# -- 1, 2. a damaged database ------------------------------------------------------------------
@pytest.mark.parametrize(
    "command",
    [
        ["runs"],
        ["export", "OUT/y.csv"],
        ["export", "--format", "jsonl", "OUT/y.jsonl"],
        ["export", "--format", "metaschedule", "OUT/ms"],
        ["backup", "OUT/bk.db"],
        ["import", "MS"],
        ["import", "OTHER"],
        ["check"],
        ["tune", "matmul", "-p", "M=16", "-p", "N=16", "-p", "K=16", "--trials", "2", "-q"],
        ["measure", "matmul", "-p", "M=16", "-p", "N=16", "-p", "K=16"],
    ],
)
def test_every_db_command_refuses_a_damaged_file_with_one_sentence(
    damaged, tmp_path, capsys, workload, target, make_trial, command
):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    other = tmp_path / "other.db"  # a healthy database to merge into the damaged one
    _fill(other, workload, target, make_trial, trials=2, remeasures=0)
    names = {"OUT": str(out_dir), "MS": str(tmp_path / "ms"), "OTHER": str(other)}
    argv = [a.replace("OUT", names["OUT"]) for a in command]
    argv = [names.get(a, a) for a in argv]
    mode = _journal_mode(damaged)
    before = hashlib.sha256(damaged.read_bytes()).hexdigest()
    code, out, err = _cli(capsys, *argv, "--db", damaged)
    _assert_one_error(code, out, err, str(damaged), CORRUPT, "restore a backup")
    assert not any(raw in err for raw in RAW_TEXTS[:1]), err
    # Nothing written, not even the switch to WAL mode ("it was left untouched" is true).
    assert hashlib.sha256(damaged.read_bytes()).hexdigest() == before
    if mode == "delete":
        assert sorted(p.name for p in damaged.parent.iterdir()) == [damaged.name]  # no -wal
    assert list(out_dir.iterdir()) == []  # no backup of it, no half export


def _journal_mode(path) -> str:
    """The journal mode the header says (bytes 18 and 19: 2 for WAL), read without SQLite."""
    return "wal" if path.read_bytes()[18:20] == b"\x02\x02" else "delete"


def test_backup_of_a_damaged_file_is_refused_even_over_an_old_backup(damaged, tmp_path, capsys):
    old = tmp_path / "bk.db"
    old.write_bytes(b"an older backup")
    code, out, err = _cli(capsys, "backup", old, "--force", "--db", damaged)
    _assert_one_error(code, out, err, CORRUPT)
    assert old.read_bytes() == b"an older backup"  # the good old backup is not replaced
    with SQLiteStore(damaged, read_only=True) as store:
        with pytest.raises(StoreError, match=re.escape(CORRUPT)):
            store.backup(tmp_path / "other.db")  # the Python API refuses too
    assert not (tmp_path / "other.db").exists()


def test_reads_of_any_damaged_page_give_the_corrupt_sentence_or_nothing_wrong(
    db_path, workload, target, make_trial, tmp_path
):
    """Without the up-front check (the Python API), whatever a damaged page makes a read fail
    with is said as the corrupt-database sentence, never SQLite's or a decoder's raw text."""
    _fill(db_path, workload, target, make_trial, trials=60)
    healthy = db_path.read_bytes()
    copy = tmp_path / "copy.db"
    for page in range(1, len(healthy) // PAGE):
        for fill in (0xA5, 0xFF):
            copy.write_bytes(healthy)
            _damage_page(copy, page, fill)
            try:  # a damaged schema page is found on opening, by SQLite itself
                store = SQLiteStore(copy, read_only=True)
            except StoreError as exc:
                assert "is not a database (file is corrupt" in str(exc), exc
                continue
            with store:
                for read in (store.runs, store.trials, store.trial_rows, store.count_trials):
                    try:
                        read()
                    except StoreError as exc:
                        assert CORRUPT in str(exc) and "restore a backup" in str(exc), exc


# -- 3. MetaSchedule record lines --------------------------------------------------------------
def test_bad_record_lines_are_unreadable_in_plain_words(db_path, workload, target, make_trial,
                                                        tmp_path, caplog):  # fmt: skip
    with SQLiteStore(tmp_path / "seed.db") as seed:
        run = seed.create_run(workload, target, "random")
        seed.add_trials(run.id, [make_trial(workload, target, 1e-3)])
        assert export_metaschedule(seed, tmp_path / "ms") == 1
    records = tmp_path / "ms" / RECORD_FILE
    good = records.read_text().strip()
    index, record = json.loads(good)

    def line(secs=None, *, idx=index, rec=None):
        rec = json.loads(json.dumps(record)) if rec is None else rec
        if secs is not None:
            rec[1] = secs
        return json.dumps([idx, rec])

    bad = {
        line([-1.0]): "not a positive, finite number of seconds",
        line([0.0]): "not a positive, finite number of seconds",
        line([1e-3, "fast"]): "not a positive, finite number of seconds",
        line([True]): "not a positive, finite number of seconds",
        line("1e-3"): "run_secs is not a list of seconds",
        "[0, [[], [NaN], null, null]]": "not a positive, finite number of seconds",
        "[]": "not a [workload index, record] pair",
        "[0]": "not a [workload index, record] pair",
        line(idx=7): "workload #7 is not in database_workload.json (it has 1 workloads)",
        line(idx=-1): "workload #-1 is not in",
        line(idx="0"): "the workload index is not a whole number",
        line(rec=[]): "the record is not a [trace, run_secs, target, args_info] list",
        good[: len(good) // 2]: "not valid JSON",
    }
    records.write_text("\n".join([*bad, good]) + "\n")
    caplog.set_level(logging.WARNING, logger="explorer.storage")
    with SQLiteStore(db_path) as store:
        summary = import_metaschedule(store, tmp_path / "ms")
        assert (summary.imported, summary.failed) == (1, len(bad))
        (stored,) = store.trials()
        assert stored.result.run_secs == (1e-3,)
    messages = [r.getMessage() for r in caplog.records if "unreadable tuning record" in r.message]
    assert len(messages) == len(bad)
    for lineno, (message, expected) in enumerate(zip(messages, bad.values(), strict=True), 1):
        assert message.startswith(f"{records}:{lineno}: unreadable tuning record: "), message
        assert expected in message, message
        assert not any(raw in message for raw in RAW_TEXTS), message


# -- 4. paths ----------------------------------------------------------------------------------
def test_paths_that_do_not_exist_are_named(db_path, workload, target, make_trial, tmp_path,
                                           capsys):  # fmt: skip
    _fill(db_path, workload, target, make_trial, trials=4, remeasures=0)
    before = db_path.read_bytes()
    missing = tmp_path / "nonexist"
    new_db = tmp_path / "new" / "records.db"
    code, out, err = _cli(capsys, "import", missing, "--db", new_db)
    _assert_one_error(code, out, err, f"cannot import {missing}: the folder {missing} does not")
    assert not new_db.parent.exists()  # a typo in the work_dir creates no empty database
    a_file = tmp_path / "x.csv"
    a_file.write_text("kept\n")
    code, out, err = _cli(capsys, "import", a_file, "--db", db_path)
    _assert_one_error(code, out, err, f"cannot import {a_file}: it is a file")

    for fmt in ("csv", "jsonl", "metaschedule"):
        dest = missing / "dir" / "x.out"
        code, out, err = _cli(capsys, "export", "--format", fmt, dest, "--db", db_path)
        _assert_one_error(code, out, err, f"the folder {missing / 'dir'} does not exist")
    assert not missing.exists()
    code, out, err = _cli(capsys, "export", "--format", "metaschedule", a_file, "--db", db_path)
    _assert_one_error(code, out, err, f"cannot export to {a_file}: it is a file")
    assert a_file.read_text() == "kept\n"
    code, out, err = _cli(capsys, "export", tmp_path, "--db", db_path)
    _assert_one_error(code, out, err, f"cannot export to {tmp_path}: it is a directory")
    code, out, err = _cli(capsys, "backup", missing / "b.db", "--db", db_path)
    _assert_one_error(code, out, err, f"the folder {missing} does not exist")
    assert db_path.read_bytes() == before


@pytest.mark.parametrize("command", [["runs"], ["export", "x.csv"], ["backup", "b.db"],
                                     ["import", "ms"], ["check"]])  # fmt: skip
def test_an_empty_db_name_is_refused(tmp_path, capsys, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EXPLORER_DB", str(tmp_path / "default.db"))
    (tmp_path / "ms").mkdir()
    for name in ("database_workload.json", "database_tuning_record.json"):
        (tmp_path / "ms" / name).write_text("")
    code, out, err = _cli(capsys, *command, "--db", "")
    _assert_one_error(code, out, err, "--db", "file name")
    assert "is a directory" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ms"]  # not even the default database


def test_empty_paths_are_refused_not_taken_for_the_current_folder(tmp_path, capsys,
                                                                   monkeypatch):  # fmt: skip
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError, match="the path is empty"):
        SQLiteStore("")
    with pytest.raises(StoreError, match="the path is empty"):
        SQLiteStore("", read_only=True)
    db = tmp_path / "r.db"
    store = SQLiteStore(db)
    store.create_run(get_workload("matmul", M=8, N=8, K=8), Target.local_cpu(), "manual")
    with pytest.raises(StoreError, match="empty path"):
        import_metaschedule(store, "")
    with pytest.raises(StoreError, match="empty path"):
        store.backup("")
    for fmt in ("csv", "jsonl", "metaschedule"):  # refused by the CLI or by the storage layer
        with pytest.raises(StoreError, match="empty path"):
            (export_metaschedule if fmt == "metaschedule" else _EXPORTS[fmt])(store, "")
        code, out, err = _cli(capsys, "export", "--format", fmt, "", "--db", db)
        _assert_one_error(code, out, err, "empty")
    code, out, err = _cli(capsys, "import", "", "--db", db)
    _assert_one_error(code, out, err, "empty")
    code, out, err = _cli(capsys, "backup", "", "--db", db)
    _assert_one_error(code, out, err, "empty")
    store.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.db"]


# -- 5. trials and re-measurements -------------------------------------------------------------
def test_export_and_backup_count_trials_as_runs_does(db_path, workload, target, make_trial,
                                                     tmp_path, capsys):  # fmt: skip
    # 4 distinct schedules (a fifth measurement of one would be a re-measurement: one rule
    # counts them everywhere, explorer.storage._counting), then 3 of them re-timed
    _fill(db_path, workload, target, make_trial, trials=4, remeasures=3)
    code, out, _ = _cli(capsys, "runs", "--db", db_path)
    assert code == 0 and out.splitlines()[1].split()[2] == "4"
    for fmt, name in (("csv", "l.csv"), ("jsonl", "l.jsonl")):
        code, out, _ = _cli(capsys, "export", "--format", fmt, tmp_path / name, "--db", db_path)
        assert code == 0
        assert out.strip() == f"exported 4 trials + 3 re-measurements to {tmp_path / name}"
    with open(tmp_path / "l.csv", newline="") as fh:  # nothing lost: every row is written
        flags = [row["is_remeasure"] for row in csv.DictReader(fh)]
    assert sorted(flags) == ["0"] * 4 + ["1"] * 3
    assert len((tmp_path / "l.jsonl").read_text().splitlines()) == 7
    code, out, _ = _cli(capsys, "backup", tmp_path / "bk.db", "--db", db_path)
    assert code == 0
    assert out.strip() == f"backed up 1 run, 4 trials + 3 re-measurements to {tmp_path / 'bk.db'}"
    code, out, _ = _cli(capsys, "export", "--run", "1", tmp_path / "r.csv", "--db", db_path)
    assert out.strip() == f"exported 4 trials + 3 re-measurements to {tmp_path / 'r.csv'}"
    code, out, _ = _cli(capsys, "export", "--format", "metaschedule", tmp_path / "ms",
                        "--db", db_path)  # fmt: skip
    assert code == 0 and out.startswith("exported ") and "MetaSchedule tuning record" in out


def test_a_run_without_re_measurements_is_counted_plainly(db_path, workload, target, make_trial,
                                                          tmp_path, capsys):  # fmt: skip
    _fill(db_path, workload, target, make_trial, trials=1, remeasures=0)
    code, out, _ = _cli(capsys, "export", tmp_path / "one.csv", "--db", db_path)
    assert out.strip() == f"exported 1 trial to {tmp_path / 'one.csv'}"
    code, out, _ = _cli(capsys, "backup", tmp_path / "b.db", "--db", db_path)
    assert out.strip() == f"backed up 1 run, 1 trial to {tmp_path / 'b.db'}"
