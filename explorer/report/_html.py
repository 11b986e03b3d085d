"""The report as one self-contained HTML file: plotly.js is embedded, nothing is fetched.

The figures are the dashboards' own (``explorer.plots``, as plain ``go.Figure``\\ s), so a report
shows what the notebook shows. plotly is an optional extra (``pip install
'schedule-explorer[lab]'``); it is imported on first use only, so ``explorer`` keeps importing
without it, and its absence is one ``MissingExtraError`` sentence.
"""

from __future__ import annotations

import html
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from explorer.analysis import Metric, shown_strategy
from explorer.code import CodeMix, mix_rows
from explorer.extras import MissingExtraError, require
from explorer.model import speed_text
from explorer.report._collect import (
    MAX_SCHEDULES,
    BestSchedule,
    ModelReport,
    NoRunsError,
    ReportInfo,
    RunReport,
    WorkloadReport,
    collect_report,
    settings_text,
)
from explorer.storage import RecordStore
from explorer.text import format_secs

PLOT_CONFIG = {"displaylogo": False, "responsive": True}


MissingDependencyError = MissingExtraError  # the name this module gave it first


@dataclass(frozen=True)
class ReportResult:
    """Where a report was written and what it holds."""

    path: Path
    num_runs: int
    num_workloads: int
    num_schedules: int
    size_bytes: int


def write_report(
    store: RecordStore,
    path: str | Path,
    run_ids: Sequence[int] | None = None,
    *,
    latest: int | None = None,
    metric: Metric = "gflops",
    max_schedules: int = MAX_SCHEDULES,
    knobs: bool = True,
    title: str | None = None,
) -> ReportResult:
    """Write one self-contained HTML report of runs: the dashboards' plots, the best schedules'
    TVMScript and traces, and the runs' settings. It opens in any browser, offline.

    Args:
        store: Where the runs are.
        path: The HTML file to write (replaced if it exists; written whole or not at all).
        run_ids: The runs to show; ``None``: the ``latest`` ones, else every run.
        latest: Show the latest this many runs (not with ``run_ids``).
        metric: ``"gflops"`` or ``"latency_ms"`` for the convergence and comparison plots.
        max_schedules: Best distinct schedules shown per workload.
        knobs: Include the knob-effects plot (builds each workload's knob space).
        title: The page's title.

    Raises:
        MissingExtraError: plotly is not installed.
        UnknownRunError: A run of ``run_ids`` is not in the store.
        NoRunsError: The store has no run.
        ValueError: Both ``run_ids`` and ``latest`` were given.
        OSError: The file cannot be written.
    """
    _plotting()  # before any work: a missing plotly is one sentence, at once
    info = collect_report(
        store, run_ids, latest=latest, metric=metric, max_schedules=max_schedules, knobs=knobs
    )
    if not info.workloads:
        raise NoRunsError(f"no runs in {info.source}: nothing to report")
    text = render_report(info, title=title)
    path = Path(path).expanduser()
    _write_atomically(path, text.encode("utf-8"))
    return ReportResult(
        path=path,
        num_runs=info.num_runs,
        num_workloads=len(info.workloads),
        num_schedules=sum(len(w.best) for w in info.workloads),
        size_bytes=path.stat().st_size,
    )


def _write_atomically(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)  # mkstemp makes it private; a report is for sharing
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _plotting() -> tuple[Any, Any]:
    """``(plotly.io, explorer.plots)``, or one sentence saying what to install."""
    pio = require("plotly.io", "the HTML report", "lab")
    from explorer import plots

    return pio, plots


# -- rendering ---------------------------------------------------------------------------------
def render_report(info: ReportInfo, *, title: str | None = None) -> str:
    """The report's HTML text (``write_report`` writes it)."""
    from plotly.offline import get_plotlyjs

    from explorer import __version__

    title = title or "Schedule Explorer report"
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(info.created_at))
    runs = _count(info.num_runs, "run")
    toc = "".join(
        f'<li><a href="#w{i}">{_breakable(w.title)}</a> ({_count(len(w.runs), "run")})</li>'
        for i, w in enumerate(info.workloads)
    )
    figures = _Figures()
    sections = "\n".join(
        [_model_section(m, figures) for m in info.models]
        + [_workload_section(i, w, figures) for i, w in enumerate(info.workloads)]
    )
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="Schedule Explorer {_e(__version__)}">
<title>{_e(title)}</title>
<style>{_CSS}</style>
<script type="text/javascript">{get_plotlyjs()}</script>
</head>
<body>
<header>
<h1>{_e(title)}</h1>
<p class="meta">{runs} from <code>{_e(info.source)}</code>, written {when} by Schedule
Explorer {_e(__version__)}. Trials' latencies are medians of repeated timings; a run's best
was re-timed side by side with the unscheduled program at the end of its search, and reads its
fastest repeat there (load only ever adds time).</p>
<nav><ol>{toc}</ol></nav>
</header>
<main>
{sections}
</main>
</body>
</html>
"""


class _Figures:
    """Turns the dashboards' figures into ``<div>``\\ s, numbered through the page."""

    def __init__(self) -> None:
        self.pio, self.plots = _plotting()
        self.count = 0

    def div(self, make: str, info: Any, css_class: str) -> str:
        fig = getattr(self.plots, make)(info)
        self.count += 1
        body = self.pio.to_html(
            fig,
            full_html=False,
            include_plotlyjs=False,  # once, in <head>
            config=PLOT_CONFIG,
            div_id=f"plot-{self.count}",
        )
        return f'<div class="plot {css_class}">{body}</div>'


