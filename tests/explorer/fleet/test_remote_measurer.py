"""RemoteMeasurer on a real fleet: the measurer contract, devices named, faults as data."""

from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from explorer import _tvm
from explorer.core._tracker import NoDevice
from explorer.fleet import (
    LocalFleet,
    ServerSpec,
    default_servers,
    start_fleet,
    stop_fleet,
    tracker_summary,
    wait_for_devices,
)
from explorer.fleet._local import WORK_PREFIX
from explorer.machine import CACHE_ENV, measure_peak
from explorer.measure import Candidate, MeasureConfig, RemoteMeasurer
from explorer.measure._batch import CUT_MIN_CALL_SECS
from explorer.measure._remote import NoSuchKey, TargetNotReported
from explorer.search import make_strategy
from explorer.session import ScheduleSession
from explorer.storage import RunStatus, get_store
from explorer.target import KNOWN_MCPUS, VECTOR_SETS, Target, cuda_available
from explorer.testing import hooks
from explorer.testing.contracts import MeasurerContract
from explorer.testing.ports import free_port
from explorer.tuner import Tuner
from explorer.types import MeasureStatus
from explorer.workloads import Workload, get_workload

RUN_TIMEOUT = 4.0
FAST = MeasureConfig(
    repeat=3,
    min_repeat_secs=0.002,
    run_timeout_secs=RUN_TIMEOUT,
    # About statuses and devices, not timing quality (the servers share 2 cores with the test).
    max_spread=math.inf,
)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalFleet]:
    """Two 1-thread servers under key ``local``, each pinned to its own core."""
    state = tmp_path_factory.mktemp("fleet") / "fleet.json"
    running = start_fleet(default_servers(2, threads=1), state=state, port=free_port())
    try:
        yield running
    finally:
        stop_fleet(state)
    assert not [p for p in running.processes if p.is_alive()], "fleet down left processes"


def unscheduled(workload: Workload, target: Target) -> Candidate:
    return Candidate(workload, target, _tvm.trace_to_json(_tvm.Schedule(workload.mod()).trace))


@pytest.fixture(scope="module")
def target(fleet: LocalFleet) -> Target:
    with RemoteMeasurer(fleet.tracker, "local") as m:
        return m.device_target()


class TestRemote(MeasurerContract):
    @pytest.fixture(autouse=True)
    def _fleet(self, fleet: LocalFleet) -> None:
        self.tracker = fleet.tracker

    def make_measurer(self) -> RemoteMeasurer:
        return RemoteMeasurer(self.tracker, "local", FAST)


def test_a_key_without_devices_is_refused_at_once_naming_the_keys(fleet: LocalFleet) -> None:
    # it once waited the queue's 120 s in silence (a typo in --key)
    start = time.monotonic()
    with RemoteMeasurer(fleet.tracker, "locla") as m, pytest.raises(NoSuchKey) as err:
        m.device_target()
    assert time.monotonic() - start < 10
    assert str(err.value) == (
        f"no device is registered under key 'locla' at the tracker {fleet.tracker} "
        "(keys with devices: local)"
    )


def test_the_device_reports_its_target(target: Target) -> None:
    # 1-thread servers: the target says so, and its key differs from the whole machine's
    assert target.kind == "llvm" and target.num_cores == 1
    assert target.key() == Target.local_cpu(num_cores=1).key()


def test_a_batch_is_spread_over_the_devices_and_each_result_names_its_device(
    fleet: LocalFleet, target: Target
) -> None:
    mm = get_workload("matmul", M=64, N=64, K=64)
    with RemoteMeasurer(fleet.tracker, "local", FAST) as m:
        results = m.measure([unscheduled(mm, target)] * 6)
    assert [r.status for r in results] == [MeasureStatus.OK] * 6
    devices = {r.device for r in results}
    assert devices <= {s.device for s in tracker_summary(fleet.tracker).servers}
    assert len(devices) == 2, "two free devices: both took part"
    assert all(r.num_threads == 1 for r in results)


