"""The instruction mix of generated code (issue 25), against kernels counted by hand: a
vectorised add, and an FMA loop with and without unrolling, compiled for a CPU with AVX-512 and
for one with AVX2 (compiling needs neither: nothing here runs the code)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from explorer import _tvm
from explorer.code import code_mix, compare_mixes, generated_code, hot_loop_diff
from explorer.measure import Candidate
from explorer.session import ScheduleSession
from explorer.target import Target
from explorer.workloads import get_workload

N = 4096
LANES = {"skylake-avx512": 16, "haswell": 8}


def compiled(mcpu: str, *, fma: bool, unroll: int | None = None) -> str:
    """``C = A * B + D`` (or ``A + B``) over N floats, vectorised by the CPU's lanes, the
    vector loop optionally unrolled ``unroll`` times by the schedule."""
    te, lanes = _tvm.te, LANES[mcpu]
    a, b, d = (te.placeholder((N,), name=n) for n in "ABD")
    if fma:
        c = te.compute((N,), lambda i: a[i] * b[i] + d[i], name="C")
        func = te.create_prim_func([a, b, d, c])
    else:
        c = te.compute((N,), lambda i: a[i] + b[i], name="C")
        func = te.create_prim_func([a, b, c])
    sch = _tvm.Schedule(_tvm.tvm.IRModule({"main": func}))
    (i,) = sch.get_loops(sch.get_sblock("C"))
    if unroll:
        _, u, v = sch.split(i, [None, unroll, lanes])
        sch.unroll(u)
    else:
        _, v = sch.split(i, [None, lanes])
    sch.vectorize(v)
    target = dataclasses.replace(Target.local_cpu(), mcpu=mcpu, name="")
    return _tvm.compile_mod(sch.mod, target.to_tvm()).mod.inspect_source("asm")


@pytest.mark.parametrize("mcpu", sorted(LANES))
def test_a_vectorised_add_reads_two_vectors_and_writes_one_per_add(mcpu) -> None:
    lanes, register = LANES[mcpu], {16: "zmm", 8: "ymm"}[LANES[mcpu]]
    mix = code_mix(compiled(mcpu, fma=False))
    hot = mix.hot
    assert hot is not None and mix.hot_function == "main_compute_"
    adds = hot.vector_arith  # however many times LLVM unrolled the loop
    assert adds >= 1 and hot.fma == 0 and hot.scalar_arith == 0
    assert hot.loads == 2 * adds and hot.stores == adds and hot.branches == 1
    assert hot.flops == lanes * adds and hot.loaded_bytes == 2 * 4 * lanes * adds
    assert hot.intensity == pytest.approx(1 / 8)  # one add per 8 bytes read, at any width
    # per add: a load, the add (reading the other input from memory) and the store
    assert getattr(hot, register) == 3 * adds and hot.vector_bits == 32 * lanes
    assert hot.spills == 0 and hot.broadcasts == 0
    assert len(mix.hot_code) == hot.instructions
    assert sum("vaddps" in line for line in mix.hot_code) == adds


def test_an_fma_loop_unrolled_by_the_schedule_holds_that_many_fmas() -> None:
    rolled = code_mix(compiled("skylake-avx512", fma=True)).hot
    unrolled = code_mix(compiled("skylake-avx512", fma=True, unroll=8)).hot
    assert rolled is not None and unrolled is not None
    # per FMA: three vector loads (one of them the FMA's memory operand) and one store
    for hot in (rolled, unrolled):
        assert hot.loads == 3 * hot.fma and hot.stores == hot.fma
        assert hot.flops == 2 * 16 * hot.fma and hot.intensity == pytest.approx(32 / 192)
        assert hot.zmm == 4 * hot.fma and hot.branches == 1 and hot.spills == 0
    # counted by hand in the listing: 8 x (2 loads, 1 FMA, 1 store) + add, compare, jump
    assert (unrolled.fma, unrolled.instructions) == (8, 35)
    assert rolled.fma in (1, 2, 4)  # LLVM's own unrolling of the plain loop
    # what changed, in one sentence and as a diff of the two hot loops
    before = code_mix(compiled("skylake-avx512", fma=True))
    after = code_mix(compiled("skylake-avx512", fma=True, unroll=8))
    r = rolled.fma
    assert compare_mixes(before, after) == (
        f"The hot loop now issues 8 zmm FMAs per 24 loads instead of {r} zmm FMA"
        f"{'s' if r != 1 else ''} per {3 * r} loads."
    )
    diff = hot_loop_diff(before, after)
    assert diff[:2] == ["--- before", "+++ after"]
    assert sum(line.startswith("+vfmadd") for line in diff) == 8 - r


def test_the_code_of_a_candidate_is_its_measured_build() -> None:
    w = get_workload("matmul", M=64, N=64, K=64)
    target = Target.local_cpu()
    candidate = Candidate(w, target, _tvm.trace_to_json(_tvm.Schedule(w.mod()).trace))
    code = generated_code(candidate)
    assert code.error is None and code.asm and code.llvm_ir
    assert "main_compute_" in code.asm and "define" in code.llvm_ir
    mix = code_mix(code.asm)
    assert mix.hot is not None and mix.hot.flops > 0
    assert mix.total.instructions > mix.hot.instructions
    broken = Candidate(w, target, [[], ["nonsense"]])
    failed = generated_code(broken)
    assert failed.asm is None and failed.error


def explorer(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "explorer", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_explorer_show_prints_the_mix_and_the_hot_loop_of_a_saved_schedule(tmp_path) -> None:
    w = get_workload("matmul", M=64, N=64, K=64)
    session = ScheduleSession(w, Target.local_cpu())
    session.apply("split", loop="j", factors=[None, 16])
    session.apply("reorder", loops=["i", "k", "j_0", "j_1"])
    session.apply("vectorize", loop="j_1")
    path = tmp_path / "vectorized.json"
    session.save(path)
    shape = ["matmul", "-p", "M=64", "-p", "N=64", "-p", "K=64"]
    plain = explorer("show", *shape, "--mix")
    vector = explorer("show", *shape, "--mix", "--trace", str(path))
    assert plain.returncode == 0 and vector.returncode == 0, plain.stderr + vector.stderr

    def row(out: str, label: str) -> list[str]:
        line = next(x for x in out.splitlines() if x.startswith(label))
        return line[len(label) :].split()

    assert row(plain.stdout, "vector FMA")[0] == "0"  # unscheduled: scalar FMAs only
    assert int(row(plain.stdout, "scalar arithmetic")[0]) > 0
    assert int(row(vector.stdout, "vector FMA")[0]) > 0
    assert "hot loop (main_compute_, one pass):" in vector.stdout
    # The loop nest above the code is the schedule's (it was the unscheduled one's).
    assert "  C: i(64) > j(64) > k(64)" in plain.stdout
    assert (
        f"loop nest (the schedule in {path}):\n  C: i(64) > k(64) > j_0(4) > j_1(16, vectorized)"
        in vector.stdout
    )
    asm = explorer("show", *shape, "--asm", "--trace", str(path))
    assert (
        asm.returncode == 0 and "main_compute_:" in asm.stdout and "instruction mix" in asm.stdout
    )
    versus = explorer("show", *shape, "--mix", "--trace", str(path), "--vs", str(path))
    assert versus.returncode == 0, versus.stderr
    assert "(the hot loops' code is the same)" in versus.stdout
    assert f"against {path}: The hot loop is the same: " in versus.stdout
    # A --vs file that cannot be read is refused before anything is printed.
    missing = explorer("show", *shape, "--mix", "--vs", str(tmp_path / "missing.json"))
    assert missing.returncode == 2 and missing.stdout == "", missing.stdout
    usage = explorer("show", *shape, "--trace", str(path))
    assert usage.returncode == 2
    assert usage.stderr.strip() == "error: --trace only applies with --asm, --ir or --mix"
