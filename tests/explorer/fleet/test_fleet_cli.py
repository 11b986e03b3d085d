"""`explorer fleet up|status|down` and `--tracker` on tune and measure, as a user runs them."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time

import psutil
import pytest

from explorer import cli
from explorer.testing.ports import free_port


def explorer(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "explorer", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def test_up_status_tune_measure_down(tmp_path) -> None:
    port = free_port()
    state = tmp_path / "fleet.json"
    db = tmp_path / "records.db"
    env = {**os.environ, "EXPLORER_FLEET_STATE": str(state), "EXPLORER_DB": str(db)}
    env["SCHEDULE_EXPLORER_PEAK_CACHE"] = str(tmp_path / "peak.json")
    up = explorer("fleet", "up", "--servers", "1", "--threads", "1", "--port", str(port), env=env)
    assert up.returncode == 0, up.stderr
    try:
        assert f"tracker 127.0.0.1:{port}: 1 device server" in up.stdout
        more = ("fleet", "up", "--servers", "1", "--key", "avx2", "--threads", "1")
        up2 = explorer(*more, "--mcpu", "x86-64-v3", env=env)
        assert up2.returncode == 0, up2.stderr
        assert "note:" not in up2.stdout  # 2 one-thread servers on 2 cores do not compete
        pids = [p["identity"]["pid"] for p in json.loads(state.read_text())["processes"]]
        assert len(pids) == 3  # one tracker, two servers

        status = explorer("fleet", "status", env=env)
        assert status.returncode == 0, status.stderr
        assert "key avx2: 1 device" in status.stdout and "key local: 1 device" in status.stdout
        assert "code for x86-64-v3" in status.stdout

        shape = ("matmul", "--param", "M=64", "--param", "N=64", "--param", "K=64")
        fleet = ("--tracker", f"127.0.0.1:{port}")
        measured = explorer("measure", *shape, *fleet, "--key", "avx2", env=env)
        assert measured.returncode == 0, measured.stderr
        assert "on avx2@127.0.0.1:" in measured.stdout and "matches NumPy" in measured.stdout

        peak = explorer("peak", *fleet, "--key", "avx2", env=env)
        assert peak.returncode == 0, peak.stderr
        assert f"key avx2's devices at 127.0.0.1:{port}" in peak.stdout
        assert "llvm:x86-64-v3:1): fp32 peak" in peak.stdout and "on 1 thread" in peak.stdout

        tuned = explorer("tune", *shape, *fleet, "--trials", "6", "--batch", "3", "-q", env=env)
        assert tuned.returncode == 0, tuned.stderr
        # the first run on key local measures its devices' peak once, for the run's record
        assert "measuring the peak of key local's devices once" in tuned.stderr
        with sqlite3.connect(db) as conn:
            rows = conn.execute("SELECT environment_json FROM runs ORDER BY id").fetchall()
            targets = {t for (t,) in conn.execute("SELECT DISTINCT target_key FROM runs")}
            trials = conn.execute("SELECT count(*) FROM trials WHERE is_remeasure = 0").fetchone()
            devices = dict(conn.execute("SELECT device, count(*) FROM trials GROUP BY device"))
        # the devices' own targets: the AVX2 one and the 1-thread one, not this machine's
        assert any(t.startswith("llvm:x86-64-v3:1") for t in targets), targets
        assert trials[0] >= 6 + 1  # every trial of the search, and the manual measurement
        # every run says where it measured, with its devices' peak (measured by then)
        measure_env, tune_env = (json.loads(e) for (e,) in rows)
        assert measure_env["measured_on"] == f"fleet 127.0.0.1:{port}, key avx2"
        assert tune_env["measured_on"] == f"fleet 127.0.0.1:{port}, key local"
        assert measure_env["peak"]["target_key"] == "llvm:x86-64-v3:1"
        assert measure_env["device"]["target"]["vector_bits"] == 256  # AVX2 registers
        local_device = tune_env["device"]["target"]
        assert tune_env["peak"]["target_key"] == f"llvm:{local_device['mcpu']}:1"
        # every record says which device measured it
        assert None not in devices and all(d.split("@")[0] in ("local", "avx2") for d in devices)
    finally:
        down = explorer("fleet", "down", env=env)
    assert down.returncode == 0, down.stderr
    assert "stopped 3 processes" in down.stdout
    assert not [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
    assert not state.exists()
    again = explorer("fleet", "status", env=env)
    assert again.returncode == 1 and "no fleet is running" in again.stdout


def test_misuse_is_one_sentence(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("EXPLORER_FLEET_STATE", str(tmp_path / "fleet.json"))

    def refused(*args: str, message: str, code: int = 2) -> None:
        assert cli.main(list(args)) == code
        out, err = capsys.readouterr()
        assert out == "" and len(err.strip().splitlines()) == 1 and message in err, err

    refused("fleet", "up", "--host", "0.0.0.0", message="no authentication")
    assert not (tmp_path / "fleet.json").exists()
    for command in (("measure", "matmul"), ("peak",)):
        refused(*command, "--key", "local", message="--key needs --tracker")
    # a blank key is refused, not silently 'local'
    refused("peak", "--tracker", "127.0.0.1:9", "--key", "", message="device key")
    refused("peak", "--tracker", "127.0.0.1:9", "--threads", "1", message="the threads its server")
    refused("measure", "matmul", "--tracker", "nowhere", message="HOST:PORT")
    nobody = "no tracker answers at 127.0.0.1:9"
    refused("measure", "matmul", "--tracker", "127.0.0.1:9", message=nobody, code=3)
    # and as a real process: its exit code and its one line on stderr
    env = {**os.environ, "EXPLORER_FLEET_STATE": str(tmp_path / "fleet.json")}
    wide = explorer("fleet", "up", "--host", "0.0.0.0", env=env)
    assert wide.returncode == 2 and "no authentication" in wide.stderr
    assert len(wide.stderr.strip().splitlines()) == 1


# -- a fleet's processes are never forgotten (issue 21) -----------------------------------------
def _fleet_env(tmp_path) -> dict[str, str]:
    return {**os.environ, "EXPLORER_FLEET_STATE": str(tmp_path / "fleet.json")}


def _recorded_pids(tmp_path) -> list[int]:
    data = json.loads((tmp_path / "fleet.json").read_text())
    return [p["identity"]["pid"] for p in data["processes"]]


def _running(pid: int) -> bool:
    return psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE


def test_a_fleet_whose_tracker_died_gets_it_back_on_its_port_and_down_stops_everything(
    tmp_path,
) -> None:
    port = free_port()
    env = _fleet_env(tmp_path)
    up = explorer("fleet", "up", "--servers", "1", "--threads", "1", "--port", str(port), env=env)
    assert up.returncode == 0, up.stderr
    first = _recorded_pids(tmp_path)
    try:
        tracker = json.loads((tmp_path / "fleet.json").read_text())["processes"][0]
        assert tracker["role"] == "tracker"
        os.killpg(os.getpgid(tracker["identity"]["pid"]), signal.SIGKILL)
        psutil.Process(tracker["identity"]["pid"]).wait(30)

        # Seen: "no fleet is running here" while its server ran.
        status = explorer("fleet", "status", env=env)
        assert status.returncode == 1
        assert f"tracker at 127.0.0.1:{port} has stopped; 1 device server of it still run" in (
            status.stdout
        )
        # Seen: a second tracker on another port, the first server forgotten (down left it).
        again = explorer("fleet", "up", "--servers", "1", "--threads", "1", env=env)
        assert again.returncode == 0, again.stderr
        assert "had stopped while 1 device server still ran; starting it again there" in (
            again.stdout
        )
        assert f"tracker 127.0.0.1:{port}: 2 device servers" in again.stdout  # its own port
        status = explorer("fleet", "status", env=env)
        assert status.returncode == 0 and "key local: 2 devices" in status.stdout, status.stdout
        assert all(pid in _recorded_pids(tmp_path) for pid in first[1:])  # the first server
    finally:
        down = explorer("fleet", "down", env=env)
    assert down.returncode == 0 and "stopped 3 processes" in down.stdout, down.stdout
    assert not [pid for pid in first + _pids_in_logs(tmp_path) if _running(pid)]


def _pids_in_logs(tmp_path) -> list[int]:
    """Every server's pid, also of those started after the state file was read last."""
    return [p.pid for p in psutil.process_iter() if _is_our_server(p, tmp_path)]


