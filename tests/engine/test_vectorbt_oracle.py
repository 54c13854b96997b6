"""vectorbt ``Portfolio.from_signals`` is an independent simulator of ``ema_cross``.

Its signals share no code with barsweep: the EMAs are ``talib.EMA`` and the crosses are
numpy over the rule of the design (``a`` crosses above ``b`` at ``t`` when
``a[t-1] < b[t-1] and a[t] > b[t]``, all four defined). So a fault in barsweep's
``ema`` or ``cross_above``/``cross_below`` moves barsweep's results but not vectorbt's.

Same semantics where both define them (fill at the signal bar's close, all cash
in, fees on entry and exit, an open position valued at the last close without an
exit fee and counted as a trade, one return per bar, 365-day years, the benchmark
being the close's bar-to-bar returns). Every metric but ulcer_index (which vectorbt
lacks) is compared.
"""

import numpy as np
import pandas as pd
import pytest
from helpers.bars import random_bars

from barsweep.engine import METRICS, Execution, backtest, get_strategy, sweep_block

vbt = pytest.importorskip("vectorbt")
talib = pytest.importorskip("talib")

N_BARS = 3000
FEES = 0.001


def crosses(a, b):
    """``(above, below)``: bool arrays, True at ``t`` where ``a`` crosses ``b`` upwards
    (``a[t-1] < b[t-1] and a[t] > b[t]``) or downwards; False at bar 0 and wherever a
    value is NaN (every comparison with NaN is False)."""
    above = np.zeros(len(a), dtype=bool)
    below = np.zeros(len(a), dtype=bool)
    above[1:] = (a[:-1] < b[:-1]) & (a[1:] > b[1:])
    below[1:] = (a[:-1] > b[:-1]) & (a[1:] < b[1:])
    return above, below


def oracle_signals(close, fast, slow):
    """Entries/exits of an EMA(fast)/EMA(slow) cross from TA-Lib's EMAs and numpy."""
    close = np.asarray(close, dtype=np.float64)
    return crosses(talib.EMA(close, timeperiod=int(fast)), talib.EMA(close, timeperiod=int(slow)))


def test_oracle_crosses_follow_the_rule():
    """The oracle's own cross rule on a hand-made case: a tie is not a cross, NaN never
    crosses, a first defined bar already above is not a cross."""
    a = np.array([np.nan, 2.0, 1.0, 1.0, 3.0, 2.0, 0.0, 1.0])
    b = np.array([np.nan, 1.0, 1.0, 2.0, 2.0, 2.0, 1.0, 0.5])
    above, below = crosses(a, b)
    # t: 1 first defined (already above), 2 tie, 3 down from a tie, 4 up, 5 tie, 6 down
    # from a tie, 7 up
    assert above.tolist() == [False, False, False, False, True, False, False, True]
    assert below.tolist() == [False, False, False, False, False, False, False, False]
    above, below = crosses(b, a)
    assert below.tolist() == [False, False, False, False, True, False, False, True]


def flat_start_bars(n_flat, n_bars, seed, step):
    """Random bars whose first ``n_flat`` bars all trade at exactly 100 (stale prices), then
    a move of ``step`` (a fraction of the price): every EMA is exactly 100 over the flat
    stretch, so fast and slow are tied on the bar before the move."""
    bars = random_bars(n_bars, seed=seed)
    for key in ("open", "high", "low", "close"):
        bars[key][:n_flat] = 100.0
    scale = 100.0 * (1.0 + step) / bars["close"][n_flat]
    for key in ("open", "high", "low", "close"):
        bars[key][n_flat:] *= scale
    bars["high"][n_flat:] = np.maximum(bars["high"][n_flat:], 100.0)
    bars["low"][n_flat:] = np.minimum(bars["low"][n_flat:], 100.0)
    return bars


def test_ema_cross_matches_vectorbt_from_signals():
    rng = np.random.default_rng(0)
    fast = rng.integers(2, 60, 120)
    slow = fast + rng.integers(1, 150, 120)
    ours, pf = sweep_and_vectorbt(random_bars(N_BARS, seed=42), fast, slow)
    assert_same_metrics(ours, pf, len(fast))
    assert (ours[:, METRICS.index("n_trades")] > 0).all()


