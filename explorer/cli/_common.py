"""Arguments several commands share: the workload, the target, the database, a trace file."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from explorer.cli._args import (
    UsageError,
    file_name,
    parse_params,
    parse_shapes,
    positive_int,
)


# -- workload arguments ------------------------------------------------------------------------
def add_workload_args(p: argparse.ArgumentParser, *, optional_when: str = "") -> None:
    """The workload and its parameters; ``optional_when`` says when the command does without
    one (in its help; empty: never)."""
    p.add_argument(
        "workload",
        nargs="?" if optional_when else None,
        help="family or preset name (see `explorer workloads`), `expr` with --expr/--shape, "
        "or MODEL:TASK, a task of an imported model (see `explorer model show`)"
        + (f" ({optional_when})" if optional_when else ""),
    )
    p.add_argument(
        "-p",
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a shape parameter, e.g. -p M=512 (repeatable)",
    )
    p.add_argument("--expr", help="a custom expression, e.g. 'C[i, j] += A[i, k] * B[k, j]'")
    p.add_argument(
        "--shape",
        action="append",
        default=[],
        metavar="NAME=DxD",
        help="shape of an input of --expr, e.g. --shape A=64x32 (repeatable)",
    )


def workload_of(args: argparse.Namespace) -> Any:
    from explorer.workloads import get_workload, parse_expression

    params = parse_params(args.param)
    if args.expr is not None or args.workload == "expr":
        if args.workload not in ("expr", None):
            raise UsageError(
                f"give either a workload name ({args.workload!r}) or --expr, not both "
                "(a custom expression is the workload `expr`)"
            )
        if args.expr is None:
            raise UsageError("the expr workload needs --expr TEXT and --shape NAME=DxD")
        given = sorted(set(params) - {"dtype"})
        if given:  # text and shapes come from --expr and --shape, nothing else is a parameter
            raise UsageError(
                f"-p {given[0]} does not apply to an expression: its text is --expr, its input "
                "shapes are --shape NAME=DxD, and -p dtype=... is its only parameter"
            )
        return parse_expression(args.expr, shapes=parse_shapes(args.shape), **params)
    if args.shape:
        raise UsageError(f"--shape applies to --expr only; {args.workload} takes -p KEY=VALUE")
    if ":" in args.workload:
        if params:
            raise UsageError(
                f"-p does not apply to a model's task ({args.workload}): its model fixes it"
            )
        return model_task_of(args.workload, args.db)
    return get_workload(args.workload, **params)


def model_task_of(handle: str, db: str | None) -> Any:
    """The workload of ``MODEL:TASK``, a task of a model stored in ``db``."""
    from explorer.storage import default_store, get_store, is_postgres_url

    model_name, _, task_name = handle.partition(":")
    where = db or default_store()
    if not is_postgres_url(str(where)) and not Path(where).is_file():
        raise UsageError(f"{handle}: there is no database {where} to find model {model_name!r} in")
    with get_store(where, read_only=True) as store:
        try:
            return store.get_model(model_name).task(task_name).workload
        except KeyError as exc:
            raise UsageError(f"{handle}: {exc.args[0]}") from None


def target_of(args: argparse.Namespace) -> Any:
    from explorer.target import Target

    if args.target != "cpu":
        return Target.cuda()
    cpu = Target.local_cpu()
    if args.threads is not None and args.threads > cpu.num_cores:
        # More threads than cores would be timed on fewer cores yet recorded as this many.
        raise UsageError(
            f"--threads {args.threads}: this machine has {cpu.num_cores} cores available "
            f"(use at most {cpu.num_cores})"
        )
    return Target.local_cpu(num_cores=args.threads)


def add_common(p: argparse.ArgumentParser, *, target: bool = True) -> None:
    p.add_argument(
        "--db",
        type=file_name,
        help="record database: a file, or a postgresql://user@host/dbname URL "
        "(default: $EXPLORER_DB or ~/.explorer/records.db)",
    )
    if target:
        p.add_argument("--target", choices=("cpu", "cuda"), default="cpu")
        p.add_argument(
            "--threads",
            type=positive_int,
            default=None,
            help="threads per kernel, at most the cores available (default: all of them)",
        )


def read_trace(path: Path, workload: Any, target: Any, *, refit: bool = False) -> Any:
    """The file's trace, checked: bad input never reaches TVM or the database. ``--refit``
    re-fits a trace of another shape, and what it changed is printed; a file saved for another
    target (a session, a record) is measured for ``target``, and that is said too."""
    from explorer.session import read_trace_file

    checked = read_trace_file(path, workload, refit=refit)
    for note in checked.notes:
        print(f"refit: {note}")
    saved = checked.target
    if saved is not None and saved.kind != target.kind:
        raise UsageError(
            f"{path} was saved for the {saved.kind} target {saved.key()}: a schedule for one "
            f"kind of device does not run on another (--target "
            f"{'cuda' if saved.kind == 'cuda' else 'cpu'} measures it)"
        )
    if saved is not None and saved.key() != target.key():
        print(f"note: {path} was saved for {saved.key()}; measuring it for {target.key()}")
    return checked.trace


def empty_trace(workload: Any) -> Any:
    from explorer import _tvm

    return _tvm.trace_to_json(_tvm.Schedule(workload.mod()).trace)


REFIT_HELP = (
    "re-fit a trace recorded for another shape of this operator: each tile that no longer "
    "fits becomes the nearest one that does, and each change is printed"
)
