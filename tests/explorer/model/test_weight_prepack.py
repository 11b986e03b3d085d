"""A network built with packed schedules copies its weights into panels once, at build time (as
ONNX Runtime packs its weights when a session starts), not in every inference (issue 23)."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest

from explorer import _tvm
from explorer.core import ModelRecord, ModelTask
from explorer.errors import ModelError
from explorer.model import MAX_ERROR
from explorer.model._import import LOWERINGS, lower_as_stored, lower_onnx, model_tasks
from explorer.model._onnx import read_onnx
from explorer.model._race_child import _relative_error
from explorer.space import DesignSpace, KnobSpace
from explorer.target import Target

CONV = "fused_conv2d1_add_add1_relu"  # the tiny network's second convolution, with its residual


@pytest.fixture(scope="module")
def network(tiny_onnx):
    onnx_file = read_onnx(tiny_onnx)
    lowered = lower_onnx(onnx_file, "tiny")
    target = Target.local_cpu(num_cores=1)
    tasks = {name: workload for name, _, workload in model_tasks(lowered, target, "tiny")}
    return tiny_onnx, lowered, target, tasks


def _packed_schedule(workload, target):
    """(the task's IRModule, the trace of a random point of its first packed sketch)."""
    space = DesignSpace.of(workload, target)
    assert space.num_sketches > space.num_metaschedule_sketches  # the conv has packed sketches
    knobs, sketch = KnobSpace(space), space.num_metaschedule_sketches
    rng = np.random.default_rng(0)
    candidate = None
    while candidate is None:  # a random point of this sketch that TVM builds
        candidate = knobs.materialize(knobs.random_point(rng, sketch=sketch))
    return workload.mod(), candidate.trace


def _hand_schedule(workload, edit):
    sch = _tvm.Schedule(workload.mod())
    edit(sch)
    return workload.mod(), _tvm.trace_to_json(sch.trace)


def _matches_onnxruntime(path, lowered, target, schedules):
    x = np.random.default_rng(1).standard_normal((1, 3, 32, 32)).astype("float32")
    got = _tvm.relax_runner(_tvm.build_relax(lowered, target, schedules))(x)
    expected = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"]).run(
        None, {"x": x}
    )
    assert _relative_error(got, expected) <= MAX_ERROR


def test_a_packed_weight_copy_runs_once_at_build_time(network):
    path, lowered, target, tasks = network
    schedules = [_packed_schedule(tasks[CONV], target)]
    main = _tvm.apply_schedules(lowered, target.to_tvm(), schedules)["main"].script()
    # the convolution now takes its weights in panels, and no copy is left to run: TVM split
    # the copy into a function of its own and ran it on the constant weights
    assert f"{CONV}_prepacked" in main
    assert "_weight_prepack" not in main
    # the copies' results are constants handed to the kernel as they are, not a tuple of them
    # made and taken apart in every inference (a virtual-machine call each)
    assert "R.Tuple" not in main
    _matches_onnxruntime(path, lowered, target.to_tvm(), schedules)


