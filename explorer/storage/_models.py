"""The ``models`` table of a SQL record database (schema version 6): imported models, each
stored once with its inputs and tasks."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from explorer.core import ModelRecord
from explorer.errors import StoreError
from explorer.target import Target

MODEL_COLUMNS = "id, name, source_sha256, inputs_json, tasks_json, target_json, created_at"
_INSERT = (
    "INSERT INTO models (name, source_sha256, inputs_json, tasks_json, target_json, "
    "created_at) VALUES (?, ?, ?, ?, ?, ?) RETURNING id"
)


def insert_model(conn: Any, model: ModelRecord) -> ModelRecord:
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
        _INSERT,
        (model.name, model.source_sha256, model.inputs_json(), model.tasks_json(),
         target_json, model.created_at),
    ).fetchone()  # fmt: skip
    return ModelRecord(
        int(model_id), model.name, model.source_sha256, model.inputs, model.tasks,
        model.target, model.created_at,
    )  # fmt: skip


def select_models(conn: Any) -> list[ModelRecord]:
    rows = conn.execute(f"SELECT {MODEL_COLUMNS} FROM models ORDER BY id").fetchall()
    return [decode_model(row) for row in rows]


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
