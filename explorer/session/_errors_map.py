"""Translate TVM's schedule errors into plain-language ``PrimitiveError``\\ s.

TVM renders a ``ScheduleError`` as a header, the IR with the offending part underlined, and one
``Error message: ...`` line that refers to objects as ``s_tir.SBlock#0`` / ``tirx.For#1``. Users
think in the names they typed, so each known message is matched here and rephrased with those
names; TVM's full text stays available as ``PrimitiveError.detail``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from explorer.errors import PrimitiveError
from explorer.session._params import shown

_VERBS = {
    "vectorize": "vectorized",
    "parallel": "parallelized",
    "bind": "bound to a thread axis",
    "unroll": "unrolled",
}

Reason = Callable[[re.Match[str], Mapping[str, Any]], str]

# (pattern on the "Error message" sentence, argument at fault, plain-language reason)
_RULES: list[tuple[str, str, Reason]] = [
    (
        r'The "(\w+)" cannot be fulfilled .*not a data parallel block iter',
        "loop",
        lambda m, a: (
            f"loop {a.get('loop')} is a reduction loop (a block iterates a reduction axis with "
            f"it); only data-parallel loops can be {_VERBS.get(m.group(1), m.group(1))}"
        ),
    ),
    (
        r'The "(\w+)" cannot be fulfilled',
        "loop",
        lambda m, a: (
            f"loop {a.get('loop')} cannot be {_VERBS.get(m.group(1), m.group(1))}: a block "
            "under it binds its iterators in a way that forbids it"
        ),
    ),
    (
        r"can't be fused because the outer loop .* is not the parent of the inner loop",
        "loops",
        lambda m, a: (
            "the loops must be perfectly nested, each one directly inside the previous "
            "(outer to inner, nothing else in between)"
        ),
    ),
    (
        r"can't be fused",
        "loops",
        lambda m, a: "these loops cannot be fused (they must be perfectly nested, outer to inner)",
    ),
    (
        r"product of factors is not larger than or equal to the extent",
        "factors",
        lambda m, a: "the factors must multiply to at least the loop extent",
    ),
    (
        r"Only one factor can be specified as -1 or none",
        "factors",
        lambda m, a: "at most one factor may be None",
    ),
    (
        r"constant factors are required to be positive",
        "factors",
        lambda m, a: "every factor must be a positive integer or None",
    ),
    (
        r"block has init statement",
        "block",
        lambda m, a: (
            f"block {a.get('block')} is a reduction (it has an init statement); only a block "
            "that computes each element in one statement can be inlined"
        ),
    ),
    (
        r"is an output block",
        "block",
        lambda m, a: (
            f"block {a.get('block')} writes an output of the function, so it cannot be "
            + (
                "inlined"
                if "inline" in a.get("__primitive__", "")
                else "moved under another block's loop (move its consumer with "
                "reverse_compute_at instead)"
            )
        ),
    ),
    (
        r"required to have only a single producer block",
        "block",
        lambda m, a: (
            f"block {a.get('block')} can only be reverse-inlined into a single producer that is "
            "a complete (non-reduction) block with no other consumer; try cache_write on the "
            "reduction first"
        ),
    ),
    (
        r"required to have only a single consumer|only a single consumer",
        "block",
        lambda m, a: f"block {a.get('block')} must have a single consumer to be inlined here",
    ),
    (
        r"not to be touched by any data parallel block iter",
        "loop",
        lambda m, a: (
            f"loop {a.get('loop')} is a data-parallel (spatial) loop; rfactor needs a loop that "
            "only the block's reduction axes use"
        ),
    ),
    (
        r"`factor_axis` is required to be in \[(-?\d+), (-?\d+)\]",
        "factor_axis",
        lambda m, a: f"must be between {m.group(1)} and {m.group(2)}",
    ),
    (
        r"has (\d+) (read|write) regions, so `buffer_index` is required to be in \[0, (\d+)\)",
        "__index__",
        lambda m, a: (
            f"block {a.get('block')} has {m.group(1)} {m.group(2)} buffer(s); the index must be "
            f"in 0..{int(m.group(3)) - 1}"
        ),
    ),
    (
        r"storage scope .* is invalid",
        "storage_scope",
        lambda m, a: "is not a storage scope TVM knows",
    ),
    (
        r"`axis` is required to be in \[(-?\d+), (-?\d+)\)",
        "axis",
        lambda m, a: f"must be in {m.group(1)}..{int(m.group(2)) - 1}",
    ),
    (
        r"is not allocated by a block",
        "buffer_index",
        lambda m, a: (
            "the buffer is a function argument; storage_align only applies to buffers "
            "allocated inside the function (e.g. by cache_read/cache_write)"
        ),
    ),
    (
        r"appears in the input array for multiple times",
        "loops",
        lambda m, a: "names a loop twice",
    ),
    (
        r"not in a chain|not under the same scope|loops are not in the same line",
        "loops",
        lambda m, a: (
            "the loops must lie on one path of the loop nest (each inside the previous one), "
            "not in different blocks' nests"
        ),
    ),
    (
        r"consumer\(s\) of the given block to be present under the target loop",
        "loop",
        lambda m, a: (
            f"every consumer of block {a.get('block')} must be under loop {a.get('loop')}; "
            "computing it there would break the dependence (move the consumers first)"
        ),
    ),
    (
        r"producer\(s\) of the given block to be present under the target loop",
        "loop",
        lambda m, a: (
            f"every producer of block {a.get('block')} must be under loop {a.get('loop')}; "
            "computing it there would break the dependence (move the producers first)"
        ),
    ),
    (
        r"under the same block scope, and loop not to be the ancestor of block",
        "loop",
        lambda m, a: (
            f"loop {a.get('loop')} must be in the same scope as block {a.get('block')} and must "
            "not already enclose it"
        ),
    ),
    (
        r"not a stage pipeline|stage pipeline",
        "block",
        lambda m, a: (
            "the blocks in this scope do not form a stage pipeline (each buffer written by one "
            "block, no overlapping writes), so the block cannot be moved"
        ),
    ),
    (
        r'The "?(\w+)"? cannot be fulfilled|does not have compact dataflow',
        "loop",
        lambda m, a: (
            f"loop {a.get('loop')} cannot be "
            f"{_VERBS.get(a.get('__primitive__', ''), 'changed this way')}: a block under it is "
            "neither a complete block nor a whole reduction (for example the init and update "
            "halves of a decomposed reduction), so TVM cannot prove its iterations independent"
        ),
    ),
    (
        r"is not a complete block - it violates condition #(\d)",
        "block",
        lambda m, a: (
            f"block {a.get('block')} is not a complete block (it must be the only writer of "
            "its output region, iterate data-parallel axes only, and not read what it writes), "
            "so it cannot be moved under another loop"
        ),
    ),
    (
        r"TensorRegion pattern match failed",
        "block",
        lambda m, a: (
            f"TVM cannot relate block {a.get('block')}'s buffer accesses to loop "
            f"{a.get('loop')} (their index expressions are not simple affine ones); "
            "move the block to a loop of the nest its accesses are written in"
        ),
    ),
    (
        r"Cannot find a block with the name: (\S+)",
        "block",
        lambda m, a: f"no block named {m.group(1)}",
    ),
    (
        r"not a reduction block|is not a reduction",
        "block",
        lambda m, a: f"block {a.get('block')} is not a reduction block",
    ),
    (
        r"required to be an ancestor|is not an ancestor|not the ancestor",
        "loop",
        lambda m, a: f"loop {a.get('loop')} does not enclose block {a.get('block')}",
    ),
]

_OBJECT_REF = re.compile(r"\b(?:a |an )?(?:s_tir\.|tirx\.)?(SBlock|For)#\d+")


def error_sentence(exc: BaseException) -> str:
    """TVM's one-sentence reason: the ``Error message:`` line, else the last non-empty line."""
    text = str(exc)
    for line in text.splitlines():
        if line.startswith("Error message:"):
            sentence = line[len("Error message:") :].strip()
            return re.sub(r"^ScheduleError:\s*", "", sentence)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else type(exc).__name__


