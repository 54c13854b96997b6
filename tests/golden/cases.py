"""Regression pins: real daily bars (AAPL, MSFT from bokeh_sampledata), fixed strategies
and executions, and how their metrics are written, read and compared.

The pinned metrics were written by barsweep's own ``backtest()`` (``make_pins.py``), so
they are not an independent oracle: they show that results did not move, not that they
are right. Correctness is held by the oracles that share no code with the engine
(vectorbt fed TA-Lib signals, the literal reference simulator, TA-Lib indicators).

The prices are the file's raw Open/High/Low/Close, not adjusted for splits (AAPL's
2000 and 2005 and MSFT's 2003 splits show as overnight drops): the cases pin the
engine's results, not an investment record. Shared by ``make_pins.py`` (writes
``pinned_metrics.json``) and ``test_regression_pins.py``; the package keeps its name
``golden`` because other tests load the real bars through ``golden.cases``.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from barsweep.engine import METRICS, backtest

PINS_PATH = Path(__file__).with_name("pinned_metrics.json")
SYMBOLS = ("AAPL", "MSFT")
YEAR_DAYS = 252.0
RTOL = 1e-9
ATOL = 1e-12  # for metrics that are 0 up to rounding (e.g. alpha of buy_and_hold)

EXECUTION = dict(fill="next_open", fees=0.0005, slippage=0.0002)
STOPS = dict(EXECUTION, direction="both", stop_loss=0.08, take_profit=0.2, trailing_stop=0.1)
STRATEGIES = (
    ("ema_cross", dict(fast=12, slow=50)),
    ("rsi", dict(period=14, lower=30.0, upper=70.0)),
    ("bollinger", dict(period=20, k=2.0)),
    ("donchian", dict(period=55)),
    ("macd", dict(fast=12, slow=26, signal=9)),
    ("buy_and_hold", {}),
)

#: Every case: ``{symbol, strategy, params, execution}``.
CASES = [
    dict(symbol=symbol, strategy=name, params=params, execution=EXECUTION)
    for symbol in SYMBOLS
    for name, params in STRATEGIES
] + [
    dict(symbol="AAPL", strategy="ema_cross", params=dict(fast=12, slow=50), execution=STOPS),
    dict(symbol="MSFT", strategy="bollinger", params=dict(period=20, k=2.0), execution=STOPS),
]


def stocks_csv() -> Path:
    import bokeh_sampledata

    return Path(bokeh_sampledata.__file__).parent / "_data" / "stocks.csv.gz"


@functools.cache
def load_bars(symbol: str) -> dict[str, np.ndarray]:
    """Daily bars of ``symbol``: read-only float64 open/high/low/close, time as int64 ns
    (midnight UTC), sorted by time."""
    df = pd.read_csv(stocks_csv())
    df = df[df["Ticker"] == symbol].sort_values("Date")
    if df.empty:
        raise KeyError(f"no bars for {symbol!r} in {stocks_csv()}")
    bars = {col.lower(): df[col].to_numpy(dtype=np.float64) for col in
            ("Open", "High", "Low", "Close")}
    dates = pd.to_datetime(df["Date"], format="%Y-%m-%d")  # naive: midnight UTC
    bars["time"] = dates.to_numpy(dtype="datetime64[ns]").view(np.int64)
    for values in bars.values():
        values.flags.writeable = False
    return bars


def case_key(case: dict) -> str:
    """A stable identity of a case, for matching pinned entries to cases."""
    return json.dumps([case["symbol"], case["strategy"], case["params"], case["execution"]],
                      sort_keys=True)


def case_id(case: dict) -> str:
    extra = "-stops" if case["execution"].get("direction") == "both" else ""
    return f"{case['symbol']}-{case['strategy']}{extra}"


def run_case(case: dict) -> dict[str, float]:
    """Every metric of one case; ppy is inferred from the daily spacing (252 a year)."""
    bars = load_bars(case["symbol"])
    res = backtest(bars, case["strategy"], case["params"], year_days=YEAR_DAYS,
                   **case["execution"])
    return res.metrics


def encode(value: float) -> float | str | None:
    """A metric for JSON: NaN as null, infinities as "inf"/"-inf", finite floats as is."""
    if math.isnan(value):
        return None
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return float(value)


def decode(value: float | str | None) -> float:
    return math.nan if value is None else float(value)


def record(case: dict, metrics: dict[str, float]) -> dict:
    return dict(case, metrics={m: encode(metrics[m]) for m in METRICS})


def read_pins(path: Path = PINS_PATH) -> dict[str, dict]:
    """The pins file as ``{case_key: entry}`` with decoded float metrics."""
    entries = json.loads(path.read_text(encoding="utf-8"))
    return {case_key(e): dict(e, metrics={m: decode(v) for m, v in e["metrics"].items()})
            for e in entries}


def write_pins(entries: list[dict], path: Path = PINS_PATH) -> None:
    path.write_text(json.dumps(entries, indent=2, allow_nan=False) + "\n", encoding="utf-8")


def same(old: float, new: float) -> bool:
    """Equal within RTOL (ATOL near 0); NaN only equals NaN."""
    if math.isnan(old) or math.isnan(new):
        return math.isnan(old) and math.isnan(new)
    return math.isclose(new, old, rel_tol=RTOL, abs_tol=ATOL)


def changed_metrics(old: dict[str, float], new: dict[str, float]) -> list[str]:
    """Lines ``metric: old -> new (rel ...)`` for each metric that moved (or appeared)."""
    lines = []
    for m in sorted(set(old) | set(new)):
        a, b = old.get(m), new.get(m)
        if a is None or b is None:
            lines.append(f"{m}: {a!r} -> {b!r}")
        elif not same(a, b):
            finite = a != 0 and math.isfinite(a) and math.isfinite(b)
            rel = f" (rel {abs(b - a) / abs(a):.3g})" if finite else ""
            lines.append(f"{m}: {a!r} -> {b!r}{rel}")
    return lines
