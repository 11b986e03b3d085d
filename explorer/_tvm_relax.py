"""The Relax half of the module that imports TVM (``explorer._tvm``, which re-exports every
public name here; nothing else imports this module): a model's path from ONNX to tasks and back
to a built network, and a task's weight copies split from its kernel."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import tvm
from tvm import tirx
from tvm.s_tir import Schedule, ScheduleError, Trace
from tvm.s_tir import meta_schedule as ms

from explorer._tvm_winograd import legalize_conv2d


def onnx_frontend_operators() -> frozenset[str]:
    """The ONNX operator types TVM's Relax frontend converts."""
    from tvm.relax.frontend.onnx import onnx_frontend

    return frozenset(onnx_frontend._get_convert_map()) | {"Constant", "If"}


def relax_from_onnx(model: Any, shapes: dict[str, list[int]]) -> tvm.IRModule:
    """A Relax module from an ``onnx.ModelProto`` with its weights folded in as constants."""
    from tvm.relax.frontend.onnx import from_onnx

    return from_onnx(model, shape_dict=shapes, keep_params_in_input=False)


CHANNELS_LAST = {"relax.nn.conv2d": ["NHWC", "OHWI"]}
"""The layouts ``lower_relax(channels_last=True)`` gives every convolution: activations
``[n, h, w, c]`` and weights ``[o, kh, kw, i]``, so a kernel vectorized over channels reads
and writes contiguous vectors (see ``lower_relax``)."""


def lower_relax(
    mod: tvm.IRModule,
    *,
    channels_last: bool = False,
    fast_math: bool = False,
    winograd: bool = False,
) -> tvm.IRModule:
    """The standard lowering that leaves one fused TIR function per task: operators decomposed
    for inference and legalized to TIR, constants folded, fusable neighbours fused.

    ``channels_last``: every convolution first takes the layouts of ``CHANNELS_LAST`` (Relax's
    ``ConvertLayout``, which carries them through the elementwise operators and pools between
    convolutions; one transpose at each end of the convolutional part). An NCHW convolution
    vectorized over output channels writes each vector across as many cache lines, and so does
    its fused residual add: on ResNet-18's 64-channel 3x3 layer with its residual, 64 trials
    of ``evolutionary`` reached 1009 us a call in NHWC against 1122 us in NCHW (2-core Zen 4,
    ``docs/reproduction.md``, "Whole networks").

    ``fast_math``: ``erf``, ``exp``, ``tanh`` and ``softmax`` become TOPI's polynomial
    approximations (Relax's ``FastMathTransform``; after the layout change, which cannot see
    into the functions it makes), as ONNX Runtime computes them. LLVM calls the C library's
    ``erff`` or ``expf`` once per element, unvectorized, at a cost that depends on the value:
    the BERT layer's GELU (128 x 3072 ``erf``) took 1.6 ms more inside the network than when
    its task was timed on random inputs, about half of its matmul's time (2-core Zen 4,
    ``docs/reproduction.md``, "Whole networks").

    ``winograd``: channels-last 3x3 stride-1 convolutions with a large enough output are
    computed as Winograd's F(4x4, 3x3), their weights transformed at build time
    (``explorer._tvm_winograd``)."""
    relax = tvm.relax
    first = []
    if channels_last and _calls(mod, "relax.nn.conv2d"):
        mod = _scalar_clamps_as_ops(mod)
        first.append(relax.transform.ConvertLayout(CHANNELS_LAST))
    if fast_math:
        first.append(relax.transform.FastMathTransform())
    passes = tvm.transform.Sequential(
        [
            *first,
            relax.transform.DecomposeOpsForInference(),
            relax.transform.LegalizeOps(
                customize_legalize_map={"relax.nn.conv2d": legalize_conv2d} if winograd else None
            ),
            relax.transform.AnnotateTIROpPattern(),
            relax.transform.FoldConstant(),
            relax.transform.FuseOps(),
            relax.transform.FuseTIR(),
        ]
    )
    return passes(mod)


