"""A small, safe expression language for grid constraints and result filters.

Constraints such as ``fast < slow`` or ``2 <= fast < slow and stop < 0.1`` are read by a
tokenizer and a recursive-descent parser into a tree of frozen nodes, then evaluated
elementwise with numpy. Nothing is ever handed to Python's ``eval``: the language has
numbers, names, ``+ - * /`` (with unary minus and parentheses), the comparisons
``< <= > >= == !=`` (chains such as ``a < b < c`` mean ``a < b and b < c``) and the
boolean operators ``and``/``&``, ``or``/``|`` and ``not``.

Precedence, loosest first: ``or``/``|``; ``and``/``&``; ``not``; comparisons; ``+ -``;
``* /``; unary ``-``/``+``. ``&`` and ``|`` are spellings of ``and`` and ``or`` with the
same precedence (as in pandas' ``query``), so ``a < b & c < d`` means
``(a < b) and (c < d)``.

Arithmetic takes numbers and gives numbers, comparisons take numbers and give booleans,
and/or/not take booleans; an expression whose mix of these makes no sense (``fast + 1``
as a whole, ``(a < b) + 1``, ``fast and slow``) is refused when it is parsed. Any
comparison with NaN on either side is False, ``!=`` included.

:meth:`Expr.truth` decides an expression over whole boxes of values at once by interval
arithmetic: given each name's least and greatest value in a box, it tells whether the
expression holds for every point of the box, for none, or cannot tell. It never claims
more than :meth:`Expr.evaluate` would find point by point (see :meth:`Expr.truth`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from barsweep.errors import SpecError

__all__ = ["Expr", "check_names", "parse_expr"]

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op><=|>=|==|!=|<|>|[-+*/()&|])
    """,
    re.VERBOSE,
)
_KEYWORDS = frozenset({"and", "or", "not"})
_OR = frozenset({"or", "|"})
_AND = frozenset({"and", "&"})
_COMPARISONS = frozenset({"<", "<=", ">", ">=", "==", "!="})
_INT64_MAX = 2**63 - 1

_ARITHMETIC = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide}
_COMPARE = {
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
    "==": np.equal,
    "!=": np.not_equal,
}
_HINTS = {
    "=": "; use '==' to compare",
    "!": "; use 'not' (or '!=' to compare)",
    "'": "; strings, calls and attributes are not part of the language",
    '"': "; strings, calls and attributes are not part of the language",
    ".": "; strings, calls and attributes are not part of the language",
}


# --------------------------------------------------------------------------- the tree


@dataclass(frozen=True)
class _Num:
    value: int | float

    kind = "number"

    def names(self) -> frozenset[str]:
        return frozenset()

    def evaluate(self, env: Mapping) -> np.ndarray:
        return np.asarray(self.value)

    def interval(self, bounds: Mapping) -> _Interval:
        return _exact_interval(np.float64(self.value), np.float64(self.value))


@dataclass(frozen=True)
class _Name:
    name: str

    kind = "number"

    def names(self) -> frozenset[str]:
        return frozenset({self.name})

    def evaluate(self, env: Mapping) -> np.ndarray:
        try:
            return np.asarray(env[self.name])
        except KeyError:
            known = ", ".join(sorted(env)) or "(none)"
            raise SpecError(f"no values for name {self.name!r}; given: {known}") from None

    def interval(self, bounds: Mapping) -> _Interval:
        try:
            lo, hi = bounds[self.name]
        except KeyError:
            known = ", ".join(sorted(bounds)) or "(none)"
            raise SpecError(f"no bounds for name {self.name!r}; given: {known}") from None
        with np.errstate(over="ignore", invalid="ignore"):
            return _exact_interval(np.asarray(lo, dtype=np.float64),
                                   np.asarray(hi, dtype=np.float64))


@dataclass(frozen=True)
class _Negate:
    operand: object

    kind = "number"

    def names(self) -> frozenset[str]:
        return self.operand.names()

    def evaluate(self, env: Mapping) -> np.ndarray:
        return np.negative(self.operand.evaluate(env))

    def interval(self, bounds: Mapping) -> _Interval:
        lo, hi, ok = self.operand.interval(bounds)
        return -hi, -lo, ok


