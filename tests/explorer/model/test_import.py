"""Importing an ONNX model: its tasks become workloads, timed and stored (issue 23)."""

from __future__ import annotations

import math
import subprocess
import sys
import time
from dataclasses import replace

import numpy as np
import onnx
import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from explorer.core import TrialRecord
from explorer.errors import ModelError, StoreError
from explorer.machine import BUSY
from explorer.model import (
    NETWORKS,
    ModelRecord,
    ModelTask,
    import_busy_note,
    import_model,
    lower_onnx,
    model_tasks,
    parse_onnx,
    read_onnx,
)
from explorer.search import EvolutionarySearch, RandomSearch, baseline_candidate
from explorer.space import DesignSpace
from explorer.storage import get_store
from explorer.target import Target
from explorer.types import MeasureStatus
from explorer.workloads import TASK, Workload, get_workload


@pytest.fixture(scope="module")
def imported(tiny_onnx, measurer, tmp_path_factory):
    db = tmp_path_factory.mktemp("db") / "records.db"
    with get_store(db) as store:
        model = import_model(tiny_onnx, store, measurer=measurer)
    return db, model


def test_the_tiny_network_imports_with_its_tasks(imported):
    db, model = imported
    assert model.id == 1 and model.name == "tiny"
    assert [(i.name, i.shape, i.dtype) for i in model.inputs] == [("x", (1, 3, 32, 32), "float32")]
    names = {t.name for t in model.tasks}
    assert {"fused_conv2d_add_relu", "fused_conv2d1_add_add1_relu", "mean"} <= names, names
    for task in model.tasks:
        assert task.workload.family == TASK and task.weight >= 1
        assert task.error is None and task.untuned_secs is not None and task.untuned_secs > 0
        assert task.untuned_busy is not None and 0.0 <= task.untuned_busy <= 1.0  # watched
    conv = model.task("fused_conv2d1_add_add1_relu")
    # 16 -> 16 channels, 3x3, 32x32: 2*16*16*9*32*32 multiply-adds, plus the bias, the residual
    # add and the relu over the 16x32x32 output
    assert conv.flops == 2 * 16 * 16 * 9 * 32 * 32 + 3 * 16 * 32 * 32
    # channels-last: its input, weights and output [n, h, w, c], [o, kh, kw, i], [n, h, w, c]
    inputs = [shape for shape, _ in conv.workload.input_specs()]
    assert inputs[:2] == [(1, 32, 32, 16), (16, 3, 3, 16)]
    assert conv.workload.output_spec()[0] == (1, 32, 32, 16)
    assert math.isclose(sum(model.share(t) for t in model.tasks), 1.0)
    with get_store(db, read_only=True) as store:
        assert store.models() == [model]
        assert store.get_model("tiny") == store.get_model(1) == model


def test_importing_the_same_file_again_finds_the_stored_model(imported, tiny_onnx, measurer):
    db, model = imported
    with get_store(db) as store:
        again = import_model(tiny_onnx, store, measurer=measurer)
        assert again == model and len(store.models()) == 1


def test_another_file_under_a_stored_name_is_refused(imported, tmp_path, measurer):
    db, _ = imported
    other = tmp_path / "tiny.onnx"
    onnx.save(NETWORKS["tiny"](seed=1), other)  # other weights: another file
    steps: list[str] = []
    with get_store(db) as store, pytest.raises(StoreError, match="already stored as 'tiny'"):
        import_model(other, store, measurer=measurer, on_step=steps.append)
    assert steps == []  # refused before converting it
    with get_store(db) as store:
        renamed = import_model(other, store, name="tiny-seed1", measurer=measurer)
        assert renamed.id == 2 and [m.name for m in store.models()] == ["tiny", "tiny-seed1"]