# The tiny network has no erf or exp, nor a convolution Winograd's would take: LOWERINGS[1] and
# [2] give it today's tasks.
@pytest.mark.parametrize("lowering", LOWERINGS[3:])
def test_a_model_lowered_as_older_imports_were_builds_with_its_schedules(
    network, tiny_onnx, lowering
):
    """Tasks imported before convolutions were channels-last, or before a task listed its
    weights (the older ``LOWERINGS``), are other functions than today's: the race lowers
    such a model as it was (``lower_as_stored``), its schedules apply, and a packed copy of
    its weights still moves to build time."""
    _, today, target, _ = network
    onnx_file = read_onnx(tiny_onnx)
    old = lower_onnx(
        onnx_file,
        "tiny",
        weights_layout_free=lowering.weights_layout_free,
        channels_last=lowering.channels_last,
        fast_math=lowering.fast_math,
        winograd=lowering.winograd,
    )
    found = model_tasks(old, target, "tiny")
    tasks = {name: workload for name, _, workload in found}
    schedules = [_packed_schedule(tasks[CONV], target)]
    main = _tvm.apply_schedules(old, target.to_tvm(), schedules)["main"].script()
    assert f"{CONV}_prepacked" in main and "_weight_prepack" not in main
    _matches_onnxruntime(tiny_onnx, old, target.to_tvm(), schedules)
    # on the module lowered as tasks are now, that schedule is another task's: not applied
    assert (
        f"{CONV}_prepacked"
        not in _tvm.apply_schedules(today, target.to_tvm(), schedules)["main"].script()
    )

    def model(found):
        tasks = tuple(ModelTask(n, w, c, w.flops(), None, None) for n, c, w in found)
        return ModelRecord(0, "tiny", "", (), tasks, target, 0.0)

    again, which = lower_as_stored(onnx_file, model(found), "tiny")
    assert which == lowering
    assert (
        f"{CONV}_prepacked"
        in _tvm.apply_schedules(again, target.to_tvm(), schedules)["main"].script()
    )
    _, today_is = lower_as_stored(onnx_file, model(model_tasks(today, target, "tiny")), "tiny")
    assert today_is == LOWERINGS[0]


def test_a_model_imported_with_exact_erf_and_exp_is_lowered_so_again():
    """A transformer imported before ``fast_math`` has tasks that call ``erf`` and ``exp``:
    ``lower_as_stored`` finds that lowering, and today's for one imported today."""
    from explorer.model._import import Lowering
    from explorer.model._networks import bert_layer
    from explorer.model._onnx import parse_onnx

    onnx_file = parse_onnx(bert_layer(seq=8, hidden=32, heads=2).SerializeToString(), "bert")
    target = Target.local_cpu(num_cores=1)
    for lowering in (LOWERINGS[0], Lowering(fast_math=False, winograd=False)):
        lowered = lower_onnx(onnx_file, "bert", fast_math=lowering.fast_math)
        found = model_tasks(lowered, target, "bert")
        tasks = tuple(ModelTask(n, w, c, w.flops(), None, None) for n, c, w in found)
        model = ModelRecord(0, "bert", "", (), tasks, target, 0.0)
        assert lower_as_stored(onnx_file, model, "bert")[1] == lowering


def test_a_model_whose_tasks_no_lowering_gives_is_refused_in_one_sentence(network, tiny_onnx):
    _, _, target, tasks = network
    renamed = tuple(ModelTask(f"{n}_x", w, 1, w.flops(), None, None) for n, w in tasks.items())
    model = ModelRecord(0, "tiny", "", (), renamed, target, 0.0)
    with pytest.raises(ModelError, match="other tasks than those stored at its import"):
        lower_as_stored(read_onnx(tiny_onnx), model, "tiny")


def _weight_copy_inside_the_nest(sch):
    conv = sch.get_sblock("conv2d_nhwc")
    copy = sch.cache_read(conv, 1, "global")  # param_0, the weights: a network constant
    sch.compute_at(copy, sch.get_loops(conv)[1])  # under the output rows' loop


def _input_copy(sch):
    sch.cache_read(sch.get_sblock("pad_temp"), 0, "global")  # lv3, the layer's input


@pytest.mark.parametrize("edit", [_weight_copy_inside_the_nest, _input_copy])
def test_copies_of_inputs_or_inside_the_compute_stay_in_the_kernel(network, edit):
    """A copy of a weight made inside the convolution's loops cannot move out whole, and a
    copy of the layer's input is not a constant: both stay, and the network is still right."""
    path, lowered, target, tasks = network
    schedules = [_hand_schedule(tasks[CONV], edit)]
    main = _tvm.apply_schedules(lowered, target.to_tvm(), schedules)["main"].script()
    assert "_prepacked" not in main and "_weight_prepack" not in main
    _matches_onnxruntime(path, lowered, target.to_tvm(), schedules)


