"""The ``CostModel`` contract, checked on the shipped recording of real measurements."""

from __future__ import annotations

import math
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from explorer.cost_models import CostModel, record_latency, spearman
from explorer.measure import MeasureResult
from explorer.storage import TrialRecord
from explorer.testing import recordings
from explorer.types import MeasureStatus

NUM_TRAIN = 160
"""Records of the 64^3 matmul recording a model learns from; the rest are held out."""


class CostModelContract:
    """What strategies and dashboards rely on from every cost model.

    Subclasses implement ``make_model(seed)`` (a fresh, untrained model; models without a seed
    ignore it) and may lower ``min_spearman``, the rank correlation with measured speed a model
    must reach on held-out schedules after ``update`` on the training records.
    """

    min_spearman: ClassVar[float] = 0.2

    def make_model(self, seed: int) -> CostModel:
        raise NotImplementedError("subclasses return a fresh, untrained model")

    @pytest.fixture(scope="class")
    @classmethod
    def records(cls, tmp_path_factory: pytest.TempPathFactory) -> list[TrialRecord]:
        store = recordings.open_recording(tmp_path_factory.mktemp("recording"))
        return recordings.recorded_trials(store, recordings.SMALL)

    @pytest.fixture(scope="class")
    @classmethod
    def train(cls, records: list[TrialRecord]) -> list[TrialRecord]:
        return records[:NUM_TRAIN]

    @pytest.fixture(scope="class")
    @classmethod
    def held_out(cls, records: list[TrialRecord]) -> list[TrialRecord]:
        return records[NUM_TRAIN:]

    def test_predict_gives_one_finite_float64_per_candidate(
        self, train: list[TrialRecord], held_out: list[TrialRecord]
    ) -> None:
        model = self.make_model(0)
        cands = [r.candidate for r in held_out]
        for _ in range(2):  # untrained, then trained
            scores = model.predict(cands)
            assert isinstance(scores, np.ndarray) and scores.dtype == np.float64
            assert scores.shape == (len(cands),) and np.isfinite(scores).all()
            assert model.predict([]).shape == (0,)
            model.update(train)

    def test_update_with_nothing_changes_nothing(self, held_out: list[TrialRecord]) -> None:
        model = self.make_model(0)
        cands = [r.candidate for r in held_out[:16]]
        before = model.predict(cands)
        model.update([])
        np.testing.assert_array_equal(model.predict(cands), before)

    def test_failed_trials_are_data(self, train: list[TrialRecord]) -> None:
        """Failures (no latency) may teach a model that a schedule is slow, never break it."""
        model = self.make_model(0)
        failed = [
            TrialRecord(
                r.id, r.run_id, r.seq, r.candidate,
                MeasureResult(MeasureStatus.RUN_ERROR, error_msg="crashed"), {}, 0.0,
            )
            for r in train[:8]
        ]  # fmt: skip
        model.update(failed)
        model.update(failed + list(train[8:24]))
        scores = model.predict([r.candidate for r in train[:24]])
        assert scores.shape == (24,) and np.isfinite(scores).all()

    def test_higher_means_faster_on_held_out_schedules(
        self, train: list[TrialRecord], held_out: list[TrialRecord]
    ) -> None:
        model = self.make_model(0)
        model.update(train)
        scores = model.predict([r.candidate for r in held_out])
        latencies = [record_latency(r) for r in held_out]
        assert all(math.isfinite(x) for x in latencies)
        rho = spearman(scores, latencies)
        assert rho >= self.min_spearman, f"Spearman {rho:.3f} < {self.min_spearman}"

    @pytest.mark.parametrize("trained", [False, True], ids=["untrained", "trained"])
    def test_save_then_load_gives_identical_predictions(
        self,
        trained: bool,
        train: list[TrialRecord],
        held_out: list[TrialRecord],
        tmp_path: Path,
    ) -> None:
        model = self.make_model(3)
        if trained:
            model.update(train)
        path = str(tmp_path / "model")
        model.save(path)
        fresh = self.make_model(3)
        fresh.load(path)
        cands = [r.candidate for r in held_out[:24]]
        np.testing.assert_array_equal(fresh.predict(cands), model.predict(cands))

    def test_a_seed_reproduces_training_and_predictions(
        self, train: list[TrialRecord], held_out: list[TrialRecord]
    ) -> None:
        a, b = self.make_model(5), self.make_model(5)
        cands = [r.candidate for r in held_out[:24]]
        np.testing.assert_array_equal(a.predict(cands), a.predict(cands))  # stable
        a.update(train)
        b.update(train)
        np.testing.assert_array_equal(a.predict(cands), b.predict(cands))
