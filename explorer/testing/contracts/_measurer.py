"""The ``Measurer`` contract: one result per candidate, in order; failures are results."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from explorer.measure import Candidate, Measurer, MeasureResult
from explorer.target import Target
from explorer.testing import recordings
from explorer.types import MeasureStatus


class MeasurerContract:
    """Subclasses implement ``make_measurer()``; it must measure the shipped recording's
    ``reduce_sum`` candidates (a real measurer, or a replay of that recording)."""

    runs_kernels: bool = True
    """A measurer that runs the kernels measures the recorded schedules built for this machine.
    The recording was made on another CPU (a Zen 5, AVX-512): its target's kernels may hold
    instructions this CPU lacks (on an AMD EPYC without AVX-512, the fleet's 1-thread devices
    died of SIGILL running them). A replay keeps the recorded target: it only looks them up."""

    def make_measurer(self) -> Measurer:
        raise NotImplementedError("subclasses return a fresh measurer")

    @pytest.fixture(scope="class")
    @classmethod
    def candidates(cls, tmp_path_factory: pytest.TempPathFactory) -> list[Candidate]:
        store = recordings.open_recording(tmp_path_factory.mktemp("recording"))
        recorded = [t.candidate for t in recordings.recorded_trials(store, recordings.TINY)[:4]]
        if not cls.runs_kernels:
            return recorded
        here = Target.local_cpu()
        return [dataclasses.replace(c, target=here) for c in recorded]

    @pytest.fixture
    def measurer(self) -> Iterator[Measurer]:
        with self.make_measurer() as m:
            yield m

    def test_one_result_per_candidate_in_order(
        self, measurer: Measurer, candidates: list[Candidate]
    ) -> None:
        assert measurer.measure([]) == []
        broken = Candidate(candidates[0].workload, candidates[0].target, [[], ["nonsense"]])
        batch = [candidates[0], broken, candidates[1]]
        results = measurer.measure(batch)
        assert len(results) == 3 and all(isinstance(r, MeasureResult) for r in results)
        assert results[0].is_ok and results[2].is_ok
        assert all(s > 0 for s in results[0].run_secs)
        assert not results[1].is_ok and results[1].error_msg, "a broken trace is a result"

    def test_results_round_trip_through_json(
        self, measurer: Measurer, candidates: list[Candidate]
    ) -> None:
        for result in measurer.measure(candidates):
            assert MeasureResult.from_json(result.to_json()) == result

    def test_remeasure_answers_every_candidate(
        self, measurer: Measurer, candidates: list[Candidate]
    ) -> None:
        first = measurer.measure(candidates[:2])
        again = measurer.remeasure(candidates[:2], rounds=2, previous=first)
        assert [r.status for r in again] == [MeasureStatus.OK, MeasureStatus.OK]

    def test_measure_paired_times_every_candidate_in_the_first_round(
        self, measurer: Measurer, candidates: list[Candidate]
    ) -> None:
        broken = Candidate(candidates[0].workload, candidates[0].target, [[], ["nonsense"]])
        per = measurer.measure_paired([candidates[0], broken, candidates[1]], rounds=2)
        assert len(per) == 3 and all(1 <= len(rounds) <= 2 for rounds in per)
        assert per[0][0].is_ok and per[2][0].is_ok  # round 1 times every candidate
        assert per[1] == per[1][:1] and not per[1][0].is_ok  # a failure ends its rounds
        with pytest.raises(ValueError, match="at least 1"):
            measurer.measure_paired(candidates[:1], rounds=0)

    def test_misuse_raises_and_close_is_idempotent(self, candidates: list[Candidate]) -> None:
        measurer = self.make_measurer()
        with pytest.raises(TypeError):
            measurer.measure(["not a candidate"])  # type: ignore[list-item]  # misuse on purpose: it must be refused
        measurer.close()
        measurer.close()