def test_a_wrong_result_a_crash_and_a_hang_are_results_and_the_fleet_survives(
    fleet: LocalFleet, target: Target
) -> None:
    mm = get_workload("matmul", M=64, N=64, K=64)
    with hooks.registered():
        wrong, crash, hang = (
            unscheduled(hooks.hook_workload(kind), target) for kind in ("wrong", "crash", "hang")
        )
        with RemoteMeasurer(fleet.tracker, "local", FAST, max_retries=1) as m:
            start = time.monotonic()
            r_wrong, r_crash, r_hang, r_ok = m.measure(
                [wrong, crash, hang, unscheduled(mm, target)]
            )
            took = time.monotonic() - start
    assert r_wrong.status is MeasureStatus.WRONG_RESULT and r_wrong.device
    # a crash ends the device's session like a vanished device: tried again, then RUN_ERROR
    assert r_crash.status is MeasureStatus.RUN_ERROR
    assert "could run it in 2 tries" in r_crash.error_msg
    # a hang is ended by the device at the session's limit, not retried
    assert r_hang.status is MeasureStatus.TIMEOUT, r_hang.error_msg
    assert "RPCSessionTimeoutError" in r_hang.error_msg and r_hang.device
    assert r_ok.status is MeasureStatus.OK
    assert took < 3 * (2 * RUN_TIMEOUT + 10 + 10)
    # both devices still serve: a server whose session crashed registers again with the
    # tracker when it resumes listening, which takes seconds on a loaded machine (seen under
    # `make test`'s two workers: checked at once, one of the two was not back yet)
    assert len(wait_for_devices(fleet.tracker, "local", 2, timeout=30).servers) == 2


def sent_kernels() -> set[Path]:
    """The kernels TVM's device sessions keep in temp folders of the system's (the measurer
    names each by 32 hex digits)."""
    return {
        f for f in Path(tempfile.gettempdir()).glob("tmp*/*.so")
        if re.fullmatch(r"[0-9a-f]{32}\.so", f.name)
    }  # fmt: skip


def test_a_server_killed_mid_batch_loses_nothing(tmp_path) -> None:
    # TVM's sessions keep the kernels they are sent in a temp folder that only a session which
    # exits normally removes: the victim's session left its folder in the system's, once for
    # every run of this test. A server's sessions use a folder of the server's own, removed
    # by `fleet down` once the server is gone.
    before = sent_kernels()
    state = tmp_path / "fleet.json"
    fleet = start_fleet(
        [ServerSpec("kill", 1, (0,)), ServerSpec("kill", 1, (1,))], state=state, port=free_port()
    )
    try:
        with RemoteMeasurer(fleet.tracker, "kill") as m:
            target = m.device_target()
        # each kernel is timed for >= 1.5 s, so the kill lands while both devices are busy
        slow = MeasureConfig(repeat=3, min_repeat_secs=0.5, max_spread=float("inf"))
        mm = get_workload("matmul", M=128, N=128, K=128)
        cands = [unscheduled(mm, target)] * 3
        results: list = []
        with RemoteMeasurer(fleet.tracker, "kill", slow) as m:
            worker = threading.Thread(target=lambda: results.extend(m.measure(cands)))
            worker.start()
            deadline = time.monotonic() + 120
            while tracker_summary(fleet.tracker).queues["kill"].free > 0:
                assert time.monotonic() < deadline, "the devices never both got busy"
                time.sleep(0.05)
            victim = fleet.servers[0]
            os.killpg(os.getpgid(victim.identity.pid), signal.SIGKILL)
            worker.join(timeout=300)
        assert [r.status for r in results] == [MeasureStatus.OK] * 3, [
            r.error_msg for r in results
        ]
        # The kernel the victim was timing when killed was timed again on the survivor, beside
        # the survivor's own. On a loaded machine the survivor's session can open seconds after
        # the victim's, which may then finish one kernel before both are busy (seen in CI).
        survivor = f"kill@127.0.0.1:{fleet.servers[1].port}"
        by = [r.device for r in results]
        killed = f"kill@127.0.0.1:{victim.port}"
        assert by.count(survivor) >= 2 and set(by) <= {survivor, killed}, by
    finally:
        stop_fleet(state)
    left = sent_kernels() - before
    assert not left, sorted(map(str, left))
    assert not list(Path(tempfile.gettempdir()).glob(f"{WORK_PREFIX}*-{victim.identity.pid}-*"))