@pytest.mark.parametrize("direction, step", [("long", 0.01), ("long", -0.01),
                                             ("short", -0.01), ("short", 0.01)])
def test_tied_emas_on_stale_prices_match_vectorbt(direction, step):
    """Over a flat stretch the EMAs are equal; the first move off it is not a cross (the
    previous bar is a tie), so no side opens on it."""
    fast = np.array([3, 5, 10, 12])
    slow = np.array([8, 20, 30, 50])
    bars = flat_start_bars(200, N_BARS, seed=3, step=step)
    for f, s in zip(fast, slow):  # the case is what it claims: a tie, then a move
        tied = talib.EMA(bars["close"], timeperiod=int(f))[199], talib.EMA(
            bars["close"], timeperiod=int(s))[199]
        assert tied == (100.0, 100.0) and bars["close"][200] == 100.0 * (1.0 + step)
    ours, pf = sweep_and_vectorbt(bars, fast, slow, direction)
    assert_same_metrics(ours, pf, len(fast))
    first = pf.trades.records_readable.groupby("Column")["Entry Timestamp"].min()
    assert (pf.wrapper.index.get_indexer(first) > 200).all()


def sweep_and_vectorbt(bars, fast, slow, direction="long"):
    """barsweep's sweep metrics and vectorbt's portfolio of the same EMA-cross combos,
    long only (long on a cross above, flat on a cross below) or short only (short on a
    cross below, flat on a cross above)."""
    n_bars = len(bars["close"])
    close = bars["close"]
    ours = sweep_block(get_strategy("ema_cross"), bars, dict(fast=fast, slow=slow),
                       Execution(fill="close", fees=FEES, direction=direction), ppy=365 * 24)
    signals = [oracle_signals(close, f, s) for f, s in zip(fast, slow)]
    index = pd.date_range("2020-01-01", periods=n_bars, freq="1h")
    above = pd.DataFrame(np.column_stack([a for a, _ in signals]), index=index)
    below = pd.DataFrame(np.column_stack([b for _, b in signals]), index=index)
    entries, exits = (above, below) if direction == "long" else (below, above)
    pf = vbt.Portfolio.from_signals(pd.Series(close, index=index), entries, exits,
                                    direction=f"{direction}only", fees=FEES,
                                    init_cash=10_000.0, freq="1h")
    return ours, pf


def assert_same_metrics(ours, pf, n_combos):
    """Every metric vectorbt defines, combo by combo."""
    col = {name: i for i, name in enumerate(METRICS)}
    trade_returns = pf.trades.records_readable.groupby("Column")["Return"].mean()
    theirs = {
        "total_return": pf.total_return(),
        "cagr": pf.annualized_return(),
        "volatility": pf.annualized_volatility(),
        "sharpe": pf.sharpe_ratio(),
        "sortino": pf.sortino_ratio(),
        "max_drawdown": pf.max_drawdown(),
        "calmar": pf.calmar_ratio(),
        "win_rate": pf.trades.win_rate(),
        "profit_factor": pf.trades.profit_factor(),
        "avg_trade_return": trade_returns.reindex(range(n_combos)),
        "exposure": pf.position_mask().mean(),
        "alpha": pf.alpha(),
        "beta": pf.beta(),
    }
    for name, values in theirs.items():
        np.testing.assert_allclose(ours[:, col[name]], np.asarray(values, dtype=float),
                                   rtol=1e-9, atol=1e-12, err_msg=name)
    np.testing.assert_array_equal(ours[:, col["n_trades"]], pf.trades.count().to_numpy())


def test_trade_returns_match_vectorbt():
    bars = random_bars(N_BARS, seed=7)
    res = backtest(bars, "ema_cross", dict(fast=8, slow=40), ppy=8760, fill="close", fees=FEES)
    entries, exits = oracle_signals(bars["close"], 8, 40)
    pf = vbt.Portfolio.from_signals(pd.Series(bars["close"]), entries, exits, fees=FEES,
                                    init_cash=10_000.0, freq="1h")
    records = pf.trades.records_readable
    np.testing.assert_allclose(res.trades["pnl"], records["PnL"], rtol=1e-9)
    np.testing.assert_allclose(res.trades["return"], records["Return"], rtol=1e-9)
    np.testing.assert_allclose(res.equity.to_numpy(), pf.value().to_numpy(), rtol=1e-12)
