"""The command line's contract under bad input (issue 8, section 4): every subcommand, a table of
bad arguments; each gives its exit code, exactly one ``error:`` line, no traceback, no output on
stdout, and leaves the database as it was (and creates none). Most rows run ``main()`` in-process;
the pipe, the exit code for an unusable database and a sample of rows run as real processes."""

from __future__ import annotations

import argparse
import math
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from explorer import cli
from explorer.cli._args import STRATEGY_NAMES, is_environment_problem
from explorer.errors import StoreError
from explorer.text import format_secs, plural

SMALL = ["matmul", "-p", "M=8", "-p", "N=8", "-p", "K=8"]
EXPR = ["expr", "--expr", "C[i] = A[i] * 2", "--shape", "A=16"]
ERROR_LINE = re.compile(r"^error: ", re.MULTILINE)


def run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "explorer", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """A database holding one finished run (made by the real command), plus bad input files."""
    root = tmp_path_factory.mktemp("cli_errors")
    db = root / "records.db"
    made = run("tune", *SMALL, "--trials", "2", "--batch", "2", "-q", "--db", str(db))
    assert made.returncode == 0, made.stderr
    (root / "binary.json").write_bytes(bytes(range(256)) * 4)
    (root / "text.json").write_text("hello, not JSON")
    (root / "a_dir").mkdir()
    return {"root": root, "db": db}


