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
import time
from typing import Any

from explorer.cli._args import (
    EXIT_OK,
    UsageError,
    did_you_mean,
    file_name,
    non_negative_int,
    positive_int,
    trial_count,
)
from explorer.cli._common import add_common, target_of
from explorer.cli._db import _db_path
from explorer.text import format_secs, plural


def _input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    from explorer.errors import ModelError
    from explorer.model import parse_input_shape

    try:
        return parse_input_shape(text)
    except ModelError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--input ")) from None


def _store(args: argparse.Namespace, *, read_only: bool, existing: bool = False) -> Any:
    """The ``--db`` store; with ``existing``, one that must exist already (a tune or race of
    a stored model), refused as ``show`` refuses it instead of created at a mistyped path."""
    from explorer.storage import get_store

    path = _db_path(args)
    if existing and not read_only:
        get_store(path, read_only=True).close()
    return get_store(path, read_only=read_only)


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
    started = time.time()
    with _store(args, read_only=False) as store:
        model = import_model(
            args.file, store, inputs=shapes, name=args.name, target=target,
            on_step=lambda step: say(f"{step}..."),
        )  # fmt: skip
        if model.created_at < started:
            say(f"{model.name} is already stored (the same file, the same input sizes)")
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
    from explorer.model import tune_spent

    with _store(args, read_only=True) as store:
        model = _stored_model(store, args.model)
        races = store.model_races(model.id)
        tunes = sorted({t for _, _, t in store.model_runs(model.id)})
        spent = {t: tune_spent(model, store, t) for t in tunes}
    _print_model(model, top=args.top)
    for tune in tunes:
        print(f"tune {tune}: {plural(spent[tune], 'trial')}")
    if races:
        _print_race(races[-1], races)
    return EXIT_OK


def say(text: str) -> None:
    """A step of a long command, on stderr (stdout keeps the results)."""
    print(text, file=sys.stderr, flush=True)


def _stored_model(store: Any, name: str) -> Any:
    try:
        return store.get_model(name)
    except KeyError as exc:
        raise UsageError(str(exc.args[0])) from None


def cmd_tune(args: argparse.Namespace) -> int:
    from explorer.measure import LocalMeasurer
    from explorer.model import race_model, tune_model, tune_name, tune_spent
    from explorer.search import check_capabilities

    check_capabilities(args.strategy, start=False, cost_model=None, transfer=args.transfer)
    with _store(args, read_only=False, existing=True) as store:
        model = _stored_model(store, args.model)

        def progress(p: Any) -> None:
            estimate = p.estimated_secs
            print(
                f"[{p.trials}/{p.max_trials}] {p.task}: best "
                f"{format_secs(next(s.best_secs for s in p.states if s.task.name == p.task))}; "
                f"tasks at their best: {format_secs(estimate)} per inference",
                flush=True,
            )
            if p.busy_note:  # about how it was measured, as the steps are: beside the results
                say(p.busy_note)

        planned = tune_name(args.strategy, args.seed, args.scheduler, transfer=args.transfer)
        before = tune_spent(model, store, planned)
        if before >= args.trials:  # --trials is the tune's total: nothing is left to spend
            say(
                f"tune {planned} has spent {plural(before, 'trial')} already and --trials is "
                f"its total: nothing to tune (give --trials above {before} to tune further)"
            )
        try:
            with LocalMeasurer() as measurer:
                tune = tune_model(
                    model, store, measurer, max_trials=args.trials, strategy=args.strategy,
                    seed=args.seed, scheduler=args.scheduler, chunk=args.chunk,
                    transfer=args.transfer, on_progress=None if args.quiet else progress,
                    on_step=lambda step: None if args.quiet else say(f"{step}..."),
                )  # fmt: skip
        except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (explorer.cli._lifecycle)
            print(
                f"interrupted; tune {planned} keeps every stored trial: run the same command "
                "again to go on from there",
                file=sys.stderr,
            )
            raise
        print(f"tune {tune}: {plural(tune_spent(model, store, tune), 'trial')} in all")
        if args.no_race:
            return EXIT_OK
        spent = tune_spent(model, store, tune)
        race = race_model(
            model, store, tune=tune, rounds=args.rounds,
            tune_relax_trials=spent if args.vs_tune_relax else 0,
            on_step=lambda step: say(f"{step}..."),
        )  # fmt: skip
        races = store.model_races(model.id)
    _print_race(race, races)
    return EXIT_OK


def cmd_race(args: argparse.Namespace) -> int:
    from explorer.model import race_model

    with _store(args, read_only=False, existing=True) as store:
        model = _stored_model(store, args.model)
        tunes = sorted({t for _, _, t in store.model_runs(model.id)})
        if args.tune is not None and args.tune not in tunes:
            raise UsageError(
                f"model {model.name} has no tune {args.tune!r} (its tunes: "
                f"{', '.join(tunes) or 'none yet: `explorer model tune`'})"
            )
        race = race_model(
            model, store, tune=args.tune, rounds=args.rounds,
            tune_relax_trials=args.tune_relax,
            on_step=lambda step: say(f"{step}..."),
        )  # fmt: skip
        races = store.model_races(model.id)
    _print_race(race, races)
    return EXIT_OK


