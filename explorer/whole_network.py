"""A NAS search's networks built whole: each exported to ONNX, imported as a model, tuned and
raced, so a candidate's latency is read from the network that runs, beside the search's sum of
convolutions.

The search compares networks by the sum of their tuned convolutions (batch norms, ReLUs,
pooling and the concatenations of split layers left out on every side). A whole-network build
adds what that sum leaves out: every fused task of the network (a convolution with its bias,
shortcut and ReLU is one), tuned with the same budget for each network, and ONNX Runtime on the
same file. Each network is raced on its own (its tuned build against ONNX Runtime, in
interleaved rounds); across networks, the ONNX Runtime readings say what the transformation
buys a runtime we did not tune.
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from explorer.core import RecordStore
from explorer.model import ONNXRUNTIME, TUNED, import_model, race_model, tune_model
from explorer.nas import NasPoint, network_onnx
from explorer.target import Target

if TYPE_CHECKING:  # the measurer package imports TVM; describing a build does not need it
    from explorer.measure import Measurer


@dataclass(frozen=True, slots=True)
class WholeNetwork:
    """One network of a search, built whole: its model in the store, the model tune that
    scheduled it (``trials`` trials in all) and what its race read.

    ``tuned_secs`` and ``onnxruntime_secs`` are the race's fastest readings (``None`` when
    that build failed: ``error`` says why); ``convs_secs`` is the search's latency of the same
    network (the sum of its tuned convolutions)."""

    point: str  # the search's name for it: "original", "candidate 7"
    model: str  # its name in the store (``explorer model show``)
    tune: str
    trials: int
    tuned_secs: float | None
    onnxruntime_secs: float | None
    convs_secs: float | None
    error: str | None = None


def model_name(network_name: str, point_name: str, source: bytes, target: Target) -> str:
    """The stored model's name (a valid one, whatever the names): the network, the point and a
    digest of the ONNX file and the target, so the same network built again for the same
    target finds its model (and its tune) while another sample's "candidate 3" gets its own."""
    digest = hashlib.sha256(source + json.dumps(target.to_json(), sort_keys=True).encode())
    network, point = (re.sub(r"[^A-Za-z0-9]+", "", n) for n in (network_name, point_name))
    return f"nas.{network[:32]}.{point[:16]}.{digest.hexdigest()[:8]}"


def build_whole(
    network_name: str,
    points: Sequence[NasPoint],
    *,
    store: RecordStore,
    measurer: Measurer,
    target: Target,
    trials: int,
    strategy: str = "evolutionary",
    seed: int = 0,
    rounds: int = 3,
    on_step: Callable[[str], None] = lambda _: None,
) -> list[WholeNetwork]:
    """Build each of ``points`` whole (see the module doc) with ``trials`` trials per network,
    in order; a network already tuned so in ``store`` is not tuned again (its tune goes on
    from where it stopped).

    Raises:
        ValueError: ``trials`` or ``rounds`` below 1.
        ModelError: a network could not be imported or raced (the sentence says which).
    """
    if trials < 1 or rounds < 1:
        raise ValueError(f"trials and rounds must be at least 1 (got {trials}, {rounds})")
    out = []
    for point in points:
        source = network_onnx(point.network).SerializeToString()
        name = model_name(network_name, point.name, source, target)
        model = next((m for m in store.models() if m.name == name), None)
        if model is None:
            with tempfile.TemporaryDirectory(prefix="explorer-nas-") as folder:
                path = Path(folder) / f"{name}.onnx"
                path.write_bytes(source)
                on_step(f"{point.name}: importing it as {name}")
                model = import_model(path, store, name=name, target=target, measurer=measurer)
        on_step(f"{point.name}: tuning its {len(model.tasks)} tasks, {trials} trials in all")
        tune = tune_model(model, store, measurer, max_trials=trials, strategy=strategy, seed=seed)
        on_step(f"{point.name}: racing its build against ONNX Runtime")
        race = race_model(model, store, tune=tune, rounds=rounds, seed=seed, untuned=False)
        tuned, ort = race.entry(TUNED), race.entry(ONNXRUNTIME)
        errors = [e.error for e in (tuned, ort) if e is not None and e.error]
        out.append(
            WholeNetwork(
                point.name,
                name,
                tune,
                race.trials,
                None if tuned is None or tuned.error else tuned.fastest_secs,
                None if ort is None or ort.error else ort.fastest_secs,
                point.latency_secs,
                errors[0] if errors else None,
            )
        )
    return out
