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
from dataclasses import dataclass

import ipywidgets as w

from explorer.code import (
    CodeMix,
    code_mix,
    compare_mixes,
    generated_code,
    hot_loop_diff,
    mix_rows,
)
from explorer.measure import Candidate
from explorer.session import ScheduleSession, Snapshot
from explorer.storage import name_trial
from explorer.text import format_secs
from widgets._context import Context
from widgets._cost_views import candidate_key
from widgets._jobs import Job, JobRunner
from widgets._panel import Panel
from widgets._pickers import Dropdown

IR_LINES = 2000
"""How much LLVM IR the panel shows (``explorer show --ir`` prints it all)."""

BEFORE = -1
"""The "Compare with" choice that means the schedule shown before the one on screen."""

TRIAL = "trial:"
"""A "Compare with" choice of a stored trial: ``TRIAL`` and the trial's id."""

STORED = 5
"""How many of the workload's fastest stored schedules "Compare with" offers."""


@dataclass(frozen=True)
class _Built:
    mix: CodeMix
    llvm_ir: str | None


@dataclass(frozen=True)
class _Reference:
    """What the schedule on screen is compared with."""

    key: str
    built: _Built
    label: str  # "the schedule shown before", "step 3", "trial 4 of run 2"
    secs: float | None = None  # a stored trial's own timing (a step's: the panel's reading)


def mix_html(mix: CodeMix, reference: CodeMix | None = None, label: str = "") -> str:
    """The mix as a table (hot loop beside total, and beside ``reference``'s hot loop when
    given) and the hot loop's code."""
    cells: list[tuple[str, ...]] = list(mix_rows(mix))
    header = "<th></th><th>hot loop (one pass)</th><th>whole code</th>"
    if reference is not None:
        header += f"<th>hot loop of {html.escape(label)}</th>"
        cells = [
            (*row, ref_hot)
            for row, (_, ref_hot, _t) in zip(cells, mix_rows(reference), strict=True)
        ]
    rows = "".join(
        "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>"
        for row in cells
    )
    out = f"<table class='se-mix'><tr>{header}</tr>{rows}</table>"
    if mix.hot is None:
        return out + "<p><i>No loop: the code runs straight through.</i></p>"
    intensity = mix.hot.intensity
    shown = "no loads" if intensity is None else f"{intensity:.3g} flops per loaded byte"
    code = html.escape("\n".join(mix.hot_code))
    return (
        f"{out}<p>Hot loop: {mix.hot.flops:g} flops per pass, {shown}.</p>"
        f"<pre class='se-hot-loop'>{code}</pre>"
    )


def diff_html(reference: CodeMix, mix: CodeMix, label: str) -> str:
    """The two hot loops' code, diffed: what ``label``'s loop had (-) and this one has (+)."""
    lines = hot_loop_diff(reference, mix)
    if not lines:
        return ""
    marked = []
    for line in lines[2:]:  # the "--- before / +++ after" header says nothing here
        escaped = html.escape(line)
        if line.startswith("+"):
            marked.append(f"<span class='se-diff-add'>{escaped}</span>")
        elif line.startswith("-"):
            marked.append(f"<span class='se-diff-del'>{escaped}</span>")
        else:
            marked.append(escaped)
    return (
        f"<p>The hot loop's code against {html.escape(label)}'s (- {html.escape(label)}, "
        "+ this schedule):</p>"
        f"<pre class='se-hot-diff'>{chr(10).join(marked)}</pre>"
    )


def ir_html(llvm_ir: str | None) -> str:
    if llvm_ir is None:
        return "<p><i>This target has no LLVM IR to show.</i></p>"
    lines = llvm_ir.splitlines()
    note = (
        f"<p><i>The first {IR_LINES} of {len(lines)} lines (<code>explorer show --ir</code> "
        "prints them all).</i></p>"
        if len(lines) > IR_LINES
        else ""
    )
    return f"{note}<pre class='se-llvm-ir'>{html.escape(chr(10).join(lines[:IR_LINES]))}</pre>"


