"""Ruin on real daily bars: rsi with ``direction: both`` on AAPL and MSFT.

Equity that could go below zero would leave 126 of these 450 combos below -100% (max
drawdown -4,253%, infinite alpha and sortino), ranked first by sortino and volatility.
Equity stops at zero: no total return below -1, no infinite metric, the ruined combos
say so, and the reference simulator agrees.
"""

import math

import numpy as np
import pytest
from helpers.compare import assert_metrics_match
from helpers.ref_strategies import ref_signals
from helpers.reference import ref_simulate

from barsweep.engine import METRICS, Execution, get_strategy, sweep_block
from golden.cases import EXECUTION, SYMBOLS, YEAR_DAYS, load_bars

pytest.importorskip("bokeh_sampledata")

BOTH = dict(EXECUTION, direction="both")  # next_open, fees 0.0005, slippage 0.0002
PERIOD, LOWER, UPPER = np.meshgrid(np.arange(5, 50, 5), np.arange(20.0, 45.0, 5.0),
                                   np.arange(60.0, 85.0, 5.0), indexing="ij")
PARAMS = dict(period=PERIOD.ravel(), lower=LOWER.ravel(), upper=UPPER.ravel())  # 225
#: Combos per symbol checked against the (slow) reference: every ruined one up to this
#: many, and as many that were not.
N_REFERENCE = 12


@pytest.fixture(scope="module")
def swept():
    return {s: sweep_block(get_strategy("rsi"), load_bars(s), PARAMS, Execution(**BOTH), YEAR_DAYS)
            for s in SYMBOLS}


def column(out, name):
    return out[:, METRICS.index(name)]


def test_no_equity_below_zero_and_no_infinite_metric(swept):
    n_ruined = 0
    for out in swept.values():
        assert out.shape == (225, len(METRICS))
        assert column(out, "total_return").min() >= -1.0
        assert column(out, "max_drawdown").min() >= -1.0
        assert not np.isinf(out).any()
        ruined = column(out, "ruined") == 1.0
        assert set(np.unique(column(out, "ruined"))) <= {0.0, 1.0}
        n_ruined += ruined.sum()
        for name in ("total_return", "cagr", "max_drawdown"):
            assert (column(out, name)[ruined] == -1.0).all(), name
            assert (column(out, name)[~ruined] > -1.0).all(), name
        for name in ("volatility", "sharpe", "sortino", "calmar", "ulcer_index", "beta"):
            assert np.isfinite(column(out, name)[ruined]).all(), name
    assert n_ruined > 0  # AAPL's rise squeezes many of the shorts


@pytest.mark.parametrize("symbol", SYMBOLS)
def test_reference_agrees_on_ruined_and_other_combos(swept, symbol):
    out = swept[symbol]
    ruined = np.flatnonzero(column(out, "ruined") == 1.0)[:N_REFERENCE]
    others = np.flatnonzero(column(out, "ruined") == 0.0)
    picks = np.concatenate([ruined, others[:: max(1, len(others) // N_REFERENCE)]])
    bars = load_bars(symbol)
    for i in picks:
        params = dict(period=int(PARAMS["period"][i]), lower=float(PARAMS["lower"][i]),
                      upper=float(PARAMS["upper"][i]))
        le, lx, se, sx = ref_signals("rsi", bars, params)
        ref, equity, trades = ref_simulate(list(bars["open"]), list(bars["close"]), le, lx,
                                           se, sx, high=list(bars["high"]),
                                           low=list(bars["low"]), ppy=YEAR_DAYS, **BOTH)
        assert_metrics_match(dict(zip(METRICS, out[i])), ref, where=(symbol, params))
        assert min(equity) >= 0.0
        assert (trades[-1]["reason"] == "ruin") == (ref["ruined"] == 1.0)
        assert math.isfinite(ref["sortino"]) and math.isfinite(ref["volatility"])
