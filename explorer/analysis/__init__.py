"""Pure analyses of stored trials for plots: records in, frozen ``*Info`` dataclasses out.

Nothing here imports a plotting or notebook package; ``explorer.plots`` turns each info into a
figure (Optuna's ``_get_xxx_info`` / ``_get_xxx_plot`` split). Infos are in display units
(``latency_ms``, GFLOPS) and already reduced for drawing: best-so-far curves keep only their
improvement points, scatters at most ``max_points`` per series, so a dashboard over 100k trials
ships a few thousand numbers, not 100k.

* ``convergence_info``: best-so-far vs trials and vs seconds, per run, with median and spread
  per strategy.
* ``strategy_comparison_info``: each run's best at an equal budget, per strategy.
* ``predicted_vs_measured_info``: each cost model's predictions against the measurements, with
  Spearman and Kendall rank correlations.
* ``knob_effects_info``: knob values against latency, and each knob's importance.
* ``transfer_info``: each target's best schedule measured on every target (a fleet's
  "transfer" view: what tuning for the wrong target costs).
* ``model_times_info``, ``model_race_info``: an imported model's tasks before and after
  tuning (what still dominates), and its races against ONNX Runtime by trials spent.
* ``race_info``: a race of strategies on a recording (``explorer.replay``), per strategy: the
  median best over seeds and the trials needed to reach 90% of the recording's best.
* ``nas_front_info``: a NAS search's networks (latency, Fisher Potential ratio, MACs,
  parameters, legality, the front) and the layer a click on each opens in the editor.

``TrialTable`` holds trials as columns, so a dashboard can keep 100k of them and extend them batch
by batch; it is built from ``RecordStore.trial_rows`` (no trace decoded), and every per-trial
analysis accepts records, rows or a table.

A *re-measurement* is a trial whose trace already appeared earlier in the same run (the
``Tuner`` re-times its best candidates at the end of a run). The analyses keep re-measurements
off the trials axis and out of trial budgets and counts, and report how many there were
(``num_remeasured``): a search with ``max_trials=8`` shows 8 trials, plus its re-measurements.
"""

from __future__ import annotations

from explorer.analysis._convergence import (
    METRIC_LABELS,
    ComparisonGroup,
    ConvergenceGroup,
    ConvergenceInfo,
    Metric,
    RunCurve,
    RunSeries,
    Spread,
    StrategyComparisonInfo,
    convergence_info,
    run_curve,
    run_curves,
    shown_strategy,
    strategy_comparison_info,
)
from explorer.analysis._knob_effects import (
    KnobEffect,
    KnobEffectsInfo,
    knob_effects_info,
    omega_squared,
)
from explorer.analysis._model import (
    ModelRaceInfo,
    ModelTimesInfo,
    RacePoint,
    TaskTimeInfo,
    model_race_info,
    model_times_info,
)
from explorer.analysis._nas import (
    LayerFocus,
    NasFrontInfo,
    NasPointInfo,
    format_count,
    format_ms,
    layer_focus,
    nas_front_info,
    plan_summary,
)
from explorer.analysis._predicted_vs_measured import (
    MIN_POINTS,
    ModelPredictions,
    PredictedVsMeasuredInfo,
    predicted_vs_measured_info,
)
from explorer.analysis._race import REACH, RaceInfo, RaceRow, race_info, trials_to_reach
from explorer.analysis._table import STATUSES, Decision, TrialTable
from explorer.analysis._transfer import TransferCell, TransferInfo, transfer_info

__all__ = [
    "shown_strategy",
    "REACH",
    "RaceInfo",
    "RaceRow",
    "race_info",
    "trials_to_reach",
    "ModelRaceInfo",
    "ModelTimesInfo",
    "RacePoint",
    "TaskTimeInfo",
    "model_race_info",
    "model_times_info",
    "METRIC_LABELS",
    "MIN_POINTS",
    "STATUSES",
    "ComparisonGroup",
    "ConvergenceGroup",
    "ConvergenceInfo",
    "Decision",
    "KnobEffect",
    "KnobEffectsInfo",
    "LayerFocus",
    "Metric",
    "ModelPredictions",
    "NasFrontInfo",
    "NasPointInfo",
    "PredictedVsMeasuredInfo",
    "RunCurve",
    "RunSeries",
    "Spread",
    "StrategyComparisonInfo",
    "TransferCell",
    "TransferInfo",
    "TrialTable",
    "convergence_info",
    "format_count",
    "format_ms",
    "knob_effects_info",
    "layer_focus",
    "nas_front_info",
    "omega_squared",
    "plan_summary",
    "predicted_vs_measured_info",
    "run_curve",
    "run_curves",
    "strategy_comparison_info",
    "transfer_info",
]
