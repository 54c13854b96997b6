"""A checked rule made into the engine's strategy pieces: indicator slots and the source
of a signal function.

Every indicator call of a rule that is not inside another one is a slot: a row of the
block's indicator table per distinct tuple of its parameters' values, hoisted once and
shared by the rules and combos that use it (two slots of the same text are one). Its
row is computed by :func:`row` from the bars, nested indicators first, with the
indicators' own kernels. A series the kernels' :class:`~barsweep.engine.core.inputs.Bars`
record does not carry (``volume``) read outside an indicator is a slot too: its row is
the column. What remains (arithmetic, comparisons, lags, crosses, the
position state) is evaluated at each bar by the generated signal (:func:`signal_source`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ...errors import SpecError
from ..core.calendar import CALENDAR
from ..core.calendar import missing as missing_time
from ..core.inputs import BAR_COLUMNS
from ..indicators.registry import INDICATORS
from .functions import FUNCTIONS
from .parse import Node

#: Names the generated signal's source imports from :mod:`barsweep.engine.rules.runtime`.
RUNTIME = ("at", "at_row", "cross_above", "cross_below", "fmax", "fmin", "held", "ne", "price",
           "side")


def text(node: Node) -> str:
    """The canonical text of a node: one spelling per meaning, fully parenthesised
    where operators meet (the key of a slot and of a compiled rule).

    >>> from barsweep.engine.rules.parse import parse_rule
    >>> text(parse_rule("close>sma( close,n )and not(open<1.0)", {"n": "int"}))
    '((close > sma(close, n)) and (not (open < 1)))'
    """
    kind, value, args = node.kind, node.value, node.args
    if kind == "num":
        return _number(value)
    if kind in ("col", "param", "state"):
        return value
    if kind == "call":
        name, output = value
        return f"{name}({', '.join(map(text, args))})" + (f".{output}" if output else "")
    if kind in ("helper", "cross"):
        return f"{value}({', '.join(map(text, args))})"
    if kind == "lag":
        return f"{text(args[0])}[{text(args[1])}]"
    if kind == "neg":
        return f"(-{text(args[0])})"
    if kind == "not":
        return f"(not {text(args[0])})"
    joiner = f" {value} "
    return f"({joiner.join(map(text, args))})"


def _number(value) -> str:
    """A number's one spelling: ``1`` for 1 and 1.0, ``0.5``, ``True``."""
    if isinstance(value, bool) or not float(value).is_integer():
        return repr(value if isinstance(value, bool) else float(value))
    return str(int(value))


def walk(node: Node):
    """``node`` and every node under it, parents first."""
    yield node
    for arg in node.args:
        yield from walk(arg)


def params_of(node: Node) -> tuple[str, ...]:
    """The parameters a node reads, in order of first appearance."""
    return tuple(dict.fromkeys(n.value for n in walk(node) if n.kind == "param"))


def slots(rules: Mapping[str, Node]) -> list[Node]:
    """The distinct outermost indicator calls of the rules, and the series they read
    outside one that are not in the kernels' Bars (:func:`is_slot`), in order of
    appearance."""
    found: dict[str, Node] = {}

    def visit(node: Node) -> None:
        if is_slot(node):
            found.setdefault(text(node), node)
            return
        for arg in node.args:
            visit(arg)

    for node in rules.values():
        visit(node)
    return list(found.values())


def is_slot(node: Node) -> bool:
    """Whether ``node``, met outside an indicator, is read from the indicator table: an
    indicator call, or a series the kernels' Bars record does not carry (``volume``)."""
    return node.kind == "call" or (node.kind == "col" and node.value not in BAR_COLUMNS)


def columns_of(rules: Mapping[str, Node]) -> frozenset[str]:
    """The bar columns the rules read."""
    return frozenset(n.value for node in rules.values() for n in walk(node) if n.kind == "col")


# ---------------------------------------------------------------------- indicator rows


