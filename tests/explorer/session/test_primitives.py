"""Every primitive applied legally (and still computing the right answer), and refused cleanly."""

from __future__ import annotations

import pytest
from session_helpers import assert_computes

from explorer.errors import PrimitiveError
from explorer.session import PARAM_KINDS, PRIMITIVES, REQUIRED, ScheduleSession
from explorer.target import Target
from explorer.workloads import get_workload

# (workload fixture, [(primitive, args), ...]); the last step is the one under test
LEGAL = {
    "split": ("matmul", [("split", {"loop": "i", "factors": [None, 16]})]),
    "split_exact": ("matmul", [("split", {"loop": "j", "factors": [2, 4, 16]})]),
    "split_ragged": ("matmul", [("split", {"loop": "i", "factors": [None, 3]})]),
    "fuse": ("matmul", [("fuse", {"loops": ["i", "j"]})]),
    "reorder": ("matmul", [("reorder", {"loops": ["k", "j", "i"]})]),
    "parallel": ("matmul", [("parallel", {"loop": "i"})]),
    "vectorize": (
        "matmul",
        [("reorder", {"loops": ["i", "k", "j"]}), ("vectorize", {"loop": "j"})],
    ),
    "unroll": (
        "matmul",
        [("split", {"loop": "k", "factors": [None, 4]}), ("unroll", {"loop": "k_1"})],
    ),
    "cache_read": (
        "matmul",
        [
            ("split", {"loop": "i", "factors": [None, 16]}),
            ("cache_read", {"block": "C", "read_index": 0, "storage_scope": "global"}),
        ],
    ),
    "cache_read_compute_at": (
        "matmul",
        [
            ("split", {"loop": "i", "factors": [None, 16]}),
            ("cache_read", {"block": "C", "read_index": 1, "storage_scope": "local"}),
            ("compute_at", {"block": "B_local", "loop": "i_0"}),
        ],
    ),
    "cache_write": ("matmul", [("cache_write", {"block": "C", "write_index": 0})]),
    "compute_at": ("chain", [("compute_at", {"block": "add", "loop": "relu.i"})]),
    "compute_at_chain": (
        "chain",
        [
            ("compute_at", {"block": "add", "loop": "relu.i"}),
            ("compute_at", {"block": "mul", "loop": "relu.i", "preserve_unit_loops": True}),
        ],
    ),
    "reverse_compute_at": ("mm_relu", [("reverse_compute_at", {"block": "relu", "loop": "C.i"})]),
    "compute_inline": ("chain", [("compute_inline", {"block": "mul"})]),
    "reverse_compute_inline": (
        "mm_relu",
        [
            ("cache_write", {"block": "C", "write_index": 0}),
            ("reverse_compute_inline", {"block": "relu"}),
        ],
    ),
    "decompose_reduction": ("matmul", [("decompose_reduction", {"block": "C", "loop": "k"})]),
    "rfactor": (
        "matmul",
        [
            ("split", {"loop": "k", "factors": [None, 8]}),
            ("rfactor", {"loop": "k_1", "factor_axis": 0}),
        ],
    ),
    "annotate_loop": (
        "matmul",
        [("annotate", {"loop": "i", "key": "pragma_auto_unroll_max_step", "value": 16})],
    ),
    "annotate_block": (
        "matmul",
        [("annotate", {"block": "C", "key": "meta_schedule.unroll_explicit", "value": 0})],
    ),
    "storage_align": (
        "matmul",
        [
            ("cache_read", {"block": "C", "read_index": 0}),
            ("storage_align", {"block": "A_global", "axis": 0, "factor": 32, "offset": 1}),
        ],
    ),
    "transform_layout": (
        "matmul",
        [
            ("cache_read", {"block": "C", "read_index": 1}),
            ("transform_layout", {"block": "C", "read_index": 1, "axis": 1, "factor": 32}),
        ],
    ),
    "transform_layout_batch": (
        "batched",
        [
            ("cache_read", {"block": "C", "read_index": 1}),
            ("transform_layout", {"block": "C", "read_index": 1, "axis": 2, "factor": 8}),
        ],
    ),
    "packed_register_tile": (
        "matmul",
        [
            ("cache_read", {"block": "C", "read_index": 1}),
            ("transform_layout", {"block": "C", "read_index": 1, "axis": 1, "factor": 16}),
            ("split", {"loop": "C.i", "factors": [None, 8]}),
            ("split", {"loop": "C.j", "factors": [None, 16]}),
            ("reorder", {"loops": ["i_0", "j_0", "k", "i_1", "j_1"]}),
            ("cache_write", {"block": "C"}),
            ("reverse_compute_at", {"block": "C_global", "loop": "j_0"}),
            ("parallel", {"loop": "i_0"}),
            ("unroll", {"loop": "i_1"}),
            ("vectorize", {"loop": "j_1"}),
        ],
    ),
    "field_guide_tiling": (
        "mm_relu",
        [
            ("split", {"loop": "C.i", "factors": [None, 16]}),
            ("split", {"loop": "C.j", "factors": [None, 32]}),
            ("split", {"loop": "k", "factors": [None, 4]}),
            ("reorder", {"loops": ["i_0", "j_0", "k_0", "i_1", "k_1", "j_1"]}),
            ("cache_write", {"block": "C"}),
            ("reverse_compute_at", {"block": "C_global", "loop": "j_0"}),
            ("reverse_compute_inline", {"block": "relu"}),
            ("fuse", {"loops": ["i_0", "j_0"]}),
            ("parallel", {"loop": "i_0_j_0_fused"}),
            ("vectorize", {"loop": "j_1"}),
            ("unroll", {"loop": "k_1"}),
            ("annotate", {"loop": "i_0_j_0_fused", "key": "pragma_unroll_explicit", "value": 1}),
            ("decompose_reduction", {"block": "C", "loop": "k_0"}),
        ],
    ),
}


