"""Golden files: TVMScript, trace-as-Python and loop nest after scripted sessions.

Regenerate with ``pytest tests/explorer/session --update-golden`` and review the diff.
"""

from __future__ import annotations

import pytest
from session_helpers import assert_computes

from explorer.session import ScheduleSession

SCRIPTS = {
    "matmul_tiling": (
        "matmul",
        [
            ("split", {"loop": "i", "factors": [None, 32]}),
            ("split", {"loop": "j", "factors": [None, 64]}),
            ("split", {"loop": "k", "factors": [None, 4]}),
            ("reorder", {"loops": ["i_0", "j_0", "k_0", "i_1", "k_1", "j_1"]}),
            ("cache_write", {"block": "C"}),
            ("reverse_compute_at", {"block": "C_global", "loop": "j_0"}),
            ("fuse", {"loops": ["i_0", "j_0"]}),
            ("parallel", {"loop": "i_0_j_0_fused"}),
            ("vectorize", {"loop": "j_1"}),
            ("unroll", {"loop": "k_1"}),
            ("decompose_reduction", {"block": "C", "loop": "k_0"}),
        ],
    ),
    "mm_relu_fused_epilogue": (
        "mm_relu",
        [
            ("split", {"loop": "C.i", "factors": [None, 16]}),
            ("cache_write", {"block": "C"}),
            ("reverse_compute_at", {"block": "C_global", "loop": "i_0"}),
            ("reverse_compute_inline", {"block": "relu"}),
            ("parallel", {"loop": "i_0"}),
            ("annotate", {"loop": "i_0", "key": "pragma_auto_unroll_max_step", "value": 16}),
        ],
    ),
    "chain_inline": (
        "chain",
        [
            ("compute_inline", {"block": "mul"}),
            ("compute_at", {"block": "add", "loop": "relu.i"}),
            ("split", {"loop": "relu.j", "factors": [None, 16]}),
            ("vectorize", {"loop": "j_1"}),
            ("parallel", {"loop": "relu.i"}),
        ],
    ),
}


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_golden_session(name: str, golden, request: pytest.FixtureRequest) -> None:
    fixture, steps = SCRIPTS[name]
    session = ScheduleSession(request.getfixturevalue(fixture))
    for primitive, args in steps:
        session.apply(primitive, **args)
    snap = session.snapshot
    golden(f"session/{name}.script.txt", snap.script)
    golden(f"session/{name}.trace.txt", snap.trace_python)
    golden(f"session/{name}.nest.txt", snap.loop_nest_text())
    assert_computes(session)