@dataclass(frozen=True)
class _Arithmetic:
    op: str
    left: object
    right: object

    kind = "number"

    def names(self) -> frozenset[str]:
        return self.left.names() | self.right.names()

    def evaluate(self, env: Mapping) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return _ARITHMETIC[self.op](self.left.evaluate(env), self.right.evaluate(env))

    def interval(self, bounds: Mapping) -> _Interval:
        a_lo, a_hi, a_ok = self.left.interval(bounds)
        b_lo, b_hi, b_ok = self.right.interval(bounds)
        ok = a_ok & b_ok
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if self.op == "+":
                lo, hi = a_lo + b_lo, a_hi + b_hi
            elif self.op == "-":
                lo, hi = a_lo - b_hi, a_hi - b_lo
            else:
                if self.op == "/":  # a divisor that may be 0 gives inf or NaN: unknown
                    ok = ok & ((b_lo > 0) | (b_hi < 0))
                corners = [_ARITHMETIC[self.op](a, b) for a in (a_lo, a_hi) for b in (b_lo, b_hi)]
                lo = functools.reduce(np.minimum, corners)
                hi = functools.reduce(np.maximum, corners)
            return _checked(lo, hi, ok)


@dataclass(frozen=True)
class _Compare:
    """A chain ``a op0 b op1 c ...``: every link must hold."""

    ops: tuple[str, ...]
    operands: tuple[object, ...]

    kind = "bool"

    def names(self) -> frozenset[str]:
        return frozenset().union(*(o.names() for o in self.operands))

    def evaluate(self, env: Mapping) -> np.ndarray:
        values = [o.evaluate(env) for o in self.operands]
        links = [_compare(op, a, b) for op, a, b in zip(self.ops, values, values[1:], strict=False)]
        return functools.reduce(np.logical_and, links)

    def truth(self, bounds: Mapping) -> _Truth:
        intervals = [o.interval(bounds) for o in self.operands]
        links = [_compare_intervals(op, a, b)
                 for op, a, b in zip(self.ops, intervals, intervals[1:], strict=False)]
        return _all_of(links)


@dataclass(frozen=True)
class _Not:
    operand: object

    kind = "bool"

    def names(self) -> frozenset[str]:
        return self.operand.names()

    def evaluate(self, env: Mapping) -> np.ndarray:
        return np.logical_not(self.operand.evaluate(env))

    def truth(self, bounds: Mapping) -> _Truth:
        always, never = self.operand.truth(bounds)
        return never, always


@dataclass(frozen=True)
class _Logical:
    op: str  # "and" or "or"
    operands: tuple[object, ...]

    kind = "bool"

    def names(self) -> frozenset[str]:
        return frozenset().union(*(o.names() for o in self.operands))

    def evaluate(self, env: Mapping) -> np.ndarray:
        combine = np.logical_and if self.op == "and" else np.logical_or
        return functools.reduce(combine, [o.evaluate(env) for o in self.operands])

    def truth(self, bounds: Mapping) -> _Truth:
        truths = [o.truth(bounds) for o in self.operands]
        if self.op == "and":
            return _all_of(truths)
        never, always = _all_of([(n, a) for a, n in truths])  # or: De Morgan's dual of and
        return always, never