def _workload_section(index: int, w: WorkloadReport, figures: _Figures) -> str:
    conv = w.convergence
    parts = [
        f'<section class="workload" id="w{index}">',
        f"<h2>{_breakable(w.title)}</h2>",
        f'<p class="meta">{_count(conv.num_runs, "run")}, {_count(conv.num_trials, "trial")}'
        f"{_remeasured(conv.num_remeasured)}; {w.workload.flops():,} FLOPs per call</p>",
        _runs_table(w.runs, w.workload),
        "<h3>Convergence</h3>",
        figures.div("make_convergence_figure", conv, "se-convergence"),
    ]
    if w.comparison.groups:
        parts += [
            "<h3>Strategies compared</h3>",
            figures.div("make_strategy_comparison_figure", w.comparison, "se-comparison"),
        ]
    parts.append("<h3>Predicted vs measured</h3>")
    if w.predicted.models:
        parts.append(figures.div("make_predicted_vs_measured_figure", w.predicted, "se-pvm"))
    else:
        parts.append(
            '<p class="note">No cost-model predictions are stored for these runs (searches '
            "with a cost model store one with each trial they propose once the model is "
            "trained; random search and manual measurements do not).</p>"
        )
    if w.knobs is not None and w.knobs.num_used:
        parts += [
            "<h3>Knob effects</h3>",
            figures.div("make_knob_effects_figure", w.knobs, "se-knobs"),
        ]
    elif w.knobs_note:
        parts.append(f'<p class="note">Knob effects: {_e(w.knobs_note)}</p>')
    parts.append("<h3>Best schedules</h3>")
    if w.best:
        parts += [_schedule(i, b) for i, b in enumerate(w.best, 1)]
    else:
        parts.append('<p class="note">No run has a successful trial.</p>')
    parts.append("<h3>Run settings</h3>")
    parts += [_settings(r) for r in w.runs]
    parts.append("</section>")
    return "\n".join(parts)


def _model_section(m: ModelReport, figures: _Figures) -> str:
    """A model: its latest race against ONNX Runtime, where its time goes, its races."""
    model = m.model
    parts = [
        f'<section class="model" id="model-{model.id}">',
        f"<h2>Model {_e(model.name)}</h2>",
        f'<p class="meta">{_count(len(model.tasks), "task")} on '
        f"{_e(model.target.name or model.target.key())}; inputs "
        f"{_e(', '.join(str(i) for i in model.inputs))}</p>",
    ]
    race = m.latest
    if race is not None:
        env = race.environment
        slow = m.races.latest.slow if m.races.latest is not None else None
        rows = "".join(
            f"<tr><td>{_e(e.name)}</td><td>"
            + (_e(e.error) if e.error else _e(format_secs(e.fastest_secs)))
            + "</td><td>"
            + ("" if e.max_error is None or e.name == "onnxruntime" else f"{e.max_error:.1g}")
            + "</td></tr>"
            for e in race.entries
        )
        parts += [
            f"<h3>Race {race.id} against ONNX Runtime</h3>",
            f'<p class="meta">{_count(race.trials, "trial")} spent; '
            f"{_e(env.get('cpu_model'))}, {_e(env.get('num_threads'))} threads, ONNX Runtime "
            f"{_e(env.get('onnxruntime_version'))}; each build's fastest call over "
            "interleaved rounds, its output checked against ONNX Runtime's"
            + "".join(f"; {_e(said)}" for said in (speed_text(race), slow) if said)
            + ".</p>",
            "<table><tr><th>build</th><th>fastest call</th><th>max difference from ONNX "
            f"Runtime (of its largest output)</th></tr>{rows}</table>",
        ]
    parts += [
        figures.div("make_model_tasks_figure", m.times, "se-model-tasks"),
        figures.div("make_model_race_figure", m.races, "se-model-races"),
        "</section>",
    ]
    return "\n".join(parts)


def _runs_table(runs: Sequence[RunReport], workload: Any) -> str:
    head = (
        "<tr><th>run</th><th>strategy</th><th>status</th><th>trials</th><th>best</th>"
        "<th>GFLOPS</th><th>vs unscheduled</th><th>started</th><th>best trial</th></tr>"
    )
    rows = []
    flops = workload.flops()
    for r in runs:
        s, run = r.summary, r.run
        gflops = f"{flops / s.best_secs / 1e9:.2f}" if s.best_secs and flops else "-"
        speedup = s.speedup_over_baseline
        started = time.strftime("%Y-%m-%d %H:%M", time.localtime(run.started_at))
        trials = f"{s.num_trials}{_remeasured(s.num_remeasured, short=True)}"
        rows.append(
            f'<tr id="run-{run.id}"><td>{run.id}</td><td>{_e(shown_strategy(run))}</td>'
            f"<td>{_e(str(run.status))}</td><td>{trials}</td>"
            f"<td>{_e(format_secs(s.best_secs))}</td><td>{gflops}</td>"
            f"<td>{'-' if speedup is None else f'{speedup:.2f}x'}</td><td>{started}</td>"
            f"<td>{_e(r.best_name or '-')}</td></tr>"
        )
    return f'<table class="runs">{head}{"".join(rows)}</table>'


