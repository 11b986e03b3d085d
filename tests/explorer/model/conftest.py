"""The tiny network as an ONNX file, written once per test module (`make test` installs the
model extra: onnx and onnxruntime)."""

from __future__ import annotations

import onnx
import pytest

from explorer.measure import LocalMeasurer, MeasureConfig


@pytest.fixture(scope="module")
def measurer():
    """The real measurer, with short repeats: these tests check what is measured, not speed."""
    with LocalMeasurer(MeasureConfig(repeat=3, min_repeat_secs=0.002)) as m:
        yield m


@pytest.fixture(scope="module")
def tiny_onnx(tmp_path_factory):
    from explorer.model import NETWORKS

    path = tmp_path_factory.mktemp("model") / "tiny.onnx"
    onnx.save(NETWORKS["tiny"](), path)
    return path


@pytest.fixture(scope="session")
def import_and_tune():
    """``import_and_tune(path, db, measurer, cores=, trials=)``: see ``_import_and_tune``."""
    return _import_and_tune


def _import_and_tune(path, db, measurer, *, cores, trials):
    """The tiny network imported for ``cores`` cores into ``db`` and tuned with ``trials``
    random trials in round-robin, chunks of 8; returns (model, tune name)."""
    from explorer.model import import_model, tune_model
    from explorer.storage import get_store
    from explorer.target import Target

    with get_store(db) as store:
        model = import_model(
            path, store, measurer=measurer, target=Target.local_cpu(num_cores=cores)
        )
        tune = tune_model(
            model, store, measurer, max_trials=trials, strategy="random",
            scheduler="round-robin", chunk=8,
        )  # fmt: skip
    return model, tune