def snapshot(db: Path) -> dict[str, object]:
    """What must not change: every table's row count and every run's row."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        state: dict[str, object] = {
            t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables
        }
        state["runs rows"] = conn.execute("SELECT * FROM runs ORDER BY id").fetchall()
    return state


# (argv, exit code, a fragment of the error line); {root} is the fixture's folder.
BAD: list[tuple[list[str], int, str]] = [
    # show: workload arguments
    (["show", "matmul", "-p", "M=--5"], 2, "integer"),
    (["show", "matmul", "-p", "M=0"], 2, "at least 1"),
    (["show", "matmul", "-p", "M"], 2, "KEY=VALUE"),
    (["show", "matmul", "-p", "M=8", "-p", "M=16"], 2, "given twice"),
    (["show", "matmu"], 2, "did you mean 'matmul'"),
    (["show", "resnet18_c2", "-p", "CI=32"], 2, "preset"),
    (["show", "conv2d", "-p", "CI=6", "-p", "CO=4", "-p", "groups=4"], 2, "divisible"),
    (["show", *EXPR, "-p", "text=foo"], 2, "does not apply"),
    (["show", *EXPR, "-p", "shapes=A"], 2, "does not apply"),
    (["show", "expr", "--expr", "C[i] = A[i] / 0", "--shape", "A=4"], 2, "division by zero"),
    (["show", "expr", "--expr", "M[i] = max(A[i, k])", "--shape", "A=4x5"], 2, "max="),
    (["show", "expr", "--expr", "C[i] = A[i] +", "--shape", "A=4"], 2, "expected"),
    (["show", "matmul", "--expr", "C[i] = A[i]", "--shape", "A=4"], 2, "not both"),
    (["show", *EXPR, "--shape", "A=9"], 2, "given twice"),
    (["show", "expr", "--expr", "C[i] = A[i]", "--shape", "A=4xq"], 2, "NAME=DxD"),
    (["show", "expr"], 2, "needs --expr"),
    (["show", "matmul", "--shape", "A=4"], 2, "--expr only"),
    (["show", "matmul", "--threads", "0"], 2, "at least 1"),
    (["show", "matmul", "--threads", "100000"], 2, "cores"),
    (["show", "matmul", "--target", "tpu"], 2, "invalid choice"),
    (["show"], 2, "required"),
    # measure
    (["measure", *SMALL, "--repeat", "0"], 2, "--repeat"),
    (["measure", *SMALL, "--repeat", "-1"], 2, "--repeat"),
    (["measure", *SMALL, "--repeat", "many"], 2, "integer"),
    (["measure", *SMALL, "--trace", "{root}/binary.json"], 2, "binary.json"),
    (["measure", *SMALL, "--trace", "{root}/text.json"], 2, "text.json"),
    (["measure", *SMALL, "--trace", "{root}/missing.json"], 2, "missing.json"),
    (["measure", *SMALL, "--trace", "{root}/a_dir"], 2, "a_dir"),
    (["measure", "expr", "--expr", "C[i] = A[i] / (A[i] - A[i])", "--shape", "A=4"], 2, "zero"),
    (["measure", "matmull"], 2, "did you mean"),
    # tune: every option checked before anything is built, measured or stored
    (["tune", *SMALL, "--batch", "0"], 2, "--batch"),
    (["tune", *SMALL, "--batch", "-1"], 2, "--batch"),
    (["tune", *SMALL, "--seed", "-1"], 2, "--seed"),
    (["tune", *SMALL, "--trials", "0"], 2, "--trials"),
    (["tune", *SMALL, "--trials", "-3"], 2, "--trials"),
    (["tune", *SMALL, "--trials", "1e3"], 2, "integer"),
    (["tune", *SMALL, "--seconds", "-1"], 2, "--seconds"),
    (["tune", *SMALL, "--seconds", "0"], 2, "--seconds"),
    (["tune", *SMALL, "--seconds", "nan"], 2, "--seconds"),
    (["tune", *SMALL, "--seconds", "inf"], 2, "--seconds"),
    (["tune", *SMALL, "--seconds", "soon"], 2, "--seconds"),
    (["tune", *SMALL, "--save-trace", "/nonexistent-folder/x.json"], 2, "does not exist"),
    (["tune", *SMALL, "--save-trace", "{root}/a_dir"], 2, "is a directory"),
    (["tune", *SMALL, "--threads", "100000"], 2, "cores"),
    (["tune", *SMALL, "--strategy", "drplet"], 2, "did you mean 'droplet'"),
    (["tune", *SMALL, "--strategy", "simulated-annealing"], 2, "strategy"),
    (["tune", *SMALL, "--resume", "999"], 2, "999"),
    (["tune", *SMALL, "--resume", "0"], 2, "--resume"),
    (["tune", "matmul", "-p", "M=8", "-p", "M=16", "--trials", "1"], 2, "given twice"),
    (["tune", *SMALL, "--resume", "-1"], 2, "--resume: must be at least 1"),
    (["tune", *SMALL, "--resume", "abc"], 2, "--resume: expected an integer"),
    (["tune", *SMALL, "--threads", "0"], 2, "--threads: must be at least 1"),
    (["tune", *SMALL, "--transfer"], 2, "strategy 'random' cannot learn from other workloads"),
    (["pretrain"], 2, "--minutes"),
    (["pretrain", "--minutes", "0"], 2, "--minutes"),
    (["pretrain", "--minutes", "nan"], 2, "--minutes"),
    (["pretrain", "--minutes", "1", "--only", "nope"], 2, "no preset named nope"),
    (["pretrain", "--minutes", "1", "--skip", "chain_1m", "--only", "chain_1m"], 2, "no preset"),
    (["pretrain", "--minutes", "1", "--per-preset", "0"], 2, "--per-preset"),
    # a single-value option given twice is refused, never "the last one wins"
    (["tune", *SMALL, "--strategy", "random", "--strategy", "droplet"], 2, "--strategy is given"),
    (["tune", *SMALL, "--trials", "2", "--trials", "3"], 2, "--trials is given twice (2 and 3)"),
    (["tune", *SMALL, "--trials=2", "--trials", "2"], 2, "--trials is given twice"),
    (["tune", *SMALL, "--trial", "2", "--trials", "3"], 2, "--trials is given twice"),
    (["tune", "--resume", "1", "--resume", "1"], 2, "--resume is given twice"),
    (["measure", *SMALL, "--trace", "{root}/a.json", "--trace", "{root}/b.json"], 2, "--trace is"),
    (["measure", *SMALL, "--repeat", "2", "--repeat=3"], 2, "--repeat is given twice"),
    (["show", "matmul", "--target", "cpu", "--target", "cpu"], 2, "--target is given twice"),
    (["runs", "--db", "{root}/a.db", "--db", "{root}/b.db"], 2, "--db is given twice"),
    (["export", "--format", "csv", "--format=jsonl", "{root}/out.csv"], 2, "--format is given"),
    # a bound checked before any work: 10^8 repeats would only time out and store a junk run
    (["measure", *SMALL, "--repeat", "100000000"], 2, "--repeat: must be at most 100"),
    (["measure", *SMALL, "--repeat", "101"], 2, "at most 100"),
    # an option that would do nothing is refused, not ignored
    (["tune", *SMALL, "--refit"], 2, "--refit only applies with --start"),
    # what a strategy takes is declared (explorer.search.capabilities), refused in one sentence
    (["tune", *SMALL, "--start", "{root}/text.json"], 2, "strategy 'random' cannot start from"),
    (["tune", *SMALL, "--strategy", "static", "--start", "{root}/no.json"], 2, "'static' cannot"),
    (["tune", *SMALL, "--strategy", "droplet", "--cost-model", "xgb-rank"], 2, "uses no cost"),
    (["tune", *SMALL, "--cost-model", "static"], 2, "strategy 'random' uses no cost model"),
    (
        ["tune", *SMALL, "--strategy", "autotvm", "--cost-model", "static"],
        2,
        "xgb-rank or xgb-reg",
    ),
    (["tune", *SMALL, "--strategy", "autotvm", "--cost-model", "xgb-rnk"], 2, "mean 'xgb-rank'"),
    (["measure", *SMALL, "--refit"], 2, "--refit only applies with --trace"),
    (["tune", *SMALL, "--save-trace", ""], 2, "--save-trace: expected a file name"),
    (["tune", *SMALL, "--start", ""], 2, "--start: expected a file name"),
    (["measure", *SMALL, "--trace", ""], 2, "--trace: expected a file name"),
    (["runs", "--db", ""], 2, "--db: expected a file name"),
    (["export", ""], 2, "out: expected a file name"),
    # a number means what it shows: no stripped spaces, no other scripts' digits, no "1_000"
    (["show", "matmul", "-p", "M=\u0663\u0662"], 2, "digits 0-9"),  # Arabic-Indic 32
    (["show", "matmul", "-p", "M= 32"], 2, "remove the spaces"),
    (["show", "matmul", "-p", "M=1_000"], 2, "digits 0-9"),
    (["show", "matmul", "-p", "M=+32"], 2, "digits 0-9"),
    (["tune", *SMALL, "--trials", "\u0663"], 2, "--trials: expected an integer"),
    (["tune", *SMALL, "--trials", " 3"], 2, "--trials: expected an integer"),
    (["tune", *SMALL, "--seconds", "\u0661"], 2, "--seconds: expected a number"),
    (["show", "expr", "--expr", "C[i] = A[i]", "--shape", "A=\u0664"], 2, "NAME=DxD"),
    (["show", "expr", "--expr", "C[i] = A[i]", "--shape", "A=4 5"], 2, "NAME=DxD"),
    # runs, export, import
    (["runs", "--bogus"], 2, "unrecognized"),
    (["runs", "extra"], 2, "unrecognized"),
    (["export", "--run", "999", "{root}/out.csv"], 2, "999"),
    (["export", "--run", "0", "{root}/out.csv"], 2, "--run"),
    (["export", "--run", "-1", "{root}/out.csv"], 2, "--run: must be at least 1"),
    (["export", "--format", "xml", "{root}/out.xml"], 2, "invalid choice"),
    (["runs", "--db", "{root}/no/such.db"], 2, "does not exist"),
    (["export", "--db", "{root}/no/such.db", "{root}/out.csv"], 2, "does not exist"),
    (["export"], 2, "required"),
    (["import"], 2, "required"),
    (["import", "{root}/no-such-dir"], 2, "MetaSchedule"),
    (["import", "{root}/binary.json"], 2, "MetaSchedule"),
    (["backup"], 2, "required"),
    (["backup", "{root}/a_dir"], 2, "directory"),
    (["backup", "/nonexistent-folder/x.db"], 2, "does not exist"),
    (["check", "--run", "999"], 2, "999"),
    (["check", "--run", "x"], 2, "--run"),
    (["check", "--run", "0"], 2, "--run: must be at least 1"),
    # the command itself
    (["nonsense"], 2, "unknown command 'nonsense'"),
    (["workloads", "extra"], 2, "unrecognized arguments: extra; see `explorer workloads --help`"),
]
DB_COMMANDS = {
    "show", "measure", "tune", "runs", "export", "import", "backup", "check", "pretrain",
}  # fmt: skip


def _argv(row: list[str], root: Path, db: Path) -> list[str]:
    argv = [a.replace("{root}", str(root)) for a in row]
    # --db goes after the subcommand (each has its own); a bare subcommand stays bare
    if "--db" in argv or not argv or argv[0] not in DB_COMMANDS or len(argv) == 1:
        return argv
    return [*argv, "--db", str(db)]


def check_one_error(code: int, out: str, err: str, expected: int, fragment: str) -> None:
    assert code == expected, err
    assert "Traceback" not in err and "Traceback" not in out, err
    assert "internal error" not in err, err
    assert len(ERROR_LINE.findall(err)) == 1 and err.startswith("error: "), err
    assert "usage:" not in err and "None" not in err, err  # no usage block, no Python values
    assert fragment in err, err
    assert out == "", out  # no result, no progress bar


@pytest.mark.parametrize(("row", "code", "fragment"), BAD, ids=[" ".join(r) for r, _, _ in BAD])
def test_bad_arguments_in_process(row, code, fragment, files, capsys, monkeypatch):
    monkeypatch.setenv("EXPLORER_DB", str(files["root"] / "default-must-not-be-made.db"))
    before = snapshot(files["db"])
    made = set(files["root"].iterdir())
    result = cli.main(_argv(row, files["root"], files["db"]))
    out, err = capsys.readouterr()
    check_one_error(result, out, err, code, fragment)
    assert snapshot(files["db"]) == before
    assert set(files["root"].iterdir()) == made  # no database, export or trace file appeared


@pytest.mark.parametrize(
    ("row", "code", "fragment"),
    [r for r in BAD if r[0] and r[0][0] in ("show", "measure", "tune") and len(r[0]) > 1],
    ids=lambda v: " ".join(v) if isinstance(v, list) else None,
)
def test_bad_arguments_create_no_database(row, code, fragment, files, tmp_path, capsys):
    fresh = tmp_path / "sub" / "fresh.db"
    result = cli.main(_argv(row, files["root"], fresh))
    out, err = capsys.readouterr()
    check_one_error(result, out, err, code, fragment)
    assert not (tmp_path / "sub").exists()


def test_every_single_value_option_given_twice_is_refused(capsys):
    # Generic: each subcommand's every option that takes one value ("store"), not only those
    # in the table, so that an option added later cannot silently keep its last value.
    parser = cli._main.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    checked = 0
    for command, subparser in sub.choices.items():
        for action in subparser._actions:
            if not action.option_strings or action.nargs == 0:  # positionals, flags, --help
                continue
            if isinstance(action, argparse._AppendAction):  # -p, --shape: repeatable
                continue
            option = max(action.option_strings, key=len)
            value = str(action.choices[0]) if action.choices else "1"
            for argv in ([option, value, option, value], [f"{option}={value}", option, value]):
                assert cli.main([command, *argv]) == cli.EXIT_USAGE, (command, argv)
                out, err = capsys.readouterr()
                assert err == f"error: {option} is given twice ({value} and {value}); see " + (
                    f"`explorer {command} --help`\n"
                ), err
            checked += 1
    assert checked >= 20  # --db, --threads, --trials, --repeat, --format, ... all of them


def test_resuming_with_a_time_budget_the_run_lacks_says_so_in_words(files, capsys):
    before = snapshot(files["db"])
    code = cli.main(["tune", "--resume", "1", "--seconds", "1", "--db", str(files["db"])])
    out, err = capsys.readouterr()
    check_one_error(code, out, err, 2, "--seconds 1 (the run has no time budget)")
    assert snapshot(files["db"]) == before


def test_a_resumed_run_keeps_its_cost_model(files, capsys):
    before = snapshot(files["db"])
    code = cli.main(
        ["tune", "--resume", "1", "--cost-model", "xgb-rank", "--db", str(files["db"])]
    )
    out, err = capsys.readouterr()
    check_one_error(code, out, err, 2, "--cost-model (a run keeps the cost model it began with)")
    assert snapshot(files["db"]) == before


# A representative subset as a user runs them: a real process, its real stderr and exit status.
REAL = [
    ["tune", *SMALL, "--seed", "-1"],
    ["tune", *SMALL, "--trials", "0"],
    ["tune", *SMALL, "--strategy", "random", "--strategy", "droplet"],
    ["tune", *SMALL, "--refit"],
    ["tune", *SMALL, "--resume", "999"],
    ["measure", *SMALL, "--trace", "{root}/binary.json"],
    ["show", "expr", "--expr", "C[i] = A[i] / 0", "--shape", "A=4"],
    ["export", "--run", "999", "{root}/out.csv"],
]


@pytest.mark.parametrize("row", REAL, ids=[" ".join(r) for r in REAL])
def test_bad_arguments_in_a_real_process(row, files):
    code, fragment = next((c, f) for r, c, f in BAD if r == row)
    before = snapshot(files["db"])
    out = run(*_argv(row, files["root"], files["db"]))
    check_one_error(out.returncode, out.stdout, out.stderr, code, fragment)
    assert snapshot(files["db"]) == before


def test_a_closed_pipe_ends_quietly(files):
    # `explorer workloads | head -1`: the reader leaves early; no "Broken pipe", no traceback.
    cmd = f"{sys.executable} -m explorer workloads | head -1"
    out = subprocess.run(
        ["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("matmul") and len(out.stdout.splitlines()) == 1
    assert out.stderr == ""


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="needs Linux /proc")
def test_an_unusable_database_is_an_environment_problem(tmp_path):
    # Nothing can be created in /proc, not even by root: the environment's fault (exit 3).
    out = run("tune", *SMALL, "--trials", "1", "-q", "--db", "/proc/explorer-test.db")
    assert out.returncode == cli.EXIT_ENVIRONMENT, out.stderr
    assert len(ERROR_LINE.findall(out.stderr)) == 1 and "Traceback" not in out.stderr


def test_a_locked_database_is_an_environment_problem(files, monkeypatch, capsys):
    from explorer.storage._sqlite import SQLiteStore

    # Another process holds the write lock: after the (shortened) busy timeout, exit 3, nothing
    # measured or stored. The same command works once the lock is gone.
    monkeypatch.setitem(SQLiteStore.__init__.__kwdefaults__, "timeout_secs", 0.5)
    before = snapshot(files["db"])
    holder = sqlite3.connect(files["db"], isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        code = cli.main(["tune", *SMALL, "--trials", "1", "-q", "--db", str(files["db"])])
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    out, err = capsys.readouterr()
    check_one_error(code, out, err, cli.EXIT_ENVIRONMENT, "locked")
    assert snapshot(files["db"]) == before


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (sqlite3.OperationalError("database is locked"), 3),
        (sqlite3.OperationalError("attempt to write a readonly database"), 3),
        (sqlite3.OperationalError("database or disk is full"), 3),
        (OSError(28, "No space left on device"), 3),
        (PermissionError(13, "Permission denied", "/x/records.db"), 3),
        (FileNotFoundError(2, "No such file or directory", "x.json"), 2),
        (sqlite3.DatabaseError("file is not a database"), 2),
        (StoreError("x.db is not a database (file is corrupt or not SQLite)"), 2),
    ],
)
def test_exit_codes_for_store_and_os_failures(exc, code, monkeypatch, capsys, tmp_path):
    def fail(args):
        if isinstance(exc, StoreError):
            raise exc
        raise StoreError(f"{tmp_path}/records.db: {exc}") from exc  # as the store wraps them

    parser = cli._main.build_parser()
    monkeypatch.setattr(cli._main, "build_parser", lambda: _with_func(parser, "runs", fail))
    assert cli.main(["runs", "--db", str(tmp_path / "r.db")]) == code
    err = capsys.readouterr().err
    assert len(ERROR_LINE.findall(err)) == 1 and "Traceback" not in err
    assert is_environment_problem(exc) == (code == 3)


def _with_func(parser: argparse.ArgumentParser, command: str, func) -> argparse.ArgumentParser:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sub.choices[command].set_defaults(func=func)
    return parser


def test_a_bug_is_one_line_not_a_traceback(monkeypatch, capsys, tmp_path):
    def boom(args):
        raise ZeroDivisionError("division by zero")

    parser = _with_func(cli._main.build_parser(), "runs", boom)
    monkeypatch.setattr(cli._main, "build_parser", lambda: parser)
    monkeypatch.delenv("EXPLORER_DEBUG", raising=False)
    assert cli.main(["runs", "--db", str(tmp_path / "r.db")]) == cli.EXIT_FAILED
    err = capsys.readouterr().err
    assert err.startswith("error: internal error (ZeroDivisionError") and err.count("\n") == 1


def test_exit_codes_are_documented():
    assert {0, 1, 2, 3, 130} <= set(cli.EXIT_CODES) and cli.EXIT_ENVIRONMENT == 3
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    for text in (cli.__doc__, readme):
        assert all(str(code) in text for code in (0, 1, 2, 3, 130))
        assert "3" in text and "locked" in text and "disk is full" in text


# -- discoverability and output ----------------------------------------------------------------
def test_tune_help_lists_every_strategy(capsys):
    from explorer.search import STRATEGIES

    assert STRATEGY_NAMES == tuple(STRATEGIES)
    assert cli.main(["tune", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    assert all(name in text for name in STRATEGIES)
    # --cost-model's help names the strategies that take a choice, and their models
    from explorer.search import capabilities

    choices = {n: capabilities(n).cost_models for n in STRATEGIES}
    for name, models in choices.items():
        if len(models) > 1:
            assert f"{name}: {' or '.join(models)}" in text, (name, models)


@pytest.mark.parametrize(
    ("secs", "text"),
    [
        (3e-10, "0.30 ns"),
        (8.12e-7, "812 ns"),
        (3.414e-6, "3.41 µs"),
        (0.0123, "12.3 ms"),
        (0.99996e-3, "1.00 ms"),
        (1.5234, "1.52 s"),
        (1234.5, "1234 s"),
        (None, "-"),
        (math.inf, "-"),
    ],
)
def test_durations_have_a_readable_unit(secs, text):
    assert format_secs(secs) == text


def test_a_tiny_kernel_reports_sub_millisecond_units_and_one_thread(tmp_path):
    out = run(
        *["measure", *EXPR, "--threads", "1", "--repeat", "2"], "--db", str(tmp_path / "r.db")
    )
    assert out.returncode == 0, out.stderr
    # a unit that fits the duration, never "median 0.0000 ms"
    assert re.search(r"median \d+(\.\d+)? (ns|µs|ms) over 2 repeats", out.stdout), out.stdout
    assert re.search(r"\b1 thread; matches NumPy", out.stdout) and "0.0000" not in out.stdout


def test_plural():
    assert plural(1, "thread") == "1 thread" and plural(2, "thread") == "2 threads"


# -- fuzz: random argument lists never give a traceback ----------------------------------------
TOKENS = [
    "workloads", "show", "measure", "tune", "runs", "export", "import", "backup", "check",
    "expr", "matmul",
    "conv2d", "resnet18_c2", "matmu", "-p", "M=8", "M=0", "M=--5", "N=8", "K=8", "M", "=",
    "text=x", "groups=3", "--expr", "C[i] = A[i] / 0", "C[i] = A[i]", "M[i] = max(A[i, k])",
    "--shape", "A=4", "A=4x5", "A=x", "--trials", "--batch", "--seed", "--seconds", "--repeat",
    "--threads", "--resume", "--run", "--format", "csv", "metaschedule", "0", "-1", "1", "nan",
    "999", "--strategy", "drplet", "droplet", "--save-trace", "--trace", "--start", "--script",
    "-q", "--target", "cuda", "--help", "", " ", "\x00", "é", "--", "-", "--db",
    "pretrain", "--minutes", "--only", "--skip", "--per-preset", "--transfer", "chain_1m",
]  # fmt: skip


@pytest.mark.timeout(600)
@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    argv=st.lists(st.sampled_from(TOKENS) | st.text(max_size=8), max_size=9)
    | st.builds(  # mostly a real command first, so the arguments get past argparse
        lambda cmd, rest: [*cmd, *rest],
        st.sampled_from(
            [
                ["show", "matmul"],
                ["show", "expr"],
                ["measure", "matmul"],
                ["tune", "matmul"],
                ["runs"],
                ["pretrain", "--minutes", "1"],
                ["export"],
                ["import"],
                ["show"],
            ]
        ),
        st.lists(st.sampled_from(TOKENS), max_size=8),
    )  # fmt: skip
)
@example(argv=["import", "\x00"])  # was "internal error (ValueError: embedded null byte)"
@example(argv=["export", "--out", "a\x00b"])
def test_random_argument_lists_never_give_a_traceback(argv, tmp_path, monkeypatch, capsys):
    import explorer.measure

    class NoWork:  # an argument list that gets as far as measuring is valid: stop it there
        def __init__(self, *args, **kwargs):
            raise KeyboardInterrupt

    monkeypatch.setattr(explorer.measure, "LocalMeasurer", NoWork)
    monkeypatch.chdir(tmp_path)  # relative paths in argv land here
    monkeypatch.setenv("EXPLORER_DB", str(tmp_path / "fuzz.db"))
    code = cli.main(argv)
    out, err = capsys.readouterr()
    assert code in cli.EXIT_CODES, (argv, err)
    assert "Traceback" not in err + out and "internal error" not in err, (argv, err)
    assert "usage:" not in err, (argv, err)  # argparse's usage block never comes back
    if code in (cli.EXIT_USAGE, cli.EXIT_ENVIRONMENT) and "usage:" not in out:
        assert len(ERROR_LINE.findall(err)) == 1, (argv, err)
