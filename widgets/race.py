"""The Search tab's race on a recording ("Measure on: a recording"): several strategies, several
seeds each, replayed from earlier measurements of the session's workload in seconds.

The recording is this explorer's own database (every measurement made here of the workload) or
another database file; ``explorer.replay.race`` does the work on the search worker (one job at
a time with the searches), its runs live in a store of the race's own, and the view shows a row
per strategy (median best, trials to 90% of the recording's best) and the best-so-far curves,
all marked as replayed.
"""

from __future__ import annotations

import html
import math
from pathlib import Path

import ipywidgets as w

from explorer import plots
from explorer.analysis import REACH, RaceInfo, race_info
from explorer.errors import ExplorerError
from explorer.replay import DEFAULT_STRATEGIES, MAX_SEEDS, RaceProgress, Recording, race
from explorer.search import STRATEGIES
from explorer.storage import get_store, is_postgres_url
from explorer.text import format_secs, plural, share
from explorer.types import MAX_TRIALS, TOO_MANY_TRIALS
from widgets import _ui
from widgets._context import Context
from widgets._jobs import Job, JobState
from widgets._panel import Panel
from widgets._plot import LiveFigure
from widgets._style import tagged
from widgets._whole import WholeText, parse_whole

THIS_DATABASE = ""
"""The recording field's value for the explorer's own database."""


class RacePanel(Panel):
    """Race strategies on a recording of the current workload (see the module).

    Attributes:
        widget: the panel to display.
        job: the latest race (``job.wait(t)`` in scripts).
        info: the latest race's summary (``explorer.analysis.RaceInfo``).
        figure: its best-so-far curves (``None`` before the first race).
    """

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.job: Job | None = None
        self.info: RaceInfo | None = None
        self.source = tagged(
            w.Text(
                value=THIS_DATABASE,
                placeholder="this explorer's database (or a database file or URL)",
                description="Recording",
                layout=w.Layout(width="100%", max_width="640px"),
            ),
            "se-race-source",
        )
        self.strategies = tagged(
            w.SelectMultiple(
                options=list(STRATEGIES),
                value=[s for s in DEFAULT_STRATEGIES if s in STRATEGIES],
                rows=4,
                description="Strategies",
            ),
            "se-race-strategies",
        )
        self.seeds = tagged(WholeText(value=10, description="Seeds"), "se-race-seeds")
        self.trials = tagged(WholeText(value=64, description="Trials each"), "se-race-trials")
        self.race_button = tagged(
            w.Button(description="Race", button_style="primary", icon="flag-checkered"),
            "se-race",
        )
        self.stop_button = tagged(
            w.Button(description="Stop", disabled=True, icon="stop"), "se-race-stop"
        )
        self.progress = tagged(
            w.IntProgress(value=0, min=0, max=1, description="Runs"), "se-race-progress"
        )
        self.status = tagged(w.Label(value=""), "se-race-status")
        self.table = tagged(w.HTML(value=""), "se-race-table")
        self.figure: LiveFigure | None = None
        self.figure_box = w.Box(layout=w.Layout(width="100%"))
        self.race_button.on_click(lambda _b: self._guard(self.start))
        self.stop_button.on_click(lambda _b: self._guard(self.stop))
        self.widget = w.VBox(
            [
                self.source,
                w.HBox([self.strategies, w.VBox([self.seeds, self.trials])]),
                w.HBox([self.race_button, self.stop_button]),
                self.progress,
                self.status,
                self.table,
                self.figure_box,
            ]
        )
        self.widget.add_class("se-race-panel")

    def start(self) -> Job | None:
        """Race with the panel's settings; ``None`` (and one sentence) when refused."""
        runner = self.ctx.search_jobs
        if runner.busy and runner.current is not None:
            self._say(f"{runner.current.name} is running: stop it (or wait) before racing.")
            return None
        session = self.ctx.session
        if session is None:
            self._say("Build a workload first: the race replays its recorded measurements.")
            return None
        seeds = parse_whole("Seeds", self.seeds.value, 1, f"between 1 and {MAX_SEEDS}")
        if isinstance(seeds, int) and seeds > MAX_SEEDS:
            seeds = f"Seeds must be between 1 and {MAX_SEEDS} (got {seeds})."
        trials = parse_whole(
            "Trials each", self.trials.value, 1, "at least 1", MAX_TRIALS, TOO_MANY_TRIALS
        )
        for parsed in (seeds, trials):  # the first field at fault
            if isinstance(parsed, str):
                self._say(parsed)
                return None
        assert isinstance(seeds, int) and isinstance(trials, int)
        names = list(self.strategies.value)
        if not names:
            self._say("Pick at least one strategy to race.")
            return None
        source = self.source.value.strip()
        if source and not is_postgres_url(source) and not Path(source).is_file():
            self._say(f"There is no database file {source}.")
            return None
        workload = session.workload
        self.progress.max, self.progress.value, self.progress.bar_style = len(names) * seeds, 0, ""
        self._set_running(True)
        self._say(f"Reading the recording of {workload.key()}\u2026")

        def run(job: Job) -> RaceInfo:
            # Worker thread: no widget.
            recorded = self.ctx.store if not source else get_store(source, read_only=True)
            try:
                recording = Recording(
                    recorded, workload, source=source or "this explorer's database"
                )
            finally:
                if source:
                    recorded.close()
            _ui.call_soon(self._say, f"Racing on {recording.describe()}\u2026")
            store = get_store(":memory:")
            result = race(
                recording,
                names,
                seeds=seeds,
                trials=trials,
                store=store,
                should_stop=job.is_cancelled,
                on_progress=lambda p: _ui.call_soon(self._on_progress, p),
            )
            return race_info(result, store)

        self.job = runner.submit("a race on a recording", run, on_done=self._on_done)
        return self.job

    def stop(self) -> None:
        self._stop_job(
            self.job, self.stop_button,
            idle="No race is running.", stopping="Stopping after the current run...",
        )  # fmt: skip

    # -- callbacks (UI thread) ----------------------------------------------------------------
    def _on_progress(self, p: RaceProgress) -> None:
        self.progress.value = min(p.done, self.progress.max)
        best = p.run.best_secs
        got = f"best {best * 1e3:.4g} ms" if best else "no correct schedule"
        self._say(f"{p.done}/{p.total} runs: {p.run.strategy}, seed {p.run.seed}: {got}.")

    def _on_done(self, job: Job) -> None:
        self._set_running(False)
        if job.state is JobState.ERROR:
            self.progress.bar_style = "danger"
            exc = job.exception
            known = isinstance(exc, ExplorerError)
            self._say(f"No race: {exc}" if known else f"Race failed: {type(exc).__name__}: {exc}")
            return
        info: RaceInfo = job.result
        self.info = info
        self.progress.bar_style = "success" if job.state is JobState.FINISHED else "warning"
        how = "Stopped" if job.state is JobState.CANCELLED else "Raced"
        self._say(
            f"{how}: {plural(sum(r.num_seeds for r in info.rows), 'run')} in {info.secs:.1f} s, "
            "replayed (nothing was built or timed)."
        )
        self.table.value = table_html(info)
        old, self.figure = self.figure, LiveFigure(plots.make_race_figure(info))
        self.figure_box.children = (self.figure.widget,)
        if old is not None:
            old.close()

    def _set_running(self, running: bool) -> None:
        self.race_button.disabled = running
        self.stop_button.disabled = not running

    def close(self) -> None:
        if self.figure is not None:
            self.figure.close()