def translate(primitive: str, exc: BaseException, args: Mapping[str, Any]) -> PrimitiveError:
    """A ``PrimitiveError`` that explains ``exc`` (raised by TVM) in terms of ``args``.

    The argument at fault is the one the matched rule names; an unmatched message blames the
    first block/loop argument given, with TVM's own sentence (object references cleaned up).
    """
    sentence = error_sentence(exc)
    context = {**args, "__primitive__": primitive}
    arg: str | None
    for pattern, rule_arg, reason in _RULES:
        match = re.search(pattern, sentence)
        if match is None:
            continue
        arg = rule_arg
        if arg == "__index__":
            arg = next((k for k in ("read_index", "write_index", "buffer_index") if k in args), "")
        if arg not in args:
            arg = _fallback_arg(args)
        return PrimitiveError(
            primitive,
            arg,
            reason(match, context),
            value=shown(args.get(arg)) if arg else None,
            detail=str(exc),
        )
    arg = _fallback_arg(args)
    cleaned = plain_sentence(
        _OBJECT_REF.sub(lambda m: "a block" if m.group(1) == "SBlock" else "a loop", sentence)
    )
    return PrimitiveError(
        primitive,
        arg,
        f"TVM refused it: {cleaned}",
        value=shown(args.get(arg)) if arg else None,
        detail=str(exc),
    )


