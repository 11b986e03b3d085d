"""A device server: ``python -m explorer.fleet._server --tracker HOST:PORT --key KEY``.

TVM's own RPC server (``tvm.rpc.server``, the one ``python -m tvm.exec.rpc_server`` runs), with
three additions a fleet needs:

* a thread count and, optionally, the cores it may use (``--threads 1 --cores 0``), set in the
  process before TVM's thread pool exists; each session runs in a forked child that inherits
  both, so "a 1-thread server pinned to one core" is a real, separate device;
* it keeps serving after a session's process crashes (TVM's own server stops then);
* a global function ``explorer.fleet.keep_off_worker_cores`` that binds the session's thread
  (it launches the kernels and runs their first share itself) off the cores of TVM's worker
  threads, as local measurements do (``explorer.measure.keep_off_worker_cores`` says why);
* a global function ``explorer.fleet.device_info`` that sessions can call: the device's key,
  address, pid, CPU model, TVM version and the ``Target`` it measures for (``--mcpu`` names
  the CPU that kernels for it are compiled for, e.g. ``x86-64-v3`` for an AVX2-only device,
  whose vector width is then that CPU's; ``--cuda`` makes it a GPU device: its target is the
  GPU's). It is registered before the server forks its sessions, so every session sees it.

The server serves one session at a time, as TVM's does; start several for parallel work.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import tempfile
import threading
from dataclasses import replace


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m explorer.fleet._server")
    parser.add_argument("--tracker", required=True, help="HOST:PORT of the tracker")
    parser.add_argument("--key", required=True)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=9090)
    parser.add_argument("--port-end", type=int, default=9199)
    parser.add_argument("--threads", type=int, default=0, help="TVM threads (0: every core)")
    parser.add_argument("--cores", default="", help="comma-separated CPU ids to pin to")
    parser.add_argument("--mcpu", default="", help="LLVM CPU name kernels are compiled for")
    parser.add_argument(
        "--cuda", action="store_true", help="measure on this machine's GPU (CUDA device 0)"
    )
    return parser.parse_args(argv)


def _own_temp_folder() -> None:
    """Each session keeps the kernels it is sent in a folder of TVM's that the session removes
    as it exits: one killed with its server (`fleet down` mid-session, a server killed
    outright) left its folder in the system's temp folder. The sessions' folders go into the
    server's own, named after it, which `fleet down` (or the next server started here) removes
    once the server is gone."""
    from explorer._process import owned_temp_dir
    from explorer.fleet._local import WORK_PREFIX

    work = owned_temp_dir(WORK_PREFIX)
    tempfile.tempdir = work  # forked sessions inherit it
    os.environ["TMPDIR"] = work  # and anything started afresh reads it


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    # Before TVM starts: TVM's thread pool reads the variable once, and the affinity is
    # inherited by every session the server forks.
    if args.cores:
        os.sched_setaffinity(0, {int(c) for c in args.cores.split(",")})
    threads = args.threads or len(os.sched_getaffinity(0))
    os.environ["TVM_NUM_THREADS"] = str(threads)
    os.environ["OMP_NUM_THREADS"] = str(threads)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # `fleet down` stops it, not a terminal's Ctrl-C
    _own_temp_folder()

    from explorer import _tvm
    from explorer.core import DEVICE_INFO_FUNC, PIN_LAUNCHER_FUNC, TrackerAddress
    from explorer.errors import TargetError
    from explorer.measure import keep_off_worker_cores
    from explorer.target import MCPU_VECTOR_BITS, Target, cpu_model

    tracker = TrackerAddress.parse(args.tracker)
    target = Target.local_cpu(num_cores=threads)
    if args.cuda:
        try:
            target = Target.cuda()
        except TargetError as exc:  # no GPU here: one sentence, not a traceback
            print(f"error: --cuda: {exc}", file=sys.stderr)
            return 2
        _tvm.ensure_cuda_jit()  # its sessions load CUDA modules: TVM compiles their source
    elif args.mcpu:  # code for an older CPU uses its narrower registers too
        bits = min(target.vector_bits, MCPU_VECTOR_BITS.get(args.mcpu, target.vector_bits))
        name = f"{args.mcpu}, {threads} thread(s)"
        target = replace(target, mcpu=args.mcpu, vector_bits=bits, name=name)
    info: dict[str, object] = {
        "key": args.key,
        "host": args.host,
        "pid": os.getpid(),
        "hostname": socket.gethostname(),
        "cpu_model": cpu_model(),
        "tvm_version": _tvm.TVM_VERSION,
        "threads": threads,
        "cores": sorted(os.sched_getaffinity(0)),
        "target": target.to_json(),
    }

    def device_info() -> str:
        return json.dumps(info)

    def keep_launcher_off_workers() -> str:
        cores = keep_off_worker_cores()  # the calling thread: the session's, which runs kernels
        return ",".join(map(str, sorted(cores))) if cores else ""

    # Registered before the server starts forking sessions, so that every session has them.
    _tvm.tvm_ffi.register_global_func(DEVICE_INFO_FUNC, device_info, override=True)
    _tvm.tvm_ffi.register_global_func(PIN_LAUNCHER_FUNC, keep_launcher_off_workers, override=True)
    state = _tvm.rpc.server.PopenRPCServerState(
        args.host,
        args.port,
        args.port_end,
        tracker_addr=(tracker.host, tracker.port),
        key=args.key,
        silent=True,
    )
    info["port"] = state.port
    # The fleet reads the port from here: the first line of the server's stdout.
    print(json.dumps({"port": state.port, "pid": os.getpid()}), flush=True)
    home = os.getcwd()
    while True:
        state.thread.join()
        # TVM's listen loop raises, and its thread ends, when a session's process exits
        # abnormally: one kernel that crashes would take the device off the fleet for good
        # (seen: a SIGSEGV kernel, retried on the next device, stopped the whole fleet). The
        # device itself is fine, so it serves again on the same socket, from where it began.
        os.chdir(home)
        state.thread = threading.Thread(
            target=_tvm.rpc.server._listen_loop,
            args=(state.sock, state.port, args.key, (tracker.host, tracker.port), None, None),
        )
        state.thread.start()


if __name__ == "__main__":
    sys.exit(main())
