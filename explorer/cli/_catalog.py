"""`explorer workloads` and `explorer show`: the operator catalog."""

from __future__ import annotations

import argparse

from explorer.cli._args import (
    EXIT_OK,
)
from explorer.cli._common import (
    add_common,
    add_workload_args,
    target_of,
    workload_of,
)


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

    workload = workload_of(args)
    session = ScheduleSession(workload, target=target_of(args))
    print(f"workload: {workload.key()}")
    print(f"FLOPs:    {workload.flops():,}")
    print(f"bytes:    {workload.bytes_moved():,}")
    *inputs, (out_name, out_shape, out_dtype) = workload.buffers()
    for name, shape, dtype in inputs:
        print(f"input:    {name} {list(shape)} {dtype}")
    print(f"output:   {out_name} {list(out_shape)} {out_dtype}")
    print("\nloop nest:")
    for block in session.snapshot.blocks:
        loops = " > ".join(
            f"{lp.name}({lp.extent}{', ' + lp.kind if lp.kind != 'serial' else ''})"
            for lp in block.loops
        )
        print(f"  {block.name}: {loops or '(no loops)'}")
    if args.script:
        print("\n" + session.snapshot.script)
    return EXIT_OK


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("workloads", help="list operator families and named shapes")
    p.set_defaults(func=cmd_workloads)

    p = sub.add_parser("show", help="describe a workload: sizes, FLOPs, loop nest, TVMScript")
    add_workload_args(p)
    add_common(p)
    p.add_argument("--script", action="store_true", help="also print the TVMScript")
    p.set_defaults(func=cmd_show)