def test_an_import_says_when_other_processes_kept_the_cpus_busy_meanwhile(imported):
    _, model = imported

    def timed_beside(share: float | None) -> ModelRecord:
        return replace(model, tasks=tuple(replace(t, untuned_busy=share) for t in model.tasks))

    assert import_busy_note(timed_beside(None)) is None  # not watched: a fleet device
    assert import_busy_note(timed_beside(BUSY - 0.01)) is None
    note = import_busy_note(timed_beside(0.6))
    assert note is not None and note.startswith("Other processes used 60% of the CPUs while")
    stored_before = {k: v for k, v in model.tasks[0].to_json().items() if k != "untuned_busy"}
    assert ModelTask.from_json(stored_before).untuned_busy is None  # an older import reads


def test_a_task_round_trips_through_json_and_keys_its_program_by_digest(imported):
    _, model = imported
    task = model.task("fused_conv2d_add_relu").workload
    assert Workload.from_json(task.to_json()) == task
    assert task.key().startswith("task(name=fused_conv2d_add_relu,tir=sha256:")
    assert len(task.key()) < 80  # the program's text is in the JSON, not in the key


def test_a_task_is_checked_against_its_unscheduled_program(imported, measurer):
    """The reference of a fused task is its default build: a schedule's output is compared
    with it, and a wrong output is caught."""
    _, model = imported
    task = model.task("fused_conv2d1_add_add1_relu").workload
    inputs = task.random_inputs()
    expected = task.reference(inputs)
    assert expected.shape == task.output_spec()[0] and np.isfinite(expected).all()
    # the residual add and relu: every output is >= 0, and not all of them 0
    assert (expected >= 0).all() and expected.max() > 0
    wrong = expected.copy()
    wrong[0, 3, 4, 5] += 1.0
    assert "differ" in task.check_output(wrong, expected)
    # a real schedule of it (tiled, vectorized) measures as correct
    target = Target.local_cpu()
    space = DesignSpace.of(task, target)
    rng = np.random.default_rng(0)
    cands = [space.sample(rng).candidate for _ in range(3)]
    results = measurer.measure([baseline_candidate(task, target), *cands])
    assert all(r.status is MeasureStatus.OK for r in results), [r.error_msg for r in results]


def _tell(strategy, measurer, cands, told):
    results = measurer.measure(cands)
    recs = [TrialRecord(len(told) + i, 1, len(told) + i, c, r, {}, 0.0)
            for i, (c, r) in enumerate(zip(cands, results, strict=True))]  # fmt: skip
    strategy.tell(recs)
    told += recs


def _evolve(strategy, measurer, told, trials):
    """Ask, measure and tell ``strategy`` until ``told`` holds ``trials`` records."""
    while len(told) < trials:
        cands = strategy.ask(4)
        assert cands, "the search gave up"
        _tell(strategy, measurer, cands, told)
    assert all(r.status is MeasureStatus.OK for r in told), [r.result.error_msg for r in told]


def test_an_evolutionary_search_of_a_task_evolves_from_its_first_draws(imported, measurer):
    """A task's weights are laid out by a postprocessor (``RewriteLayout``). The search's
    first trials, one random schedule of each sketch, seed MetaSchedule's evolution, which
    replays them without their postprocessing and runs it again: unmarked, the rewrite ran
    twice and TVM refused the trace (a ResNet-18 tune stopped at its first evolution)."""
    _, model = imported
    task = model.task("fused_conv2d_add_relu").workload
    space = DesignSpace.of(task, Target.local_cpu())
    strategy = EvolutionarySearch(population_size=32, num_trials_per_iter=4)
    strategy.reset(space, rng=np.random.default_rng(0), history=[])
    told: list[TrialRecord] = []
    _evolve(strategy, measurer, told, space.num_sketches + 4)  # every sketch, then a round
    sketches = [r.candidate.decisions["sketch"] for r in told[: space.num_sketches]]
    assert sorted(sketches) == list(range(space.num_sketches))
    assert strategy.num_rounds_ >= 1  # the evolution ran on them


