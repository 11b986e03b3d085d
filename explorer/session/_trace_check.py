"""Check a trace that comes from outside (a file, a database, a notebook cell) before using it.

TVM's own replay (``Trace.apply_json_to_schedule``) cannot be trusted with such a trace:

* it kills the process on some inputs: a tile decision containing 0 (SIGFPE), a decision for an
  instruction index that does not exist (SIGSEGV);
* it silently "repairs" decisions that do not fit: ``[2, 2, 2, 2]`` on a loop of extent 127
  becomes ``[1, 1, 1, 127]``, a missing decision is drawn at random, and a trace recorded for
  another shape quietly turns into a different schedule.

So a trace goes through three gates. (1) A static check in plain Python names the first thing
that is wrong with the JSON itself (shape, instruction names, variables, decisions). (2) The
trace is replayed in an isolated worker process, so that whatever TVM does to a process happens
to that one. (3) The decisions TVM used there are compared with the file's; any difference is an
error naming the instruction, the file's decision and TVM's. Only then may the caller replay the
trace in its own process, where it now replays exactly as written.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import re
import shutil
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from explorer import _tvm
from explorer.core import factorizations
from explorer.errors import TraceError
from explorer.target import Target
from explorer.types import JSON
from explorer.workloads import Workload

# Instructions whose decision a trace records. TVM draws a fresh one when it is missing.
SAMPLING_KINDS = (
    "SamplePerfectTile",
    "SamplePartitionedTile",
    "SampleCategorical",
    "SampleComputeLocation",
)
MAX_INSTRUCTIONS = 10_000  # a real trace has tens; this bounds the work spent on a hostile file
MAX_TRACE_NESTING = 8
"""Lists within lists a trace may hold: a real one is 5 deep (trace, instructions, instruction,
its inputs, a list input). A deeper one is refused before it is copied or sent to a worker
(a 900-deep one ended in a RecursionError, exit 1)."""
_INT64 = 2**63
_INT32 = 2**31  # TVM's loop extents and tile factors are int32
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_REPLAY_TIMEOUT_SECS = 120.0
_WITH_INDEX_MAP = "TransformLayout"
"""The instruction whose input holds an index map, written by TVM as its own JSON graph in a
string, and whose pad value is ``null`` when there is none."""


# -- gate 1: the JSON itself ---------------------------------------------------------------------
def check_trace_json(trace_json: Any) -> JSON:
    """Check a trace's JSON without running TVM; return a plain private copy of it.

    Raises:
        TraceError: the first problem found, in one sentence naming the instruction at fault.
    """
    # The cheap checks first: a hostile trace must not cost its size in copying.
    is_pair = isinstance(trace_json, (list, tuple)) and len(trace_json) == 2
    if is_pair and isinstance(trace_json[0], (list, tuple)):
        if len(trace_json[0]) > MAX_INSTRUCTIONS:
            raise TraceError(
                f"a trace has at most {MAX_INSTRUCTIONS} instructions (got {len(trace_json[0])})"
            )
    check_nesting(trace_json, MAX_TRACE_NESTING, "a trace", TraceError)  # before json, pickle
    try:
        plain = json.loads(json.dumps(trace_json, allow_nan=False))
    except (TypeError, ValueError, RecursionError):
        raise TraceError(
            "a trace must be plain JSON (lists, strings and finite numbers), "
            f"not {_describe(trace_json)}"
        ) from None
    is_pair = isinstance(plain, list) and len(plain) == 2
    if not (is_pair and all(isinstance(part, list) for part in plain)):
        raise TraceError(
            "a trace must be a list [instructions, decisions] as trace_to_json gives, "
            f"not {_describe(plain)}"
        )
    insts, decisions = plain
    defined: set[str] = set()
    for index, inst in enumerate(insts):
        _check_instruction(index, inst, defined)
    _check_decisions(insts, decisions)
    return plain


def _check_instruction(index: int, inst: Any, defined: set[str]) -> None:
    if not (
        isinstance(inst, list)
        and len(inst) == 4
        and isinstance(inst[0], str)
        and all(isinstance(part, list) for part in inst[1:])
    ):
        raise TraceError(
            f"must be [name, inputs, attributes, outputs], not {_describe(inst)}",
            instruction=index,
        )
    kind, inputs, attrs, outputs = inst
    if not _tvm.is_instruction_kind(kind):
        raise TraceError(f"{kind!r} is not a TVM schedule instruction", instruction=index)
    for value in _flatten(inputs):
        _check_input(index, kind, value, defined)
    for value in _flatten(attrs):
        if (value is None and kind != _WITH_INDEX_MAP) or isinstance(value, dict):
            raise TraceError(
                f"{kind} has an attribute {_short(value)}; attributes are numbers, "
                "strings, booleans and lists of them",
                instruction=index,
            )
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= _INT64:
            raise TraceError(f"{kind} has an attribute out of range: {value}", instruction=index)
    if kind == "Split":
        _check_split_factors(index, inputs)
    if kind in ("SamplePerfectTile", "SamplePartitionedTile"):
        _check_tile_attrs(index, kind, attrs)
    for name in outputs:
        if not isinstance(name, str) or not _VARIABLE.match(name) or name == "None":
            raise TraceError(
                f"{kind} defines an output named {_short(name)}; outputs are names like l3",
                instruction=index,
            )
        if name in defined:
            raise TraceError(
                f"{kind} defines {name}, which an earlier instruction already defines",
                instruction=index,
            )
        defined.add(name)


def _check_input(index: int, kind: str, value: Any, defined: set[str]) -> None:
    if isinstance(value, bool) and kind == "Annotate":
        return  # an annotation's value: MetaSchedule's RewriteLayout marks its copies with true
    if isinstance(value, bool) or value is None or isinstance(value, dict):
        raise TraceError(
            f'{kind} has an input {_short(value)}; inputs are variables, "None", '
            "quoted strings, numbers and (an annotation's value) booleans",
            instruction=index,
        )
    if isinstance(value, int) and abs(value) >= _INT64:
        raise TraceError(f"{kind} has an input out of range: {value}", instruction=index)
    if isinstance(value, str):
        is_literal = value == "None" or (len(value) >= 2 and value[0] == value[-1] == '"')
        if kind == _WITH_INDEX_MAP and value.startswith("{"):
            _check_index_map(index, kind, value)
        elif not is_literal and value not in defined:
            raise TraceError(
                f"{kind} uses {_short(value)}, which no earlier instruction defines",
                instruction=index,
            )


def _check_index_map(index: int, kind: str, value: str) -> None:
    # Only the graph's shape is checked here: TVM's replay (gate 2) checks the map itself.
    try:
        graph = json.loads(value)
        root = graph["nodes"][graph["root_index"]]["type"]
    except (ValueError, KeyError, IndexError, TypeError):
        root = None
    if root != "tirx.IndexMap":
        raise TraceError(
            f"{kind} has an input {_short(value)} that is not an index map TVM wrote",
            instruction=index,
        )


def _check_split_factors(index: int, inputs: list[Any]) -> None:
    # A literal factor of 0 divides by zero inside TVM; -1 means "inferred" like None.
    for factor in inputs[1:]:
        if isinstance(factor, int) and (factor == 0 or factor < -1 or factor >= _INT32):
            raise TraceError(
                f"Split has a factor {factor}; factors are positive integers below 2**31 or None",
                instruction=index,
            )
        if isinstance(factor, float):
            raise TraceError(
                f"Split has a factor {factor}; factors are integers", instruction=index
            )


def _check_tile_attrs(index: int, kind: str, attrs: list[Any]) -> None:
    if not (
        len(attrs) >= 2
        and all(isinstance(a, int) and not isinstance(a, bool) for a in attrs[:2])
        and 1 <= attrs[0] <= 16
        and 0 <= attrs[1] < _INT32
    ):
        raise TraceError(
            f"{kind} needs attributes [n, max_innermost_factor] with 1 <= n <= 16 "
            f"(got {_short(attrs)})",
            instruction=index,
        )


def _check_decisions(insts: list[Any], decisions: list[Any]) -> None:
    seen: dict[int, Any] = {}
    for entry in decisions:
        if not (
            isinstance(entry, list)
            and len(entry) == 2
            and isinstance(entry[0], int)
            and not isinstance(entry[0], bool)
        ):
            raise TraceError(
                f"each decision must be [instruction index, value], not {_describe(entry)}"
            )
        index, value = entry
        if not 0 <= index < len(insts):
            raise TraceError(
                f"a decision names instruction {index}, but the trace has "
                f"{len(insts)} instructions (0..{len(insts) - 1})"
            )
        kind = insts[index][0]
        if kind not in SAMPLING_KINDS:
            raise TraceError(
                f"has a decision, but {kind} takes none (only {', '.join(SAMPLING_KINDS)} do)",
                instruction=index,
            )
        if index in seen:
            raise TraceError(f"{kind} has two decisions", instruction=index)
        _check_decision_value(index, insts[index], value)
        seen[index] = value
    for index, inst in enumerate(insts):
        if inst[0] in SAMPLING_KINDS and index not in seen:
            raise TraceError(
                f"{inst[0]} has no decision; TVM would draw one at random, so the trace would "
                "not say which schedule it is",
                instruction=index,
            )


def _check_decision_value(index: int, inst: list[Any], value: Any) -> None:
    kind, _inputs, attrs, _outputs = inst
    if kind in ("SamplePerfectTile", "SamplePartitionedTile"):
        n = attrs[0]
        if not (
            isinstance(value, list)
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        ):
            raise TraceError(
                f"{kind}'s decision must be a list of {n} integers, not {_describe(value)}",
                instruction=index,
            )
        if len(value) != n:
            raise TraceError(
                f"{kind}'s decision {_short(value)} has {len(value)} factors; this tile has {n}",
                instruction=index,
            )
        if any(v < 1 or v >= _INT32 for v in value):
            raise TraceError(
                f"{kind}'s decision {_short(value)} has a factor out of range; tile factors are "
                "positive integers below 2**31",
                instruction=index,
            )
        return
    if not isinstance(value, int) or isinstance(value, bool):
        raise TraceError(
            f"{kind}'s decision must be an integer, not {_describe(value)}", instruction=index
        )
    if kind == "SampleCategorical":
        candidates = attrs[0] if attrs and isinstance(attrs[0], list) else []
        if not 0 <= value < len(candidates):
            raise TraceError(
                f"{kind}'s decision {value} is not an index into its {len(candidates)} "
                f"candidates (0..{len(candidates) - 1})",
                instruction=index,
            )
    elif kind == "SampleComputeLocation" and not -2 <= value < _INT32:
        raise TraceError(
            f"{kind}'s decision {value} is out of range (-2 inline, -1 root, 0.. a loop)",
            instruction=index,
        )


def _flatten(values: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    for value in values:
        if isinstance(value, list):
            out.extend(_flatten(value))
        else:
            out.append(value)
    return out


def _describe(value: Any) -> str:
    if isinstance(value, (list, dict)):
        return _short(value, 60)
    if isinstance(value, str):
        return f"the string {_short(value)}"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return repr(value)
    return f"a {type(value).__name__}"


def _short(value: Any, limit: int = 40) -> str:
    """A JSON value as a message shows it: cut to ``limit`` characters."""
    try:
        text = json.dumps(value, ensure_ascii=True)
    except (TypeError, ValueError, RecursionError):
        text = f"a {type(value).__name__}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- re-fitting to another shape ------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class CheckedTrace:
    """A trace that replays exactly as written, and what re-fitting it changed (if asked to);
    ``target`` is the one the file says it was made for (a saved session or a record), if any.
    """

    trace: JSON
    notes: tuple[str, ...]
    target: Target | None = None


def refit_trace(workload: Workload, trace_json: Any) -> CheckedTrace:
    """Re-fit a trace recorded for another shape of the same operator to ``workload``.

    Only on request, never implicitly: each tile decision that no longer multiplies to its
    loop's extent becomes the factorization of the new extent nearest to it (in log scale, the
    innermost factor within the tile's limit), and each change is named in ``notes``. Anything
    else that does not fit is refused as ``check_trace`` refuses it.

    Raises:
        TraceError: the trace is malformed, or something other than a tile does not fit.
    """

    plain = check_trace_json(trace_json)
    notes: list[str] = []
    for _ in range(len(plain[1]) + 1):
        try:
            return CheckedTrace(check_trace(workload, plain), tuple(notes))
        except TraceError as exc:
            index = exc.instruction
            if exc.misfit is None or index is None or not isinstance(exc.misfit[1], list):
                raise
            old, got = exc.misfit
            extent, attrs = math.prod(got), plain[0][index][2]
            options = factorizations(extent, len(old), attrs[1]) or (tuple(got),)
            new = list(min(options, key=lambda f: _log_distance(f, old)))
            position = next(p for p, (i, _) in enumerate(plain[1]) if i == index)
            plain[1][position] = [index, new]
            notes.append(
                f"instruction {index} ({plain[0][index][0]}): tile {old} re-fitted to {new} "
                f"for a loop of extent {extent}"
            )
    raise TraceError("the trace could not be re-fitted to this shape")  # pragma: no cover


def _log_distance(factors: Iterable[int], old: Iterable[int]) -> float:
    return sum(abs(math.log(a) - math.log(b)) for a, b in zip(factors, old, strict=True))


# -- files ----------------------------------------------------------------------------------------
MAX_FILE_BYTES = 4 << 20
"""The largest trace or session file read. A trace is about 120 bytes an instruction as a
session saves it, so the most a trace may hold (``MAX_INSTRUCTIONS``) is about 1.2 MB; a larger
file is refused by its size, before anything is parsed (a 50 MB one was parsed for 38 s and
1.4 GB of memory before its instructions were counted; ``/dev/zero`` is endless)."""
MAX_FILE_NESTING = 32
"""Lists and objects within each other a trace, session or record file may hold (a saved
session with a loaded trace is about 10 deep)."""


def read_json_file(path: str | os.PathLike[str], *, what: str, error: type[Exception]) -> Any:
    """The JSON value in a file, or ``error`` naming the file and what is wrong with it.

    Reads at most ``MAX_FILE_BYTES`` (a device or a huge file is refused, not read whole),
    refuses values nested deeper than ``MAX_FILE_NESTING``, and accepts a UTF-8 byte-order
    mark, as editors on some systems write one.
    """
    name = os.fspath(path)
    if os.path.exists(f"{name}-shm"):
        # A database in WAL mode, named by mistake: closing a descriptor of it would drop the
        # locks that a store of this process holds on it (see explorer.storage._files).
        raise error(f"{name} is an SQLite database ({name}-shm is beside it), not {what}")
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)
    except IsADirectoryError:
        raise error(f"{name} is a folder, not {what}") from None
    except OSError as exc:
        raise error(f"{name}: cannot read it ({exc.strerror or exc})") from None
    if len(raw) > MAX_FILE_BYTES:
        raise error(f"{name} is larger than {MAX_FILE_BYTES >> 20} MiB: not {what}")
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise error(f"{name}: not a JSON file ({what})") from None
    check_nesting(data, MAX_FILE_NESTING, f"{name}: its JSON", error)
    return data


def check_nesting(value: Any, limit: int, what: str, error: type[Exception]) -> None:
    """Refuse (``error``) a value with lists, tuples or dicts nested deeper than ``limit``;
    iterative, so that no depth reaches Python's recursion limit here (or later, in ``json``
    or ``pickle``)."""
    level: list[Any] = [value]
    for _ in range(limit):
        level = [
            child
            for item in level
            if isinstance(item, (list, tuple, dict))
            for child in (item.values() if isinstance(item, dict) else item)
        ]
        if not level:
            return
    if any(isinstance(item, (list, tuple, dict)) for item in level):
        raise error(f"{what} nests lists or objects more than {limit} levels deep")


# -- gates 2 and 3: replay in an isolated worker, compare decisions ------------------------------
def check_trace(workload: Workload, trace_json: Any) -> JSON:
    """Every gate: the static check, a replay in an isolated process, the decisions compared.

    Returns:
        A plain copy of the trace, which replays in this process exactly as written.

    Raises:
        TraceError: the trace is malformed, does not apply to ``workload``, crashes TVM, or
            TVM would replay it with other decisions than the ones it records.
    """
    return check_trace_on_module(workload.mod(), trace_json, name=workload.key())


def check_trace_on_module(mod: Any, trace_json: Any, *, name: str = "the module") -> JSON:
    """``check_trace`` for a bare ``IRModule`` (a MetaSchedule workload, say); ``name`` is
    what the messages call it."""
    plain = check_trace_json(trace_json)
    reply = _CHECKER.replay(mod, plain)
    if not reply.get("ok"):
        index = reply.get("index")
        raise TraceError(
            f"the trace does not apply to {name}: {reply['error']}",
            instruction=index,
            kind=None if index is None else plain[0][index][0],
            detail=reply.get("detail"),
        )
    compare_decisions(plain, reply["decisions"])
    return plain


def compare_decisions(trace_json: JSON, replayed_decisions: JSON) -> None:
    """Raise unless TVM's replay used exactly the decisions that ``trace_json`` records."""
    insts, decisions = trace_json
    used = {int(index): value for index, value in replayed_decisions}
    for index, value in decisions:
        got = used.get(index)
        if got == value:
            continue
        kind = insts[index][0]
        hint = ""
        if kind in ("SamplePerfectTile", "SamplePartitionedTile") and isinstance(got, list):
            extent, product = math.prod(got), math.prod(value)
            if extent != product:
                hint = (
                    f": its factors multiply to {product}, but the loop here has extent "
                    f"{extent} (was the trace recorded for another shape? re-fitting it is "
                    "explicit: refit_trace, or --refit on the command line)"
                )
        raise TraceError(
            f"the file's decision {_short(value)} does not fit; TVM would have used "
            f"{_short(got)} instead{hint}",
            instruction=index,
            kind=kind,
            misfit=(value, got),
        )