def row(node: Node, columns: Mapping[str, np.ndarray], values: Mapping[str, float],
        memo: dict[str, np.ndarray]) -> np.ndarray:
    """The values of a per-bar numeric node at every bar, as float64.

    Parameters
    ----------
    node : Node
        A numeric node that reads no position state.
    columns : mapping of column name to ndarray, shape (n_bars,)
    values : mapping of parameter name to value (ints for int parameters)
    memo : dict
        Rows already computed in this block, by canonical text with the values in it.

    Indicators take their inputs as TA-Lib's Python functions do: from the first bar
    where every input is defined, so ``ema(rsi(close, n), m)`` equals
    ``talib.EMA(talib.RSI(close, n), m)``.
    """
    if node.kind == "call":
        key = f"{text(node)} {[values[p] for p in params_of(node)]}"
        if key not in memo:
            memo[key] = _indicator(node, columns, values, memo)
        return memo[key]
    return np.asarray(_value(node, columns, values, memo), dtype=np.float64)


def _indicator(node: Node, columns, values, memo) -> np.ndarray:
    name, output = node.value
    function = FUNCTIONS[name]
    indicator = INDICATORS[function.outputs[output]]
    n_series = len(function.series)
    series = [np.ascontiguousarray(row(a, columns, values, memo)) for a in node.args[:n_series]]
    scalars = [_scalar(a, kind, values)
               for a, (_, kind) in zip(node.args[n_series:], function.scalars, strict=True)]
    result = indicator.fn(*series, *scalars)
    return result if indicator.output is None else result[indicator.output]


def _scalar(node: Node, kind: str, values: Mapping[str, float]):
    value = values[node.value] if node.kind == "param" else node.value
    return int(value) if kind == "int" else float(value)


def _value(node: Node, columns, values, memo):
    """A numeric node's value: an ndarray over the bars, or a scalar."""
    kind, args = node.kind, node.args
    if kind == "num":
        return float(node.value)
    if kind == "col":
        key = f"column {node.value}"  # checked once a block
        if key not in memo:
            memo[key] = _column(node.value, columns)
        return memo[key]
    if kind == "param":
        return float(values[node.value])
    if kind == "call":
        return row(node, columns, values, memo)
    parts = [_value(a, columns, values, memo) for a in args]
    with np.errstate(divide="ignore", invalid="ignore"):
        if kind == "neg":
            return -parts[0]
        if kind == "op":
            left, right = parts
            return {"+": np.add, "-": np.subtract, "*": np.multiply,
                    "/": np.true_divide}[node.value](left, right)
        if kind == "helper":
            if node.value == "abs":
                return np.abs(parts[0])
            reduce = np.minimum if node.value == "min" else np.maximum
            out = parts[0]
            for part in parts[1:]:
                out = reduce(out, part)
            return out
    if kind == "lag":
        return _lagged(parts[0], int(_scalar(args[1], "int", values)))
    raise ValueError(f"not a numeric series node: {text(node)}")


def _column(name: str, columns) -> np.ndarray:
    """Bar column ``name`` as float64; SpecError when the bars have none, or when it is
    NaN at every bar (bars imported without it)."""
    if name not in columns:
        if name in CALENDAR:
            raise missing_time(name)
        raise SpecError(f"the rule reads {name}, but the bars have no {name} column")
    column = np.asarray(columns[name], dtype=np.float64)
    if len(column) and np.isnan(column).all():
        raise SpecError(f"the rule reads {name}, but the bars' {name} is NaN throughout "
                        f"(bars imported without a {name} column)")
    return column


def _lagged(series: np.ndarray, k: int) -> np.ndarray:
    out = np.full(series.shape, np.nan)
    if k < len(series):
        out[k:] = series[: len(series) - k]
    return out


# ------------------------------------------------------------------ the signal's source