def test_an_evolutionary_search_of_a_task_evolves_from_knob_space_trials(imported, measurer):
    """The same for another strategy's trials: an evolution resumed from points the knob space
    materialized (``random``'s, ``autotvm``'s, a user's start) replays them as it replays its
    own draws, and stopped at its first round when they were written without the mark."""
    _, model = imported
    task = model.task("fused_conv2d_add_relu").workload
    space = DesignSpace.of(task, Target.local_cpu())
    random = RandomSearch()
    random.reset(space, rng=np.random.default_rng(1), history=[])
    history: list[TrialRecord] = []
    _tell(random, measurer, random.ask(8), history)
    assert all("point" in r.candidate.decisions for r in history)  # the knob space's points
    strategy = EvolutionarySearch(population_size=32, num_trials_per_iter=4)
    strategy.reset(space, rng=np.random.default_rng(0), history=history)
    told = list(history)
    _evolve(strategy, measurer, told, len(history) + space.num_sketches + 4)
    assert strategy.num_rounds_ >= 1


def test_the_default_task_family_instance_builds():
    w = get_workload(TASK)
    assert w.input_specs() == [((64, 64), "float32"), ((64,), "float32")]
    assert w.flops() == 64 * 64


# -- bad files: one sentence each, nothing stored ----------------------------------------------
def _graph_model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _assert_refused(path, match, tmp_path, **kwargs):
    db = tmp_path / "bad.db"
    with get_store(db) as store:
        with pytest.raises(ModelError, match=match) as info:
            import_model(path, store, **kwargs)
        assert store.models() == []
    assert "\n" not in str(info.value)
    return str(info.value)


def test_a_file_that_is_not_onnx_is_refused(tmp_path):
    path = tmp_path / "notes.onnx"
    path.write_text("these are my notes, not a network\n")
    _assert_refused(path, "is not an ONNX model", tmp_path)


def test_a_truncated_file_is_refused_as_cut_short(tiny_onnx, tmp_path):
    data = tiny_onnx.read_bytes()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[:-200])
    _assert_refused(path, "cut.onnx is cut short or damaged: it starts as an ONNX model", tmp_path)
    for cut in range(2, len(data), 97):  # wherever a copy stopped (fails before any TVM work)
        path.write_bytes(data[:cut])
        # the file's bytes end in a field (no graph at all) or inside one
        with pytest.raises(ModelError, match="is cut short or damaged|or one cut short"):
            read_onnx(path)


def test_a_missing_file_or_a_folder_is_refused(tmp_path):
    _assert_refused(tmp_path / "nowhere.onnx", "no such file", tmp_path)
    _assert_refused(tmp_path, f"{tmp_path} is a folder: give the path of an ONNX file", tmp_path)


def test_an_operator_tvm_cannot_convert_is_named_with_its_node(tmp_path):
    f32 = TensorProto.FLOAT
    model = _graph_model(
        [helper.make_node("Relu", ["x"], ["r"], name="first"),
         helper.make_node("Celu", ["r"], ["y"], name="smooth")],
        [helper.make_tensor_value_info("x", f32, [1, 8])],
        [helper.make_tensor_value_info("y", f32, [1, 8])],
    )  # fmt: skip
    path = tmp_path / "celu.onnx"
    onnx.save(model, path)
    message = _assert_refused(path, "operator Celu", tmp_path)
    assert "node 'smooth'" in message, message


def _dynamic_relu(tmp_path):
    """A Relu over x of shape [batch, 16], saved as dynamic.onnx."""
    f32 = TensorProto.FLOAT
    model = _graph_model(
        [helper.make_node("Relu", ["x"], ["y"])],
        [helper.make_tensor_value_info("x", f32, ["batch", 16])],
        [helper.make_tensor_value_info("y", f32, ["batch", 16])],
    )
    path = tmp_path / "dynamic.onnx"
    onnx.save(model, path)
    return path