def replay_decisions(mod: Any, trace_json: JSON) -> dict[str, Any]:
    """Replay ``trace_json`` on the IRModule ``mod`` here and report the decisions TVM used.

    Only for traces that passed ``check_trace_json``, and only in a process that may die
    (the isolated worker runs this): TVM can still kill the process for inputs no static
    check foresees.
    """
    from explorer.session._errors_map import step_sentence

    sch = _tvm.Schedule(mod)
    try:
        _tvm.apply_trace_json(trace_json, sch)
    except Exception as exc:  # noqa: BLE001  (any refusal is the trace's)
        index = _first_failing(mod, trace_json)
        kind = trace_json[0][index][0] if index is not None else "replay"
        sentence = step_sentence(kind, exc)
        return {"ok": False, "error": sentence, "index": index, "detail": str(exc)}
    return {"ok": True, "decisions": _tvm.trace_to_json(sch.trace)[1]}


def _first_failing(mod: Any, trace_json: JSON) -> int | None:
    """The first instruction whose prefix of the trace no longer replays (TVM does not say)."""
    insts, decisions = trace_json
    for end in range(1, len(insts) + 1):
        prefix = [insts[:end], [d for d in decisions if d[0] < end]]
        try:
            _tvm.apply_trace_json(prefix, _tvm.Schedule(mod))
        except Exception:  # noqa: BLE001
            return end - 1
    return None


