"""The model tables of a SQL record database (schema version 6): imported models with their
ONNX files, the runs that tuned their tasks, and their races."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from explorer.core import ModelInput, ModelRace, ModelRecord, RaceEntry
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
        return stored_as_imported(decode_model(row), model.source_sha256, model.inputs)
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


def stored_as_imported(
    stored: ModelRecord, sha256: str, inputs: Sequence[ModelInput]
) -> ModelRecord:
    """``stored``, when a file with ``sha256`` at input sizes ``inputs`` is imported under its
    name: the same model.

    Raises:
        StoreError: ``stored`` came from another file, or from this one at other input sizes
            (nothing is replaced: the model's runs and races were made at its sizes).
    """
    if stored.source_sha256 != sha256:
        raise StoreError(
            f"another model is already stored as {stored.name!r} (imported from a different "
            "file); import this one under another name (--name)"
        )
    if tuple(stored.inputs) != tuple(inputs):
        raise StoreError(
            f"{stored.name!r} is already stored from this file with input "
            f"{_shapes(stored.inputs)}, not {_shapes(inputs)}; import it at these sizes under "
            "another name (--name)"
        )
    return stored


def _shapes(inputs: Sequence[ModelInput]) -> str:
    return ", ".join(f"{i.name}={'x'.join(map(str, i.shape))}" for i in inputs)


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


# -- whole databases copied or merged (explorer.storage._sqlcopy) -------------------------------
_ALL_MODEL_COLUMNS = (
    "id, name, source_sha256, source, inputs_json, tasks_json, target_json, created_at"
)


def model_rows(conn: Any) -> list[tuple[Any, ...]]:
    rows = conn.execute(f"SELECT {_ALL_MODEL_COLUMNS} FROM models ORDER BY id").fetchall()
    return [(*r[:3], bytes(r[3]), *r[4:]) for r in rows]


def copy_models(dest: Any, source: Any, run_ids: dict[int, int] | None) -> int:
    """Copy every model, model run and race of ``source`` (a connection) into ``dest`` (one in
    a write transaction). ``run_ids=None``: into an empty database, ids kept (a backup); else
    merged: a model ``dest`` holds already (same name and file) is reused, its runs mapped
    through ``run_ids`` (source run id -> dest run id), races added once.

    Raises:
        StoreError: ``dest`` holds another file under a model's name (merging would lose one).
    """
    with_ids = f"INSERT INTO models ({_ALL_MODEL_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
    new_ids = (
        f"INSERT INTO models ({_ALL_MODEL_COLUMNS.removeprefix('id, ')}) "
        "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id"
    )
    model_ids: dict[int, int] = {}
    held = {
        str(name): (int(i), str(sha))
        for i, name, sha in dest.execute("SELECT id, name, source_sha256 FROM models").fetchall()
    }
    for row in model_rows(source):
        if run_ids is None:
            dest.execute(with_ids, row)
            model_ids[int(row[0])] = int(row[0])
        elif row[1] in held:
            if held[row[1]][1] != row[2]:
                raise StoreError(
                    f"both databases hold a model named {row[1]!r}, imported from different "
                    "files: rename one (import it again with --name) before merging"
                )
            model_ids[int(row[0])] = held[row[1]][0]
        else:
            (new_id,) = dest.execute(new_ids, row[1:]).fetchone()
            model_ids[int(row[0])] = int(new_id)
    linked = {int(r) for (r,) in dest.execute("SELECT run_id FROM model_runs").fetchall()}
    for run_id, model_id, task, tune in source.execute(
        "SELECT run_id, model_id, task, tune FROM model_runs ORDER BY run_id"
    ).fetchall():
        mapped = int(run_id) if run_ids is None else run_ids.get(int(run_id))
        if mapped is not None and mapped not in linked:
            insert_model_run(dest, model_ids[int(model_id)], mapped, task, tune)
    races = {
        (int(m), float(t))
        for m, t in dest.execute("SELECT model_id, created_at FROM model_races").fetchall()
    }
    columns = "model_id, tune, trials, entries_json, environment_json, created_at"
    for row in source.execute(f"SELECT id, {columns} FROM model_races ORDER BY id").fetchall():
        model_id = model_ids[int(row[1])]
        if (model_id, float(row[6])) in races:
            continue
        with_id = run_ids is None
        names = f"id, {columns}" if with_id else columns
        values = (row[0], model_id, *row[2:]) if with_id else (model_id, *row[2:])
        marks = ", ".join("?" * len(values))
        dest.execute(f"INSERT INTO model_races ({names}) VALUES ({marks})", values)
    return len(model_ids)