@pytest.mark.parametrize("case", sorted(LEGAL))
def test_legal_steps_compile_and_compute(case: str, request: pytest.FixtureRequest) -> None:
    fixture, steps = LEGAL[case]
    session = ScheduleSession(request.getfixturevalue(fixture))
    for name, args in steps:
        before = session.snapshot
        snap = session.apply(name, **args)
        assert snap.step.primitive == name
        assert snap.script != before.script or name == "annotate"
        assert snap.diff.startswith("---")
        assert len(snap.path) == len(before.path) + 1
    assert_computes(session)


def test_every_primitive_is_exercised() -> None:
    used = {name for _, steps in LEGAL.values() for name, _ in steps}
    assert used | {"bind"} == set(PRIMITIVES)


def test_bind_legal_on_a_cuda_target(matmul) -> None:
    # Scheduling for CUDA needs no GPU (nor does compiling: tests/explorer/measure/test_cuda.py)
    session = ScheduleSession(matmul, Target(kind="cuda", arch="sm_80"))
    session.apply("split", loop="i", factors=[None, 32])
    session.apply("bind", loop="i_0", thread_axis="blockIdx.x")
    snap = session.apply("bind", loop="i_1", thread_axis="threadIdx.x")
    kinds = {lp.name: (lp.kind, lp.thread) for lp in snap.loops}
    assert kinds["i_0"] == ("thread_binding", "blockIdx.x")
    assert kinds["i_1"] == ("thread_binding", "threadIdx.x")


def bad(fixture: str, primitive: str, args: dict, arg: str, *words: str, setup=()) -> tuple:
    """An illegal step: the argument it must blame and words its reason must contain."""
    return fixture, list(setup), primitive, args, arg, list(words)


