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