def _is_our_server(proc: psutil.Process, tmp_path) -> bool:
    try:
        return "explorer.fleet._server" in " ".join(proc.cmdline()) and str(tmp_path) in (
            proc.environ().get("EXPLORER_FLEET_STATE", "")
        )
    except psutil.Error:
        return False


def _time_wait(port: int) -> None:
    """Leave 127.0.0.1:``port`` in TIME_WAIT, as a tracker that just stopped does (TVM's
    tracker listens with SO_REUSEADDR, which its connections' TIME_WAIT entries keep)."""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(1)
        client = socket.create_connection(("127.0.0.1", port))
        conn, _ = listener.accept()
        conn.close()  # the side that closes first keeps the port in TIME_WAIT
        client.close()
    with socket.socket() as plain, pytest.raises(OSError):
        plain.bind(("127.0.0.1", port))  # without SO_REUSEADDR, the port looks taken


def test_up_takes_the_port_asked_for_even_in_time_wait_and_refuses_a_taken_one(tmp_path) -> None:
    port, other, taken_port = free_port(), free_port(), free_port()
    env = _fleet_env(tmp_path)
    _time_wait(port)
    up = explorer("fleet", "up", "--servers", "1", "--threads", "1", "--port", str(port), env=env)
    try:
        assert up.returncode == 0, up.stderr
        assert f"tracker 127.0.0.1:{port}: 1 device server" in up.stdout  # not port + 1
        elsewhere = explorer("fleet", "up", "--servers", "1", "--port", str(other), env=env)
        assert elsewhere.returncode == 2
        assert (
            f"a fleet already runs here with its tracker at 127.0.0.1:{port}" in elsewhere.stderr
        )
    finally:
        down = explorer("fleet", "down", env=env)
    assert down.returncode == 0 and "stopped 2 processes" in down.stdout
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", taken_port))
        taken.listen(1)
        busy = explorer("fleet", "up", "--servers", "1", "--port", str(taken_port), env=env)
    assert busy.returncode == 3, busy.stderr
    assert f"port {taken_port} on 127.0.0.1 is in use by another program" in busy.stderr
    assert not (tmp_path / "fleet.json").exists()  # nothing was started, nothing recorded


def test_what_an_interrupted_up_started_is_stopped_by_down(tmp_path) -> None:
    """`fleet up` killed while its server still starts: that server and the tracker were
    already recorded, so `down` stops them (recorded only at the end, they ran on, unknown)."""
    port = free_port()
    env = _fleet_env(tmp_path)
    state = tmp_path / "fleet.json"
    up = subprocess.Popen(
        [sys.executable, "-m", "explorer", "fleet", "up", "--servers", "1", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not state.exists() or len(_recorded_pids(tmp_path)) < 2:
            assert up.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        up.kill()
        up.wait(timeout=30)
        pids = _recorded_pids(tmp_path)
    finally:
        down = explorer("fleet", "down", env=env)
    assert down.returncode == 0 and "stopped 2 processes" in down.stdout, down.stdout
    assert not [pid for pid in pids + _pids_in_logs(tmp_path) if _running(pid)]
