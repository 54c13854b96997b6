"""Grid constraints and result filters: the expression core's language as a value.

Constraints such as ``fast < slow`` or ``2 <= fast < slow and stop < 0.1`` are read by the
expression core (:mod:`barsweep.engine.expr`: :func:`ast.parse` and a whitelist, never
``eval``): decimal numbers, names, ``+ - * /`` (with unary ``-``/``+`` and parentheses), the
comparisons ``< <= > >= == !=`` (chains such as ``a < b < c`` mean ``a < b and b < c``)
and the boolean operators ``and``/``&``, ``or``/``|`` and ``not``. Anything else (calls,
attributes, subscripts, strings, ``**`` ...) is refused with a caret under it.

Result filters (``--where``) also take quoted strings, parsed with
``parse_expr(text, strings=True)``: a string is compared with ``==`` or ``!=`` to a
name (``symbol == 'MSFT'``, ``sample != "test"``) and takes part in nothing else;
:func:`check_names` then refuses a name holding text that is used as a number, and a
number compared with a string.

Precedence, loosest first: ``or``/``|``; ``and``/``&``; ``not``; comparisons; ``+ -``;
``* /``; unary ``-``/``+``. ``&`` and ``|`` are spellings of ``and`` and ``or`` with the
same precedence (as in pandas' ``query``), so ``a < b & c < d`` means
``(a < b) and (c < d)``.

Arithmetic takes numbers and gives numbers, comparisons take numbers and give booleans,
and/or/not take booleans; an expression whose mix of these makes no sense (``fast + 1``
as a whole, ``(a < b) + 1``, ``fast and slow``) is refused when it is parsed. Any
comparison with NaN on either side is False, ``!=`` included. Evaluation is the engine's
(:mod:`barsweep.engine.expr.arrays`: numpy over whole arrays), the same a block's task
masks its combos with.

:meth:`Expr.truth` decides an expression over whole boxes of values at once by interval
arithmetic: given each name's least and greatest value in a box, it tells whether the
expression holds for every point of the box, for none, or cannot tell. It never claims
more than :meth:`Expr.evaluate` would find point by point (see :meth:`Expr.truth`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from ...engine.expr import UFUNCS, Node, Reader, evaluate
from ...errors import SpecError

__all__ = ["Expr", "check_names", "parse_expr"]


def _lookup(mapping: Mapping, name: str, what: str):
    try:
        return mapping[name]
    except KeyError:
        known = ", ".join(sorted(mapping)) or "(none)"
        raise SpecError(f"no {what} for name {name!r}; given: {known}") from None


def _names(node: Node) -> frozenset[str]:
    if node.kind == "name":
        return frozenset({node.value})
    return frozenset().union(*(_names(a) for a in node.args))


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


def _interval(node: Node, bounds: Mapping) -> _Interval:
    kind, args = node.kind, node.args
    if kind == "num":
        return _exact_interval(np.float64(node.value), np.float64(node.value))
    if kind == "name":
        lo, hi = _lookup(bounds, node.value, "bounds")
        with np.errstate(over="ignore", invalid="ignore"):
            return _exact_interval(np.asarray(lo, dtype=np.float64),
                                   np.asarray(hi, dtype=np.float64))
    if kind == "neg":
        lo, hi, ok = _interval(args[0], bounds)
        return -hi, -lo, ok
    op = node.value
    (a_lo, a_hi, a_ok), (b_lo, b_hi, b_ok) = (_interval(a, bounds) for a in args)
    ok = a_ok & b_ok
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if op == "+":
            lo, hi = a_lo + b_lo, a_hi + b_hi
        elif op == "-":
            lo, hi = a_lo - b_hi, a_hi - b_lo
        else:
            if op == "/":  # a divisor that may be 0 gives inf or NaN: unknown
                ok = ok & ((b_lo > 0) | (b_hi < 0))
            corners = [UFUNCS[op](a, b) for a in (a_lo, a_hi) for b in (b_lo, b_hi)]
            lo = functools.reduce(np.minimum, corners)
            hi = functools.reduce(np.maximum, corners)
        return _checked(lo, hi, ok)


def _truth(node: Node, bounds: Mapping) -> _Truth:
    if node.kind == "cmp":
        return _compare_intervals(node.value, *(_interval(a, bounds) for a in node.args))
    truths = [_truth(a, bounds) for a in node.args]
    if node.kind == "not":
        always, never = truths[0]
        return never, always
    if node.kind == "and":
        return _all_of(truths)
    never, always = _all_of([(n, a) for a, n in truths])  # or: De Morgan's dual of and
    return always, never


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
    node : barsweep.engine.expr.Node
        Its tree, which the engine evaluates (a block's task masks its combos with the
        trees of the grid's constraints).
    """

    text: str
    node: Node = field(repr=False)

    @property
    def names(self) -> frozenset[str]:
        """The names the expression reads."""
        return _names(self.node)

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
        return np.asarray(evaluate(self.node, env), dtype=bool)

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
        always, never = _truth(self.node, bounds)
        return np.atleast_1d(always), np.atleast_1d(never)

    def __str__(self) -> str:
        return self.text