def test_a_dynamic_input_needs_its_size(tmp_path):
    path = _dynamic_relu(tmp_path)
    message = _assert_refused(path, "dynamic shape", tmp_path)
    assert "give its size as x=Nx16 with a whole number for each N" in message, message
    _assert_refused(path, "does not fit", tmp_path, inputs={"x": (4, 8)})
    _assert_refused(path, "has no input 'y'", tmp_path, inputs={"y": (4, 16)})
    with get_store(tmp_path / "ok.db") as store:
        model = import_model(path, store, inputs={"x": (4, 16)})
        assert [i.shape for i in model.inputs] == [(4, 16)]
        (task,) = model.tasks
        assert task.workload.output_spec() == ((4, 16), "float32")


def test_the_same_file_at_other_input_sizes_is_refused_before_any_work(tmp_path):
    """Imported again at other sizes, a file gave back the model stored at its first sizes,
    silently, after converting and timing it again."""
    path = _dynamic_relu(tmp_path)
    with get_store(tmp_path / "sizes.db") as store:
        first = import_model(path, store, inputs={"x": (4, 16)})
        steps: list[str] = []
        message = "'dynamic' is already stored from this file with input x=4x16, not x=2x16"
        with pytest.raises(StoreError, match=message):
            import_model(path, store, inputs={"x": (2, 16)}, on_step=steps.append)
        assert steps == [] and store.models() == [first]
        assert import_model(path, store, inputs={"x": (4, 16)}, on_step=steps.append) == first
        assert steps == []  # found at once: nothing converted, nothing timed
        second = import_model(path, store, inputs={"x": (2, 16)}, name="dynamic-2")
        assert store.models() == [first, second] and second.inputs[0].shape == (2, 16)

        @settings(max_examples=40, deadline=None)
        @given(sizes=st.lists(st.integers(0, 1 << 20), min_size=0, max_size=4))
        def again_at_any_size(sizes):
            """Any other sizes: one sentence, nothing converted, nothing stored."""
            shape = tuple(sizes)
            if shape == (4, 16):
                return
            with pytest.raises((StoreError, ModelError)) as info:
                import_model(path, store, inputs={"x": shape}, on_step=steps.append)
            assert "\n" not in str(info.value) and steps == []
            assert store.models() == [first, second]

        again_at_any_size()