def _compare(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise ``a op b``, False wherever either side is NaN."""
    result = _COMPARE[op](a, b)
    if op == "!=":
        result = result & ~(_isnan(a) | _isnan(b))
    return result


def _isnan(a: np.ndarray) -> np.ndarray:
    return np.isnan(a) if np.issubdtype(a.dtype, np.inexact) else np.zeros(a.shape, dtype=bool)


# --------------------------------------------------------------------------- over boxes
#
# An interval is ``(lo, hi, ok)``: float64 arrays (one entry per box) bounding a number
# expression over the box, trusted only where ``ok``. Elsewhere (a divisor interval that
# holds 0, or a magnitude of 2**53 or more) the value may be anything, NaN included.
# Below 2**53 float64 holds every int64 exactly, so int64 and mixed int/float arithmetic,
# as :meth:`Expr.evaluate` does it, gives the same numbers as float64 here; and
# round-to-nearest is monotonic, so each rounded result over a box lies between the
# rounded results at the box's corners. A truth is ``(always, never)``: bool arrays,
# True where the condition holds at every point of the box, or at none.

_Interval = tuple[np.ndarray, np.ndarray, np.ndarray]
_Truth = tuple[np.ndarray, np.ndarray]
_EXACT = 2.0**53


def _exact_interval(lo: np.ndarray, hi: np.ndarray) -> _Interval:
    return _checked(lo, hi, np.True_)


def _checked(lo: np.ndarray, hi: np.ndarray, ok: np.ndarray) -> _Interval:
    """`ok` narrowed to where both ends are below 2**53 in magnitude (NaN is not)."""
    ok = ok & (np.abs(lo) < _EXACT) & (np.abs(hi) < _EXACT)
    return lo, hi, ok


def _compare_intervals(op: str, a: _Interval, b: _Interval) -> _Truth:
    """Where ``a op b`` holds for every pair of values of the two intervals, or for none."""
    a_lo, a_hi, a_ok = a
    b_lo, b_hi, b_ok = b
    if op == "<":
        always, never = a_hi < b_lo, a_lo >= b_hi
    elif op == "<=":
        always, never = a_hi <= b_lo, a_lo > b_hi
    elif op == ">":
        always, never = a_lo > b_hi, a_hi <= b_lo
    elif op == ">=":
        always, never = a_lo >= b_hi, a_hi < b_lo
    else:
        same = (a_lo == a_hi) & (b_lo == b_hi) & (a_lo == b_lo)
        apart = (a_hi < b_lo) | (b_hi < a_lo)
        always, never = (same, apart) if op == "==" else (apart, same)
    ok = a_ok & b_ok
    return always & ok, never & ok


def _all_of(truths: list[_Truth]) -> _Truth:
    """The truth of a conjunction: always where every part always holds, never where any
    part never does."""
    always = functools.reduce(np.logical_and, [a for a, _ in truths])
    never = functools.reduce(np.logical_or, [n for _, n in truths])
    return always, never


# --------------------------------------------------------------------------- the value


@dataclass(frozen=True)
class Expr:
    """A parsed boolean expression: a frozen, picklable value.

    Build one with :func:`parse_expr`. Two expressions parsed from the same text are equal.

    Attributes
    ----------
    text : str
        The source text, as given.
    """

    text: str
    node: object = field(repr=False)

    @property
    def names(self) -> frozenset[str]:
        """The names the expression reads."""
        return self.node.names()

    def evaluate(self, env: Mapping[str, np.ndarray | float]) -> np.ndarray:
        """Evaluate elementwise over the arrays (or scalars) of `env`.

        Parameters
        ----------
        env : mapping of str to array_like or float
            Values of the names, broadcast against each other as numpy does.

        Returns
        -------
        numpy.ndarray of bool
            The broadcast shape of the values used (0-d when all are scalars).

        Raises
        ------
        SpecError
            If a name of the expression has no value in `env`.

        Examples
        --------
        >>> import numpy as np
        >>> parse_expr("2 <= fast < slow").evaluate({"fast": np.array([1, 2, 5]), "slow": 4})
        array([False,  True, False])
        """
        return np.asarray(self.node.evaluate(env), dtype=bool)

    def truth(self, bounds: Mapping[str, tuple]) -> tuple[np.ndarray, np.ndarray]:
        """Decide the expression over boxes, by interval arithmetic.

        Parameters
        ----------
        bounds : mapping of str to (lo, hi)
            For each name, its least and greatest value in each of ``k`` boxes: array_like
            of shape ``(k,)`` (or scalars, broadcast as numpy does).

        Returns
        -------
        always, never : numpy.ndarray of bool, shape (k,)
            ``always[i]``: :meth:`evaluate` gives True at every point of box ``i`` (every
            combination of values within the bounds); ``never[i]``: False at every
            point. Both False means the bounds cannot tell (the box may be mixed). The
            answer is conservative: a comparison of quantities that may reach 2**53 in
            magnitude or divide by a range holding 0 is never decided.

        Raises
        ------
        SpecError
            If a name of the expression has no bounds.

        Examples
        --------
        >>> expr = parse_expr("fast < slow")
        >>> always, never = expr.truth({"fast": ([2, 2, 10], [5, 12, 20]),
        ...                             "slow": ([10, 10, 5], [20, 20, 8])})
        >>> always.tolist(), never.tolist()
        ([True, False, False], [False, False, True])
        """
        always, never = self.node.truth(bounds)
        return np.atleast_1d(always), np.atleast_1d(never)

    def __str__(self) -> str:
        return self.text


def parse_expr(text: str) -> Expr:
    """Parse a boolean expression such as ``"fast < slow"``.

    Parameters
    ----------
    text : str
        The expression; see the module docstring for the language.

    Returns
    -------
    Expr

    Raises
    ------
    SpecError
        If `text` is not an expression of the language, or is not a condition
        (a number such as ``fast + 1`` is refused). The message shows the text with
        a caret under the position of the problem.

    Examples
    --------
    >>> sorted(parse_expr("fast < slow and not slow > 100").names)
    ['fast', 'slow']
    """
    if not isinstance(text, str):
        raise SpecError(f"an expression must be a string, got {type(text).__name__} {text!r}")
    parser = _Parser(text, _tokenize(text))
    node = parser.parse()
    if node.kind != "bool":
        raise _error(
            text,
            0,
            "the expression is a number, not a condition: compare it, e.g. 'fast < slow'",
        )
    return Expr(text=text, node=node)


def check_names(expr: Expr, allowed: Iterable[str], what: str = "constraint") -> None:
    """Refuse an expression that reads a name outside `allowed`.

    Parameters
    ----------
    expr : Expr
        A parsed expression.
    allowed : iterable of str
        The names it may read.
    what : str, default "constraint"
        What the expression is, for the message.

    Raises
    ------
    SpecError
        Naming the first unknown name (in alphabetical order) and listing `allowed`.

    Examples
    --------
    >>> check_names(parse_expr("fast < slow"), ["fast", "slow"])
    """
    allowed = sorted(set(allowed))
    unknown = sorted(expr.names.difference(allowed))
    if unknown:
        listed = ", ".join(allowed) if allowed else "(none)"
        raise SpecError(
            f"unknown name {unknown[0]!r} in {what} {expr.text!r}; allowed names: {listed}"
        )


# --------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class _Token:
    kind: str  # "number", "name", "op", "keyword" or "end"
    text: str
    pos: int


def _tokenize(text: str) -> list[_Token]:
    """Split `text` into tokens, ending with one ``end`` token."""
    tokens = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            char = text[pos]
            raise _error(text, pos, f"unexpected character {char!r}{_HINTS.get(char, '')}")
        kind = match.lastgroup
        if kind != "space":
            value = match.group()
            if kind == "name" and value in _KEYWORDS:
                kind = "keyword"
            tokens.append(_Token(kind, value, pos))
        pos = match.end()
    tokens.append(_Token("end", "", len(text)))
    return tokens


def _number(literal: str) -> int | float:
    if any(c in literal for c in ".eE"):
        return float(literal)
    value = int(literal)
    return value if value <= _INT64_MAX else float(value)


def _error(text: str, pos: int, message: str) -> SpecError:
    """A SpecError showing `text` with a caret under column `pos` (0-based)."""
    shown = " ".join(text.splitlines()) if "\n" in text or "\r" in text else text
    return SpecError(
        f"cannot parse expression {text!r}: {message} (column {pos + 1})\n"
        f"    {shown}\n"
        f"    {' ' * pos}^"
    )


class _Parser:
    """Recursive descent over a token list; one method per precedence level."""

    def __init__(self, text: str, tokens: list[_Token]) -> None:
        self.text = text
        self.tokens = tokens
        self.i = 0

    @property
    def token(self) -> _Token:
        return self.tokens[self.i]

    def advance(self) -> _Token:
        token = self.tokens[self.i]
        self.i += 1
        return token

    def fail(self, token: _Token, message: str) -> SpecError:
        return _error(self.text, token.pos, message)

    def expect_kind(self, node, kind: str, token: _Token, role: str):
        if node.kind != kind:
            wanted = "a condition" if kind == "bool" else "a number"
            got = "a condition" if node.kind == "bool" else "a number"
            raise self.fail(token, f"{role} needs {wanted}, got {got}")
        return node

    def parse(self):
        if self.token.kind == "end":
            raise self.fail(self.token, "the expression is empty")
        node = self.parse_or()
        if self.token.kind != "end":
            raise self.fail(self.token, f"unexpected {self.describe(self.token)}")
        return node

    def parse_or(self):
        return self.parse_logical("or", _OR, self.parse_and)

    def parse_and(self):
        return self.parse_logical("and", _AND, self.parse_not)

    def parse_logical(self, op: str, spellings: frozenset[str], parse_operand):
        first_token = self.token
        operands = [parse_operand()]
        while self.token.text in spellings and self.token.kind in ("keyword", "op"):
            op_token = self.advance()
            self.expect_kind(operands[0], "bool", first_token, f"'{op_token.text}'")
            right_token = self.token
            operands.append(parse_operand())
            self.expect_kind(operands[-1], "bool", right_token, f"'{op_token.text}'")
        return operands[0] if len(operands) == 1 else _Logical(op, tuple(operands))

    def parse_not(self):
        if self.token.kind == "keyword" and self.token.text == "not":
            self.advance()
            operand_token = self.token
            operand = self.parse_not()
            return _Not(self.expect_kind(operand, "bool", operand_token, "'not'"))
        return self.parse_comparison()

    def parse_comparison(self):
        first_token = self.token
        operands = [self.parse_sum()]
        ops = []
        while self.token.kind == "op" and self.token.text in _COMPARISONS:
            op_token = self.advance()
            self.expect_kind(operands[0], "number", first_token, f"'{op_token.text}'")
            right_token = self.token
            operands.append(self.parse_sum())
            self.expect_kind(operands[-1], "number", right_token, f"'{op_token.text}'")
            ops.append(op_token.text)
        return operands[0] if not ops else _Compare(tuple(ops), tuple(operands))

    def parse_sum(self):
        return self.parse_binary(("+", "-"), self.parse_product)

    def parse_product(self):
        return self.parse_binary(("*", "/"), self.parse_unary)

    def parse_binary(self, ops: tuple[str, ...], parse_operand):
        left_token = self.token
        node = parse_operand()
        while self.token.kind == "op" and self.token.text in ops:
            op_token = self.advance()
            self.expect_kind(node, "number", left_token, f"'{op_token.text}'")
            right_token = self.token
            right = self.expect_kind(parse_operand(), "number", right_token, f"'{op_token.text}'")
            node = _Arithmetic(op_token.text, node, right)
        return node

    def parse_unary(self):
        if self.token.kind == "op" and self.token.text in ("-", "+"):
            op_token = self.advance()
            operand_token = self.token
            operand = self.parse_unary()
            self.expect_kind(operand, "number", operand_token, f"unary '{op_token.text}'")
            return _Negate(operand) if op_token.text == "-" else operand
        return self.parse_atom()

    def parse_atom(self):
        token = self.token
        if token.kind == "number":
            self.advance()
            return _Num(_number(token.text))
        if token.kind == "name":
            self.advance()
            if self.token.kind == "op" and self.token.text == "(":
                raise self.fail(self.token, "function calls are not part of the language")
            return _Name(token.text)
        if token.kind == "op" and token.text == "(":
            self.advance()
            node = self.parse_or()
            if not (self.token.kind == "op" and self.token.text == ")"):
                raise self.fail(self.token, f"expected ')', got {self.describe(self.token)}")
            self.advance()
            return node
        raise self.fail(token, f"expected a number, a name or '(', got {self.describe(token)}")

    @staticmethod
    def describe(token: _Token) -> str:
        if token.kind == "end":
            return "the end of the expression"
        return f"{token.kind} {token.text!r}" if token.kind != "op" else repr(token.text)