ILLEGAL = {
    "split_product": bad(
        "matmul",
        "split",
        {"loop": "i", "factors": [4, 4]},
        "factors",
        "loop extent 128",
        "[4, 4]",
        "16",
    ),
    "split_two_none": bad(
        "matmul", "split", {"loop": "i", "factors": [None, None]}, "factors", "None"
    ),
    "split_zero": bad(
        "matmul", "split", {"loop": "i", "factors": [None, 0]}, "factors", "positive"
    ),
    "split_not_list": bad("matmul", "split", {"loop": "i", "factors": 4}, "factors", "list"),
    "split_float": bad(
        "matmul", "split", {"loop": "i", "factors": [None, 2.5]}, "factors", "positive integer"
    ),
    "unknown_loop": bad(
        "matmul",
        "split",
        {"loop": "q", "factors": [None, 4]},
        "loop",
        "no loop named 'q'",
        "i, j, k",
    ),
    "ambiguous_loop": bad(
        "mm_relu", "parallel", {"loop": "i"}, "loop", "ambiguous", "C.i", "relu.i"
    ),
    "unknown_block": bad(
        "mm_relu", "compute_inline", {"block": "D"}, "block", "no block named 'D'", "C, relu"
    ),
    "loop_not_str": bad("matmul", "parallel", {"loop": 3}, "loop", "loop name"),
    "vectorize_reduction": bad(
        "matmul", "vectorize", {"loop": "k"}, "loop", "loop k is a reduction loop", "vectorized"
    ),
    "vectorize_outer_loop": bad("matmul", "vectorize", {"loop": "i"}, "loop", "innermost", "j, k"),
    "parallel_nested": bad(
        "matmul",
        "parallel",
        {"loop": "j"},
        "loop",
        "inside parallel loop i",
        "fuse",
        setup=[("parallel", {"loop": "i"})],
    ),
    "reverse_compute_at_of_a_producer": bad(
        "chain",
        "reverse_compute_at",
        {"block": "mul", "loop": "relu.j"},
        "loop",
        "block add reads",
        "dependence",
    ),
    "parallel_reduction": bad(
        "matmul", "parallel", {"loop": "k"}, "loop", "reduction loop", "parallelized"
    ),
    "fuse_not_adjacent": bad("matmul", "fuse", {"loops": ["i", "k"]}, "loops", "nested"),
    "fuse_one_loop": bad("matmul", "fuse", {"loops": ["i"]}, "loops", "at least 2"),
    "fuse_same_loop": bad("mm_relu", "fuse", {"loops": ["C.i", "C.i"]}, "loops", "once"),
    "reorder_across_blocks": bad(
        "mm_relu", "reorder", {"loops": ["C.j", "relu.i"]}, "loops", "one path"
    ),
    "compute_at_breaks_deps": bad(
        "chain", "compute_at", {"block": "mul", "loop": "relu.i"}, "loop", "consumer", "dependence"
    ),
    "compute_at_output": bad(
        "mm_relu", "compute_at", {"block": "relu", "loop": "C.i"}, "block", "output"
    ),
    "reverse_compute_at_breaks_deps": bad(
        "chain", "reverse_compute_at", {"block": "relu", "loop": "mul.i"}, "loop", "producer"
    ),
    "compute_inline_reduction": bad(
        "matmul", "compute_inline", {"block": "C"}, "block", "reduction", "C"
    ),
    "compute_inline_output": bad(
        "chain", "compute_inline", {"block": "relu"}, "block", "output", "inlined"
    ),
    "reverse_compute_inline_after_reduction": bad(
        "mm_relu", "reverse_compute_inline", {"block": "relu"}, "block", "producer"
    ),
    "rfactor_spatial": bad("matmul", "rfactor", {"loop": "i"}, "loop", "data-parallel", "spatial"),
    "rfactor_axis": bad(
        "matmul", "rfactor", {"loop": "k", "factor_axis": 7}, "factor_axis", "between"
    ),
    "cache_read_index": bad(
        "matmul", "cache_read", {"block": "C", "read_index": 2}, "read_index", "0..1", "A", "B"
    ),
    "cache_write_index": bad(
        "matmul", "cache_write", {"block": "C", "write_index": 1}, "write_index", "0..0"
    ),
    "cache_read_scope": bad(
        "matmul",
        "cache_read",
        {"block": "C", "storage_scope": "texture"},
        "storage_scope",
        "one of",
    ),
    "storage_align_argument": bad(
        "matmul",
        "storage_align",
        {"block": "C", "axis": 0, "factor": 8},
        "buffer_index",
        "function argument",
    ),
    "transform_layout_of_an_input": bad(
        "matmul",
        "transform_layout",
        {"block": "C", "read_index": 1, "axis": 1, "factor": 32},
        "read_index",
        "B is an input of the function",
        "cache_read",
    ),
    "transform_layout_factor": bad(
        "matmul",
        "transform_layout",
        {"block": "C", "read_index": 1, "axis": 1, "factor": 48},
        "factor",
        "must divide dimension 1 of B_global (128)",
        "32, 64, 128",
        setup=[("cache_read", {"block": "C", "read_index": 1})],
    ),
    "transform_layout_axis": bad(
        "matmul",
        "transform_layout",
        {"block": "C", "read_index": 1, "axis": 2, "factor": 4},
        "axis",
        "2 dimensions",
        setup=[("cache_read", {"block": "C", "read_index": 1})],
    ),
    "transform_layout_index": bad(
        "matmul",
        "transform_layout",
        {"block": "C", "read_index": 5, "axis": 0, "factor": 4},
        "read_index",
        "0..1",
    ),
    "storage_align_axis": bad(
        "matmul",
        "storage_align",
        {"block": "A_global", "axis": 5, "factor": 8},
        "axis",
        "-2..1",
        setup=[("cache_read", {"block": "C"})],
    ),
    "storage_align_offset": bad(
        "matmul",
        "storage_align",
        {"block": "A_global", "axis": 0, "factor": 8, "offset": 9},
        "offset",
        "smaller than factor",
        setup=[("cache_read", {"block": "C"})],
    ),
    "bind_on_cpu": bad(
        "matmul",
        "bind",
        {"loop": "i", "thread_axis": "threadIdx.x"},
        "thread_axis",
        "CUDA",
        "llvm",
    ),
    "bind_bad_axis": bad(
        "matmul", "bind", {"loop": "i", "thread_axis": "warp.x"}, "thread_axis", "one of"
    ),
    "annotate_both": bad(
        "matmul",
        "annotate",
        {"loop": "i", "block": "C", "key": "pragma_unroll_explicit", "value": 1},
        "loop",
        "exactly one",
    ),
    "annotate_bad_key": bad(
        "matmul", "annotate", {"loop": "i", "key": "nope", "value": 1}, "key", "one of"
    ),
    "unknown_arg": bad("matmul", "parallel", {"loop": "i", "lop": "j"}, "lop", "not a parameter"),
    "missing_arg": bad("matmul", "split", {"loop": "i"}, "factors", "required"),
    "decompose_not_ancestor": bad(
        "mm_relu", "decompose_reduction", {"block": "C", "loop": "relu.i"}, "loop"
    ),
    "bool_type": bad(
        "chain",
        "compute_at",
        {"block": "add", "loop": "relu.i", "preserve_unit_loops": 1},
        "preserve_unit_loops",
        "True or False",
    ),
}


