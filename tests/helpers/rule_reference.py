"""A slow, obvious evaluation of a rule, bar by bar in Python, its indicators by TA-Lib.

The rule's tree comes from barsweep's parser; everything numeric here is independent
of the engine: indicators are TA-Lib's Python functions on series built bar by bar,
arithmetic is Python's on float64, and the position state is the reference simulator's
(reference.py feeds it through ``signal_at``).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import talib

from barsweep.engine.rules.build import parse_all

from .reference import ref_simulate

NAN = float("nan")


def _talib(name: str, output: str, series: list[np.ndarray], scalars: list) -> np.ndarray:
    """The TA-Lib call a rule function names, the output asked for."""
    one = {"sma": talib.SMA, "ema": talib.EMA, "wma": talib.WMA, "rsi": talib.RSI,
           "roc": talib.ROC, "trix": talib.TRIX, "highest": talib.MAX, "lowest": talib.MIN,
           "atr": talib.ATR}
    if name in one:
        return one[name](*series, *scalars)
    if name == "stdev":
        return talib.STDDEV(series[0], scalars[0], 1.0)
    if name == "bbands":
        period, k = scalars
        up, mid, low = talib.BBANDS(series[0], period, k, k, 0)
        return {"upper": up, "middle": mid, "lower": low}[output]
    if name == "macd":
        line, signal, hist = talib.MACD(series[0], *scalars)
        return {"macd": line, "signal": signal, "hist": hist}[output]
    if name == "stoch":
        fastk, slowk, slowd = scalars
        k, d = talib.STOCH(*series, fastk, slowk, 0, slowd, 0)
        return {"k": k, "d": d}[output]
    if name == "donchian":
        high, low = series
        return talib.MAX(high, scalars[0]) if output == "upper" else talib.MIN(low, scalars[0])
    raise KeyError(name)


class RuleReference:
    """The four signals of a rule at any bar, given the position state there.

    ``signal_at(t, position, entry_price, entry_bar, equity, pending, pending_price)``
    returns ``(long_entry, long_exit, short_entry, short_exit)``; ``position`` is the
    signed quantity (0 when flat), ``pending`` the side of the entry order pending (0:
    none; its level is then NaN).
    """

    def __init__(self, rule, kinds: dict, params: dict, bars: dict) -> None:
        self.trees = parse_all(rule, kinds)
        self.params = {k: float(v) for k, v in params.items()}
        self.bars = {k: np.asarray(v, dtype=np.float64) for k, v in bars.items()
                     if k != "time"}
        if "time" in bars:  # the calendar as pandas reads it (UTC)
            index = pd.DatetimeIndex(np.asarray(bars["time"]).astype("datetime64[ns]"),
                                     tz="UTC")
            calendar = {"hour": index.hour, "minute": index.minute,
                        "weekday": index.day_of_week, "day": index.day,
                        "month": index.month}
            for name, values in calendar.items():
                self.bars.setdefault(name, np.asarray(values, dtype=np.float64))
        self.n = len(self.bars["close"])
        self.series: dict[int, np.ndarray] = {}
        self.state = (0.0, NAN, 0)
        self.account = (NAN, 0, NAN)
        self.t = 0

    def signal_at(self, t: int, position: float, entry_price: float, entry_bar: int,
                  equity: float = NAN, pending: int = 0, pending_price: float = NAN):
        self.state, self.t = (position, entry_price, entry_bar), t
        self.account = (equity, pending, pending_price)
        return tuple(bool(self.value(self.trees[k], t)) for k in
                     ("long_entry", "long_exit", "short_entry", "short_exit"))

    def value(self, node, t: int):
        kind, args = node.kind, node.args
        if kind == "num":
            return node.value if isinstance(node.value, bool) else float(node.value)
        if kind == "param":
            return self.params[node.value]
        if kind == "col":
            return float(self.bars[node.value][t]) if t >= 0 else NAN
        if kind == "state":
            position, price, bar = self.state
            equity, pending, pending_price = self.account
            return {"position": float(np.sign(position)),
                    "entry_price": price if position != 0 else NAN,
                    "bars_held": self.t - bar if position != 0 else 0,
                    "quantity": float(position), "equity": float(equity),
                    "pending": float(pending),
                    "pending_price": pending_price if pending != 0 else NAN}[node.value]
        if kind == "call":
            series = self._indicator(node)
            return float(series[t]) if t >= 0 else NAN
        if kind == "lag":
            return self.value(args[0], t - int(self.value(args[1], t)))
        if kind == "cross":
            a0, b0 = self.value(args[0], t - 1), self.value(args[1], t - 1)
            a1, b1 = self.value(args[0], t), self.value(args[1], t)
            if node.value == "cross_above":
                return a0 < b0 and a1 > b1
            return a0 > b0 and a1 < b1
        values = [self.value(a, t) for a in args]
        return _apply(node, values)

    def _indicator(self, node) -> np.ndarray:
        key = id(node)
        if key not in self.series:
            from barsweep.engine.rules.functions import FUNCTIONS

            name, output = node.value
            n_series = len(FUNCTIONS[name].series)
            series = [np.array([self.value(a, i) for i in range(self.n)], dtype=np.float64)
                      for a in node.args[:n_series]]
            scalars = []
            for a, (_, kind) in zip(node.args[n_series:], FUNCTIONS[name].scalars, strict=True):
                v = self.value(a, 0)
                scalars.append(int(v) if kind == "int" else float(v))
            self.series[key] = _talib(name, output, series, scalars)
        return self.series[key]


def _apply(node, values):
    kind, op = node.kind, node.value
    if kind == "neg":
        return -values[0]
    if kind == "op":
        a, b = np.float64(values[0]), np.float64(values[1])
        with np.errstate(all="ignore"):
            return float({"+": a + b, "-": a - b, "*": a * b, "/": a / b}[op])
    if kind == "helper":
        if op == "abs":
            return abs(values[0])
        if any(math.isnan(v) for v in values):
            return NAN
        return min(values) if op == "min" else max(values)
    if kind == "cmp":
        a, b = values
        if math.isnan(a) or math.isnan(b):
            return False
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b,
                "!=": a != b}[op]
    if kind == "and":
        return all(values)
    if kind == "or":
        return any(values)
    if kind == "not":
        return not values[0]
    raise ValueError(kind)


def reference_run(rule, kinds: dict, combo: dict, bars: dict, ppy: float, **settings):
    """The slow reference's ``(metrics, equity, trades)`` of one combo of ``rule`` over
    ``bars``: the rule evaluated bar by bar (:class:`RuleReference`) and simulated by
    :func:`~helpers.reference.ref_simulate` with ``settings``."""
    ref = RuleReference(rule, kinds, combo, bars)
    return ref_simulate(list(bars["open"]), list(bars["close"]), high=list(bars["high"]),
                        low=list(bars["low"]), ppy=ppy, signal=ref.signal_at, **settings)