def signal_source(rules: Mapping[str, Node], slot_texts: Mapping[str, int],
                  param_index: Mapping[str, int]) -> str:
    """The body of ``signal(ind, rows, fparams, bars, t, position, entry_price,
    entry_bar)`` (and ``equity, pending, pending_price`` when a rule reads the account,
    :data:`~.functions.ACCOUNT_STATE`) returning ``(long_entry, long_exit, short_entry,
    short_exit)``.

    ``rules`` maps those four names to trees (a rule given twice is evaluated once),
    ``slot_texts`` each slot's canonical text to its index in ``rows``, ``param_index``
    each parameter to its column of ``fparams``. Every value the rules read (a
    parameter, an indicator's or a column's value at a bar) is read once, into a local
    at the top, before any ``and`` or ``or``: each is read once however often the rules
    name it, and no array is used under a branch (where numba would count its
    references at every bar).
    """
    emit = _Emitter(slot_texts, param_index)
    lines, names = [], {}
    for name in ("long_entry", "long_exit", "short_entry", "short_exit"):
        key = text(rules[name])
        if key not in names:
            names[key] = name
            lines.append(f"    {name} = {emit(rules[name], 't')}")
    returned = ", ".join(names[text(rules[n])] for n in
                         ("long_entry", "long_exit", "short_entry", "short_exit"))
    reads = [f"    {local} = {expr}" for expr, local in emit.reads.items()]
    return "\n".join((*reads, *lines, f"    return {returned}"))


class _Emitter:
    """Python source of a node's value at the bar given as an index expression; the
    values it reads are locals, defined in ``reads`` (expression -> local name)."""

    def __init__(self, slot_texts: Mapping[str, int], param_index: Mapping[str, int]):
        self.slots, self.params = slot_texts, param_index
        self.reads: dict[str, str] = {}

    def read(self, expression: str) -> str:
        """The local holding ``expression``'s value (defined once, in order)."""
        if expression not in self.reads:
            self.reads[expression] = f"v{len(self.reads)}"
        return self.reads[expression]

    def __call__(self, node: Node, i: str) -> str:
        kind, value, args = node.kind, node.value, node.args
        if kind == "num":
            return repr(value) if isinstance(value, bool) else repr(float(value))
        if kind == "param":
            return self.read(f"fparams[{self.params[value]}]")
        if kind == "col" and value in BAR_COLUMNS:
            return self.read(f"bars.{value}[t]" if i == "t" else f"at(bars.{value}, {i})")
        if is_slot(node):
            row_of = self.read(f"rows[{self.slots[text(node)]}]")
            return self.read(f"ind[{row_of}, t]" if i == "t" else f"at_row(ind, {row_of}, {i})")
        if kind == "state":
            return {"position": "side(position)", "bars_held": "held(position, t, entry_bar)",
                    "entry_price": "price(position, entry_price)",
                    "quantity": "position", "equity": "equity", "pending": "pending",
                    "pending_price": "price(pending, pending_price)"}[value]
        if kind == "lag":
            return self(args[0], f"{i} - {self._int(args[1])}")
        if kind == "cross":
            before = f"{i} - 1"
            a, b = args
            return (f"{value}({self(a, before)}, {self(b, before)}, {self(a, i)}, "
                    f"{self(b, i)})")
        if kind == "helper":
            parts = [self(a, i) for a in args]
            if value == "abs":
                return f"abs({parts[0]})"
            out = parts[0]
            for part in parts[1:]:
                out = f"f{value}({out}, {part})"
            return out
        if kind == "neg":
            return f"(-{self(args[0], i)})"
        if kind == "not":
            return f"(not {self(args[0], i)})"
        if kind == "cmp" and value == "!=":
            return f"ne({self(args[0], i)}, {self(args[1], i)})"
        joiner = f" {value} "
        return f"({joiner.join(self(a, i) for a in args)})"

    def _int(self, node: Node) -> str:
        return str(int(node.value)) if node.kind == "num" else f"int({self(node, 't')})"
