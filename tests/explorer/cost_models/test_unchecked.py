"""Unchecked timings (MetaSchedule's, never compared with NumPy) teach no cost model anything:
neither as successes nor as failures."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from explorer.cost_models import make_cost_model
from explorer.cost_models._value import samples_from_records
from explorer.types import MeasureStatus


def _unchecked(record):
    result = dataclasses.replace(
        record.result, status=MeasureStatus.UNCHECKED, error_msg="timed by MetaSchedule"
    )
    return dataclasses.replace(record, result=result)


@pytest.mark.parametrize("name", ["xgb-rank", "xgb-reg", "metaschedule-xgb", "value"])
def test_unchecked_records_change_no_prediction(name, measured, candidates):
    checked, others = measured[:14], [_unchecked(r) for r in measured[14:]]
    plain, mixed = make_cost_model(name, seed=0), make_cost_model(name, seed=0)
    plain.update(checked)
    mixed.update(others[:5] + checked + others[5:])
    np.testing.assert_array_equal(plain.predict(candidates), mixed.predict(candidates))


def test_value_samples_leave_unchecked_records_out(measured):
    assert samples_from_records([_unchecked(r) for r in measured]) == []
    assert len(samples_from_records(measured)) > 0