def _import_at_once(tmp_path, sizes):
    """`explorer model import` of one file in two processes started together on one database,
    at ``sizes`` (x=4x16, ...); returns their (exit code, stdout, stderr) and the stored models."""
    path, db = _dynamic_relu(tmp_path), tmp_path / "shared.db"
    command = [sys.executable, "-m", "explorer", "model", "import", str(path), "--db", str(db)]
    procs = [
        subprocess.Popen(
            [*command, "--input", f"x={size}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for size in sizes
    ]
    texts = [p.communicate(timeout=300) for p in procs]
    with get_store(db, read_only=True) as store:
        models = store.models()
    return [(p.returncode, out, err) for p, (out, err) in zip(procs, texts, strict=True)], models


def test_two_processes_importing_a_file_at_other_sizes_at_once_store_one(tmp_path):
    """Whichever comes second is refused in one sentence, before converting or at the store's
    insert."""
    outs, models = _import_at_once(tmp_path, ["4x16", "2x16"])
    (model,) = models
    stored = "x".join(map(str, model.inputs[0].shape))
    other = ({"4x16", "2x16"} - {stored}).pop()
    (ok, refused) = sorted(outs, key=lambda o: o[0])
    assert ok[0] == 0 and ok[1].startswith("model 1: dynamic, 1 task"), outs
    message = f"'dynamic' is already stored from this file with input x={stored}, not x={other}"
    assert refused[0] == 2 and refused[1] == "", outs
    *steps, last = refused[2].splitlines()  # the steps it got through, then one sentence
    assert last.startswith("error: ") and message in last, outs
    assert not any("error" in step for step in steps), outs


def test_two_processes_importing_a_file_at_the_same_sizes_at_once_store_it_once(tmp_path):
    outs, models = _import_at_once(tmp_path, ["4x16", "4x16"])
    (model,) = models
    assert model.inputs[0].shape == (4, 16)
    assert [rc for rc, _, _ in outs] == [0, 0], outs
    # A busy machine's note may follow the model's lines: both processes timed at once.
    firsts = [out.splitlines()[:2] for _, out, _ in outs]
    assert firsts[0] == firsts[1] and firsts[0][0].startswith("model 1: dynamic, 1 task"), outs


def test_input_sizes_too_large_for_the_machine_are_refused_before_any_timing(tmp_path):
    """A Sum of n inputs of 1 GiB each (the most elements a task's buffer may hold), n chosen
    so that timing the task would need more memory than this machine has free."""
    f32, side = TensorProto.FLOAT, 1 << 14
    n = math.ceil(psutil.virtual_memory().available / 3 / 2**30) + 1
    names = [f"x{i}" for i in range(n)]
    model = _graph_model(
        [helper.make_node("Sum", names, ["y"])],
        [helper.make_tensor_value_info(x, f32, ["h", "w"]) for x in names],
        [helper.make_tensor_value_info("y", f32, ["h", "w"])],
    )
    path = tmp_path / "wide.onnx"
    onnx.save(model, path)
    started = time.monotonic()
    message = _assert_refused(
        path, f"works on {n + 1}.0 GiB of inputs and output", tmp_path,
        inputs={x: (side, side) for x in names},
    )  # fmt: skip
    assert "give the model smaller input sizes" in message, message
    assert time.monotonic() - started < 120  # nothing was built or timed


def test_weights_kept_outside_the_file_are_refused(tmp_path):
    path = tmp_path / "external.onnx"
    onnx.save(NETWORKS["tiny"](), path, save_as_external_data=True, size_threshold=0)
    _assert_refused(path, "separate files", tmp_path)


def test_an_opset_newer_than_onnx_knows_is_refused(tmp_path):
    """Opset 99 passed onnx's checker and TVM's frontend (which takes each operator's newest
    conversion); ONNX Runtime, the race's reference, refuses it."""
    f32 = TensorProto.FLOAT
    model = _graph_model(
        [helper.make_node("Relu", ["x"], ["y"])],
        [helper.make_tensor_value_info("x", f32, [1, 8])],
        [helper.make_tensor_value_info("y", f32, [1, 8])],
        opset=99,
    )
    path = tmp_path / "future.onnx"
    onnx.save(model, path)
    newest = onnx.defs.onnx_opset_version()
    message = _assert_refused(path, "uses ONNX opset 99", tmp_path)
    assert f"up to {newest}" in message, message


def test_read_onnx_reports_the_opset_and_inputs(tiny_onnx):
    checked = read_onnx(tiny_onnx)
    assert checked.opset == 17 and [str(i) for i in checked.inputs] == ["x=1x3x32x32 (float32)"]


# -- any file: a ModelError or a model, never another exception --------------------------------
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_bytes_give_a_model_or_one_sentence(data, tiny_onnx, tmp_path):
    """Random bytes, and the tiny network's file cut short or with bytes flipped: reading and
    lowering either succeed or raise ModelError with one line (the process never dies)."""
    original = tiny_onnx.read_bytes()
    kind = data.draw(st.sampled_from(["random", "cut", "flip"]))
    if kind == "random":
        blob = data.draw(st.binary(max_size=4096))
    elif kind == "cut":
        blob = original[: data.draw(st.integers(0, len(original) - 1))]
    else:
        blob = bytearray(original)
        for at in data.draw(st.lists(st.integers(0, len(original) - 1), min_size=1, max_size=8)):
            blob[at] ^= data.draw(st.integers(1, 255))
        blob = bytes(blob)
    path = tmp_path / "fuzz.onnx"
    path.write_bytes(blob)
    try:
        checked = read_onnx(path)
        lower_onnx(checked, str(path))
    except ModelError as exc:
        assert str(exc) and "\n" not in str(exc), repr(exc)


def test_a_relu6_between_convolutions_stays_channels_last_and_fuses_into_the_first():
    """TVM's frontend emits ONNX ``Clip`` as two TIR calls the layout change cannot see into:
    each ReLU6 became a task of its own between two transposes back to NCHW. As Relax's own
    ``maximum`` and ``minimum`` it keeps NHWC and fuses into the convolution before it, and
    the network still computes what ONNX Runtime does."""
    import onnxruntime
    from onnx import numpy_helper

    from explorer import _tvm
    from explorer.model._race_child import _relative_error

    rng = np.random.default_rng(0)
    weights = numpy_helper.from_array(rng.standard_normal((8, 8, 3, 3)).astype("float32"), "w")
    bounds = [
        numpy_helper.from_array(np.array(v, "float32"), n) for n, v in (("lo", 0), ("hi", 6))
    ]
    model = _graph_model(
        [
            helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
            helper.make_node("Clip", ["c", "lo", "hi"], ["r"]),
            helper.make_node("Conv", ["r", "w"], ["y"], pads=[1, 1, 1, 1]),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 16, 16])],
        [weights, *bounds],
    )
    onnx_file = parse_onnx(model.SerializeToString(), "relu6.onnx")
    lowered = lower_onnx(onnx_file, "relu6.onnx")
    names = [name for name, _, _ in model_tasks(lowered, Target.local_cpu(), "relu6.onnx")]
    assert "fused_conv2d_maximum_minimum" in names, names
    assert not [n for n in names if "maximum" in n and "transpose" in n], names
    x = rng.standard_normal((1, 8, 16, 16)).astype("float32") * 4  # past both bounds
    got = _tvm.relax_runner(_tvm.build_relax(lowered, Target.local_cpu().to_tvm()))(x)
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    assert _relative_error(got, session.run(None, {"x": x})) <= 1e-5


