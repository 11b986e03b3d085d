"""Tokenizer and recursive-descent parser for the custom-expression language (see ``_expr``).

Grammar (``[]`` optional, ``{}`` repeated)::

    statement := access ("=" | "+=" | "max" "=" | "min" "=") expr EOF
    access    := NAME "[" [index {"," index}] "]"
    index     := iterm {("+" | "-") iterm}                     -- affine in the index variables
    iterm     := "-" iterm | ifactor {"*" ifactor}             -- at most one non-constant factor
    ifactor   := INT | NAME | "(" index ")"
    expr      := term {("+" | "-") term}
    term      := unary {("*" | "/") unary}
    unary     := "-" unary | primary
    primary   := NUMBER | access | NAME "(" expr {"," expr} ")" | "(" expr ")"

Every node keeps the character offset it starts at, so later (semantic) errors can point at it too.
Nothing here is ever passed to ``eval``.
"""

from __future__ import annotations

import keyword
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass

from explorer.errors import WorkloadError

MAX_TEXT = 2000  # longer text is a paste accident, not an operator
MAX_DEPTH = 64  # nesting limit: keeps the recursive descent far from Python's recursion limit
MAX_OPERATORS = 256  # binary chains are built in loops, so depth alone does not bound the tree
MAX_INDEX_CONST = 1 << 20  # index constants/coefficients beyond this overflow int32 index maths

# name -> arity; the lowering and the NumPy reference map each to their own implementation.
FUNCTIONS: dict[str, int] = {
    "max": 2,
    "min": 2,
    "exp": 1,
    "log": 1,
    "sqrt": 1,
    "tanh": 1,
    "sigmoid": 1,
    "relu": 1,
    "abs": 1,
}
ASSIGN_OPS = ("=", "+=", "max=", "min=")


# -- AST -------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Affine:
    """An index expression ``const + sum(coeff * var)``; ``terms`` in order of first appearance."""

    terms: tuple[tuple[str, int], ...]
    const: int
    pos: int
    end: int  # one past the last character, to quote the index back in messages

    @property
    def variables(self) -> tuple[str, ...]:
        return tuple(v for v, _ in self.terms)


@dataclass(frozen=True, slots=True)
class Num:
    value: float
    pos: int


@dataclass(frozen=True, slots=True)
class Access:
    name: str
    indices: tuple[Affine, ...]
    pos: int


@dataclass(frozen=True, slots=True)
class Call:
    fn: str
    args: tuple[Expr, ...]
    pos: int


@dataclass(frozen=True, slots=True)
class BinOp:
    op: str  # "+", "-", "*", "/"
    lhs: Expr
    rhs: Expr
    pos: int  # of the operator


@dataclass(frozen=True, slots=True)
class Neg:
    operand: Expr
    pos: int


Expr = Num | Access | Call | BinOp | Neg


@dataclass(frozen=True, slots=True)
class Statement:
    output: Access
    op: str  # one of ASSIGN_OPS
    rhs: Expr
    op_pos: int


# -- tokens ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # "name", "number", "op", "end"
    text: str
    pos: int


_TOKEN_RE = re.compile(
    r"(?P<space>\s+)"
    r"|(?P<number>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op>\+=|[-+*/=\[\](),])",
    re.ASCII,  # digits and letters are ASCII only: int() would accept other scripts' digits
)


def tokenize(text: str) -> list[Token]:
    """Split ``text`` into tokens; raises ``WorkloadError`` at the first unknown character."""
    tokens: list[Token] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if m is None:
            raise WorkloadError(
                f"unexpected character {text[pos]!r} in expression", position=pos, text=text
            )
        if m.lastgroup == "name" and keyword.iskeyword(m.group()):
            # TVMScript prints buffers and loop variables as Python names.
            raise WorkloadError(
                f"{m.group()!r} is a Python keyword and cannot name a tensor or index variable",
                position=pos,
                text=text,
            )
        if m.lastgroup != "space":
            tokens.append(Token(m.lastgroup or "", m.group(), pos))
        pos = m.end()
    tokens.append(Token("end", "", len(text)))
    return tokens