def _print_race(race: Any, races: Any) -> None:
    """Each contender's fastest call, checked against ONNX Runtime, and the ratios that
    matter: tuned against ONNX Runtime and against untuned. ``races``: the model's (what its
    probes are compared with)."""
    from explorer.model import (
        ONNXRUNTIME,
        TUNE_RELAX,
        TUNED,
        UNTUNED,
        busy_note,
        speed_note,
        speed_text,
    )

    env = race.environment
    scheduled = plural(int(env.get("tasks_scheduled") or 0), "task")
    speed = speed_text(race)
    print(
        f"race {race.id} on {env.get('cpu_model', 'this CPU')}, {env.get('num_threads')} "
        f"threads, {plural(race.trials, 'trial')} spent, {scheduled} "
        f"scheduled (ONNX Runtime {env.get('onnxruntime_version')})"
        + (f"; {speed}" if speed else "")
        + ":"
    )
    for e in race.entries:
        if e.error is not None:
            print(f"  {e.name:12s} {e.error}")
            continue
        check = (
            "" if e.max_error is None else f", output within {e.max_error:.1g} of ONNX Runtime's"
        )
        rounds = " ".join(format_secs(x) for x in e.round_secs)
        print(f"  {e.name:12s} {format_secs(e.fastest_secs)} (rounds: {rounds}){check}")
    tuned, ort, untuned = (race.entry(n) for n in (TUNED, ONNXRUNTIME, UNTUNED))
    if tuned and ort and tuned.fastest_secs and ort.fastest_secs:
        ratio = tuned.fastest_secs / ort.fastest_secs
        print(f"tuned / ONNX Runtime: {ratio:.2f} ({'faster' if ratio < 1 else 'slower'})")
    relax = race.entry(TUNE_RELAX)
    if tuned and relax and tuned.fastest_secs and relax.fastest_secs:
        ratio = relax.fastest_secs / tuned.fastest_secs
        print(f"speed-up over tune_relax at equal trials: {ratio:.2f}x")
    if tuned and untuned and tuned.fastest_secs and untuned.fastest_secs:
        print(f"speed-up over untuned: {untuned.fastest_secs / tuned.fastest_secs:.1f}x")
    for note in (busy_note(race), speed_note(race, races)):
        if note:
            print(note)


def _print_model(model: Any, *, top: int) -> None:
    """The model's tasks, costliest first: what to tune first."""
    from explorer.model import import_busy_note

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
    note = import_busy_note(model)
    if note:
        print(note)


def add_model_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "model",
        help="bring your own network: import an ONNX model, tune its tasks, race it against "
        "ONNX Runtime",
    )
    cmds = p.add_subparsers(metavar="COMMAND", required=True)
    _add_example_import_list(cmds)
    _add_tune(cmds)
    _add_race_show(cmds)


def _add_example_import_list(cmds: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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


def _add_tune(cmds: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tune = cmds.add_parser(
        "tune",
        help="tune a model's tasks with one budget, then race the network against ONNX Runtime",
    )
    tune.add_argument("model", help="its name or id (see `explorer model list`)")
    tune.add_argument(
        "--trials",
        type=trial_count,
        required=True,
        help="the tune's trials in all, over every task (run again with more, it continues)",
    )
    tune.add_argument(
        "--strategy", default="evolutionary", metavar="NAME",
        help="search strategy of every task (default evolutionary)",
    )  # fmt: skip
    tune.add_argument(
        "--scheduler", choices=("gradient", "round-robin"), default="gradient",
        help="which task the next trials go to (default gradient: where they cut the "
        "network's latency most)",
    )  # fmt: skip
    tune.add_argument(
        "--chunk", type=positive_int, default=16, help="trials a task gets at a time (default 16)"
    )
    tune.add_argument("--seed", type=non_negative_int, default=0, help="(default 0)")
    tune.add_argument(
        "--transfer", action="store_true",
        help="each task's strategy learns first from the database's trials of other workloads "
        "(the other tasks, `explorer pretrain`'s presets), as tune_relax shares one model",
    )  # fmt: skip
    tune.add_argument(
        "--rounds", type=positive_int, default=3, help="interleaved rounds of the race (default 3)"
    )
    tune.add_argument("--no-race", action="store_true", help="tune only; race later")
    tune.add_argument(
        "--vs-tune-relax", action="store_true",
        help="race TVM's own tune_relax too, at the trials this tune spent (as long again)",
    )  # fmt: skip
    tune.add_argument("-q", "--quiet", action="store_true", help="no line per chunk")
    add_common(tune, target=False)
    tune.set_defaults(func=cmd_tune)


def _add_race_show(cmds: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    race = cmds.add_parser(
        "race",
        help="build the network with its tasks' best schedules and race it against ONNX "
        "Runtime and the untuned build",
    )
    race.add_argument("model", help="its name or id (see `explorer model list`)")
    race.add_argument(
        "--tune", default=None, metavar="NAME",
        help="the schedules of one tune, e.g. evolutionary/seed0/gradient (default: the best "
        "of every task in the database)",
    )  # fmt: skip
    race.add_argument(
        "--rounds", type=positive_int, default=3, help="interleaved rounds (default 3)"
    )
    race.add_argument(
        "--tune-relax", type=non_negative_int, default=0, metavar="TRIALS",
        help="race TVM's own tune_relax too, tuned with this many trials (default 0: not)",
    )  # fmt: skip
    add_common(race, target=False)
    race.set_defaults(func=cmd_race)

    show = cmds.add_parser("show", help="a stored model's tasks, costliest first")
    show.add_argument("model", help="its name or id (see `explorer model list`)")
    show.add_argument(
        "--top", type=non_negative_int, default=0, help="tasks to print (default 0: all)"
    )
    add_common(show, target=False)
    show.set_defaults(func=cmd_show)
