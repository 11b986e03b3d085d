"""What the CPU runs for the schedule on screen: its instruction mix, in total and in its hot
loop, and the hot loop's code (``explorer.code``), under the cost panel.

Built on request ("Show generated code"), then again after every edit while shown; each build
runs off the UI thread (a compile takes a second or more) and is kept per schedule, so going
back to an earlier step shows its code at once. Each new schedule's mix is compared with the
one shown before it, in one sentence ("The hot loop now issues 16 zmm FMAs per 2 loads instead
of ...").
"""

from __future__ import annotations

import html
from collections.abc import Callable

import ipywidgets as w

from explorer.code import CodeMix, code_mix, compare_mixes, generated_code, mix_rows
from explorer.measure import Candidate
from explorer.session import ScheduleSession, Snapshot
from widgets._context import Context
from widgets._cost_views import candidate_key
from widgets._jobs import Job, JobRunner
from widgets._panel import Panel


def mix_html(mix: CodeMix) -> str:
    """The mix as a table (hot loop beside total) and the hot loop's code."""

    rows = "".join(
        f"<tr><td>{html.escape(label)}</td><td>{html.escape(hot)}</td>"
        f"<td>{html.escape(total)}</td></tr>"
        for label, hot, total in mix_rows(mix)
    )
    out = (
        "<table class='se-mix'><tr><th></th><th>hot loop (one pass)</th><th>whole code</th></tr>"
        f"{rows}</table>"
    )
    if mix.hot is None:
        return out + "<p><i>No loop: the code runs straight through.</i></p>"
    intensity = mix.hot.intensity
    shown = "no loads" if intensity is None else f"{intensity:.3g} flops per loaded byte"
    code = html.escape("\n".join(mix.hot_code))
    return (
        f"{out}<p>Hot loop: {mix.hot.flops:g} flops per pass, {shown}.</p>"
        f"<pre class='se-hot-loop'>{code}</pre>"
    )


class CodeView(Panel):
    """The generated code of the schedule on screen (see the module).

    Attributes:
        widget: the container to display.
        show_button: builds and shows the code (the view then follows every edit).
        mix: the instruction-mix table and the hot loop's code.
        job: the latest build (``job.wait(t)`` in scripts).
    """

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.session: ScheduleSession | None = None
        self.job: Job | None = None
        self.show_button = w.Button(
            description="Show generated code",
            icon="microchip",
            layout=w.Layout(width="auto", flex="0 0 auto"),  # the whole label, never "Show gen…"
        )
        self.show_button.add_class("se-show-code")
        self.status = w.Label()
        self.mix = w.HTML()
        self.mix.add_class("se-code-mix")
        self.widget = w.VBox([self.show_button, self.status, self.mix])
        # UI thread only
        self._shown = False
        self._built: dict[str, CodeMix | str] = {}  # candidate key -> its mix, or why none
        self._current: str | None = None
        self._last: tuple[str, CodeMix] | None = None  # the mix shown before, to compare with
        self._pending: Candidate | None = None  # edited while a build ran: built next
        self._runner = JobRunner("explorer-code")
        self._unsubscribe_session: Callable[[], None] | None = None
        self._unsubscribe_ctx = ctx.on("session", self.set_session)
        self.show_button.on_click(lambda _b: self._guard(self.show))
        if ctx.session is not None:
            self.set_session(ctx.session)

    def set_session(self, session: ScheduleSession) -> None:
        if self._unsubscribe_session is not None:
            self._unsubscribe_session()
        self.session = session
        self._unsubscribe_session = session.on_change(self._on_change)
        self._on_change(session.snapshot)

    def _on_change(self, snapshot: Snapshot) -> None:
        self._guard(self._follow)

    def _follow(self) -> None:
        if self._shown:
            self.show()

    def show(self) -> Job | None:
        """Show the code of the schedule on screen: at once when it was built before, else
        after a build in the background (the job returned)."""
        if self.session is None:
            self._say("Build a workload first.")
            return None
        self._shown = True
        candidate = self.session.candidate()
        key = candidate_key(candidate)
        self._current = key
        if key in self._built:
            self._display(key)
            return None
        self._say(f"Compiling step {self.session.snapshot.step_id}\u2026")
        if self._runner.busy:  # one build at a time: the latest edit's comes next
            self._pending = candidate
            return self.job
        return self._submit(candidate)

    def _submit(self, candidate: Candidate) -> Job:
        key = candidate_key(candidate)
        self.job = self._runner.submit(
            "code", lambda _job: _build(candidate), on_done=lambda job: self._built_done(key, job)
        )
        return self.job

    def _built_done(self, key: str, job: Job) -> None:
        # UI thread
        if job.exception is not None:
            self._built[key] = f"the code could not be read: {job.exception}"
        else:
            self._built[key] = job.result
        if key == self._current:
            self._display(key)
        pending, self._pending = self._pending, None
        if pending is not None and candidate_key(pending) not in self._built:
            self._submit(pending)

    def _display(self, key: str) -> None:
        built = self._built[key]
        if isinstance(built, str):
            self._say(built)
            self.mix.value = ""
            return
        self._say("")
        change = ""
        if self._last is not None and self._last[0] != key:
            change = (
                f"<p class='se-code-change'>{html.escape(compare_mixes(self._last[1], built))}"
            )
            change += " (against the schedule shown before)</p>"
        self._last = (key, built)
        self.mix.value = change + mix_html(built)

    def close(self) -> None:
        self._unsubscribe_ctx()
        if self._unsubscribe_session is not None:
            self._unsubscribe_session()
            self._unsubscribe_session = None
        self._runner.shutdown()


def _build(candidate: Candidate) -> CodeMix | str:
    # Worker thread: no widget, no session.
    code = generated_code(candidate)
    if code.error is not None:
        return f"The schedule does not compile: {code.error}"
    if code.asm is None:
        return f"{code.target} has no assembly listing to read here."
    return code_mix(code.asm)