def _fallback_arg(args: Mapping[str, Any]) -> str | None:
    for key in ("loop", "loops", "block", "trace"):
        if args.get(key) is not None:
            return key
    return next(iter(args), None)


_TYPE_WORDS = {
    "s_tir.LoopRV": "a loop",
    "s_tir.SBlockRV": "a block",
    "ir.Expr": "a number",
    "ir.IntImm": "an integer",
    "ir.FloatImm": "a number",
    "ffi.Array": "a list",
    "ffi.String": "a string",
    "ffi.SmallStr": "a string",
    "None": "None",
}


def _type_words(name: str) -> str:
    if name in _TYPE_WORDS:
        return _TYPE_WORDS[name]
    inner = re.sub(r"\b(?:ffi|ir|s_tir|tirx)\.", "", name)  # Optional<Array<int>> and the like
    return f"a value of type {inner}" if "<" in inner else f"a {inner}"


def plain_sentence(sentence: str) -> str:
    """TVM's sentence without its internals: no ``Check failed`` condition, no FFI type names,
    no object addresses (the whole text stays available as an error's ``detail``)."""
    match = re.search(r"Expected `([^`]+)` but got `([^`]+)`", sentence)
    if match:
        expected, got = (_type_words(g) for g in match.groups())
        return f"it expects {expected} but is given {got}"
    # TVM's internal checks read "Check failed: (cond) is false: reason"; keep the reason.
    match = re.match(r"^(?:\w+Error: )?Check failed: .*?(?:is false)?:\s*(.+)$", sentence)
    if match and match.group(1).strip():
        sentence = match.group(1).strip()
    elif "Check failed" in sentence:
        return "these instructions do not fit together here (an internal check of TVM failed)"
    sentence = re.sub(
        r"`?\b((?:ffi|ir|s_tir|tirx)\.\w+)`?", lambda m: _type_words(m.group(1)), sentence
    )
    return re.sub(r"\s*\b0x[0-9a-fA-F]+\b", "", sentence)


# Stand-ins for the names a trace instruction does not have (its loops are variables, not names).
_LOOP, _BLOCK = "\x00loop", "\x00block"


def step_sentence(kind: str, exc: BaseException) -> str:
    """TVM's refusal of one trace instruction (``Vectorize``, ``Reorder``...) in plain words:
    ``translate`` with "the loop" and "the block" for the objects it names."""
    reason = translate(kind.lower(), exc, {"loop": _LOOP, "loops": _LOOP, "block": _BLOCK}).reason
    for placeholder, words in ((_LOOP, "the loop"), (_BLOCK, "the block")):
        reason = reason.replace(f"{words.split()[1]} {placeholder}", words)
        reason = reason.replace(placeholder, words)
    return reason