# -- parser ----------------------------------------------------------------------------------
class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0
        self.depth = 0
        self.num_operators = 0
        self.output_text = "M[i]"

    # Step helpers ----------------------------------------------------------------------------
    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def peek(self, ahead: int = 1) -> Token:
        return self.tokens[min(self.i + ahead, len(self.tokens) - 1)]

    def advance(self) -> Token:
        tok = self.tokens[self.i]
        self.i = min(self.i + 1, len(self.tokens) - 1)
        return tok

    def error(self, message: str, pos: int | None = None) -> WorkloadError:
        return WorkloadError(
            message, position=self.tok.pos if pos is None else pos, text=self.text
        )

    def describe(self, tok: Token) -> str:
        return "end of expression" if tok.kind == "end" else repr(tok.text)

    def expect(self, text: str, context: str) -> Token:
        if self.tok.kind == "op" and self.tok.text == text:
            return self.advance()
        raise self.error(f"expected {text!r} {context}, found {self.describe(self.tok)}")

    def is_op(self, *texts: str) -> bool:
        return self.tok.kind == "op" and self.tok.text in texts

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(f"expression nested more than {MAX_DEPTH} levels deep")

    def binary(self, op: Token, lhs: Expr, rhs: Expr) -> BinOp:
        self.num_operators += 1
        if self.num_operators > MAX_OPERATORS:
            raise self.error(f"expression has more than {MAX_OPERATORS} operators", op.pos)
        return BinOp(op.text, lhs, rhs, op.pos)

    # Statement -------------------------------------------------------------------------------
    def statement(self) -> Statement:
        if self.tok.kind != "name":
            raise self.error(
                f"expected the output tensor (e.g. C[i, j]), found {self.describe(self.tok)}"
            )
        out = self.access()
        op_pos = self.tok.pos
        self.output_text = self.text[out.pos : op_pos].strip()  # quoted back in hints
        if self.is_op("=", "+="):
            op = self.advance().text
        elif (
            self.tok.kind == "name"
            and self.tok.text in ("max", "min")
            and self.peek().kind == "op"
            and self.peek().text == "="
        ):
            op = self.advance().text + "="
            self.advance()
        else:
            raise self.error(
                "expected '=', '+=', 'max=' or 'min=' after the output, "
                f"found {self.describe(self.tok)}"
            )
        rhs = self.expr()
        if self.tok.kind != "end":
            raise self.error(
                f"unexpected {self.describe(self.tok)} after the end of the expression"
            )
        return Statement(out, op, rhs, op_pos)

    def access(self) -> Access:
        name = self.advance()
        self.expect("[", f"after tensor name {name.text!r}")
        indices: list[Affine] = []
        if not self.is_op("]"):
            indices.append(self.index())
            while self.is_op(","):
                self.advance()
                indices.append(self.index())
        self.expect("]", f"to close the indices of {name.text!r}")
        return Access(name.text, tuple(indices), name.pos)

    # Index expressions (affine) --------------------------------------------------------------
    def index(self) -> Affine:
        start = self.tok.pos
        terms, const = self.iterm()
        while self.is_op("+", "-"):
            sign = 1 if self.advance().text == "+" else -1
            t2, c2 = self.iterm()
            terms = _add_terms(terms, t2, sign)
            const += sign * c2
        end = self.tokens[self.i - 1].pos + len(self.tokens[self.i - 1].text)
        self._check_const(const, start)
        return Affine(tuple((v, c) for v, c in terms.items() if c != 0), const, start, end)

    def iterm(self) -> tuple[dict[str, int], int]:
        if self.is_op("-"):
            self.advance()
            self.enter()
            terms, const = self.iterm()
            self.depth -= 1
            return {v: -c for v, c in terms.items()}, -const
        terms, const = self.ifactor()
        while self.is_op("*"):
            star = self.advance()
            t2, c2 = self.ifactor()
            if terms and t2:
                raise self.error(
                    "index expressions must be affine: a product may have only one factor "
                    "that depends on an index variable",
                    star.pos,
                )
            if terms:
                terms, const = {v: c * c2 for v, c in terms.items()}, const * c2
            else:
                terms, const = {v: c * const for v, c in t2.items()}, const * c2
            self._check_const(max([abs(const), *map(abs, terms.values())]), star.pos)
        return terms, const

    def ifactor(self) -> tuple[dict[str, int], int]:
        tok = self.tok
        if tok.kind == "number":
            if not tok.text.isdigit():
                raise self.error(f"index constants must be integers (got {tok.text})")
            self.advance()
            value = int(tok.text)
            self._check_const(value, tok.pos)
            return {}, value
        if tok.kind == "name":
            if self.peek().kind == "op" and self.peek().text in ("[", "("):
                raise self.error(
                    f"indices may only use index variables and integers; {tok.text!r} cannot be "
                    "indexed or called inside [...]"
                )
            self.advance()
            return {tok.text: 1}, 0
        if self.is_op("("):
            self.advance()
            self.enter()
            inner = self.index()
            self.depth -= 1
            self.expect(")", "to close the parenthesis")
            return dict(inner.terms), inner.const
        raise self.error(
            f"expected an index (a variable, an integer or '('), found {self.describe(tok)}"
        )

    def _check_const(self, value: int, pos: int) -> None:
        if abs(value) > MAX_INDEX_CONST:
            raise self.error(f"index constant {value} is too large (limit {MAX_INDEX_CONST})", pos)

    # Value expressions -----------------------------------------------------------------------
    def expr(self) -> Expr:
        node = self.term()
        while self.is_op("+", "-"):
            op = self.advance()
            node = self.binary(op, node, self.term())
        return node

    def term(self) -> Expr:
        node = self.unary()
        while self.is_op("*", "/"):
            op = self.advance()
            node = self.binary(op, node, self.unary())
        return node

    def unary(self) -> Expr:
        if self.is_op("-"):
            minus = self.advance()
            self.enter()
            operand = self.unary()
            self.depth -= 1
            if isinstance(operand, Num):  # fold, so -1.5 is a constant and costs no FLOP
                return Num(-operand.value, minus.pos)
            return Neg(operand, minus.pos)
        return self.primary()

    def primary(self) -> Expr:
        tok = self.tok
        if tok.kind == "number":
            self.advance()
            value = float(tok.text)
            if not math.isfinite(value):
                raise self.error(f"number {tok.text} is too large", tok.pos)
            return Num(value, tok.pos)
        if tok.kind == "name":
            nxt = self.peek()
            if nxt.kind == "op" and nxt.text == "[":
                return self.access()
            if nxt.kind == "op" and nxt.text == "(":
                return self.call()
            raise self.error(
                f"{tok.text!r} is neither a tensor access ({tok.text}[...]) nor a function call "
                f"({tok.text}(...)); index variables may only appear inside [...]"
            )
        if self.is_op("("):
            self.advance()
            self.enter()
            inner = self.expr()
            self.depth -= 1
            self.expect(")", "to close the parenthesis")
            return inner
        raise self.error(
            "expected a number, a tensor access, a function call or '(', "
            f"found {self.describe(tok)}"
        )

    def call(self) -> Call:
        name = self.advance()
        if name.text not in FUNCTIONS and name.text != "sum":
            raise self.error(
                f"unknown function {name.text!r}; known: {', '.join(sorted(FUNCTIONS))}", name.pos
            )
        opening = self.advance()  # "("
        self.enter()
        args = [self.expr()]
        while self.is_op(","):
            self.advance()
            args.append(self.expr())
        self.depth -= 1
        closing = self.expect(")", f"to close the call to {name.text}")
        if name.text == "sum" or (name.text in ("max", "min") and len(args) == 1):
            # A one-argument max(A[i, k]) reads as a reduction, which is spelled in the assignment.
            op = "+=" if name.text == "sum" else f"{name.text}="
            body = self.text[opening.pos + 1 : closing.pos].strip()
            what = (
                "there is no sum() function"
                if name.text == "sum"
                else f"{name.text}() takes 2 arguments (got 1)"
            )
            raise self.error(
                f"{what}; reductions are written with the assignment, e.g. "
                f"`{self.output_text} {op} {body}`",
                name.pos,
            )
        arity = FUNCTIONS[name.text]
        if len(args) != arity:
            raise self.error(
                f"{name.text}() takes {arity} argument{'s' if arity > 1 else ''} "
                f"(got {len(args)})",
                name.pos,
            )
        return Call(name.text, tuple(args), name.pos)


def _add_terms(a: dict[str, int], b: dict[str, int], sign: int) -> dict[str, int]:
    out = dict(a)
    for v, c in b.items():
        out[v] = out.get(v, 0) + sign * c
    return out


def parse(text: str) -> Statement:
    """Parse one statement; raises ``WorkloadError`` with the offending position."""
    if not isinstance(text, str):
        raise WorkloadError(f"expression text must be a string (got {type(text).__name__})")
    if len(text) > MAX_TEXT:
        raise WorkloadError(f"expression is {len(text)} characters long (limit {MAX_TEXT})")
    if not text.strip():
        raise WorkloadError("expression is empty", position=0, text=text)
    return _Parser(text).statement()


def walk(node: Expr) -> Iterator[Expr]:
    """Every node of ``node``'s subtree, parents before children, left to right."""
    yield node
    if isinstance(node, BinOp):
        yield from walk(node.lhs)
        yield from walk(node.rhs)
    elif isinstance(node, Neg):
        yield from walk(node.operand)
    elif isinstance(node, Call):
        for arg in node.args:
            yield from walk(arg)
