"""The tiny network as an ONNX file, written once per test module (`make test` installs the
model extra: onnx and onnxruntime)."""

from __future__ import annotations

import onnx
import pytest


@pytest.fixture(scope="module")
def tiny_onnx(tmp_path_factory):
    from explorer.model import NETWORKS

    path = tmp_path_factory.mktemp("model") / "tiny.onnx"
    onnx.save(NETWORKS["tiny"](), path)
    return path
