"""`explorer workloads` and `explorer show`: the operator catalog."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from explorer.cli._args import EXIT_FAILED, EXIT_OK, UsageError, file_name, only_with
from explorer.cli._common import (
    REFIT_HELP,
    add_common,
    add_workload_args,
    empty_trace,
    read_trace,
    target_of,
    workload_of,
)

if TYPE_CHECKING:  # the commands import what they need when they run (TVM is slow to import)
    from explorer.code import CodeMix
    from explorer.target import Target
    from explorer.workloads import Workload


# -- commands ----------------------------------------------------------------------------------
def cmd_workloads(args: argparse.Namespace) -> int:
    from explorer.workloads import FAMILIES, TASK, presets

    for family in FAMILIES.values():
        if family.name == TASK:  # its program is a model's: `explorer model show` lists them
            print(f"{family.name:18s} {family.description}\n{'':18s} named MODEL:TASK")
            continue
        shape = ", ".join(f"{p.name}={p.default}" for p in family.params)
        print(f"{family.name:18s} {family.description}\n{'':18s} defaults: {shape}")
    print("\npresets:")
    for name, (family_name, params) in presets().items():
        print(f"  {name:22s} {family_name}({', '.join(f'{k}={v}' for k, v in params.items())})")
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    from explorer.session import ScheduleSession

    if args.trace and not (args.asm or args.ir or args.mix):
        raise UsageError("--trace only applies with --asm, --ir or --mix")
    only_with(args, "--refit", "--trace")
    only_with(args, "--vs", "--mix")
    workload = workload_of(args)
    target = target_of(args)
    # Both files are read before anything is printed: one that cannot be used is refused first.
    trace, other = (
        read_trace(Path(path), workload, target, refit=args.refit) if path else None
        for path in (args.trace, args.vs)
    )
    session = ScheduleSession(workload, target=target)
    if trace is not None:  # the loop nest shown is the schedule's, whose code follows
        session.load_trace(trace)
    print(f"workload: {workload.key()}")
    print(f"FLOPs:    {workload.flops():,}")
    print(f"bytes:    {workload.bytes_moved():,}")
    *inputs, (out_name, out_shape, out_dtype) = workload.buffers()
    for name, shape, dtype in inputs:
        print(f"input:    {name} {list(shape)} {dtype}")
    print(f"output:   {out_name} {list(out_shape)} {out_dtype}")
    print(f"\nloop nest{' (the schedule in ' + args.trace + ')' if args.trace else ''}:")
    for block in session.snapshot.blocks:
        loops = " > ".join(
            f"{lp.name}({lp.extent}{', ' + lp.kind if lp.kind != 'serial' else ''})"
            for lp in block.loops
        )
        print(f"  {block.name}: {loops or '(no loops)'}")
    if args.script:
        print("\n" + session.snapshot.script)
    if args.asm or args.ir or args.mix:
        return _show_code(args, workload, session.target, trace, other)
    return EXIT_OK


def _show_code(
    args: argparse.Namespace, workload: Workload, target: Target, trace: Any, other: Any
) -> int:
    """``--asm``, ``--ir``, ``--mix``: the code the schedule (``trace``, else the unscheduled
    program) compiles to, as a measurement builds it; ``other``: ``--vs``'s schedule."""
    from explorer.code import code_mix, compare_mixes, generated_code, hot_loop_diff
    from explorer.measure import Candidate

    if trace is None:
        trace = empty_trace(workload)
    before = None
    if other is not None:
        before = generated_code(Candidate(workload, target, other))
        if before.error is not None:
            print(f"error: the --vs schedule does not compile: {before.error}", file=sys.stderr)
            return EXIT_FAILED
    code = generated_code(Candidate(workload, target, trace))
    if code.error is not None:
        print(f"error: the schedule does not compile: {code.error}", file=sys.stderr)
        return EXIT_FAILED
    if code.asm is None:  # a GPU target: its kernels' source is what there is to read
        print(f"\n{code.target} has no assembly listing here; its kernels' source:")
        print(code.device_source or "(none)")
        return EXIT_OK
    if args.ir:
        print(f"\nLLVM IR ({code.target}):\n{code.llvm_ir}")
    mix = code_mix(code.asm)
    if args.asm:
        print(f"\nassembly ({code.target}):\n{code.asm}")
    if args.mix or args.asm:
        print(mix_table(mix))
    if before is not None and before.asm is not None:
        old = code_mix(before.asm)
        print(f"\nagainst {args.vs}: {compare_mixes(old, mix)}")
        print("\n".join(hot_loop_diff(old, mix)) or "(the hot loops' code is the same)")
    return EXIT_OK


def mix_table(mix: CodeMix) -> str:
    """The instruction mix, hot loop beside total, and the hot loop's code."""
    from explorer.code import mix_rows

    lines = ["", f"{'instruction mix':38s} {'hot loop':>14s} {'whole code':>14s}"]
    lines += [f"{label:38s} {hot:>14s} {total:>14s}" for label, hot, total in mix_rows(mix)]
    if mix.hot is not None:
        intensity = mix.hot.intensity
        shown = "-" if intensity is None else f"{intensity:.3g}"
        lines.append(f"{'flops per loaded byte':38s} {shown:>14s}")
        lines.append(f"\nhot loop ({mix.hot_function}, one pass):")
        lines.extend(f"  {line}" for line in mix.hot_code)
    else:
        lines.append("\n(no loop: the code runs straight through)")
    return "\n".join(lines)


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("workloads", help="list operator families and named shapes")
    p.set_defaults(func=cmd_workloads)

    p = sub.add_parser("show", help="describe a workload: sizes, FLOPs, loop nest, TVMScript")
    add_workload_args(p)
    add_common(p)
    p.add_argument("--script", action="store_true", help="also print the TVMScript")
    p.add_argument(
        "--trace", type=file_name, help="a schedule (JSON trace or saved session) for --asm/--mix"
    )
    p.add_argument("--refit", action="store_true", help=REFIT_HELP)
    p.add_argument(
        "--asm", action="store_true", help="print the generated assembly and its instruction mix"
    )
    p.add_argument("--ir", action="store_true", help="print the LLVM IR it is compiled from")
    p.add_argument(
        "--vs",
        type=file_name,
        help="with --mix: another schedule to compare with (what changed in the hot loop)",
    )
    p.add_argument(
        "--mix", action="store_true", help="print the instruction mix and the hot loop's code"
    )
    p.set_defaults(func=cmd_show)