@pytest.mark.parametrize("case", sorted(ILLEGAL))
def test_illegal_steps_are_refused_and_change_nothing(
    case: str, request: pytest.FixtureRequest
) -> None:
    fixture, setup, name, args, arg, words = ILLEGAL[case]
    session = ScheduleSession(request.getfixturevalue(fixture))
    for setup_name, setup_args in setup:
        session.apply(setup_name, **setup_args)
    before = session.snapshot
    events: list[object] = []
    session.on_change(events.append)
    with pytest.raises(PrimitiveError) as info:
        session.apply(name, **args)
    err = info.value
    message = str(err)
    assert err.primitive == name
    assert err.arg == arg, message
    if err.value is None and err.reason.startswith("is "):  # "split: factors is required"
        assert message.startswith(f"{name}: {arg} ") and "None" not in message.split("(")[0]
    else:
        assert message.startswith(f"{name}({arg}=") and repr(err.value) in message
    for word in words:
        assert word in err.reason, message
    after = session.snapshot
    assert after.script == before.script
    assert after.trace_json == before.trace_json
    assert after.trace_python == before.trace_python
    assert after.step == before.step
    assert events == []


def test_tvm_detail_is_kept(matmul) -> None:
    session = ScheduleSession(matmul)
    with pytest.raises(PrimitiveError) as info:
        session.apply("vectorize", loop="k")
    assert "ScheduleError" in info.value.detail
    assert "Error message" in info.value.detail


