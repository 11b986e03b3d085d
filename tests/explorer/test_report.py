"""``explorer report`` and ``explorer.report``: one self-contained HTML file of real runs.

The database holds real runs: a random search timed by the ``LocalMeasurer`` (with its baseline
and re-measurements), and ``autotvm`` and random searches answered by the shipped recording
(``explorer.testing.recordings``), autotvm storing its cost model's predictions. The browser
check (plots drawn, no console error) is ``tests/browser/test_report_browser.py``.
"""

from __future__ import annotations

import html
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from explorer.cli import EXIT_ENVIRONMENT, EXIT_OK, EXIT_USAGE, main
from explorer.code import code_mix, generated_code
from explorer.measure import LocalMeasurer, MeasureConfig
from explorer.report import NoRunsError, UnknownRunError, collect_report, write_report
from explorer.search import make_strategy
from explorer.session import ScheduleSession
from explorer.storage import get_store, summarize_run, trace_hash, trial_name
from explorer.testing.recordings import TINY, open_recording, recorded_trials, replay_measurer
from explorer.tuner import Tuner
from explorer.workloads import get_workload

ROOT = Path(__file__).resolve().parents[2]
MATMUL = get_workload("matmul", M=32, N=32, K=32)
NOBODY = 65534


@pytest.fixture(scope="module")
def db(tmp_path_factory, cpu_target):
    """A database of three real runs: ids 1 (matmul, LocalMeasurer), 2 and 3 (TINY, replay)."""
    base = tmp_path_factory.mktemp("report")
    path = base / "records.db"
    store = get_store(path)
    config = MeasureConfig(repeat=3, min_repeat_secs=0.002, max_spread=math.inf)
    with LocalMeasurer(config) as measurer:
        Tuner(measurer=measurer, store=store, batch_size=4, confirm_top=2).run(
            MATMUL, cpu_target, "random", max_trials=8, seed=1
        )
    recording = open_recording(base)
    target = recorded_trials(recording, TINY)[0].candidate.target
    replay = replay_measurer(recording, TINY)
    autotvm = make_strategy("autotvm", plan_size=8, parallel_size=16, n_iter=40, early_stop=10)
    for strategy in (autotvm, "random"):
        Tuner(measurer=replay, store=store, batch_size=4).run(
            TINY, target, strategy, max_trials=24, seed=3
        )
    recording.close()
    store.close()
    return path


@pytest.fixture
def store(db):
    s = get_store(db, read_only=True)
    yield s
    s.close()


def _script_of(store, trial_id):
    trial = store.get_trial(trial_id)
    session = ScheduleSession(trial.candidate.workload, trial.candidate.target)
    return session.load_trace(trial.candidate.trace)


def _settings_html(settings):
    return html.escape(json.dumps(dict(settings), indent=2, sort_keys=True, default=str))