def test_erf_and_softmax_are_polynomials_that_match_onnx_runtime_over_every_range():
    """Regression (issue 23): LLVM computed a GELU's ``erf`` (and a softmax's ``exp``) by
    calling the C library once per element, unvectorized, at a cost that depends on the
    value: the BERT layer's GELU task took 1.6 ms more in the network than on the random
    inputs it was timed with. The lowering now computes both with TOPI's polynomials (no
    ``erf`` or ``exp`` call left), and the network still computes what ONNX Runtime does on
    inputs from erf's linear part to past its clamps."""
    import onnxruntime

    from explorer import _tvm
    from explorer.model._networks import bert_layer
    from explorer.model._race_child import _relative_error

    proto = bert_layer(seq=8, hidden=32, heads=2)
    onnx_file = parse_onnx(proto.SerializeToString(), "bert.onnx")
    lowered = lower_onnx(onnx_file, "bert.onnx")
    script = lowered.script()
    assert "T.erf(" not in script and "T.exp(" not in script
    names = [name for name, _, _ in model_tasks(lowered, Target.local_cpu(), "bert.onnx")]
    assert "fast_softmax" in names and any("fast_erf" in n for n in names), names
    run = _tvm.relax_runner(_tvm.build_relax(lowered, Target.local_cpu().to_tvm()))
    session = onnxruntime.InferenceSession(
        proto.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    (spec,) = onnx_file.inputs
    for scale in (0.01, 1.0, 30.0):
        x = np.random.default_rng(0).standard_normal(spec.shape).astype("float32") * scale
        assert _relative_error(run(x), session.run(None, {spec.name: x})) <= 1e-5, scale
