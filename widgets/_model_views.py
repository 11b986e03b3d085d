"""The Model panel's HTML: its task table, its race table and its one-line race summary."""

from __future__ import annotations

import html
from collections.abc import Collection

from explorer.analysis import ModelTimesInfo
from explorer.core import ModelRace
from explorer.model import speed_text
from explorer.text import format_secs


def race_summary(race: ModelRace) -> str:
    tuned, ort = race.entry("tuned"), race.entry("onnxruntime")
    if not (tuned and ort and tuned.fastest_secs and ort.fastest_secs):
        return "no tuned or no ONNX Runtime time (the table says what did not run)"
    ratio = tuned.fastest_secs / ort.fastest_secs
    return (
        f"tuned {format_secs(tuned.fastest_secs)}, ONNX Runtime "
        f"{format_secs(ort.fastest_secs)} ({ratio:.2f}x; {race.trials} trials spent)"
    )


def tasks_html(
    info: ModelTimesInfo, elsewhere: Collection[str] = (), busy: str | None = None
) -> str:
    total = info.tuned_ms or 1.0
    rows = "".join(
        f"<tr><td>{i}</td><td>{html.escape(t.name)}</td><td>{t.weight}</td>"
        f"<td>{ms(t.untuned_ms)}</td><td>{ms(t.tuned_ms)}{_KEPT if t.untuned_kept else ''}"
        f"{_ELSEWHERE if t.name in elsewhere else ''}</td>"
        f"<td>{(t.best_ms or 0.0) / total:.1%}</td></tr>"
        for i, t in enumerate(info.tasks, start=1)
    )
    note = f"<div>{_ELSEWHERE_NOTE}</div>" if any(t.name in elsewhere for t in info.tasks) else ""
    if busy:  # the untuned column was timed beside other work: said where it is read
        note += f"<div class='se-model-busy'>{html.escape(busy)}</div>"
    return (
        "<table><tr><th>#</th><th>task</th><th>calls</th>"
        f"<th title='{_PER_INFERENCE}'>untuned, per inference</th>"
        f"<th title='{_PER_INFERENCE}'>best, per inference</th>"
        f"<th>share now</th></tr>{rows}</table>{note}"
    )


# A new user read "26.9 ms" here against the command line's "13.5 ms x2" (one call, and calls).
_PER_INFERENCE = "one call's time, times the calls an inference makes"

# The database's best of a task is any run's on the same program: another model with the same
# task, or a tune of the task alone. A new user took them for this model's own.
_ELSEWHERE = " <span title='found outside this model&#39;s tunes'>*</span>"
_ELSEWHERE_NOTE = (
    "* found outside this model's tunes (another model with the same task, or the task tuned "
    "alone): Race builds with it; the race after a tune uses that tune's schedules only."
)


# A tuned best no faster than the default: the race builds the task untuned ("now" counts that).
_KEPT = (
    " <span title='no faster than untuned: the network keeps the default'>(untuned kept)</span>"
)


def race_html(race: ModelRace) -> str:
    rows = "".join(
        f"<tr><td>{html.escape(e.name)}</td><td>"
        + (html.escape(e.error) if e.error else format_secs(e.fastest_secs))
        + "</td><td>"
        + ("" if e.max_error is None else f"{e.max_error:.1g}")
        + "</td></tr>"
        for e in race.entries
    )
    env = race.environment
    cpu, ort = (html.escape(str(env.get(k))) for k in ("cpu_model", "onnxruntime_version"))
    speed = speed_text(race)
    return (
        f"<b>Race {race.id}</b> ({race.trials} trials spent; {cpu}, "
        f"{env.get('num_threads')} threads, ONNX Runtime {ort}"
        + (f"; {html.escape(speed)}" if speed else "")
        + ")"
        f"<table><tr><th>build</th><th>fastest call</th><th>max diff vs ONNX Runtime</th></tr>"
        f"{rows}</table>"
    )


def ms(value: float | None) -> str:
    return "-" if value is None else format_secs(value / 1e3)
