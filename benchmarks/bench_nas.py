"""NAS as program transformation (Turner, Crowley, O'Boyle, ASPLOS 2021), at small scale.

Run: ``python benchmarks/bench_nas.py [--width 32] [--samples 30] [--budget 16] [--epochs 1]``

Part 1, the search (``explorer.nas.nas_search``, what ``explorer nas`` runs): ``--samples``
random transformation plans of a CIFAR-size ResNet-18 (``--width`` channels in its first stage;
the paper's is 64), each judged by its Fisher Potential against the original (tau 1.0); every
distinct convolution of the original and of the legal candidates tuned for this CPU with
``--strategy`` at ``--budget`` trials per shape (the original's layers at the same budget as
every candidate's: equal tuning budget); a network's latency is the sum of its convolutions'
tuned latencies. Reported: how many candidates were legal, the speed-up of the fastest legal
network over the original (the paper: "over 3x in the majority of cases"), the spread of the
legal candidates' speed-ups, and where the search's time went (Fisher Potentials, tuning).

Part 2, the proxy: the original, ``--train`` legal and ``--train`` illegal candidates (evenly
spread over their Fisher Potential ratios) and two variants any capacity measure should refuse
(every block's inner width collapsed to one channel; every convolution cut into two strips)
trained ``--epochs`` epochs on the digits
(``explorer.nas.train``); reported: accuracy against Fisher Potential, Spearman's rank
correlation, and the legal and illegal networks' mean accuracy.

Results go to ``--out`` (default ``bench_results/nas/``): the record database (a second run with
the same settings finds every tuning there and tunes nothing), ``points.csv``,
``training.csv``, ``summary.json`` and the Pareto plot ``front.html``.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import time
from pathlib import Path

import _checkout  # noqa: F401  (first: this checkout's explorer)
import numpy as np

from explorer.analysis import nas_front_info
from explorer.measure import LocalMeasurer
from explorer.nas import (
    Bottleneck,
    NasPoint,
    SpatialSplit,
    fisher_potential,
    format_ratio,
    get_network,
    nas_search,
    rank_correlation,
    train,
)
from explorer.plots import make_nas_pareto_figure
from explorer.storage import get_store
from explorer.target import Target


def _pick(points: list, k: int) -> list:
    ordered = sorted(points, key=lambda p: p.fisher_ratio)
    if len(ordered) <= k:
        return ordered
    at = np.linspace(0, len(ordered) - 1, k).round().astype(int)
    return [ordered[i] for i in dict.fromkeys(at.tolist())]


def search(args: argparse.Namespace, out: Path) -> tuple[dict, object]:
    network = get_network("resnet18_cifar", width=args.width)
    store = get_store(out / "records.db")
    target = Target.local_cpu()
    start = time.perf_counter()
    with LocalMeasurer() as measurer:

        def progress(p) -> None:
            if p.conv is not None:
                how = "found in the database" if p.is_cached else "tuning"
                print(f"  [{p.done + 1}/{p.total}] {p.conv.label()}: {how}", flush=True)

        result = nas_search(
            network,
            samples=args.samples,
            budget=args.budget,
            store=store,
            measurer=measurer,
            target=target,
            strategy=args.strategy,
            tau=args.tau,
            seed=args.seed,
            on_progress=progress,
        )
    wall = time.perf_counter() - start
    store.close()
    base = result.original.latency_secs
    legal = [p for p in result.points[1:] if p.is_legal]
    speedups = [base / p.latency_secs for p in legal if p.latency_secs and base]
    fisher_each = [c.fisher_secs for c in result.sample.candidates if c.fisher_secs > 0]
    summary = {
        "network": network.name,
        "target": target.key(),
        "samples": args.samples,
        "budget_per_shape": args.budget,
        "strategy": args.strategy,
        "tau": args.tau,
        "seed": args.seed,
        "legal": len(legal),
        "refused_block_plans": len(result.sample.refusals),
        "distinct_convolutions": len(result.tunings),
        "tuned_now": sum(not t.is_cached for t in result.tunings),
        "original_ms": None if base is None else base * 1e3,
        "fastest_legal": None if result.fastest_legal is None else result.fastest_legal.name,
        "fastest_legal_changes": (
            None if result.fastest_legal is None else result.fastest_legal.network.changes()
        ),
        "speedup_fastest_legal": result.speedup,
        "speedup_median_legal": statistics.median(speedups) if speedups else None,
        "legal_at_least_3x": sum(s >= 3 for s in speedups),
        "legal_faster": sum(s > 1 for s in speedups),
        "fisher_secs_total": result.fisher_secs,
        "fisher_secs_median": statistics.median(fisher_each) if fisher_each else None,
        "tuning_secs": result.tuning_secs,
        "wall_secs": wall,
    }
    with open(out / "points.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(
            [
                "name",
                "legal",
                "on_front",
                "fisher_ratio",
                "latency_ms",
                "speedup",
                "macs",
                "params",
                "changes",
            ]
        )
        for p in result.points:
            lat = p.latency_secs
            writer.writerow(
                [
                    p.name,
                    p.is_legal,
                    p.is_on_front,
                    f"{p.fisher_ratio:.4f}",
                    "" if lat is None else f"{lat * 1e3:.4f}",
                    "" if lat is None or base is None else f"{base / lat:.3f}",
                    p.macs,
                    p.params,
                    p.network.changes(),
                ]
            )
    make_nas_pareto_figure(nas_front_info(result)).write_html(
        out / "front.html", include_plotlyjs="cdn"
    )
    return summary, result


def extremes(result, args: argparse.Namespace) -> list[NasPoint]:
    """Two variants the proxy should refuse whatever the sample drew: every block's inner
    width collapsed to one channel, and every convolution cut into two strips (no halo)."""
    net = result.original.network
    variants = {
        "collapsed to 1": [((Bottleneck(b.convs[0].out_channels),), ()) for b in net.blocks],
        "split in 2 strips": [((SpatialSplit(2),), (SpatialSplit(2),)) for _ in net.blocks],
    }
    original = fisher_potential(net, seed=args.seed)
    points = []
    for name, plans in variants.items():
        variant = net.transform(plans)
        ratio = fisher_potential(variant, seed=args.seed).ratio(original)
        seeds = [
            fisher_potential(variant, seed=s).ratio(fisher_potential(net, seed=s))
            for s in range(args.seed + 1, args.seed + 3)
        ]
        print(
            f"  {name}: FP x{format_ratio(ratio)} (seeds +1, +2: "
            f"{', '.join(map(format_ratio, seeds))})",
            flush=True,
        )
        points.append(NasPoint(name, variant, ratio, ratio >= args.tau, None))
    return points


def proxy(args: argparse.Namespace, result, out: Path) -> dict:
    legal = [p for p in result.points[1:] if p.is_legal]
    illegal = [p for p in result.points[1:] if not p.is_legal]
    chosen = [
        result.original,
        *_pick(legal, args.train),
        *_pick(illegal, args.train),
        *extremes(result, args),
    ]
    rows = []
    for p in chosen:
        accs = [train(p.network, epochs=args.epochs, seed=s).accuracy for s in range(args.seeds)]
        acc = statistics.mean(accs)
        rows.append((p, acc, accs))
        print(
            f"  {p.name:<13} FP x{p.fisher_ratio:6.3f} {'legal' if p.is_legal else 'illegal':<8}"
            f" accuracy {acc:.3f} {accs}",
            flush=True,
        )
    with open(out / "training.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["name", "legal", "fisher_ratio", "accuracy", "per_seed", "changes"])
        for p, acc, accs in rows:
            writer.writerow(
                [
                    p.name,
                    p.is_legal,
                    f"{p.fisher_ratio:.4f}",
                    f"{acc:.4f}",
                    " ".join(f"{a:.3f}" for a in accs),
                    p.network.changes(),
                ]
            )
    fps = [p.fisher_ratio for p, _, _ in rows]
    accs = [a for _, a, _ in rows]
    legal_acc = [a for p, a, _ in rows if p.is_legal]
    illegal_acc = [a for p, a, _ in rows if not p.is_legal]
    return {
        "trained": len(rows),
        "epochs": args.epochs,
        "seeds": args.seeds,
        "spearman_fp_accuracy": rank_correlation(fps, accs) if len(rows) > 2 else None,
        "mean_accuracy_legal": statistics.mean(legal_acc) if legal_acc else None,
        "mean_accuracy_illegal": statistics.mean(illegal_acc) if illegal_acc else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--budget", type=int, default=16)
    parser.add_argument("--strategy", default="random")
    parser.add_argument("--tau", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train", type=int, default=3, help="legal and illegal networks each")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--seeds", type=int, default=2, help="training seeds per network")
    parser.add_argument("--out", type=Path, default=Path("bench_results/nas"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    print(
        f"Part 1: NAS search, resnet18_cifar width {args.width}, {args.samples} samples, "
        f"{args.budget} trials per shape ({args.strategy})",
        flush=True,
    )
    summary, result = search(args, args.out)
    print("Part 2: Fisher Potential against trained accuracy", flush=True)
    summary.update(proxy(args, result, args.out))
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    print("\nResults")
    for key, value in summary.items():
        print(f"  {key}: {value:.4g}" if isinstance(value, float) else f"  {key}: {value}")
    speedup = summary["speedup_fastest_legal"]
    verdict = "met" if speedup is not None and speedup >= 3 else "not met"
    shown = "n/a" if speedup is None else f"{speedup:.2f}"
    print(f"\nTarget: fastest legal / original latency >= 3 (the paper): {shown}, {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
