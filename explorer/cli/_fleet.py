"""``explorer fleet up|down|status``, and ``--tracker HOST:PORT --key KEY`` on measure and tune.

``fleet up`` starts a TVM RPC tracker on this machine (unless the recorded one still runs) and
device servers, each in its own process group; run it again with another ``--key`` to add
devices of another kind to the same tracker. ``fleet down`` stops them all; ``fleet status``
shows devices by key, free devices and waiting requests (of this machine's fleet, or of any
tracker given with ``--tracker``).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from typing import Any

from explorer.cli._args import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    non_negative_int,
    port_number,
    positive_int,
)
from explorer.text import plural


def add_tracker_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--tracker",
        default=None,
        metavar="HOST:PORT",
        help="measure on the devices of this TVM RPC tracker (`explorer fleet up` starts one)",
    )
    p.add_argument("--key", default=None, help="the device key on the tracker (default: local)")


def measurer_for(args: argparse.Namespace, config: Any = None) -> Any:
    """A ``RemoteMeasurer`` when ``--tracker`` is given, else a ``LocalMeasurer``."""
    from explorer.measure import LocalMeasurer, MeasureConfig, RemoteMeasurer

    if args.tracker is None:
        if args.key is not None:
            raise UsageError("--key needs --tracker HOST:PORT")
        return LocalMeasurer(config)
    if args.target != "cpu":
        raise UsageError(
            "--target cuda with --tracker: the target is the one the devices report (a GPU "
            "device, `python -m explorer.fleet._server --cuda`, reports its CUDA target); "
            "leave --target out"
        )
    if args.threads is not None:  # applied on the device, for each session
        config = replace(config or MeasureConfig(), num_threads=args.threads)
    try:
        return RemoteMeasurer(args.tracker, "local" if args.key is None else args.key, config)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def fleet_target(args: argparse.Namespace, measurer: Any, *, peak: bool = True) -> Any:
    """The target of ``--tracker``'s devices (as they report it), ``--threads`` applied; a
    plain TVM ``rpc_server`` reports none, and this machine's CPU is assumed (and said).
    With ``peak``, the devices' peak is measured when it is not kept yet, for the run's record.
    """
    from explorer.measure import TargetNotReported
    from explorer.target import Target

    try:
        target = measurer.device_target()
    except TargetNotReported as exc:
        target = Target.local_cpu()
        print(f"note: {exc}; assuming this machine's CPU, {target.key()}", file=sys.stderr)
    else:
        if peak:
            _ensure_peak(measurer)
    if args.threads is not None:
        target = replace(target, num_cores=args.threads)
    return target


def _ensure_peak(measurer: Any) -> None:
    """Measure the devices' peak once (kept on this machine), so that every run through the
    fleet records it; a fleet that cannot measure it still tunes (the run says why not)."""
    from explorer.errors import ExplorerError

    if measurer.cached_device_peak() is not None:
        return
    print(
        f"measuring the peak of key {measurer.key}'s devices once (kept for the next runs)...",
        file=sys.stderr,
        flush=True,
    )
    try:
        peak = measurer.device_peak()
    except ExplorerError as exc:
        print(f"note: the devices' peak is not known: {exc}", file=sys.stderr)
    else:
        print(
            f"key {measurer.key}: fp32 peak {peak.gflops_f32:.1f} GFLOPS, memory "
            f"{peak.bandwidth_gbs:.1f} GB/s",
            file=sys.stderr,
        )


# -- explorer fleet ---------------------------------------------------------------------------
def cmd_fleet_up(args: argparse.Namespace) -> int:
    from explorer.fleet import DEFAULT_PORT, ServerSpec, default_servers, read_fleet, start_fleet
    from explorer.target import available_cores

    if args.cores and args.servers != 1:
        raise UsageError("--cores pins one server; use it with --servers 1")
    try:
        if args.cores:
            cores = tuple(int(c) for c in args.cores.split(","))
            specs = [ServerSpec(args.key, args.threads, cores, args.mcpu or "")]
        else:
            specs = default_servers(args.servers, key=args.key, threads=args.threads)
            if args.mcpu:
                specs = [ServerSpec(s.key, s.threads, s.cores, args.mcpu) for s in specs]
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    before = read_fleet(args.state)
    if before is not None and not before.has_tracker:
        print(
            f"the fleet's tracker at {before.tracker} had stopped while "
            f"{plural(len(before.servers), 'device server')} still ran; starting it again there "
            "(they register with it again)"
        )
    try:
        fleet = start_fleet(
            specs, host=args.host, port=args.port, allow_remote=args.allow_remote, state=args.state
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if before is None and args.port is None and fleet.tracker.port != DEFAULT_PORT:
        print(f"note: port {DEFAULT_PORT} is in use; the tracker listens on {fleet.tracker.port}")
    if args.allow_remote:
        print(
            f"warning: the fleet listens on {args.host}; anyone who reaches it can run code "
            "on this machine (TVM RPC has no authentication)"
        )
    print(f"tracker {fleet.tracker}: {plural(len(fleet.servers), 'device server')}")
    for p in fleet.servers:
        assert p.spec is not None
        print(f"  {_describe(p.spec)} on port {p.port} (pid {p.identity.pid})")
    print(f"measure on it with: --tracker {fleet.tracker} --key {args.key}")
    threads = sum(p.spec.threads or available_cores() for p in fleet.servers if p.spec)
    if threads > available_cores():
        print(
            f"note: the servers have {threads} threads in all on {available_cores()} cores: "
            "kernels timed at the same time on two of them compete for the cores (fine for "
            "trying things out, not for numbers to publish)"
        )
    return EXIT_OK


def cmd_fleet_down(args: argparse.Namespace) -> int:
    from explorer.fleet import state_path, stop_fleet

    stopped = stop_fleet(args.state)
    if stopped:
        print(f"stopped {stopped} process{'es' * (stopped != 1)} and their process groups")
    else:
        print(f"no fleet is running (none recorded in {state_path(args.state)})")
    return EXIT_OK


def cmd_fleet_status(args: argparse.Namespace) -> int:
    from explorer.fleet import TrackerAddress, read_fleet, tracker_summary

    fleet = None
    if args.tracker is not None:
        try:
            address = TrackerAddress.parse(args.tracker)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    else:
        fleet = read_fleet(args.state)
        if fleet is None:
            print("no fleet is running here (`explorer fleet up` starts one)")
            return EXIT_FAILED
        if not fleet.has_tracker:
            print(
                f"the fleet's tracker at {fleet.tracker} has stopped; "
                f"{plural(len(fleet.servers), 'device server')} of it still run (pids "
                f"{', '.join(str(p.identity.pid) for p in fleet.servers)}): `explorer fleet up` "
                "starts the tracker again, `explorer fleet down` stops them"
            )
            return EXIT_FAILED
        address = fleet.tracker
    summary = tracker_summary(address)
    print(f"tracker {address}: {plural(len(summary.servers), 'device server')}")
    local = {p.port: p for p in fleet.servers} if fleet is not None else {}
    for key in summary.keys():
        queue = summary.queues.get(key)
        servers = [s for s in summary.servers if s.key == key]
        free = f"{queue.free} free, {queue.pending} waiting" if queue else "no queue yet"
        print(f"  key {key}: {plural(len(servers), 'device')}, {free}")
        for s in servers:
            spec = local[s.port].spec if s.port in local else None
            print(f"    {s.device}" + (f"  {_describe(spec)}" if spec else ""))
    if fleet is not None:
        missing = [p for p in fleet.servers if p.port not in {s.port for s in summary.servers}]
        for p in missing:
            print(f"  not registered: server on port {p.port} (pid {p.identity.pid})")
    return EXIT_OK


def _describe(spec: Any) -> str:
    threads = f"{spec.threads} thread(s)" if spec.threads else "all cores"
    cores = f" pinned to cores {','.join(map(str, spec.cores))}" if spec.cores else ""
    mcpu = f", code for {spec.mcpu}" if spec.mcpu else ""
    return f"{spec.key}: {threads}{cores}{mcpu}"


def add_fleet_parser(sub: Any) -> None:
    from explorer.fleet import DEFAULT_PORT

    fleet = sub.add_parser("fleet", help="a TVM RPC tracker and device servers on this machine")
    fsub = fleet.add_subparsers(metavar="ACTION")
    state_help = "the fleet's state file (default: $EXPLORER_FLEET_STATE or ~/.cache/explorer)"

    p = fsub.add_parser("up", help="start a tracker (if none runs) and device servers")
    p.add_argument("--servers", type=positive_int, default=2, help="how many (default 2)")
    p.add_argument("--key", default="local", help="their device key (default: local)")
    p.add_argument(
        "--threads", type=non_negative_int, default=0, help="threads each (default: all cores)"
    )
    p.add_argument("--cores", default="", help="pin the one server to these CPU ids, e.g. 0")
    p.add_argument("--mcpu", default="", help="compile their kernels for this LLVM CPU name")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    p.add_argument(
        "--port",
        type=port_number,
        default=None,
        help=f"the tracker's port (default: the first free one from {DEFAULT_PORT})",
    )
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow --host other than loopback (TVM RPC has no authentication)",
    )
    p.add_argument("--state", default=None, help=state_help)
    p.set_defaults(func=cmd_fleet_up)

    p = fsub.add_parser("down", help="stop the tracker and servers `fleet up` started")
    p.add_argument("--state", default=None, help=state_help)
    p.set_defaults(func=cmd_fleet_down)

    p = fsub.add_parser("status", help="devices by key, free devices and waiting requests")
    p.add_argument("--tracker", default=None, metavar="HOST:PORT", help="any tracker")
    p.add_argument("--state", default=None, help=state_help)
    p.set_defaults(func=cmd_fleet_status)

    def no_action(_: argparse.Namespace) -> int:
        raise UsageError("fleet needs an action: up, down or status")

    fleet.set_defaults(func=no_action)