def test_unknown_primitive_lists_primitives(matmul) -> None:
    with pytest.raises(PrimitiveError, match="split, fuse"):
        ScheduleSession(matmul).apply("tile", loop="i")


def test_registry_declares_forms_and_docs() -> None:
    for name, prim in PRIMITIVES.items():
        assert prim.name == name
        assert "Rewrite:" in prim.doc, name
        assert prim.doc.splitlines()[0].endswith("."), name
        for spec in prim.params:
            assert spec.kind in PARAM_KINDS
            if spec.kind == "choice":
                assert spec.choices and (spec.default is REQUIRED or spec.default in spec.choices)
    split = PRIMITIVES["split"]
    assert [(p.name, p.kind, p.required) for p in split.params] == [
        ("loop", "loop", True),
        ("factors", "factors", True),
    ]
    assert split.signature() == "split(loop, factors)"


def test_loop_names_are_resolved_fresh_each_step(mm_relu) -> None:
    session = ScheduleSession(mm_relu)
    assert session.blocks() == ["C", "relu"]
    assert session.loops() == ["C.i", "C.j", "k", "relu.i", "relu.j"]
    session.apply("split", loop="relu.j", factors=[None, 8])
    # "j" became unique, so C's loop is now plain "j"; the qualified form keeps working
    assert session.loops() == ["C.i", "j", "k", "relu.i", "j_0", "j_1"]
    session.apply("reorder", loops=["k", "C.j"])
    session.apply("fuse", loops=["relu.i", "relu.j_0"])  # qualified names always work
    assert "i_j_0_fused" in session.loops()
    session.apply("vectorize", loop="j_1")
    relu = next(b for b in session.snapshot.blocks if b.name == "relu")
    assert [(lp.name, lp.extent, lp.kind) for lp in relu.loops] == [
        ("i_j_0_fused", 512, "serial"),
        ("j_1", 8, "vectorized"),
    ]
    assert_computes(session)


def test_shared_loop_accepts_any_block_under_it(mm_relu) -> None:
    session = ScheduleSession(mm_relu)
    session.apply("reverse_compute_at", block="relu", loop="C.i")
    # C's loop i now encloses both blocks and is the only "i" left
    assert session.snapshot.blocks[1].loops[0].name == "i"
    assert session.snapshot.blocks[1].loops[0].block == "C"
    session.apply("parallel", loop="relu.i")  # the shared loop, qualified by the second block
    assert session.snapshot.loops[0].kind == "parallel"
    assert_computes(session)


def test_workloads_from_the_catalog_work(target) -> None:
    session = ScheduleSession(get_workload("matmul", M=64, N=64, K=64), target)
    session.apply("split", loop="j", factors=[None, 16])
    session.apply("reorder", loops=["k", "j_1"])
    session.apply("vectorize", loop="j_1")
    assert_computes(session)