def parse_expr(text: str, *, strings: bool = False) -> Expr:
    """Parse a boolean expression such as ``"fast < slow"``.

    Parameters
    ----------
    text : str
        The expression; see the module docstring for the language.
    strings : bool, default False
        Accept quoted strings compared with ``==`` or ``!=`` to a name
        (``symbol == 'MSFT'``): result filters. Grid constraints, decided over boxes
        of numbers, take none.

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
    >>> parse_expr("symbol == 'MSFT' and fast < 10", strings=True).evaluate(
    ...     {"symbol": np.array(["MSFT", "IBM"]), "fast": 5}).tolist()
    [True, False]
    """
    if not isinstance(text, str):
        raise SpecError(f"an expression must be a string, got {type(text).__name__} {text!r}")
    shown = repr(text) if len(text) <= 80 else f"{text[:60]!r}... ({len(text):,} characters)"
    return Expr(text=text, node=Reader(text, f"cannot parse expression {shown}",
                                       strings).parse())


def check_names(expr: Expr, allowed: Iterable[str], what: str = "constraint",
                text: Iterable[str] = ()) -> None:
    """Refuse an expression that reads a name outside `allowed`, or uses a name as the
    other kind of value than it holds.

    Parameters
    ----------
    expr : Expr
        A parsed expression.
    allowed : iterable of str
        The names it may read.
    what : str, default "constraint"
        What the expression is, for the message.
    text : iterable of str, default ()
        The names among `allowed` that hold text (``symbol``, ``sample``); the others
        hold numbers.

    Raises
    ------
    SpecError
        Naming the first unknown name (in alphabetical order) and listing `allowed`; or
        a name holding text used as a number (in arithmetic, ``<``, or compared with a
        number), or a name holding numbers compared with a string.

    Examples
    --------
    >>> check_names(parse_expr("fast < slow"), ["fast", "slow"])
    >>> check_names(parse_expr("symbol != 'IBM'", strings=True), ["symbol"], "--where",
    ...             text=["symbol"])
    """
    allowed = sorted(set(allowed))
    unknown = sorted(expr.names.difference(allowed))
    if unknown:
        listed = ", ".join(allowed) if allowed else "(none)"
        raise SpecError(
            f"unknown name {unknown[0]!r} in {what} {expr.text!r}; allowed names: {listed}"
        )
    text = frozenset(text)
    for name, kind in _uses(expr.node):
        holds = "text" if name in text else "number"
        if kind == holds:
            continue
        if holds == "text":
            raise SpecError(f"{name!r} in {what} {expr.text!r} holds text: compare it with "
                            f"== or != to a quoted string, e.g. \"{name} == 'X'\"")
        raise SpecError(f"{name!r} in {what} {expr.text!r} holds numbers: compare it with "
                        f"a number, not a string")


def _uses(node: Node, kind: str = "number") -> Iterable[tuple[str, str]]:
    """Each name of `node` with the kind of value its place needs: "text" (compared
    with == or != to a string, or to a name holding text) or "number"."""
    if node.kind == "name":
        yield node.value, kind
        return
    if node.kind == "cmp" and node.value in ("==", "!=") and any(
            a.kind == "str" for a in node.args):
        for a in node.args:
            yield from _uses(a, "text")
        return
    for a in node.args:
        yield from _uses(a)
