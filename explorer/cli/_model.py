"""``explorer model``: bring your own network (``explorer.model``).

``model example NAME -o FILE`` writes one of the shipped networks as ONNX; ``model import FILE``
converts a network, extracts its tasks, times each once unscheduled and stores the model in
``--db``; ``model list`` and ``model show MODEL`` print what is stored, the tasks ordered by
their share of the untuned network's time. A task is a workload like any other, named
``MODEL:TASK`` on the command line (``explorer tune resnet18:fused_conv2d_add_relu``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from explorer.cli._args import EXIT_OK, UsageError, did_you_mean, file_name, non_negative_int
from explorer.cli._common import add_common, target_of
from explorer.text import format_secs, plural


def _input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    from explorer.errors import ModelError
    from explorer.model import parse_input_shape

    try:
        return parse_input_shape(text)
    except ModelError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--input ")) from None


def _store(args: argparse.Namespace, *, read_only: bool) -> Any:
    from explorer.storage import default_store, get_store

    return get_store(args.db or default_store(), read_only=read_only)


def cmd_example(args: argparse.Namespace) -> int:
    from explorer.errors import UnknownPluginError
    from explorer.extras import require
    from explorer.model import NETWORKS

    if args.network not in NETWORKS:
        raise UsageError(did_you_mean(UnknownPluginError("network", args.network, NETWORKS)))
    onnx = require("onnx", "writing an ONNX network", "model")
    model = NETWORKS[args.network](seed=args.seed)
    onnx.save(model, args.output)
    inputs = ", ".join(
        f"{i.name} {'x'.join(str(d.dim_value) for d in i.type.tensor_type.shape.dim)}"
        for i in model.graph.input
    )
    print(f"wrote {args.network} to {args.output} ({len(model.graph.node)} nodes; input {inputs})")
    return EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    from explorer.model import import_model

    shapes: dict[str, tuple[int, ...]] = {}
    for name, shape in args.input or ():
        if name in shapes:
            raise UsageError(f"--input {name} is given twice")
        shapes[name] = shape
    target = target_of(args)
    with _store(args, read_only=False) as store:
        model = import_model(
            args.file, store, inputs=shapes, name=args.name, target=target,
            on_step=lambda step: print(f"{step}...", file=sys.stderr, flush=True),
        )  # fmt: skip
        _print_model(model, top=args.top)
    return EXIT_OK


def cmd_list(args: argparse.Namespace) -> int:
    with _store(args, read_only=True) as store:
        models = store.models()
    if not models:
        print("no models yet: `explorer model import FILE`")
        return EXIT_OK
    for m in models:
        untuned = [t.untuned_total_secs for t in m.tasks]
        total = sum(u for u in untuned if u is not None)
        inputs = ", ".join(str(i) for i in m.inputs)
        print(
            f"{m.id}  {m.name}  {plural(len(m.tasks), 'task')}, untuned {format_secs(total)} "
            f"per inference, input {inputs}"
        )
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    with _store(args, read_only=True) as store:
        try:
            model = store.get_model(args.model)
        except KeyError as exc:
            raise UsageError(str(exc.args[0])) from None
    _print_model(model, top=args.top)
    return EXIT_OK


def _print_model(model: Any, *, top: int) -> None:
    """The model's tasks, costliest first: what to tune first."""
    tasks = sorted(model.tasks, key=lambda t: -(t.untuned_total_secs or 0.0))
    total = sum(t.untuned_total_secs or 0.0 for t in tasks)
    print(
        f"model {model.id}: {model.name}, {plural(len(tasks), 'task')}, untuned "
        f"{format_secs(total)} per inference on {model.target.key()}"
    )
    shown = tasks if top == 0 else tasks[:top]
    for t in shown:
        share = model.share(t)
        timed = (
            f"{format_secs(t.untuned_secs)} x{t.weight}" if t.untuned_secs is not None
            else f"not timed: {t.error}"
        )  # fmt: skip
        print(
            f"  {'     -' if share is None else f'{share:6.1%}'}  {model.name}:{t.name}  "
            f"{timed}, {t.flops / 1e6:.3g} MFLOP"
        )
    if len(shown) < len(tasks):
        print(f"  ... and {plural(len(tasks) - len(shown), 'more task')} (--top 0 lists all)")


def add_model_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "model",
        help="bring your own network: import an ONNX model, list its tasks",
    )
    cmds = p.add_subparsers(metavar="COMMAND", required=True)

    ex = cmds.add_parser("example", help="write a shipped network as ONNX")
    ex.add_argument("network", help="tiny, resnet18, mobilenet_v2 or bert_layer")
    ex.add_argument("-o", "--output", type=file_name, required=True, help="the .onnx file")
    ex.add_argument("--seed", type=non_negative_int, default=0, help="of the random weights")
    ex.set_defaults(func=cmd_example)

    imp = cmds.add_parser("import", help="import an ONNX model and time its tasks untuned")
    imp.add_argument("file", type=file_name, help="the .onnx file")
    imp.add_argument(
        "--input",
        action="append",
        type=_input_shape,
        metavar="NAME=1x3x224x224",
        help="the size of an input the file leaves dynamic (repeat for several)",
    )
    imp.add_argument("--name", help="the model's name in the database (default: the file's)")
    imp.add_argument(
        "--top", type=non_negative_int, default=10, help="tasks to print (default 10; 0: all)"
    )
    add_common(imp)
    imp.set_defaults(func=cmd_import)

    ls = cmds.add_parser("list", help="the models stored in the database")
    add_common(ls, target=False)
    ls.set_defaults(func=cmd_list)

    show = cmds.add_parser("show", help="a stored model's tasks, costliest first")
    show.add_argument("model", help="its name or id (see `explorer model list`)")
    show.add_argument(
        "--top", type=non_negative_int, default=0, help="tasks to print (default 0: all)"
    )
    add_common(show, target=False)
    show.set_defaults(func=cmd_show)