def test_the_report_holds_the_plots_the_best_schedules_and_the_settings(store, tmp_path):
    from plotly.offline import get_plotlyjs

    out = tmp_path / "report.html"
    result = write_report(store, out)
    page = out.read_text()
    assert result.path == out and result.size_bytes == len(page.encode())
    assert (result.num_runs, result.num_workloads) == (3, 2)

    # self-contained: plotly.js inline, nothing fetched
    plotly_js = get_plotlyjs()
    assert page.count(plotly_js) == 1
    rest = page.replace(plotly_js, "")
    assert "<script src" not in rest and "http://" not in rest and "https://" not in rest
    assert page.count('class="plotly-graph-div"') >= 6
    # the dashboards' figures: convergence per strategy, comparison, predictions of autotvm
    for meta in ("median|random|trials", "median|autotvm|trials", "cmp|autotvm", "cmp|random"):
        assert f'"meta":"{meta}' in page, meta
    assert '"meta":"pvm|' in page  # autotvm stored its model's predictions
    assert "No cost-model predictions are stored" in page  # the matmul run has none

    runs = store.runs()
    for run in runs:
        summary = summarize_run(run.id, store.trial_rows(run_id=run.id))
        assert summary.best_trial_id is not None
        assert _settings_html(run.settings) in page  # every run's settings
        assert f'<tr id="run-{run.id}">' in page
    # the best schedule of each workload, as the editor shows it: TVMScript and trace
    matmul_run = runs[0]
    best = summarize_run(matmul_run.id, store.trial_rows(run_id=matmul_run.id)).best_trial_id
    snapshot = _script_of(store, best)
    assert html.escape(snapshot.script) in page
    assert html.escape(snapshot.trace_python) in page
    assert "@I.ir_module" in page and "def apply_trace(sch" in page
    assert f'id="trial-{best}"' in page
    # named in its run, as every screen names trials (issue 21: "best: trial 88" was a
    # database-wide id)
    rows = store.trial_rows(run_id=matmul_run.id)
    assert html.escape(trial_name(rows, best)) in page and f"of run {matmul_run.id}" in page
    # and what the CPU runs for it (issue 25): the instruction mix of its code and its hot loop
    article = page[page.index(f'id="trial-{best}"') :].split("</article>", 1)[0]
    assert "Instruction mix (what the CPU runs)" in article
    assert "<td>vector FMA</td>" in article and 'class="hot-loop"' in article
    mix = code_mix(generated_code(store.get_trial(best).candidate).asm)
    assert f"<td>instructions</td><td>{mix.hot.instructions}</td>" in article


def test_a_report_of_chosen_runs_shows_only_those(store, tmp_path):
    info = collect_report(store, [3, 2], knobs=False)
    assert [w.workload for w in info.workloads] == [TINY]
    assert [r.run.id for r in info.workloads[0].runs] == [2, 3]
    assert info.workloads[0].predicted.models  # autotvm's predictions
    # one entry per distinct schedule; runs that found the same one share it
    best = info.workloads[0].best
    assert sorted(i for b in best for i in b.run_ids) == [2, 3]
    assert len({trace_hash(b.trace_json) for b in best}) == len(best)
    assert [b.secs for b in best] == sorted(b.secs for b in best)
    latest = collect_report(store, latest=1, knobs=False)
    assert [r.run.id for w in latest.workloads for r in w.runs] == [3]
    page = tmp_path / "one.html"
    write_report(store, page, [1], max_schedules=1, knobs=False)
    text = page.read_text()
    assert MATMUL.key() in text and TINY.key() not in text
    assert text.count('<article class="schedule"') == 1


def test_unknown_runs_and_empty_databases_are_refused(store, tmp_path):
    with pytest.raises(UnknownRunError, match=r"no runs 7, 9 in .*records\.db"):
        collect_report(store, [1, 7, 9])
    empty = get_store(tmp_path / "empty.db")
    with pytest.raises(NoRunsError, match="nothing to report"):
        write_report(empty, tmp_path / "r.html")
    empty.close()
    assert not (tmp_path / "r.html").exists()


# -- the command -------------------------------------------------------------------------------
def _run(capsys, *args):
    code = main(["report", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_command_writes_the_report(db, tmp_path, capsys):
    out = tmp_path / "r.html"
    code, stdout, err = _run(capsys, "--db", db, "--run", 2, "--run", 3, "-o", out)
    assert code == EXIT_OK, err
    assert stdout.startswith(f"wrote {out} (") and "2 runs of 1 workload" in stdout
    assert "Plotly" in out.read_text()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--run", "99"], "error: no run 99 in "),
        (["--run", "1", "--run", "42"], "error: no run 42 in "),
        (["--run", "1", "--latest", "2"], "error: give either --run or --latest, not both"),
        (["--run", "0"], "error: --run: must be at least 1 (got 0)"),
    ],
)
def test_bad_runs_are_one_sentence_and_exit_2(db, tmp_path, capsys, args, message):
    out = tmp_path / "r.html"
    code, stdout, err = _run(capsys, "--db", db, *args, "-o", out)
    assert code == EXIT_USAGE
    assert err.startswith(message) and err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists()


