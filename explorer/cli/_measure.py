"""`explorer measure` (one schedule) and `explorer peak` (the machine's or a device's peak)."""

from __future__ import annotations

import argparse
from pathlib import Path

from explorer.cli._args import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    file_name,
    only_with,
    positive_int,
    repeat_count,
)
from explorer.cli._common import (
    REFIT_HELP,
    add_common,
    add_workload_args,
    empty_trace,
    read_trace,
    target_of,
    workload_of,
)
from explorer.cli._fleet import add_tracker_args, fleet_target, measurer_for
from explorer.text import format_secs, plural


def cmd_measure(args: argparse.Namespace) -> int:
    from explorer.measure import Candidate, MeasureConfig  # no TVM import yet

    only_with(args, "--refit", "--trace")
    with measurer_for(args, MeasureConfig(repeat=args.repeat)) as measurer:
        # Workers first: they import TVM while this process does the same (storage, workload).
        measurer.start_workers(num_candidates=1, num_threads=args.threads)
        from explorer.storage import MANUAL, NewTrial, environment, get_store

        workload = workload_of(args)
        target = target_of(args) if args.tracker is None else fleet_target(args, measurer)
        trace = (
            read_trace(Path(args.trace), workload, target, refit=args.refit)
            if args.trace
            else empty_trace(workload)
        )
        candidate = Candidate(workload, target, trace)
        store = get_store(args.db)  # a database that cannot be used is found before measuring
        (result,) = measurer.measure([candidate])
        where = {**environment(), **measurer.run_environment(target)}
    run = store.create_run(
        workload, target, MANUAL, settings={"trace_file": args.trace}, environment=where
    )
    try:
        store.add_trials(run.id, [NewTrial(candidate, result)])
    finally:  # a manual run is never left running, even when storing failed
        store.finish_run(run.id)
    if result.is_ok:
        gflops = f", {result.gflops:.2f} GFLOPS" if result.gflops is not None else ""
        device = f" on {result.device}" if result.device else ""
        flushed = f" ({result.cache_flush.phrase})" if result.cache_flush.phrase else ""
        print(
            f"ok: median {format_secs(result.median_secs)} over "
            f"{plural(len(result.run_secs), 'repeat')}{flushed}{gflops}, "
            f"{plural(result.num_threads or 1, 'thread')}{device}; matches "
            f"{workload.spec.reference_name}"
        )
        if result.is_noisy:  # information, not a failure: the kernel is correct and stored
            print(f"note: {result.noise_note}")
        return EXIT_OK
    print(f"{result.status.value}: {result.error_msg}")
    return EXIT_FAILED


def cmd_peak(args: argparse.Namespace) -> int:
    import datetime

    from explorer.machine import cache_path, cached_peak, measured_peak

    if args.tracker is not None:
        if args.threads is not None:
            raise UsageError(
                "--threads with --tracker: a device's peak is measured with the threads its "
                "server runs (`explorer fleet up --threads`)"
            )
        from explorer.measure import TargetNotReported

        with measurer_for(args) as measurer:
            try:
                target = measurer.device_target()
            except TargetNotReported as exc:
                raise UsageError(
                    f"{exc}: its peak cannot be measured from the command line (in Python: "
                    "explorer.machine.measured_peak(target, device=FleetDevice(tracker, key, "
                    "cpu_model)))"
                ) from None
            where = f"key {measurer.key}'s devices at {measurer.tracker}, "
            if args.remeasure or measurer.cached_device_peak() is None:
                print(f"measuring {where}{target.key()} (a few seconds)...", flush=True)
            peak = measurer.device_peak(remeasure=args.remeasure)
    else:
        if args.key is not None:
            raise UsageError("--key needs --tracker HOST:PORT")
        target, where = target_of(args), ""
        if args.remeasure or cached_peak(target) is None:
            print(f"measuring {target.key()} (a few seconds)...", flush=True)
        peak = measured_peak(target, remeasure=args.remeasure)
    when = datetime.datetime.fromtimestamp(peak.measured_at).strftime("%Y-%m-%d %H:%M")
    print(
        f"{where}{peak.cpu_model} ({target.key()}): fp32 peak {peak.gflops_f32:.1f} GFLOPS, "
        f"memory bandwidth {peak.bandwidth_gbs:.1f} GB/s\n"
        f"measured {when} on {plural(peak.num_threads, 'thread')} with TVM {peak.tvm_version}; "
        f"kept in {cache_path()} (--remeasure measures again)"
    )
    if peak.was_busy:
        print(
            f"warning: other processes used {peak.busy_elsewhere:.0%} of the CPUs meanwhile; "
            "the numbers may be low: --remeasure when the machine is quiet"
        )
    return EXIT_OK


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("measure", help="build, run, check and time one schedule")
    add_workload_args(p)
    add_common(p)
    p.add_argument(
        "--trace", type=file_name, help="JSON trace or saved session (default: unscheduled)"
    )
    p.add_argument("--refit", action="store_true", help=REFIT_HELP)
    p.add_argument(
        "--repeat", type=repeat_count, default=5, help="timed repeats (default 5, at most 100)"
    )
    add_tracker_args(p)
    p.set_defaults(func=cmd_measure)

    p = sub.add_parser(
        "peak",
        help="this CPU's, or a fleet key's devices', measured fp32 peak and memory bandwidth",
    )
    p.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help="cores to measure on, at most the cores available (default: all of them)",
    )
    p.add_argument(
        "--remeasure", action="store_true", help="measure again, replacing the kept one"
    )
    add_tracker_args(p)  # a fleet device's peak, measured there
    p.set_defaults(func=cmd_peak, target="cpu")
