"""Every notebook runs top to bottom in a real Jupyter kernel, as a user would run it.

Each notebook is executed headless with nbclient against a private database (``EXPLORER_DB``
points into ``tmp_path``), two of them with a smaller trial budget (``FEWER_TRIALS``). After the
last cell, *probe* cells run in the same kernel and check what the notebook left behind, the
way a user would poke at it (click a button, read a widget). The browser layer
(``tests/browser``) covers what a headless kernel cannot see (front-end rendering).
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from explorer.storage import SQLiteStore

REPO = Path(__file__).parents[2]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
EXPECTED = {
    "00_tour",
    "01_scheduling_basics",
    "02_automatic_search",
    "03_comparing_strategies",
    "04_cost_models",
    "05_fleet_and_targets",
    "06_nas_transformations",
    "07_bring_your_own_model",
}

# Run after the tour, in its kernel: the explorer widget exists, its editor applies a step
# when its form is filled in and Apply is clicked, and its dashboards saw the tour's runs.
TOUR_PROBES = [
    """
    assert ex.widget is not None
    assert ex.session.workload == w
    # Issue 10: after Run All the tour's "Try it" (split loop j) must still work: the search's
    # best opened in an explorer of its own, not in this one.
    assert "j" in ex.session.loops(), ex.session.loops()
    assert best_view.editor.session is best_view.session
    assert best_view.session.snapshot.trace_json == best.candidate.trace
    """,
    """
    # Issue 10: the tour's printed diff glued two lines ("...B[v_k, v_j]+   for i in ...")
    lines = s.snapshot.diff.splitlines()
    assert lines and all(line[:1] in "@+- " for line in lines), lines
    assert not any("]+" in line or "]-" in line for line in lines), lines
    """,
    """
    snapshot = ex.session.snapshot
    loop = next(
        (lp for lp in snapshot.loops
         if lp.kind == "serial" and lp.extent and lp.extent >= 4 and lp.extent % 2 == 0),
        None,
    )
    if loop is None:  # the opened schedule has no loop to split: start from the workload
        ex.open(w)
        snapshot = ex.session.snapshot
        loop = snapshot.loops[0]
    before_step, before_loops = snapshot.step_id, ex.session.loops()
    ex.editor.primitive.value = "split"
    ex.editor.params["loop"].value = loop.name
    ex.editor.params["factors"].value = "None, 2"
    ex.editor.apply_button.click()
    assert not ex.editor.banner.value, ex.editor.banner.value
    assert ex.session.snapshot.step_id != before_step, "Apply did not add a step"
    assert ex.session.snapshot.step.primitive == "split"
    assert len(ex.session.loops()) == len(before_loops) + 1, ex.session.loops()
    ex.editor.undo_button.click()
    assert ex.session.loops() == before_loops, "Undo did not restore the loops"
    """,
    """
    ex.dashboards.refresh()
    strategies = {g.strategy for g in ex.dashboards.infos["convergence"].groups}
    assert {"manual", "random"} <= strategies, strategies
    """,
]

# Run after notebook 05: the fleet it started is down, no process of it left behind.
FLEET_PROBES = [
    """
    assert all(not p.is_alive() for p in fleet.processes), fleet.processes
    assert not state.parent.exists()  # its folder too: each run left one in /tmp
    assert transfer.targets == tuple(t.key() for t in targets.values())
    for k in transfer.targets:  # the diagonal: each target's best over itself
        result = transfer.cell(k, k).result
        assert result.status.value in ("ok", "noisy"), result.error_msg
        assert result.status.value == "noisy" or transfer.slowdown(k, k) == 1.0
    """,
    """
    # each key's peak was measured on its device, and each run records it
    for key, peak in peaks.items():
        assert peak.num_threads == 1 and peak.target_key == targets[key].key()
        environment = store.get_run(results[key].run.id).environment
        assert environment["peak"] == peak.to_json(), environment
        assert environment["measured_on"] == f"fleet {fleet.tracker}, key {key}"
    """,
]

# Run after notebook 06 (NAS as program transformation), in its kernel.
NAS_PROBES = [
    """
    # Group(4) divides the work and the weights by 4, depthwise by 16; a bottleneck halves the
    # block's first output loop and its second convolution's input loop.
    assert dense.is_dense and grouped.pieces[0].conv.groups == 4
    assert grouped.macs * 4 == dense.macs and grouped.params * 4 == dense.params
    assert depthwise.macs * 16 == dense.macs
    assert [c.pieces[0].conv.out_channels for c in narrow.convs] == [8, 16]
    assert [c.pieces[0].conv.in_channels for c in narrow.convs] == [16, 8]
    assert narrow_macs * 2 == block_macs
    """,
    """
    # The printed diff holds the changed lines of the loop nest, and only changed lines.
    removed = [line[1:] for line in diff if line.startswith("-") and not line.startswith("---")]
    added = [line[1:] for line in diff if line.startswith("+") and not line.startswith("+++")]
    assert len(removed) == len(added) == 4, diff
    assert any("T.grid(1, 16, 32, 32, 16, 3, 3)" in line for line in removed), removed
    assert any("T.grid(1, 16, 32, 32, 4, 3, 3)" in line for line in added), added
    assert any("v_f // 4 * 4 + v_rc" in line for line in added), added
    assert any("T.Buffer((16, 4, 3, 3)" in line for line in added), added
    assert not set(removed) & set(added)
    """,
    """
    # Fisher Potential: the extreme variant is illegal at tau = 1, the original legal against
    # itself, and every score is a real number from a sound forward pass.
    import math
    assert extreme_is_legal is False
    assert not is_legal(fp[extreme][0], fp["original"][0], tau=1.0)
    assert all(is_legal(o, o, tau=1.0) for o in fp["original"])
    assert all(math.isfinite(c.total) and c.total > 0 for scores in fp.values() for c in scores)
    assert 1.5 < fp["original"][0].loss < 3.5  # about ln 10 at initialisation
    """,
    """
    # The tuned runs are in the notebook's database: finished, of the right convolution, with
    # their trials; the search found section 5's dense run there instead of tuning it again.
    from explorer.storage import RunStatus
    for label, layer in to_tune.items():
        run = store.get_run(tuned[label].run.id)
        assert run.status is RunStatus.FINISHED, (label, run.status)
        assert run.workload.key() == layer.pieces[0].conv.workload().key(), label
        assert run.settings.get("max_trials") == BUDGET
        assert len(store.trials(run_id=run.id)) >= BUDGET
    reused = result.tuning_of(dense.pieces[0].conv)
    assert reused is not None and reused.is_cached and reused.run_id == tuned["dense"].run.id
    for t in result.tunings:
        assert store.get_run(t.run_id).workload.key() == t.conv.workload().key()
    """,
    """
    # The search's points: the original first, illegal candidates untuned, a legal front.
    assert result.points[0].name == "original" and result.points[0].is_legal
    assert len(result.points) == 1 + 4
    assert all(p.latency_secs is None for p in result.points if not p.is_legal)
    assert all(p.is_legal and p.latency_secs for p in result.front)
    # the front is empty only when no legal network got a latency (every timing noisy)
    assert bool(result.front) == any(p.is_legal and p.latency_secs for p in result.points)
    """,
]

MODEL_TRIALS = 12  # notebook 07's tune of the tiny network under test (24 as shipped)

# Run after notebook 07: the model, its tune and its race are in the notebook's database, and
# the Model tab shows them.
MODEL_PROBES = [
    f"""
    assert [m.name for m in store.models()] == ["resnet18", "tiny"]
    assert len(resnet.tasks) == 20 and max(t.weight for t in resnet.tasks) == 2
    assert race.tune == tune and store.model_races(tiny.id) == [race]
    assert race.trials == tune_spent(tiny, store, tune) == {MODEL_TRIALS}
    assert all(e.error is None for e in race.entries), race.entries
    assert race.entry("tuned").fastest_secs < race.entry("untuned").fastest_secs
    """,
    """
    panel = ex.model
    assert panel.model is not None and panel.model.name == "tiny"  # the latest model
    assert "Race " in panel.race_table.value and len(panel.race_figure.data) == 3
    """,
]

# Run after notebook 03: its race replayed the shipped recording (complete: every schedule of
# the space), stored nothing among the measured runs, and its winner was confirmed for real.
RACE_PROBES = [
    """
    assert recording.coverage == 1.0 and recording.num_schedules == info.num_schedules
    assert len(raced.runs) == 5 * SEEDS and {r.strategy for r in raced.runs} == set(RACED)
    assert all(r.best_secs is None or r.best_secs >= recording.best_secs for r in raced.runs)
    assert not any(run.environment.get("replayed_from") for run in store.runs())
    assert all(run.environment.get("replayed_from") for run in race_store.runs())
    assert not any(r.run.environment.get("replayed_from") for r in confirmed.values())
    assert winner != "random" and confirmed[winner].num_trials > 0
    """,
]

# The budgets a test runs with, set in the notebook's own cell (as papermill sets parameters):
# every cell still runs, in order, with every strategy and model, on fewer trials (and notebook
# 03 races three seeds, not ten). Notebook 03's seven strategies at 24 trials
# were the suite's slowest test (138 s of 23 minutes on 2 cores); on a 2-core Zen 3 the ten
# notebooks took 690 s of a 40-minute run before 05, 06 and 07 had budgets of their own.
# Each assignment must be in the notebook exactly once, so an edit there cannot slip past.
FEWER_TRIALS = {
    "03_comparing_strategies": [("BUDGET = 24", "BUDGET = 8"), ("SEEDS = 10", "SEEDS = 3")],
    "04_cost_models": [("N_TRIALS = 64", "N_TRIALS = 32")],
    "05_fleet_and_targets": [("max_trials=16", "max_trials=8")],
    "06_nas_transformations": [
        ('BUDGET, STRATEGY, SEED = 8, "random", 0', 'BUDGET, STRATEGY, SEED = 4, "random", 0')
    ],
    "07_bring_your_own_model": [("max_trials=24", f"max_trials={MODEL_TRIALS}")],
}

PROBES = {
    "00_tour": TOUR_PROBES,
    "03_comparing_strategies": RACE_PROBES,
    "05_fleet_and_targets": FLEET_PROBES,
    "06_nas_transformations": NAS_PROBES,
    "07_bring_your_own_model": MODEL_PROBES,
}


def _kernel_env(db: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["EXPLORER_DB"] = str(db)  # a private database: never the user's ~/.explorer
    # The kernel runs in notebooks/: make it import this working tree's packages even when the
    # venv's editable install predates one of them (it then maps `widgets` to a namespace).
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return env


def test_every_notebook_is_tested():
    assert {p.stem for p in NOTEBOOKS} == EXPECTED


def test_notebooks_are_saved_without_outputs():
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, (
                    f"{path.name}: clear the outputs before saving"
                )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_without_error(path, tmp_path):
    db = tmp_path / "records.db"
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=False,
    )
    probes = [
        nbformat.v4.new_code_cell(textwrap.dedent(src).strip())
        for src in PROBES.get(path.stem, [])
    ]
    nb.cells.extend(probes)  # appended to the in-memory copy only, run after the notebook
    for shipped, tested in FEWER_TRIALS.get(path.stem, []):
        cells = [c for c in nb.cells if c.cell_type == "code" and shipped in c.source]
        assert len(cells) == 1 and cells[0].source.count(shipped) == 1, shipped
        cells[0].source = cells[0].source.replace(shipped, tested)
    client.reset_execution_trackers()
    with client.setup_kernel(env=_kernel_env(db)):
        # Every cell in order, as "Run All" does; a cell that raises fails the test here.
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)

    ran = [c for c in nb.cells if c.cell_type == "code"]
    # An exception inside a widget callback (a button click) is shown, not raised.
    errors = [o for c in ran for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, [f"{o['ename']}: {o['evalue']}" for o in errors]
    # So is one on a background thread (a search job, a dashboard refresh): it is logged.
    tracebacks = [
        o["text"]
        for c in ran
        for o in c.get("outputs", [])
        if o.get("output_type") == "stream" and "Traceback" in o.get("text", "")
    ]
    assert not tracebacks, tracebacks

    # The notebook wrote its measurements to the default database, i.e. to $EXPLORER_DB.
    assert db.exists()
    with SQLiteStore(db) as store:
        assert store.count_trials() > 0