def test_an_unwritable_output_is_refused_before_any_work(db, tmp_path, capsys):
    for out, message in [
        (tmp_path / "missing" / "r.html", "folder"),
        (tmp_path, "is a directory"),
    ]:
        code, _, err = _run(capsys, "--db", db, "-o", out)
        assert code == EXIT_USAGE and err.count("\n") == 1, err
        assert err.startswith("error: -o/--output ") and message in err


def test_an_output_folder_without_permission_is_refused(db):
    folder = Path(tempfile.mkdtemp(prefix="report-ro-"))
    try:
        os.chmod(folder, 0o555)  # others may enter, nobody may write
        out = subprocess.run(
            [*_other_user(), sys.executable, "-m", "explorer", "report", "--db", str(db),
             "-o", str(folder / "r.html")],
            capture_output=True, text=True, timeout=120, cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT), "HOME": tempfile.gettempdir()},
        )  # fmt: skip
    finally:
        os.chmod(folder, 0o755)
        shutil.rmtree(folder)
    assert out.returncode == EXIT_USAGE, out.stderr
    assert (
        out.stderr == f"error: -o/--output {folder / 'r.html'}: not writable (permission denied)\n"
    )


def test_a_missing_database_or_one_without_runs_is_one_sentence(tmp_path, capsys):
    code, _, err = _run(capsys, "--db", tmp_path / "nope.db", "-o", tmp_path / "r.html")
    assert code == EXIT_USAGE and err.startswith("error: ") and err.count("\n") == 1
    assert not (tmp_path / "nope.db").exists()
    get_store(tmp_path / "empty.db").close()
    code, _, err = _run(capsys, "--db", tmp_path / "empty.db", "-o", tmp_path / "r.html")
    assert code == EXIT_USAGE
    assert err == f"error: no runs in {tmp_path / 'empty.db'}: nothing to report\n"


def test_without_plotly_the_report_says_so_and_explorer_still_imports(db, tmp_path):
    script = textwrap.dedent(
        f"""
        import sys
        class Absent:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "plotly":
                    raise ModuleNotFoundError(f"No module named {{name!r}}")
        sys.meta_path.insert(0, Absent())
        import explorer.report  # importable without plotly
        from explorer.cli import main
        sys.exit(main(["report", "--db", {str(db)!r}, "-o", {str(tmp_path / "r.html")!r}]))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert out.returncode == EXIT_ENVIRONMENT, out.stderr
    assert out.stderr.startswith("error: the HTML report needs plotly, which is not installed")
    assert out.stderr.count("\n") == 1 and "pip install 'schedule-explorer[lab]'" in out.stderr
    assert not (tmp_path / "r.html").exists()


def _other_user() -> list[str]:
    """A command prefix that drops root's permission bypass (none when not root)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: permissions cannot be tested")
    prefix = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    probe = [*prefix, "test", "-r", str(ROOT / "explorer" / "__init__.py")]
    if subprocess.run(probe, capture_output=True).returncode != 0:
        pytest.skip(f"{ROOT} is not readable by another user: permissions cannot be tested")
    return prefix


def test_a_best_schedule_that_does_not_replay_is_reported_not_raised(tmp_path):
    from explorer.measure import Candidate, MeasureResult
    from explorer.storage import NewTrial
    from explorer.target import Target
    from explorer.types import MeasureStatus

    store = get_store(":memory:")
    target = Target.local_cpu()
    run = store.create_run(MATMUL, target, "imported")
    broken = Candidate(MATMUL, target, [[["NoSuchInstruction", [], [], []]], []])
    ok = MeasureResult(MeasureStatus.OK, (1e-4,), flops=MATMUL.flops())
    store.add_trials(run.id, [NewTrial(broken, ok)])
    (workload,) = collect_report(store, knobs=False).workloads
    (best,) = workload.best
    assert best.script is None and best.trace_python is None
    assert "NoSuchInstruction" in best.error
    write_report(store, tmp_path / "r.html", knobs=False)
    page = (tmp_path / "r.html").read_text()
    assert "Could not replay this schedule" in page and "NoSuchInstruction" in page