def _calls(mod: tvm.IRModule, op_name: str) -> bool:
    """Whether a Relax function of ``mod`` calls the operator ``op_name`` (TVM's
    ``ConvertLayout`` fails on some networks without a convolution: a 2-D ``Sum``)."""
    found = False

    def visit(expr: Any) -> None:
        nonlocal found
        if isinstance(expr, tvm.relax.Call) and getattr(expr.op, "name", None) == op_name:
            found = True

    for _, func in mod.functions_items():
        if isinstance(func, tvm.relax.Function):
            tvm.relax.analysis.post_order_visit(func, visit)
    return found


_CLAMPS = {"T_maximum": "maximum", "T_minimum": "minimum"}
"""The blocks TOPI's ``maximum`` and ``minimum`` compute in, by the Relax operator that does the
same."""


def _scalar_clamps_as_ops(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with every call of a TE-made ``maximum`` or ``minimum`` of a tensor and a scalar
    replaced by Relax's own operator.

    TVM's ONNX frontend emits a ``Clip`` (MobileNetV2's ReLU6) as two such calls of TIR
    functions, which ``ConvertLayout`` cannot see into: it transposed back to NCHW around each
    ReLU6, a task of its own between two transposes (13 in MobileNetV2), where Relax's
    ``maximum`` and ``minimum`` keep the layout and fuse into the convolution before them."""
    relax = tvm.relax
    call_tir = tvm.ir.Op.get("relax.call_tir")

    def clamp(call: Any) -> str | None:
        if not call.op.same_as(call_tir) or len(call.args[1].fields) != 2:
            return None
        func = mod[call.args[0]]
        scalar = call.args[1].fields[1].ty
        if not isinstance(func, tvm.tirx.PrimFunc) or getattr(scalar, "ndim", None) != 0:
            return None  # before printing the function: most calls are convolutions
        blocks = re.findall(r'^\s*with T\.sblock\("(\w+)"\)', func.script(), re.M)
        return _CLAMPS.get(blocks[0]) if len(blocks) == 1 else None

    mutator: Any = relax.PyExprMutator

    @relax.expr_functor.mutator
    class Rewrite(mutator):  # type: ignore[misc]  # TVM's base, typed Any
        def visit_call_(self, call: Any) -> Any:
            call = self.visit_expr_post_order(call)
            op = clamp(call)
            if op is None:
                return call
            tensor, scalar = call.args[1].fields
            return getattr(relax.op, op)(tensor, scalar)

    rewrite = Rewrite(mod)
    for gv, func in mod.functions_items():
        if isinstance(func, relax.Function):
            rewrite.builder_.update_func(gv, rewrite.visit_expr(func))
    return relax.transform.DeadCodeElimination()(rewrite.builder_.get())


def extract_relax_tasks(
    mod: tvm.IRModule, target: tvm.target.Target
) -> list[tuple[str, int, tvm.IRModule]]:
    """MetaSchedule's tuning tasks of a lowered Relax module: (name, calls per inference, the
    IRModule of its TIR function as ``main``), in the order MetaSchedule lists them."""
    tasks = ms.relax_integration.extract_tasks(mod, target=target)
    return [(str(t.task_name), int(t.weight), t.dispatched[0]) for t in tasks]


def build_relax(
    lowered: tvm.IRModule,
    target: tvm.target.Target,
    schedules: Sequence[tuple[Any, Any]] = (),
    *,
    database: Any = None,
    weights_at_build: bool = True,
    exec_mode: str = "bytecode",
) -> Any:
    """Compile a lowered Relax module (``lower_relax``) for a CPU target with the schedules
    ``apply_schedules`` puts in place. ``exec_mode``: Relax's virtual machine interprets its
    instructions (``"bytecode"``) or runs them compiled (``"compiled"``).

    Only the dataflow lowering and finalisation passes run after the schedules are applied:
    the default pipeline would fuse and legalize again, and tasks would no longer match.
    """
    from tvm.relax.backend.cpu_generic import pipeline as cpu

    applied = apply_schedules(
        lowered, target, schedules, database=database, weights_at_build=weights_at_build
    )
    passes = cpu.dataflow_lower_passes(target) + cpu.finalize_passes(target)

    def finish(mod: tvm.IRModule, _ctx: Any) -> tvm.IRModule:
        return tvm.transform.Sequential(passes)(mod)

    with target, tvm.transform.PassContext(opt_level=3):
        pipeline = tvm.transform.module_pass(finish, opt_level=3)
        return tvm.relax.build(
            applied, target=target, relax_pipeline=pipeline, exec_mode=exec_mode
        )


def apply_schedules(
    lowered: tvm.IRModule,
    target: tvm.target.Target,
    schedules: Sequence[tuple[Any, Any]] = (),
    *,
    database: Any = None,
    weights_at_build: bool = True,
) -> tvm.IRModule:
    """``lowered`` with each TIR function for which ``schedules`` holds (the IRModule of a
    task, the JSON trace of its schedule), or ``database`` (a MetaSchedule database:
    ``tune_relax``'s) a record, replaced by that schedule, and every other one left as the
    default lowering made it; then (``weights_at_build``) every copy a schedule makes of a
    network constant moved to build time (``mark_weight_copies``, TVM's
    ``SplitLayoutRewritePreproc``, ``FoldConstant``); without it, each stays in its kernel and
    runs in every inference."""
    database = database if database is not None else ms.database.MemoryDatabase()
    for task_mod, trace_json in schedules:
        sch = Schedule(task_mod)
        Trace.apply_json_to_schedule(trace_json, sch)
        database.commit_tuning_record(
            ms.database.TuningRecord(
                sch.trace,
                database.commit_workload(task_mod),
                run_secs=[1.0],  # one record per task: its rank is all that counts
                target=target,
                args_info=ms.arg_info.ArgInfo.from_prim_func(task_mod["main"]),
            )
        )
    relax = tvm.relax
    prepack = tvm.transform.Sequential(
        [
            mark_weight_copies(),
            relax.transform.SplitLayoutRewritePreproc(),
            relax.transform.FoldConstant(),
            # The folded copies are a tuple of constants that every inference would build and
            # take apart (84 of ResNet-18's 149 virtual-machine builtin calls, though no time
            # measurably): hand the kernels the constants themselves.
            relax.transform.CanonicalizeBindings(),
            relax.transform.DeadCodeElimination(),
        ]
        if weights_at_build
        else []
    )
    with target, database, tvm.transform.PassContext(opt_level=3):
        return prepack(relax.transform.MetaScheduleApplyDatabase()(lowered))


PREPACK = "meta_schedule.layout_rewrite_preproc"
"""TVM's mark of a block that only rearranges a weight: ``SplitLayoutRewritePreproc`` moves it
into a function of its own, which ``FoldConstant`` runs at build time when the weight is one."""


def mark_weight_copies() -> Any:
    """A Relax pass marking, in every scheduled TIR function ``main`` calls, each block that
    computes from one constant alone (a packed sketch's copy of a weight into panels): ONNX
    Runtime packs its weights once, when a session starts, and so does the network built here.

    Marked: a block alone in its loop nest at the function's root, reading only a parameter
    that every call passes a constant, and writing only a buffer the function allocates; what
    ``SplitLayoutRewritePreproc`` can move out whole. Copies of the network's input, and copies
    made inside a loop nest that computes, stay where they are."""

    def mark(mod: tvm.IRModule, _ctx: Any) -> tvm.IRModule:
        return _with_constant_callees(mod, _mark_copies)

    return tvm.transform.module_pass(mark, opt_level=0, name="MarkWeightCopies")


def _with_constant_callees(
    mod: tvm.IRModule, change: Callable[[Any, set[int]], Any]
) -> tvm.IRModule:
    """``mod`` with each TIR function ``main`` passes constants to replaced by what
    ``change(function, positions of the constants)`` returns, unless that is ``None``."""
    updates = {}
    for name, constant in _constant_params(mod["main"]).items():
        gv = mod.get_global_var(name)
        func = mod[gv]
        if constant and isinstance(func, tirx.PrimFunc):
            changed = change(func, constant)
            if changed is not None:
                updates[gv] = changed
    if not updates:
        return mod
    mod = mod.clone()
    for gv, func in updates.items():
        mod.update_func(gv, func)
    return mod


def _constant_params(main: Any) -> dict[str, set[int]]:
    """Per TIR function ``main`` calls: the positions of its arguments that are constants in
    every call."""
    call_tir = tvm.ir.Op.get("relax.call_tir")
    found: dict[str, set[int]] = {}
    for block in getattr(main.body, "blocks", ()):
        for binding in block.bindings:
            call = binding.value
            if not (isinstance(call, tvm.relax.Call) and call.op.same_as(call_tir)):
                continue
            args = getattr(call.args[1], "fields", None)
            name = str(call.args[0].name_hint)
            constant = {i for i, a in enumerate(args or ()) if isinstance(a, tvm.ir.expr.Constant)}
            found[name] = found[name] & constant if name in found else constant
    return found


def _mark_copies(func: Any, constant: set[int]) -> Any:
    """``func`` with its copies of the parameters at ``constant`` marked, or ``None``: none."""
    sch = Schedule(func)
    try:
        root = sch.get_sblock("root")
    except (ScheduleError, ValueError, RuntimeError):
        return None  # not a function of blocks
    params = list(sch.mod["main"].params)
    weights = [params[i] for i in sorted(constant)]
    allocated = list(sch.get(root).alloc_buffers)
    marked = 0
    for block in sch.get_child_blocks(root):
        node = sch.get(block)
        if PREPACK in node.annotations or node.init is not None:
            continue
        if len(node.reads) != 1 or len(node.writes) != 1:
            continue
        source, dest = node.reads[0].source, node.writes[0].source
        if not any(source.same_as(w) for w in weights):
            continue
        if not any(dest.same_as(b) for b in allocated):
            continue
        loops = sch.get_loops(block)
        if loops and len(sch.get_child_blocks(loops[0])) != 1:
            continue  # its loop nest computes too: the split moves whole nests
        sch.annotate(block, PREPACK, 1)
        marked += 1
    return sch.mod["main"] if marked else None


def mark_weights_layout_free(lowered: tvm.IRModule) -> tvm.IRModule:
    """``lowered`` with each TIR function that ``main`` calls with constants listing them in
    its ``layout_free_buffers`` attribute (the positions constant in every call): TVM's
    ``AttachAttrLayoutFreeBuffers``, keeping each function's name, which TVM's pass replaces
    (``fused_conv2d_add_relu`` becomes ``fused_conv2d_add_relu1``), and with it the names the
    model's tasks are known by. MetaSchedule's ``RewriteLayout`` then gives those parameters
    the layout a schedule reads best, in a copy made once, at build time."""
    return _with_constant_callees(
        lowered, lambda func, constant: func.with_attr("layout_free_buffers", sorted(constant))
    )


def with_weights_layout_free(lowered: tvm.IRModule) -> tvm.IRModule:
    """``lowered`` with every TIR function told which of its parameters are the network's
    constants (TVM's ``AttachAttrLayoutFreeBuffers``): MetaSchedule's ``RewriteLayout`` then
    gives each weight the layout its schedule reads best, times kernels without that copy, and
    ``apply_schedules`` moves the copy to build time. This is ``tune_relax``'s
    ``cpu_weight_prepack``, which TVM's pipeline documents as the setting for CPUs."""
    relax = tvm.relax
    passes = [
        relax.transform.CanonicalizeBindings(),
        relax.transform.AttachAttrLayoutFreeBuffers(),
    ]
    return tvm.transform.Sequential(passes)(lowered)


def relax_runner(executable: Any) -> Any:
    """A callable running ``executable``'s ``main`` on the CPU: NumPy arrays in, a list of
    NumPy arrays out (one per output of the network).

    Each input is copied into a tensor kept from the call before when its shape and dtype are
    the same (as a deployment keeps its input buffers, and ONNX Runtime reads a NumPy input in
    place): a new tensor each call would give ResNet-18's 600 KB input fresh pages every call,
    time a race would count against the network."""
    dev = tvm.cpu()
    vm = tvm.relax.VirtualMachine(executable, dev)
    main = vm["main"]
    kept: dict[int, Any] = {}

    def to_device(position: int, array: Any) -> Any:
        tensor = kept.get(position)
        if tensor is None or tuple(tensor.shape) != array.shape or tensor.dtype != array.dtype:
            tensor = kept[position] = tvm.runtime.empty(array.shape, str(array.dtype), dev)
        tensor.copyfrom(array)
        return tensor

    def run(*arrays: Any) -> list[Any]:
        out = main(*[to_device(i, a) for i, a in enumerate(arrays)])
        if hasattr(out, "numpy"):
            return [out.numpy()]
        return [o.numpy() for o in out]

    return run


def split_weight_copies(mod: tvm.IRModule) -> tuple[tvm.IRModule, dict[str, Any]] | None:
    """``mod``'s ``main`` (a scheduled task) split as a network built from it runs it, or
    ``None`` when it copies no weight: ``pack`` (the copies, which a network runs once, at
    build time) and ``main`` (the kernel, which runs in every inference, reading the copies).

    MetaSchedule's ``RewriteLayout`` gives each parameter listed in ``layout_free_buffers``
    (the network's constants, ``mark_weights_layout_free``) the layout the schedule reads
    best, in a block marked as its copy; TVM's ``SplitLayoutRewritePreproc`` (what
    ``apply_schedules`` runs on a network) moves those blocks into a function of their own.
    Timing the kernel without them ranks schedules by what the network spends: a copy of a
    512-channel convolution's 9.4 MB of weights cost a third of its measured time.

    The plan says how to call them: ``pack(*[inputs[i] for i in plan["pack_inputs"]],
    *packed)`` fills ``packed`` (``plan["packed"]``: shape and dtype of each), and ``main``
    takes, for each ``(kind, i)`` of ``plan["args"]``, ``inputs[i]`` (``"input"``) or
    ``packed[i]`` (``"packed"``), then the output."""
    relax = tvm.relax
    func = mod["main"]
    if func.attrs is None or "layout_free_buffers" not in func.attrs:
        return None  # no parameter is a constant: RewriteLayout copied nothing
    params = list(func.params)
    builder = relax.BlockBuilder()
    args = [relax.Var(str(p.name), relax.TensorType(p.shape, p.dtype)) for p in params[:-1]]
    out = params[-1]
    with builder.function("main", args):
        task = builder.add_func(func, "task")
        with builder.dataflow():
            call = relax.call_tir(task, args, relax.TensorType(out.shape, out.dtype))
            result = builder.emit_output(builder.emit(call))
        builder.emit_func_output(result)
    split = relax.transform.SplitLayoutRewritePreproc()(builder.get())
    if not any(gv.name_hint == "task_weight_prepack" for gv in split.get_global_vars()):
        return None
    # Follow the values: a parameter of main, an element of the copies' result, or a name
    # bound to one of them.
    where: dict[Any, tuple[str, int]] = {a: ("input", i) for i, a in enumerate(args)}
    pack_inputs: list[int] = []
    kernel_args: list[tuple[str, int]] = []
    call_tir = tvm.ir.Op.get("relax.call_tir")
    for block in split["main"].body.blocks:
        for binding in block.bindings:
            value = binding.value
            if isinstance(value, relax.Call) and value.op.same_as(call_tir):
                callee = value.args[0].name_hint
                given = [where[a] for a in value.args[1].fields]
                if callee == "task_weight_prepack":
                    pack_inputs = [i for _, i in given]
                    where[binding.var] = ("copies", 0)
                elif callee == "task_prepacked":
                    kernel_args = given
            elif isinstance(value, relax.TupleGetItem) and value.tuple_value in where:
                where[binding.var] = ("packed", int(value.index))
            elif value in where:
                where[binding.var] = where[value]
    pack = split["task_weight_prepack"]
    n_packed = len(pack.params) - len(pack_inputs)
    packed = [
        (tuple(int(d) for d in p.shape), str(p.dtype)) for p in list(pack.params)[-n_packed:]
    ]
    kernel = tvm.IRModule(
        {
            "main": split["task_prepacked"].with_attr("global_symbol", "main"),
            "pack": pack.with_attr("global_symbol", "pack"),
        }
    )
    plan = {"pack_inputs": pack_inputs, "packed": packed, "args": kernel_args}
    return kernel, plan