# -- a task is timed as the network runs it ---------------------------------------------------
def _build_and_run(workload, target, trace, tmp_path, *, prepacked="from the build"):
    """The measurement worker's build and run of one schedule, in this process: (the build's
    reply, the run's reply); ``prepacked`` overrides what the build said to pass on."""
    from explorer.measure._worker import _Worker

    path = str(tmp_path / f"{abs(hash(str(trace)))}.so")
    builder, runner = _Worker("build", 0), _Worker("run", 0)
    runner.pinned = True  # pytest's process: not moved off TVM's cores as a worker would be
    built = builder.handle(
        {"op": "build", "workload": workload.to_json(), "target": target.to_json(),
         "trace": trace, "path": path}
    )  # fmt: skip
    assert built["ok"], built
    run = {
        "op": "run", "workload": workload.to_json(), "path": path, "seed": 0, "check": True,
        "repeat": 2, "min_repeat_secs": 0.001, "cache_flush_bytes": 0, "warmup_secs": 0.0,
        "timing_rounds": 1, "max_spread": 1.0,
        "prepacked": built["prepacked"] if prepacked == "from the build" else prepacked,
    }  # fmt: skip
    return built, runner.handle(run)


def test_a_network_task_is_timed_without_its_weight_copy(network, tmp_path):
    """Regression (issue 23): a packed schedule of a network's task was timed with the copy of
    its weights into panels inside the kernel, which the network makes once, at build time
    (a third of a 512-channel ResNet-18 layer's measured time): schedules ranked by a time
    the network never spends. Now the kernel built for timing takes the weights already
    packed, by the copy TVM's ``RewriteLayout`` wrote, run once before the timing."""
    _, _, target, tasks = network
    mod, trace = _packed_schedule(tasks[CONV], target)
    built, ran = _build_and_run(tasks[CONV], target, trace, tmp_path)
    plan = built["prepacked"]
    assert plan is not None, "the weights' copy was not split from the kernel"
    weights = [s for s, _ in plan["packed"]]
    assert (16, 16, 3, 3) not in weights and any(len(s) > 4 for s in weights), weights
    assert ran["ok"], ran  # correct, and timed
    # the timed kernel reads the packed weights: given the weights as the ONNX file holds
    # them, it refuses them
    _, unpacked = _build_and_run(tasks[CONV], target, trace, tmp_path, prepacked=None)
    assert not unpacked["ok"] and unpacked["stage"] == "run", unpacked


def test_every_sketch_of_every_task_is_correct_split_as_the_network_runs_it(network, tmp_path):
    """Random points of every sketch of every task of the tiny network (MetaSchedule's and
    the packed ones), split from their weight copies when they make any: the kernel fed by
    the copy computes what the unscheduled task computes."""
    _, _, target, tasks = network
    rng = np.random.default_rng(7)
    split = 0
    for workload in tasks.values():
        space = DesignSpace.of(workload, target)
        knobs = KnobSpace(space)
        for sketch in range(space.num_sketches):
            for _ in range(2):
                candidate = None
                while candidate is None:
                    candidate = knobs.materialize(knobs.random_point(rng, sketch=sketch))
                built, ran = _build_and_run(workload, target, candidate.trace, tmp_path)
                assert ran["ok"], (workload.param_dict["name"], sketch, ran)
                split += built["prepacked"] is not None
    assert split > 0


def test_a_schedule_that_rewrites_a_weights_layout_opens_in_the_editor(network):
    """Regression: MetaSchedule's ``RewriteLayout`` marks its copy with ``Annotate(block,
    true)``; the editor's trace check refused any boolean input, so the Model tab could not
    open a task's best schedule once its weights' layouts were free."""
    from explorer.session import ScheduleSession

    _, _, target, tasks = network
    _, trace = _packed_schedule(tasks[CONV], target)
    assert any(inst[0] == "Annotate" and True in inst[1] for inst in trace[0]), trace
    session = ScheduleSession(tasks[CONV], target)
    assert "layout_rewrite_preproc" in session.load_trace(trace).script
