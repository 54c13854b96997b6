"""What `rank` may put first (docs/RESULTS.md, "What the numbers mean", Rank): never NaN,
never an infinite value, never a ruined combo, and never, by a metric that doing nothing
wins (volatility, ulcer_index, max_drawdown, ruined, any ascending ranking), a combo that
never traded. Ruined combos rank after every other combo, by every metric."""

import numpy as np
import pytest
import xarray as xr

from barsweep.engine import (
    BEST_WHEN_IDLE,
    LOWER_IS_BETTER,
    METRICS,
    Execution,
    get_strategy,
    sweep_block,
)
from barsweep.pipeline.analysis.rank import rank, rank_order

INF = np.inf


def results(rows: list[dict], symbol: str = "AAPL") -> xr.Dataset:
    """An in-memory results Dataset: dims (symbol, combo), one row per combo; metrics
    not given are 0 (n_trades 5, ruined 0)."""
    n = len(rows)
    data = {}
    for name in METRICS:
        default = 5.0 if name == "n_trades" else 0.0
        values = [float(r.get(name, default)) for r in rows]
        data[name] = (("symbol", "combo"), np.array([values]))
    return xr.Dataset(data, coords={"symbol": [symbol], "combo": np.arange(n)})


def ranked(ds, by, **kwargs) -> list[int]:
    return rank(ds, by=by, top=100, **kwargs)["combo"].tolist()


def test_nan_never_ranked_and_infinities_never_first():
    ds = results([dict(sortino=np.nan), dict(sortino=INF), dict(sortino=1.0),
                  dict(sortino=2.0), dict(sortino=-INF)])
    assert ranked(ds, "sortino") == [3, 2, 1, 4]
    assert ranked(ds, "sortino", ascending=True) == [2, 3, 4, 1]
    vol = results([dict(volatility=-INF), dict(volatility=0.3), dict(volatility=np.nan),
                   dict(volatility=0.2)])
    assert ranked(vol, "volatility") == [3, 1, 0]


@pytest.mark.parametrize("by", METRICS)
def test_a_ruined_combo_ranks_after_every_other_by_every_metric(by):
    # the ruined combo (1) holds the best value of every metric, in its own direction
    best = -1e9 if by in LOWER_IS_BETTER else 1e9
    values = (0.0, 0.0, 0.0) if by == "ruined" else (1.0, 2.0, 3.0)
    rows = [{"n_trades": 5.0, by: v} for v in values]
    rows.insert(1, {"n_trades": 5.0, by: best, "ruined": 1.0})
    ds = results(rows)
    order = ranked(ds, by)
    assert order[-1] == 1 and sorted(order) == [0, 1, 2, 3]
    assert ranked(ds, by, ascending=by not in LOWER_IS_BETTER)[-1] == 1


@pytest.mark.parametrize("by", ["volatility", "ulcer_index", "max_drawdown"])
def test_doing_nothing_does_not_win_the_risk_metrics(by):
    # combo 0 never traded: volatility 0, ulcer 0, no drawdown, the "best" of each
    sign = -1.0 if by == "max_drawdown" else 1.0
    ds = results([dict({by: 0.0}, n_trades=0.0), dict({by: sign * 0.3}),
                  dict({by: sign * 0.2}), dict({by: sign * 0.9}, ruined=1.0)])
    assert ranked(ds, by) == [2, 1, 0, 3]


def test_never_traded_still_competes_where_doing_nothing_is_a_fair_score():
    # a flat total return of 0 honestly beats a loss
    ds = results([dict(total_return=0.0, n_trades=0.0), dict(total_return=-0.1),
                  dict(total_return=0.2)])
    assert ranked(ds, "total_return") == [2, 0, 1]


def test_rank_order_keys():
    score = np.array([0.5, INF, 0.1, 0.9, 0.2])
    ruined = np.array([False, False, True, False, False])
    traded = np.array([True, True, True, True, False])
    assert rank_order(score, True, True, ruined, traded).tolist() == [0, 3, 1, 4, 2]
    assert rank_order(score, False, False, ruined, traded).tolist() == [3, 0, 4, 1, 2]
    ties = rank_order(np.zeros(4), False, False, np.zeros(4, bool), np.ones(4, bool))
    assert ties.tolist() == [0, 1, 2, 3]


def test_sweep_with_ruined_shorts_never_ranks_them_first():
    """The issue's case on bars of our own: shorts squeezed on a rising, volatile path.
    Ruined combos exist; by no metric is one of them (or a NaN, or infinity) first."""
    rng = np.random.default_rng(4)
    n = 400
    close = 100.0 * np.exp(np.cumsum(rng.normal(0.004, 0.06, n)))
    open_ = np.concatenate([[100.0], close[:-1]])
    bars = dict(open=open_, close=close, high=np.maximum(open_, close) * 1.03,
                low=np.minimum(open_, close) * 0.97)
    period, upper = np.meshgrid(np.arange(3, 30, 3), np.arange(55.0, 95.0, 5.0))
    params = dict(period=period.ravel(), lower=np.full(period.size, 30.0),
                  upper=upper.ravel())
    out = sweep_block(get_strategy("rsi"), bars, params, Execution(direction="both"), 8760.0)
    ds = xr.Dataset({m: (("symbol", "combo"), out[None, :, i]) for i, m in enumerate(METRICS)},
                    coords={"symbol": ["X"], "combo": np.arange(len(out))})
    ruined = out[:, METRICS.index("ruined")] == 1.0
    assert 0 < ruined.sum() < len(out)
    for by in METRICS:
        frame = rank(ds, by=by, top=len(out))
        if frame.empty:
            continue
        assert np.isfinite(frame[by].iloc[0]) and frame["ruined"].iloc[0] == 0.0, by
        if by in BEST_WHEN_IDLE:
            assert frame["n_trades"].iloc[0] > 0, by
        flags = frame["ruined"].to_numpy()
        assert (np.diff(flags) >= 0).all(), by  # every ruined combo after every other
