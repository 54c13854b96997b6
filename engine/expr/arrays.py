"""Expressions evaluated elementwise with numpy: conditions over whole arrays at once.

:func:`evaluate` gives one expression's values over arrays (or scalars) of its names,
broadcast as numpy does; :func:`holds` gives where every condition of a set holds over
``n`` combos, the mask a block's task keeps its combos by. A set of trees is compiled
once per process into a flat program (:func:`program`, cached): each distinct subtree
one numpy call over whole arrays, in order, its result dropped after its last use.
Running it walks no tree and runs no Python per element.

Arithmetic is numpy's on int64 and float64 (``/`` divides truly; ``x / 0`` is inf or NaN,
quietly). A comparison with NaN on either side is False, ``!=`` included (as the rule
runtime's ``ne``). Strings (result filters) compare with ``==`` and ``!=``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import numpy as np

from ...errors import SpecError
from .read import Node

__all__ = ["UFUNCS", "evaluate", "holds", "program"]


def _not_equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a != b``, False wherever either side is NaN."""
    if np.issubdtype(a.dtype, np.inexact) or np.issubdtype(b.dtype, np.inexact):
        return np.less(a, b) | np.greater(a, b)
    return np.not_equal(a, b)


#: The numpy function of each operator of the language (``neg`` the unary minus).
UFUNCS = {"neg": np.negative, "+": np.add, "-": np.subtract, "*": np.multiply,
          "/": np.true_divide, "<": np.less, "<=": np.less_equal, ">": np.greater,
          ">=": np.greater_equal, "==": np.equal, "!=": _not_equal, "not": np.logical_not,
          "and": lambda *values: functools.reduce(np.logical_and, values),
          "or": lambda *values: functools.reduce(np.logical_or, values)}

#: A program: its steps ``(op, value, args)`` (``op`` a key of :data:`UFUNCS`, or
#: ``num``/``str``/``name`` reading ``value``; ``args`` earlier steps), the steps each step
#: is the last to read (dropped after it), and the steps giving the results.
Program = tuple[tuple[tuple[str, object, tuple[int, ...]], ...], tuple[tuple[int, ...], ...],
                tuple[int, ...]]


def _key(node: Node) -> tuple:
    """What the value of ``node`` depends on: its kind, value (with the value's type: 1
    and 1.0 are equal nodes, int64 and float64 arrays), type and arguments."""
    return (node.kind, node.value, type(node.value), node.type, tuple(map(_key, node.args)))


def program(nodes: Sequence[Node]) -> Program:
    """The flat program of ``nodes`` (compiled once per process for each set).

    >>> from barsweep.engine.expr import read_expr
    >>> steps, _, results = program([read_expr("a < b and a > 0", "e")])
    >>> [op for op, _, _ in steps], results
    (['name', 'name', '<', 'num', '>', 'and'], (5,))
    """
    return _compiled(tuple(map(_key, nodes)))


@functools.lru_cache(maxsize=256)
def _compiled(keys: tuple[tuple, ...]) -> Program:
    steps, index = [], {}

    def emit(key: tuple) -> int:
        if key not in index:
            kind, value, _, _, args = key
            op = value if kind in ("op", "cmp") else kind
            if op not in UFUNCS and op not in ("num", "str", "name"):
                raise ValueError(f"a {kind!r} node is not evaluated elementwise")
            steps.append((op, value, tuple(emit(a) for a in args)))
            index[key] = len(steps) - 1
        return index[key]

    results = tuple(emit(key) for key in keys)
    last = {}
    for i, (_, _, args) in enumerate(steps):
        last.update(dict.fromkeys(args, i))
    frees = [[] for _ in steps]
    for arg, i in last.items():
        if arg not in results:
            frees[i].append(arg)
    return tuple(steps), tuple(map(tuple, frees)), results


def _run(compiled: Program, env: Mapping) -> list[np.ndarray]:
    steps, frees, results = compiled
    values: list = [None] * len(steps)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for i, (op, value, args) in enumerate(steps):
            if op in ("num", "str"):
                values[i] = np.asarray(value)
            elif op == "name":
                values[i] = np.asarray(_lookup(env, value))
            else:
                values[i] = UFUNCS[op](*(values[a] for a in args))
            for a in frees[i]:
                values[a] = None
    return [values[i] for i in results]


def _lookup(env: Mapping, name: str):
    try:
        return env[name]
    except KeyError:
        known = ", ".join(sorted(env)) or "(none)"
        raise SpecError(f"no values for name {name!r}; given: {known}") from None


def evaluate(node: Node, env: Mapping[str, np.ndarray | float]) -> np.ndarray:
    """The values of ``node`` over the arrays (or scalars) of ``env``.

    Parameters
    ----------
    node : Node
        A tree of the core language (``num``, ``str``, ``name`` leaves).
    env : mapping of str to array_like or scalar
        The values of the names, broadcast against each other as numpy does.

    Returns
    -------
    numpy.ndarray
        Of the broadcast shape of the values used (0-d when all are scalars); bool for
        a condition.

    Raises
    ------
    SpecError
        If a name of the expression has no value in ``env``.

    Examples
    --------
    >>> from barsweep.engine.expr import read_expr
    >>> evaluate(read_expr("2 <= fast < slow", "e"), {"fast": np.array([1, 2, 5]), "slow": 4})
    array([False,  True, False])
    """
    return _run(program([node]), env)[0]


def holds(conditions: Sequence[Node], values: Mapping[str, np.ndarray]) -> np.ndarray:
    """Where every condition holds, over the ``n`` combos of ``values``.

    Parameters
    ----------
    conditions : sequence of Node
        Trees of type ``bool``.
    values : mapping of str to numpy.ndarray, shape (n,)
        The values of the names, one entry per combo.

    Returns
    -------
    numpy.ndarray of bool, shape (n,)
        All True when there are no conditions. With no values ``n`` is 1 (the one combo
        of a box without axes).

    Examples
    --------
    >>> from barsweep.engine.expr import read_expr
    >>> holds([read_expr("a < b", "e"), read_expr("b < 3", "e")],
    ...       {"a": np.array([0, 1, 2]), "b": np.array([2, 1, 3])}).tolist()
    [True, False, False]
    """
    n = len(next(iter(values.values()))) if values else 1
    keep = np.ones(n, dtype=bool)
    if conditions:
        for result in _run(program(conditions), values):
            keep &= np.broadcast_to(result, (n,))
    return keep