def _schedule(rank: int, b: BestSchedule) -> str:
    runs = ", ".join(f'<a href="#run-{i}">run {i}</a>' for i in b.run_ids)
    what = "the unscheduled program (nothing beat it)" if b.is_baseline else _e(b.name)
    gflops = f", {b.gflops:.2f} GFLOPS" if b.gflops is not None else ""
    head = (
        f"<h4>#{rank}: {_e(format_secs(b.secs))}{gflops}: {what}, best of {runs} "
        f"({_e(', '.join(b.strategies))})</h4>"
    )
    if b.script is None:
        body = f'<p class="note">Could not replay this schedule: {_e(b.error or "")}</p>'
    else:
        body = (
            f'<details open><summary>TVMScript</summary><pre class="script"><code>'
            f"{_e(b.script)}</code></pre></details>"
            f'<details><summary>Trace (Python)</summary><pre class="trace"><code>'
            f"{_e(b.trace_python or '')}</code></pre></details>"
        )
    if b.mix is not None:
        body += _mix_details(b.mix)
    body += (
        '<details><summary>Trace (JSON, as stored)</summary><pre class="trace-json"><code>'
        f"{_e(settings_text({'trace': b.trace_json}))}</code></pre></details>"
    )
    return f'<article class="schedule" id="trial-{b.trial_id}">{head}{body}</article>'


def _mix_details(mix: CodeMix) -> str:
    """The instruction mix of a schedule's code: hot loop beside whole code, then the loop."""
    rows = "".join(
        f"<tr><td>{_e(label)}</td><td>{_e(hot)}</td><td>{_e(total)}</td></tr>"
        for label, hot, total in mix_rows(mix)
    )
    loop = ""
    if mix.hot is not None:
        loop = f'<pre class="hot-loop"><code>{_e(chr(10).join(mix.hot_code))}</code></pre>'
    return (
        '<details class="mix"><summary>Instruction mix (what the CPU runs)</summary>'
        '<table class="mix"><tr><th></th><th>hot loop (one pass)</th><th>whole code</th></tr>'
        f"{rows}</table>{loop}</details>"
    )


def _settings(r: RunReport) -> str:
    run = r.run
    ended = time.strftime("%Y-%m-%d %H:%M", time.localtime(run.ended_at)) if run.ended_at else "-"
    return (
        f'<div class="settings"><h4>Run {run.id}: {_e(shown_strategy(run))}, '
        f"{_e(str(run.status))}, "
        f"ended {ended}</h4>"
        f'<pre class="run-settings"><code>{_e(settings_text(run.settings))}</code></pre>'
        f"<details><summary>Environment (TVM, CPU, threads...)</summary>"
        f"<pre><code>{_e(settings_text(run.environment))}</code></pre></details></div>"
    )


def _remeasured(n: int, *, short: bool = False) -> str:
    if not n:
        return ""
    return f" + {n}" if short else f" + {_count(n, 're-measurement')}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _breakable(text: object) -> str:
    """``_e(text)`` that may wrap after each comma (a workload's key has no space)."""
    return _e(text).replace(",", ",<wbr>")


_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 auto;
       max-width: 1200px; padding: 1rem 2rem; color: #222; line-height: 1.4;
       box-sizing: border-box; }
/* A workload's key is one long word (conv2d(CI=64,CO=64,...)): it wraps after a comma
   (<wbr>), or anywhere, rather than widen the page (which scrolled sideways on a laptop). */
h1, h2, h3, h4, p, li, a, code { overflow-wrap: anywhere; }
table.runs { display: block; max-width: 100%; overflow-x: auto; }
h1 { margin-bottom: 0.2rem; } h2 { border-bottom: 2px solid #ddd; margin-top: 2.5rem; }
h4 { margin: 1rem 0 0.4rem; }
.meta, .note { color: #555; } .note { font-style: italic; }
table.runs { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.9rem; }
table.runs th, table.runs td { border: 1px solid #ddd; padding: 0.25rem 0.6rem;
                               text-align: right; }
table.runs th { background: #f4f4f4; }
table.runs td:nth-child(2), table.runs td:nth-child(3) { text-align: left; }
pre { background: #f7f7f7; border: 1px solid #e3e3e3; padding: 0.6rem; overflow: auto;
      max-height: 32rem; font-size: 0.8rem; }
.plot { width: 100%; margin: 0.5rem 0 1rem; }
details > summary { cursor: pointer; color: #1f5fa8; margin: 0.3rem 0; }
article.schedule, div.settings { margin-bottom: 1rem; }
"""