def table_html(info: RaceInfo) -> str:
    """A row per strategy: median best, share of the recording's best, trials to 90%, and
    what a run's own work took (the median seed's)."""
    head = (
        "<tr><th>strategy</th><th>median best</th><th>of the best</th>"
        f"<th>trials to {REACH:.0%}</th><th>seeds there</th><th>stopped early</th>"
        "<th>a run took</th></tr>"
    )
    rows = []
    for r in info.rows:
        best = f"{r.median_best_ms:.4g} ms" if r.median_best_ms else "-"
        of_best = f"{r.of_best:.2f}" if r.of_best else "-"
        needed = (
            f"&gt; {info.trials}" if r.trials_to_reach == math.inf else f"{r.trials_to_reach:g}"
        )
        rows.append(
            f"<tr><td>{html.escape(r.strategy)}</td><td>{best}</td><td>{of_best}</td>"
            f"<td>{needed}</td><td>{r.reached}/{r.num_seeds}</td><td>{r.exhausted}</td>"
            f"<td>{format_secs(r.median_run_secs)}</td></tr>"
        )
    coverage = share(info.coverage)
    note = (
        f"<p>Replayed from {html.escape(info.source)}: {info.num_schedules} recorded schedules, "
        f"{coverage} of the space. Each strategy chose among them only; a timing nobody "
        "recorded is never made up."
        + (
            " A strategy that walks to neighbouring schedules (droplet) finds few of them "
            "recorded in so small a share, and stops early."
            if info.coverage < 0.5 and any(r.exhausted for r in info.rows)
            else ""
        )
        + "</p>"
    )
    return f"{note}<table class='se-race-rows'>{head}{''.join(rows)}</table>"