class _Checker:
    """One lazily started worker process that replays untrusted traces for this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._worker: Any = None
        self._log_dir: str | None = None

    def replay(self, mod: Any, trace_json: JSON) -> Mapping[str, Any]:
        from explorer._process import owned_temp_dir
        from explorer.core import Worker, WorkerLost

        # The module itself, not the workload's description: any workload replays, custom
        # families included, without the worker knowing them.
        request = {"op": "replay", "mod": _tvm.save_json(mod), "trace": trace_json}
        with self._lock:
            if self._worker is None or not self._worker.is_alive:
                if self._log_dir is None:
                    # Named after this process, so the next one removes it after a kill -9.
                    self._log_dir = owned_temp_dir("explorer-trace-check-")
                self._worker = Worker(
                    "build", num_threads=1, memory_limit_bytes=2 << 30, log_dir=self._log_dir
                )
            try:
                reply: dict[str, Any] = self._worker.request(request, _REPLAY_TIMEOUT_SECS)
            except WorkerLost as lost:
                self._worker = None
                return {
                    "ok": False,
                    "error": f"replaying it kills TVM ({lost.message})",
                    "detail": lost.detail,
                }
        if not reply.get("ok") and reply.get("stage") == "internal":
            return {"ok": False, "error": "the replay failed", "detail": reply.get("error")}
        return reply

    def close(self) -> None:
        with self._lock:
            if self._worker is not None:
                self._worker.close()
                self._worker = None
            if self._log_dir is not None:
                shutil.rmtree(self._log_dir, ignore_errors=True)
                self._log_dir = None


_CHECKER = _Checker()
atexit.register(_CHECKER.close)
