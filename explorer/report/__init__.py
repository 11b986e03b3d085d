"""A shareable HTML report of runs: the dashboards' plots, the best schedules' TVMScript and
traces, and the runs' settings, in one self-contained file that opens without Python, offline.

``write_report(store, "report.html", run_ids=[3, 4])`` writes one (``explorer report`` and the
dashboards' "Save report" button call it); ``collect_report`` gathers what it shows as plain
data (no plotting package), ``render_report`` turns that into the HTML text. plotly is needed
to render, and imported only then.

Example:
    >>> from explorer.report import write_report
    >>> write_report(store, "report.html", latest=3).path  # doctest: +SKIP
    PosixPath('report.html')
"""

from __future__ import annotations

from explorer.report._collect import (
    MAX_SCHEDULES,
    BestSchedule,
    ModelReport,
    NoRunsError,
    ReportInfo,
    RunReport,
    UnknownRunError,
    WorkloadReport,
    collect_report,
    select_runs,
)
from explorer.report._html import (
    MissingDependencyError,
    ReportResult,
    render_report,
    write_report,
)

__all__ = [
    "MAX_SCHEDULES",
    "BestSchedule",
    "MissingDependencyError",
    "ModelReport",
    "NoRunsError",
    "ReportInfo",
    "ReportResult",
    "RunReport",
    "UnknownRunError",
    "WorkloadReport",
    "collect_report",
    "render_report",
    "select_runs",
    "write_report",
]