def test_a_key_whose_devices_all_went_away_is_said_within_seconds(tmp_path) -> None:
    """Seen: requests queued at the tracker for a key without devices, silently, for minutes
    (each until the queue timeout), then the candidates stored as failures. The queue timeout
    here is far beyond the test's own: only noticing that the key has no device ends it."""
    state = tmp_path / "fleet.json"
    fleet = start_fleet([ServerSpec("gone", 1, (0,))], state=state, port=free_port())
    try:
        with RemoteMeasurer(fleet.tracker, "gone") as m:
            target = m.device_target()
        # each kernel is timed for >= 1.5 s: the kill lands while two requests wait in the queue
        slow = MeasureConfig(repeat=3, min_repeat_secs=0.5, max_spread=float("inf"))
        mm = get_workload("matmul", M=128, N=128, K=128)
        errors: list[BaseException] = []

        def measure() -> None:
            try:
                m.measure([unscheduled(mm, target)] * 3)
            except BaseException as exc:  # noqa: BLE001  (checked below)
                errors.append(exc)

        with RemoteMeasurer(fleet.tracker, "gone", slow, parallel=3, queue_timeout_secs=3600) as m:
            worker = threading.Thread(target=measure)
            worker.start()
            deadline = time.monotonic() + 120
            while tracker_summary(fleet.tracker).queues["gone"].pending < 2:
                assert time.monotonic() < deadline, "the requests never queued"
                time.sleep(0.05)
            os.killpg(os.getpgid(fleet.servers[0].identity.pid), signal.SIGKILL)
            worker.join(timeout=300)
        assert not worker.is_alive()
        (error,) = errors
        assert isinstance(error, NoDevice), error
        assert "the devices of key 'gone' went away" in str(error)
        assert f"none is registered at the tracker {fleet.tracker} any more" in str(error)
    finally:
        stop_fleet(state)


def test_a_run_whose_devices_went_away_is_failed_never_finished(tmp_path) -> None:
    """Seen: `explorer runs` said `finished` while the end-of-run re-timing waited for devices
    that were gone."""
    state = tmp_path / "fleet.json"
    fleet = start_fleet([ServerSpec("left", 1, (0,))], state=state, port=free_port())
    store = get_store(tmp_path / "records.db")
    try:
        with RemoteMeasurer(fleet.tracker, "left", FAST) as m:
            target = m.device_target()
            tuner = Tuner(measurer=m, store=store, batch_size=2)

            def kill_the_fleet(progress) -> None:  # after the last batch, before the re-timing
                os.killpg(os.getpgid(fleet.servers[0].identity.pid), signal.SIGKILL)

            mm = get_workload("matmul", M=64, N=64, K=64)
            with pytest.raises(NoDevice, match="the devices of key 'left' went away"):
                tuner.run(mm, target, "random", max_trials=2, on_progress=kill_the_fleet)
        run = store.get_run(tuner.run_id)
        assert run.status is RunStatus.FAILED
        assert len([t for t in store.trials(run_id=run.id) if not t.is_remeasure]) == 2  # kept
    finally:
        store.close()
        stop_fleet(state)


def test_misuse_is_one_sentence() -> None:
    with pytest.raises(ValueError, match="HOST:PORT"):
        RemoteMeasurer("localhost", "local")
    with pytest.raises(ValueError, match="device key"):
        RemoteMeasurer("127.0.0.1:9190", " ")
    with pytest.raises(ValueError, match="max_retries"):
        RemoteMeasurer("127.0.0.1:9190", "local", max_retries=-1)


