"""The builtin strategies written as rules: each gives the builtin's results, bit for
bit (tests/engine/test_rules_builtins.py), and ``barsweep strategies`` shows them.

``buy_and_hold`` as a rule (``entry: True``) enters on the first bar of any run (a
walk-forward window's too) and again after a stop or target closed its position; the
builtin enters on bar 0 of the series only. Over whole runs without stops the two are
the same.
"""

from __future__ import annotations

from .build import Rule


def _cross(line_a: str, line_b: str) -> tuple[str, str]:
    return f"cross_above({line_a}, {line_b})", f"cross_below({line_a}, {line_b})"


_BANDS = "bbands(close, period, k)"

#: Builtin name -> the same strategy as a Rule (its parameters keep the builtin's names).
BUILTIN_RULES: dict[str, Rule] = {
    "buy_and_hold": Rule("True", "False"),
    "sma_cross": Rule(*_cross("sma(close, fast)", "sma(close, slow)")),
    "ema_cross": Rule(*_cross("ema(close, fast)", "ema(close, slow)")),
    "rsi": Rule("cross_below(rsi(close, period), lower)",
                "cross_above(rsi(close, period), upper)"),
    "trix": Rule(*_cross("trix(close, period)", "ema(trix(close, period), signal)")),
    "macd": Rule(*_cross("macd(close, fast, slow, signal).hist", "0")),
    "bollinger": Rule(f"close < {_BANDS}.lower", f"close >= {_BANDS}.middle",
                      short_entry=f"close > {_BANDS}.upper",
                      short_exit=f"close <= {_BANDS}.middle"),
    "donchian": Rule("close > highest(high, period)[1]", "close < lowest(low, period)[1]"),
}
