"""A MetaSchedule work_dir is a file from outside: a hostile tuning record must not take the
importing process down (TVM's ``TuningRecord.from_json`` replays traces in-process) nor be
"repaired" into another schedule; it is counted as unreadable and the others are imported."""

from __future__ import annotations

import json

from explorer.storage import NewTrial, SQLiteStore, export_metaschedule, import_metaschedule
from explorer.storage._metaschedule import RECORD_FILE
from explorer.testing.recordings import SMALL, open_recording, recorded_trials


def test_hostile_tuning_records_are_refused_and_the_rest_imported(tmp_path) -> None:
    recording = open_recording(tmp_path)
    trial = next(t for t in recorded_trials(recording, SMALL) if t.result.is_ok)
    with SQLiteStore(tmp_path / "seed.db") as seed:
        run = seed.create_run(SMALL, trial.candidate.target, "random")
        seed.add_trials(run.id, [NewTrial(trial.candidate, trial.result)])
        assert export_metaschedule(seed, tmp_path / "ms") == 1
    recording.close()
    records = tmp_path / "ms" / RECORD_FILE
    index, record = json.loads(records.read_text().splitlines()[0])
    hostile = []
    for mutate in (_zero_factor, _missing_instruction, _does_not_fit):
        bad = json.loads(json.dumps(record))
        mutate(bad[0])
        hostile.append(json.dumps([index, bad]))
    records.write_text("\n".join(hostile) + "\n" + records.read_text())

    with SQLiteStore(tmp_path / "fresh.db") as fresh:
        summary = import_metaschedule(fresh, tmp_path / "ms")
        assert (summary.imported, summary.failed) == (1, 3)
        (stored,) = fresh.trials()
        assert stored.candidate.trace[1] == trial.candidate.trace[1]


def _tile_position(trace) -> int:
    kinds = [inst[0] for inst in trace[0]]
    return next(p for p, (i, _) in enumerate(trace[1]) if kinds[i] == "SamplePerfectTile")


def _zero_factor(trace) -> None:  # SIGFPE inside TVM when replayed unchecked
    p = _tile_position(trace)
    trace[1][p][1] = [0] * (len(trace[1][p][1]) - 1) + [64]


def _missing_instruction(trace) -> None:  # SIGSEGV inside TVM when replayed unchecked
    trace[1][0][0] = 999


def _does_not_fit(trace) -> None:  # TVM would silently use [1, ..., 64] instead
    p = _tile_position(trace)
    trace[1][p][1] = [2] * len(trace[1][p][1])