class CodeView(Panel):
    """The generated code of the schedule on screen (see the module).

    Args:
        ctx: the explorer's shared context.
        latency_of: the measured latency of a schedule (by ``candidate_key``), if measured:
            a comparison then says which one ran faster.

    Attributes:
        widget: the container to display.
        show_button: builds and shows the code (the view then follows every edit).
        compare: what the schedule on screen is compared with: the schedule shown before
            (``BEFORE``), any step of the history, any branch (its id), or one of the
            workload's fastest stored schedules (``TRIAL`` and its id).
        show_ir: shows the LLVM IR of the schedule on screen under its mix.
        mix: the comparison, the instruction-mix table and the hot loop's code.
        ir: the LLVM IR, when asked for.
        job: the latest build (``job.wait(t)`` in scripts).
    """

    def __init__(
        self, ctx: Context, latency_of: Callable[[str], float | None] = lambda _key: None
    ) -> None:
        self.ctx = ctx
        self.latency_of = latency_of
        self.session: ScheduleSession | None = None
        self.job: Job | None = None
        self.show_button = w.Button(
            description="Show generated code",
            icon="microchip",
            layout=w.Layout(width="auto", flex="0 0 auto"),  # the whole label, never "Show gen…"
        )
        self.show_button.add_class("se-show-code")
        self.compare = Dropdown(
            description="Compare with",
            options=[("the schedule shown before", BEFORE)],
            value=BEFORE,
            style={"description_width": "auto"},
            layout=w.Layout(width="auto", min_width="0", flex="0 1 auto"),
        )
        self.compare.add_class("se-code-compare")
        self.show_ir = w.ToggleButton(description="LLVM IR", layout=w.Layout(width="auto"))
        self.show_ir.add_class("se-show-ir")
        self.status = w.Label()
        self.mix = w.HTML()
        self.mix.add_class("se-code-mix")
        self.ir = w.HTML()
        self.ir.add_class("se-code-ir")
        controls = w.HBox(
            [self.show_button, self.compare, self.show_ir],
            layout=w.Layout(flex_flow="row wrap", align_items="center"),
        )
        self.widget = w.VBox([controls, self.status, self.mix, self.ir])
        # UI thread only
        self._shown = False
        self._built: dict[str, _Built | str] = {}  # candidate key -> its code, or why none
        self._current: str | None = None
        self._last: tuple[str, _Built] | None = None  # the code on screen (or last shown)
        self._before: tuple[str, _Built] | None = None  # and the one shown before it
        self._wanted: list[Candidate] = []  # asked for while a build ran: built in turn
        self._stored: list[tuple[str, str]] = []  # "Compare with" choices of stored schedules
        self._trials: dict[str, tuple[Candidate, str, float | None]] = {}  # ... as _chosen reads
        self._runner = JobRunner("explorer-code")
        self._unsubscribe_session: Callable[[], None] | None = None
        self._unsubscribe_ctx = ctx.on("session", self.set_session)
        self.show_button.on_click(lambda _b: self._guard(self.show))
        self.compare.observe(lambda _c: self._guard(self._redisplay), names="value")
        self.show_ir.observe(lambda _c: self._guard(self._redisplay), names="value")
        if ctx.session is not None:
            self.set_session(ctx.session)

    def set_session(self, session: ScheduleSession) -> None:
        if self._unsubscribe_session is not None:
            self._unsubscribe_session()
        self.session = session
        self._last = self._before = None
        self._list_stored()
        self._unsubscribe_session = session.on_change(self._on_change)
        self._on_change(session.snapshot)

    def _on_change(self, snapshot: Snapshot) -> None:
        self._guard(self._follow)

    def _follow(self) -> None:
        self._list_steps()
        if self._shown:
            self.show()

    def _list_stored(self) -> None:
        """The workload's fastest stored schedules, read again (a new session, a new
        measurement; not at every edit: each name reads its run's rows)."""
        assert self.session is not None
        store = self.ctx.store
        self._stored = [
            (
                f"stored {name_trial(store, record)}: {format_secs(record.median_secs)}",
                f"{TRIAL}{record.id}",
            )
            for record in store.best(self.session.workload, self.session.target, k=STORED)
        ]

    def _list_steps(self) -> None:
        """Every step of every branch, and the fastest stored schedules of the workload, as
        "Compare with" choices."""
        assert self.session is not None
        steps = {s.id: s for branch in self.session.branches() for s in branch.steps}
        choices: list[tuple[str, int | str]] = [
            ("the schedule shown before", BEFORE),
            ("step 0: the unscheduled program", 0),
        ]
        choices += [(f"step {i}: {steps[i].label}", i) for i in sorted(steps)]
        choices += self._stored
        if choices != list(self.compare.options):
            value = self.compare.value
            with self.compare.hold_trait_notifications():
                self.compare.options = choices
                self.compare.value = value if any(v == value for _l, v in choices) else BEFORE

    def show(self) -> Job | None:
        """Show the code of the schedule on screen: at once when it was built before, else
        after a build in the background (the job returned)."""
        if self.session is None:
            self._say("Build a workload first.")
            return None
        self._shown = True
        candidate = self.session.candidate()
        self._current = candidate_key(candidate)
        self._redisplay()
        return self.job

    def refresh(self) -> None:
        """Show again what is shown (a measurement arrived: the comparison's timing, and one
        more stored schedule to compare with)."""

        def again() -> None:
            if self.session is not None:
                self._list_stored()
                self._list_steps()
            self._redisplay()

        self._guard(again)

    def _redisplay(self) -> None:
        """Show what is built; ask for the builds that are missing."""
        if not self._shown or self.session is None or self._current is None:
            return
        key = self._current
        built = self._built.get(key)
        if built is None:
            self._say(f"Compiling step {self.session.snapshot.step_id}\u2026")
            self._want(self.session.candidate())
            return
        if isinstance(built, str):
            self._say(built)
            self.mix.value = self.ir.value = ""
            return
        if self._last is None or self._last[0] != key:
            self._before, self._last = self._last, (key, built)
        reference = self._reference(key)
        if isinstance(reference, str):  # the step to compare with is being compiled
            self._say(reference)
        else:
            self._say("")
        self.mix.value = self._mix_html(
            built, reference if isinstance(reference, _Reference) else None
        )
        self.ir.value = ir_html(built.llvm_ir) if self.show_ir.value else ""

    def _reference(self, key: str) -> _Reference | str | None:
        """What to compare with: built, being built (a sentence), or nothing."""
        assert self.session is not None
        step = self.compare.value
        if step == BEFORE:
            if self._before is None:
                return None
            return _Reference(*self._before, "the schedule shown before")
        candidate, label, secs = self._chosen(step)
        ref_key = candidate_key(candidate)
        if ref_key == key:
            return None
        built = self._built.get(ref_key)
        if built is None:
            self._want(candidate)
            return f"Compiling {label} to compare with\u2026"
        if isinstance(built, str):
            return f"{label[0].upper()}{label[1:]} cannot be compared: {built}"
        return _Reference(ref_key, built, label, secs)

    def _chosen(self, choice: int | str) -> tuple[Candidate, str, float | None]:
        """The schedule a "Compare with" choice names (a step, a stored trial), its name and,
        for a stored trial, its stored timing."""
        assert self.session is not None
        if isinstance(choice, str):  # TRIAL + a stored trial's id: read once (a record is
            if choice not in self._trials:  # never rewritten)
                record = self.ctx.store.get_trial(int(choice[len(TRIAL) :]))
                name = name_trial(self.ctx.store, record)
                self._trials[choice] = (record.candidate, name, record.median_secs)
            return self._trials[choice]
        return self.session.candidate_at(choice), f"step {choice}", None

    def _mix_html(self, built: _Built, reference: _Reference | None) -> str:
        if reference is None:
            return mix_html(built.mix)
        sentence = compare_mixes(reference.built.mix, built.mix)
        change = f"{sentence.rstrip('.')} (against {reference.label}){self._timing(reference)}"
        return (
            f"<p class='se-code-change'>{html.escape(change)}</p>"
            + mix_html(built.mix, reference.built.mix, reference.label)
            + diff_html(reference.built.mix, built.mix, reference.label)
        )

    def _timing(self, reference: _Reference) -> str:
        """What the measurements say of the two, when both were measured."""
        assert self._current is not None
        secs = self.latency_of(self._current)
        ref_secs = reference.secs or self.latency_of(reference.key)
        if not secs or not ref_secs:
            return "."
        ratio = ref_secs / secs
        faster = f"{ratio:.2f}x faster" if ratio >= 1 else f"{1 / ratio:.2f}x slower"
        return (
            f". Measured: {format_secs(secs)} against {format_secs(ref_secs)}, "
            f"this schedule runs {faster}."
        )

    def _needed(self) -> set[str]:
        """The keys of the schedule on screen and of the step it is compared with."""
        if self.session is None:
            return set()
        needed = {candidate_key(self.session.candidate())}
        if self.compare.value != BEFORE:
            needed.add(candidate_key(self._chosen(self.compare.value)[0]))
        return needed

    def _want(self, candidate: Candidate) -> None:
        """Build ``candidate``'s code unless it is built or on its way (one build at a time)."""
        key = candidate_key(candidate)
        if key in self._built or any(candidate_key(c) == key for c in self._wanted):
            return
        self._wanted.append(candidate)
        if not self._runner.busy:
            self._submit_next()

    def _submit_next(self) -> None:
        while self._wanted:
            candidate = self._wanted.pop(0)
            key = candidate_key(candidate)
            # Only what is on screen now matters: a build for an edit made over since is dropped.
            if key in self._built or key not in self._needed():
                continue
            self._submit(candidate, key)
            return

    def _submit(self, candidate: Candidate, key: str) -> None:
        self.job = self._runner.submit(
            "code", lambda _job: _build(candidate), on_done=lambda job: self._built_done(key, job)
        )

    def _built_done(self, key: str, job: Job) -> None:
        # UI thread
        if job.exception is not None:
            self._built[key] = f"the code could not be read: {job.exception}"
        else:
            self._built[key] = job.result
        self._submit_next()
        self._redisplay()

    def close(self) -> None:
        self._unsubscribe_ctx()
        if self._unsubscribe_session is not None:
            self._unsubscribe_session()
            self._unsubscribe_session = None
        self._runner.shutdown()


def _build(candidate: Candidate) -> _Built | str:
    # Worker thread: no widget, no session.
    code = generated_code(candidate)
    if code.error is not None:
        return f"The schedule does not compile: {code.error}"
    if code.asm is None:
        return f"{code.target} has no assembly listing to read here."
    return _Built(code_mix(code.asm), code.llvm_ir)
