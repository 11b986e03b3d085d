"""``explorer nas NETWORK``: the NAS-PTE search from the command line (``explorer.nas``).

Every tuning is a run in ``--db`` (one per distinct convolution shape, found there again by a
later search with the same target, strategy, budget and seed), so the command can be stopped
with Ctrl-C and run again: the shapes tuned so far are not tuned again. It prints the Pareto
front of the legal networks and, with ``--json FILE``, writes every network's numbers.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import Any

from explorer.cli._args import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    check_tune_options,
    check_writable_file,
    did_you_mean,
    file_name,
    non_negative_int,
    plain_number,
    positive_int,
    trial_count,
)
from explorer.cli._common import add_common, target_of
from explorer.cli._fleet import add_tracker_args, fleet_target, measurer_for
from explorer.text import format_secs, plural


def _tau(text: str) -> float:
    value = plain_number(text)
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(
            f"must be a finite number above 0 (got {text}); at 0 every candidate is legal"
        )
    return value


def _kinds(text: str | None) -> tuple[str, ...]:
    """``--kinds`` read (after parsing, so that ``--kinds`` given twice is refused as such)."""
    from explorer.nas import KINDS, check_kinds

    if text is None:
        return KINDS
    kinds = tuple(k.strip() for k in text.split(","))
    if not text.strip():
        raise UsageError(f"--kinds: expected kinds separated by commas, from {','.join(KINDS)}")
    if "" in kinds:
        raise UsageError(f"--kinds: an empty kind in {text!r} (two commas, or one at an end)")
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise UsageError(
            f"--kinds: {unknown[0]!r} is not a kind; take them from {','.join(KINDS)}"
        )
    try:
        check_kinds(kinds)
    except ValueError as exc:
        raise UsageError(f"--kinds: {exc}") from None
    return kinds


def _network(args: argparse.Namespace) -> Any:
    from explorer.errors import UnknownPluginError
    from explorer.nas import get_network

    kwargs = {} if args.width is None else {"width": args.width}
    try:
        return get_network(args.network, **kwargs)
    except UnknownPluginError as exc:
        raise UsageError(did_you_mean(exc)) from None
    except TypeError:
        raise UsageError(
            f"--width does not apply to {args.network} (its widths are fixed)"
        ) from None
    except ValueError as exc:
        raise UsageError(f"--{exc}") from None


def _row(point: Any, original_secs: float | None) -> str:
    from explorer.nas import format_ratio

    speedup = ""
    if point.latency_secs and original_secs:
        speedup = f"{original_secs / point.latency_secs:5.2f}x"
    steps = point.network.changes()
    return (
        f"  {point.name:<13} {format_secs(point.latency_secs):>10} {speedup:>6}  "
        f"FP x{format_ratio(point.fisher_ratio):>6}  {point.macs / 1e6:8.1f} M  "
        f"{point.params / 1e3:8.1f} k  {steps}"
    )


def _as_json(result: Any) -> dict[str, Any]:
    return {
        "network": result.sample.network.name,
        "strategy": result.strategy,
        "budget": result.budget,
        "tau": result.sample.tau,
        "fisher_secs": result.fisher_secs,
        "tuning_secs": result.tuning_secs,
        "speedup": result.speedup,
        "stopped": result.stopped,
        "tunings": [
            {
                "workload": t.conv.workload().key(),
                "run": t.run_id,
                "best_secs": t.best_secs,
                "paired_secs": t.paired_secs,
                "cached": t.is_cached,
            }
            for t in result.tunings
        ],
        "points": [
            {
                "name": p.name,
                "changes": p.network.changes(),
                "latency_secs": p.latency_secs,
                "fisher_ratio": p.fisher_ratio,
                "legal": p.is_legal,
                "on_front": p.is_on_front,
                "macs": p.macs,
                "params": p.params,
            }
            for p in result.points
        ],
    }


def cmd_nas(args: argparse.Namespace) -> int:
    # Step 1. Everything that can be refused is refused before any work.
    network = _network(args)
    kinds = _checked_options(args)
    # Step 2. Sample, judge, tune.
    result = _search(args, network, kinds)
    # Step 3. What was found; and, when asked, the original and the fastest legal network
    # built whole.
    status = _say_result(args, network, result)
    if args.whole_network and status == EXIT_OK:
        _say_whole(args, network, result)
    return status


def _checked_options(args: argparse.Namespace) -> tuple[str, ...]:
    """The kinds of transformation asked for, once every option was checked."""
    from explorer.nas import NUM_DIGITS, check_count

    kinds = _kinds(args.kinds)
    args.start, args.cost_model = None, None
    check_tune_options(args)  # the strategy's name, one sentence if unknown
    try:
        check_count("--samples", args.samples)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.batch_size > NUM_DIGITS:
        raise UsageError(
            f"--batch-size: the data set has {NUM_DIGITS} digits (got {args.batch_size})"
        )
    if args.json:
        check_writable_file(args.json, "--json")
    if args.whole_network and args.tracker is not None:
        raise UsageError(
            "--whole-network builds and races networks on this machine, not on a fleet's "
            "devices: leave out --tracker, or --whole-network"
        )
    return kinds


def _search(args: argparse.Namespace, network: Any, kinds: tuple[str, ...]) -> Any:
    from explorer.nas import nas_search
    from explorer.storage import get_store

    def progress(p: Any) -> None:
        if args.quiet or p.conv is None:
            return
        how = "found in the database" if p.is_cached else "tuning"
        print(f"[{p.done + 1}/{p.total}] {p.conv.label()}: {how}", file=sys.stderr)

    measurer = measurer_for(args)
    with measurer:
        target = target_of(args) if args.tracker is None else fleet_target(args, measurer)
        store = get_store(args.db)
        try:
            if not args.quiet:
                print(
                    f"{network.name}: scoring {plural(args.samples, 'candidate')} by Fisher "
                    "Potential...",
                    file=sys.stderr,
                )
            return nas_search(
                network,
                samples=args.samples,
                budget=args.budget,
                store=store,
                measurer=measurer,
                target=target,
                strategy=args.strategy,
                tau=args.tau,
                seed=args.seed,
                tune_seed=args.tune_seed,
                batch_size=args.batch_size,
                kinds=kinds,
                inits=args.inits,
                on_progress=progress,
            )
        except KeyboardInterrupt:
            print(
                "interrupted; every shape tuned so far is kept in the database: run the same "
                "command again to go on from there",
                file=sys.stderr,
            )
            raise
        finally:
            store.close()


def _say_result(args: argparse.Namespace, network: Any, result: Any) -> int:
    legal = sum(p.is_legal for p in result.points[1:])
    tuned = sum(not t.is_cached for t in result.tunings)
    print(
        f"{network.name}: {plural(len(result.points) - 1, 'candidate')}, {legal} legal at "
        f"tau={args.tau:g} (Fisher Potentials in {result.fisher_secs:.1f} s); "
        f"{plural(len(result.tunings), 'distinct convolution')} at {args.budget} trials each "
        f"with {args.strategy}: {tuned} tuned in {result.tuning_secs:.1f} s, "
        f"{len(result.tunings) - tuned} found in the database"
    )
    original = result.original.latency_secs
    print(
        "Pareto front (latency, speed-up over the original, Fisher Potential ratio, MACs, "
        "parameters, transformations):"
    )
    for point in result.front:
        print(_row(point, original))
    if not result.original.is_on_front:
        print("the original, for reference (a legal candidate beats it on every count):")
        print(_row(result.original, original))
    for point in result.points[1:]:  # never dropped in silence
        if point.is_legal and point.latency_secs is None:
            runs = ", ".join(f"run {t.run_id}" for t in result.untimed_convs(point))
            print(
                f"{point.name} is legal but has no latency: a convolution of it had no "
                f"successful schedule ({runs or 'its tuning was stopped'}; `explorer runs`)"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(_as_json(result), indent=1))
        print(f"every network's numbers written to {args.json}")
    best = result.fastest_legal
    if best is None or result.speedup is None:
        print("no latency for the original network: a convolution had no successful schedule")
        return EXIT_FAILED
    if legal == 0:
        print(f"no candidate was legal at tau={args.tau:g}: the original stands")
    elif best is result.original:
        print("no legal candidate was faster than the original")
    else:
        print(f"fastest legal: {best.name}, {result.speedup:.2f}x faster than the original")
    return EXIT_OK


def _say_whole(args: argparse.Namespace, network: Any, result: Any) -> None:
    from explorer.storage import get_store
    from explorer.whole_network import build_whole

    points = [result.original]
    best = result.fastest_legal
    if best is not None and best is not result.original:
        points.append(best)

    def step(text: str) -> None:
        if not args.quiet:
            print(text, file=sys.stderr)

    with measurer_for(args) as measurer, get_store(args.db) as store:
        built = build_whole(
            network.name, points, store=store, measurer=measurer, target=target_of(args),
            trials=args.whole_network, strategy=args.strategy, seed=args.tune_seed,
            on_step=step,
        )  # fmt: skip
    print(
        f"built whole ({args.whole_network} trials a network with {args.strategy}, each "
        "raced against ONNX Runtime; `explorer model show MODEL` for the rest):"
    )
    first = built[0]
    for whole in built:
        line = f"  {whole.point:<13}"
        for label, secs, ref in (
            ("tuned", whole.tuned_secs, first.tuned_secs),
            ("ONNX Runtime", whole.onnxruntime_secs, first.onnxruntime_secs),
            ("sum of convolutions", whole.convs_secs, first.convs_secs),
        ):
            ratio = f" ({ref / secs:.2f}x)" if secs and ref and whole is not first else ""
            line += f"  {label} {format_secs(secs)}{ratio}"
        print(f"{line}  model {whole.model}")
        if whole.error:
            print(f"  {whole.point}: {whole.error}")
    if args.json:  # beside the search's numbers, written above
        data = json.loads(Path(args.json).read_text())
        data["whole_network"] = [dataclasses.asdict(whole) for whole in built]
        Path(args.json).write_text(json.dumps(data, indent=1))


def add_nas_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "nas",
        help="neural architecture search as program transformation: sample grouped and "
        "bottlenecked variants of a network, keep the legal ones (Fisher Potential), tune "
        "their convolutions, print the Pareto front",
    )
    p.add_argument(
        "network", help="resnet18_cifar, resnet34_cifar (32x32 input) or resnet18_imagenet"
    )
    p.add_argument(
        "--width",
        type=positive_int,
        default=None,
        help="first stage's channels of a CIFAR ResNet (default 64, the paper's)",
    )
    p.add_argument(
        "--samples", type=non_negative_int, default=20, help="candidates to draw (default 20)"
    )
    p.add_argument(
        "--budget",
        type=trial_count,
        default=16,
        help="trials per distinct convolution shape (default 16)",
    )
    p.add_argument(
        "--strategy", default="random", metavar="NAME", help="search strategy (default random)"
    )
    p.add_argument(
        "--tau",
        type=_tau,
        default=1.0,
        help="legal iff FP(candidate) >= tau x FP(original) (default 1.0)",
    )
    p.add_argument(
        "--kinds",
        default=None,
        metavar="K1,K2",
        help="what a block may become (default: all of keep, group, depthwise, bottleneck, "
        "bottleneck_group, split_group, unroll_group, spatial_split)",
    )
    _add_fisher_args(p)
    p.add_argument("--json", type=file_name, help="write every network's numbers to this file")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    add_common(p)
    add_tracker_args(p)
    p.set_defaults(func=cmd_nas)


def _add_fisher_args(p: argparse.ArgumentParser) -> None:
    """The seeds, the Fisher Potential's settings and the whole-network build."""
    p.add_argument(
        "--seed",
        type=non_negative_int,
        default=0,
        help="draws the candidates and the Fisher Potential's initialisation (default 0)",
    )
    p.add_argument(
        "--tune-seed",
        type=non_negative_int,
        default=0,
        help="the tuning runs' seed (default 0); another --seed reuses the shapes tuned",
    )
    p.add_argument(
        "--batch-size",
        type=positive_int,
        default=64,
        help="digits in the Fisher Potential's minibatch (default 64)",
    )
    p.add_argument(
        "--inits",
        type=positive_int,
        default=1,
        help="initialisations each Fisher Potential averages (default 1, the paper's; more "
        "makes the verdicts less dependent on one random draw, at that many times the cost)",
    )
    p.add_argument(
        "--whole-network",
        type=trial_count,
        default=None,
        metavar="TRIALS",
        help="then build the original and the fastest legal network whole: each imported as "
        "a model, its tasks tuned with TRIALS trials in all, raced against ONNX Runtime",
    )