def test_a_tracker_restarted_mid_batch_loses_nothing(tmp_path) -> None:
    state = tmp_path / "fleet.json"
    fleet = start_fleet([ServerSpec("again", 1, (0,))], state=state, port=free_port())
    tracker = next(p for p in fleet.processes if p.role == "tracker")
    replacement = None
    try:
        with RemoteMeasurer(fleet.tracker, "again") as m:
            target = m.device_target()
        mm = get_workload("matmul", M=64, N=64, K=64)
        os.killpg(os.getpgid(tracker.identity.pid), signal.SIGKILL)
        results: list = []
        with RemoteMeasurer(fleet.tracker, "again", FAST) as m:
            worker = threading.Thread(
                target=lambda: results.extend(m.measure([unscheduled(mm, target)] * 2))
            )
            worker.start()
            deadline = time.monotonic() + 120
            while m.num_retried < 2:  # both candidates' first tries found no tracker
                assert time.monotonic() < deadline and worker.is_alive(), results
                time.sleep(0.05)
            replacement = subprocess.Popen(
                [sys.executable, "-m", "tvm.exec.rpc_tracker", "--host", "127.0.0.1"]
                + ["--port", str(fleet.tracker.port), "--port-end", str(fleet.tracker.port + 1)],
                start_new_session=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            worker.join(timeout=300)
        assert [r.status for r in results] == [MeasureStatus.OK] * 2, [
            r.error_msg for r in results
        ]
        assert m.num_retried >= 2
    finally:
        if replacement is not None:
            os.killpg(replacement.pid, signal.SIGKILL)
            replacement.wait()
        stop_fleet(state)


def test_a_plain_tvm_rpc_server_works_and_the_cli_says_which_target_it_assumed(
    fleet: LocalFleet, tmp_path
) -> None:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "tvm.exec.rpc_server", "--tracker", str(fleet.tracker)]
        + [
            "--key",
            "plain",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--port-end",
            str(port + 20),
        ],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_devices(fleet.tracker, "plain", 1)
        with RemoteMeasurer(fleet.tracker, "plain", FAST) as m:
            with pytest.raises(TargetNotReported, match="plain TVM rpc_server"):
                m.device_target()
            mm = get_workload("matmul", M=64, N=64, K=64)
            (result,) = m.measure([unscheduled(mm, Target.local_cpu())])
        assert result.status is MeasureStatus.OK and result.device.startswith("plain@")
        cli = subprocess.run(
            [sys.executable, "-m", "explorer", "measure", "matmul", "-p", "M=32", "-p", "N=32"]
            + ["-p", "K=32", "--tracker", str(fleet.tracker), "--key", "plain"]
            + ["--db", str(tmp_path / "r.db")],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert cli.returncode == 0, cli.stderr
        assert "assuming this machine's CPU" in cli.stderr and "on plain@" in cli.stdout
        peak = subprocess.run(
            [sys.executable, "-m", "explorer", "peak", "--tracker", str(fleet.tracker)]
            + ["--key", "plain"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        # one sentence, not a note assuming this CPU followed by an error
        assert peak.returncode == 2 and len(peak.stderr.strip().splitlines()) == 1
        assert "cannot be measured from the command line" in peak.stderr
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def test_a_devices_peak_is_measured_there_kept_and_recorded_with_each_run(
    fleet: LocalFleet, target: Target, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "peak.json"))
    with RemoteMeasurer(fleet.tracker, "local", FAST) as m:
        assert m.cached_device_peak() is None
        before_tune = m.run_environment(target)
        peak = m.device_peak()
        assert m.cached_device_peak() == peak and m.device_peak() == peak  # kept: not again
        store = get_store(str(tmp_path / "records.db"))
        mm = get_workload("matmul", M=64, N=64, K=64)
        run = (
            Tuner(measurer=m, store=store, batch_size=2)
            .run(mm, target, make_strategy("random"), max_trials=2, seed=0)
            .run
        )
    # measured on a device: its one thread, its target; what else ran there is not known
    assert peak.num_threads == 1 and peak.target_key == target.key()
    assert peak.busy_elsewhere is None and not peak.was_busy
    # the same core type measured here on one thread gives the same peak (the device is one
    # pinned core of this machine): the remote kernels measure what the local ones do
    here = measure_peak(Target.local_cpu(num_cores=1))
    assert 0.7 < peak.gflops_f32 / here.gflops_f32 < 1.4, (peak, here)
    # every run through the fleet records where it measured and that device's peak
    environment = store.get_run(run.id).environment
    assert environment["measured_on"] == f"fleet {fleet.tracker}, key local"
    assert environment["device"]["target"] == target.to_json()
    assert environment["device"]["cpu_model"] == peak.cpu_model
    assert environment["peak"] == peak.to_json()
    assert before_tune["peak"] is None and before_tune["device"]["threads"] == 1


@pytest.mark.skipif(cuda_available(), reason="a GPU is here: the device would run the kernel")
def test_a_cuda_kernel_is_built_here_and_a_device_without_a_gpu_says_so(fleet: LocalFleet) -> None:
    gpu = Target(kind="cuda", arch="sm_80")
    session = ScheduleSession(get_workload("matmul", M=64, N=64, K=64), gpu)
    session.apply("split", loop="i", factors=[None, 16])
    session.apply("bind", loop="i_0", thread_axis="blockIdx.x")
    session.apply("bind", loop="i_1", thread_axis="threadIdx.x")
    with RemoteMeasurer(fleet.tracker, "local", FAST, max_retries=1) as m:
        (result,) = m.measure([session.candidate()])
    # compiled for CUDA here, then refused by the device (not retried: its key has no GPU)
    assert result.status is MeasureStatus.RUN_ERROR and result.build_secs
    assert result.error_msg.startswith("the device has no CUDA device 0"), result.error_msg
    assert result.device in {s.device for s in tracker_summary(fleet.tracker).servers}
    # and a server asked to be a GPU device on a machine without one refuses in one sentence
    server = subprocess.run(
        [sys.executable, "-m", "explorer.fleet._server", "--tracker", str(fleet.tracker)]
        + ["--key", "gpu", "--cuda"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert server.returncode == 2
    assert server.stderr.strip() == "error: --cuda: no CUDA device 0 on this machine"


def test_a_kernel_for_a_cpu_with_vector_sets_the_devices_lack_is_built_and_not_run(
    fleet: LocalFleet, target: Target
) -> None:
    """A candidate built for a CPU with AVX-512, sent to devices without it, died there of an
    illegal instruction and came back after its retries as ``run_error ... kShutdown``. Its
    target is now checked against the devices' before it is sent: built (a schedule that does
    not compile says so), then refused in one sentence, nothing retried."""
    foreign = [
        replace(target, mcpu=m, name="") for m in KNOWN_MCPUS
        if replace(target, mcpu=m, name="").missing_on(target)
    ]  # fmt: skip
    if not foreign:  # the devices' CPU has every set compared: any known CPU's kernels run
        assert set(VECTOR_SETS) <= _tvm.llvm_cpu_features(str(target.mcpu))
        return
    other = foreign[0]
    missing = ", ".join(other.missing_on(target))
    with RemoteMeasurer(fleet.tracker, "local", FAST, max_retries=2) as m:
        (result,) = m.measure([unscheduled(get_workload("matmul", M=16, N=16, K=16), other)])
        assert m.num_retried == 0
    assert result.status is MeasureStatus.INVALID and result.build_secs
    assert result.error_msg.startswith(
        f"the devices of key 'local' ({target}) lack {missing}, which kernels built for "
        f"{other.mcpu} may use"
    ), result.error_msg
    # and the devices' own target runs there
    with RemoteMeasurer(fleet.tracker, "local", FAST) as m:
        (ok,) = m.measure([unscheduled(get_workload("matmul", M=16, N=16, K=16), target)])
    assert ok.is_ok, ok.error_msg


def test_a_network_task_split_from_its_weight_copy_runs_on_a_device(
    fleet: LocalFleet, target: Target
) -> None:
    """A packed schedule of a network's convolution is built as the network runs it: the
    weights' copy apart from the kernel (``split_weight_copies``). The device copies the
    weights once, then checks and times the kernel; given the ONNX file's weights, the kernel
    would refuse them (a run error)."""
    from explorer.model import NETWORKS, lower_onnx, model_tasks, parse_onnx
    from explorer.space import DesignSpace

    onnx_file = parse_onnx(NETWORKS["tiny"]().SerializeToString(), "tiny.onnx")
    found = model_tasks(lower_onnx(onnx_file, "tiny.onnx"), target, "tiny.onnx")
    conv = next(w for name, _, w in found if name == "fused_conv2d1_add_add1_relu")
    space = DesignSpace.of(conv, target)
    rng = np.random.default_rng(0)
    samples = [space.sample(rng) for _ in range(12)]
    packed = [s.candidate for s in samples if s.sketch >= space.num_metaschedule_sketches][:2]
    assert packed, "no packed point in 12 draws"
    with RemoteMeasurer(fleet.tracker, "local", FAST) as m:
        results = m.measure(packed)
    assert [r.status for r in results] == [MeasureStatus.OK] * len(packed), results


def test_a_reference_and_a_hopeless_kernel_are_cut_short_on_a_device_too(
    fleet: LocalFleet, target: Target
) -> None:
    """The device's runner honours the bar the measurer sends: a run's baseline timed as a
    reference (``reference=True``) gets 2 repeats from 0.1 s a call, a kernel hopeless
    against the caller's best gets 2, and the same program alone gets every repeat."""
    slow = unscheduled(get_workload("matmul", M=512, N=512, K=512), target)
    config = MeasureConfig(repeat=5, max_spread=math.inf, run_timeout_secs=20)
    with RemoteMeasurer(fleet.tracker, "local", config) as m:
        (plain,) = m.measure([slow])
        (reference,) = m.measure([slow], reference=True)
        (hopeless,) = m.measure([slow], best_secs=0.001)
    for result in (plain, reference, hopeless):
        assert result.is_ok, result.error_msg
    assert min(plain.run_secs) >= CUT_MIN_CALL_SECS, "no longer slow enough to be cut"
    assert len(plain.run_secs) == 5
    # 2 repeats, or the check's call alone should a call take a second (a busy machine)
    assert len(reference.run_secs) in (1, 2) and len(hopeless.run_secs) in (1, 2)
