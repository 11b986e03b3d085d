"""The model tables of a SQL record database (schema version 6): imported models with their
ONNX files, the runs that tuned their tasks, and their races."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from explorer.core import ModelRace, ModelRecord, RaceEntry
from explorer.errors import StoreError
from explorer.target import Target

MODEL_COLUMNS = "id, name, source_sha256, inputs_json, tasks_json, target_json, created_at"
RACE_COLUMNS = "id, model_id, tune, trials, entries_json, environment_json, created_at"


def insert_model(conn: Any, model: ModelRecord, source: bytes) -> ModelRecord:
    """Insert ``model`` inside the caller's write transaction (see ``RecordStore.add_model``)."""
    row = conn.execute(
        f"SELECT {MODEL_COLUMNS} FROM models WHERE name = ?", (model.name,)
    ).fetchone()
    if row is not None:
        stored = decode_model(row)
        if stored.source_sha256 == model.source_sha256:
            return stored
        raise StoreError(
            f"another model is already stored as {model.name!r} (imported from a different "
            "file); import this one under another name (--name)"
        )
    target_json = json.dumps(model.target.to_json(), sort_keys=True)
    (model_id,) = conn.execute(
        "INSERT INTO models (name, source_sha256, source, inputs_json, tasks_json, target_json, "
        "created_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (model.name, model.source_sha256, bytes(source), model.inputs_json(),
         model.tasks_json(), target_json, model.created_at),
    ).fetchone()  # fmt: skip
    return ModelRecord(
        int(model_id), model.name, model.source_sha256, model.inputs, model.tasks,
        model.target, model.created_at,
    )  # fmt: skip


def select_models(conn: Any) -> list[ModelRecord]:
    rows = conn.execute(f"SELECT {MODEL_COLUMNS} FROM models ORDER BY id").fetchall()
    return [decode_model(row) for row in rows]


def select_source(conn: Any, model_id: int) -> bytes:
    row = conn.execute("SELECT source FROM models WHERE id = ?", (int(model_id),)).fetchone()
    if row is None:
        raise KeyError(f"no model {model_id} in this database")
    return bytes(row[0])


def insert_model_run(conn: Any, model_id: int, run_id: int, task: str, tune: str) -> None:
    conn.execute(
        "INSERT INTO model_runs (run_id, model_id, task, tune) VALUES (?, ?, ?, ?)",
        (int(run_id), int(model_id), str(task), str(tune)),
    )


def select_model_runs(conn: Any, model_id: int) -> list[tuple[int, str, str]]:
    rows = conn.execute(
        "SELECT run_id, task, tune FROM model_runs WHERE model_id = ? ORDER BY run_id",
        (int(model_id),),
    ).fetchall()
    return [(int(r), str(task), str(tune)) for r, task, tune in rows]


def insert_race(conn: Any, race: ModelRace) -> ModelRace:
    (race_id,) = conn.execute(
        "INSERT INTO model_races (model_id, tune, trials, entries_json, environment_json, "
        "created_at) VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
        (race.model_id, race.tune, race.trials, race.entries_json(),
         json.dumps(race.environment, sort_keys=True), race.created_at),
    ).fetchone()  # fmt: skip
    return ModelRace(
        int(race_id), race.model_id, race.tune, race.trials, race.entries, race.environment,
        race.created_at,
    )  # fmt: skip


def select_races(conn: Any, model_id: int) -> list[ModelRace]:
    rows = conn.execute(
        f"SELECT {RACE_COLUMNS} FROM model_races WHERE model_id = ? ORDER BY id",
        (int(model_id),),
    ).fetchall()
    return [
        ModelRace(
            int(i),
            int(m),
            None if tune is None else str(tune),
            int(trials),
            tuple(RaceEntry.from_json(e) for e in json.loads(entries)),
            json.loads(env),
            float(created),
        )  # fmt: skip
        for i, m, tune, trials, entries, env, created in rows
    ]


def decode_model(row: Sequence[Any]) -> ModelRecord:
    model_id, name, sha, inputs, tasks, target, created_at = row
    return ModelRecord(
        id=int(model_id),
        name=str(name),
        source_sha256=str(sha),
        inputs=ModelRecord.decode_inputs(inputs),
        tasks=ModelRecord.decode_tasks(tasks),
        target=Target.from_json(json.loads(target)),
        created_at=float(created_at),
    )
