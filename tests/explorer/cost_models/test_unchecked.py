"""Inconclusive timings teach no cost model anything, neither as successes nor as failures:
unchecked ones (MetaSchedule's, never compared with NumPy). A noisy reading is no longer one of
them: a correct kernel timed on a busy machine is OK (issue 21)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from explorer.cost_models import evaluate, make_cost_model
from explorer.cost_models._value import samples_from_records
from explorer.types import MeasureStatus

INCONCLUSIVE = [MeasureStatus.UNCHECKED]


def _inconclusive(record, status=MeasureStatus.UNCHECKED):
    result = dataclasses.replace(record.result, status=status, error_msg=f"{status.value}")
    return dataclasses.replace(record, result=result)


@pytest.mark.parametrize("status", INCONCLUSIVE)
@pytest.mark.parametrize("name", ["xgb-rank", "xgb-reg", "metaschedule-xgb", "value"])
def test_inconclusive_records_change_no_prediction(name, status, measured, candidates):
    checked, others = measured[:14], [_inconclusive(r, status) for r in measured[14:]]
    plain, mixed = make_cost_model(name, seed=0), make_cost_model(name, seed=0)
    plain.update(checked)
    mixed.update(others[:5] + checked + others[5:])
    np.testing.assert_array_equal(plain.predict(candidates), mixed.predict(candidates))


@pytest.mark.parametrize("status", INCONCLUSIVE)
def test_value_samples_leave_inconclusive_records_out(status, measured):
    assert samples_from_records([_inconclusive(r, status) for r in measured]) == []
    assert len(samples_from_records(measured)) > 0


def test_an_unchecked_test_record_is_not_scored_as_a_failure(measured):
    unchecked = [_inconclusive(r) for r in measured[14:17]]
    acc = evaluate(make_cost_model("xgb-reg", seed=0), measured[:14], measured[17:] + unchecked)
    assert acc.num_test == len(measured[17:])
