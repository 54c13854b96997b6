"""Portfolio weights and entry priority (docs/EXECUTION.md "Portfolios"): the volatility
held to numpy and pandas written plainly; ``weight: inverse_vol``, ``lookback`` (one
value or one per combo) and ``priority`` held to the slow reference of
tests/helpers/portfolio_reference.py (1e-12); the reference held to vectorbt's ``from_orders``
with the inverse-volatility targets (1e-9) on real daily stock bars."""

import numpy as np
import pandas as pd
import pytest
from helpers.bars import random_bars
from helpers.compare import assert_metrics_match
from helpers.portfolio_cases import CASES, EXECUTIONS, PPY, SYMBOLS, engine_way
from helpers.portfolio_reference import ref_portfolio, ref_vol, ref_weights

from barsweep.engine import METRICS, Execution, get_strategy, sweep_portfolio
from barsweep.engine.portfolio.weights import (
    hoist_sizing,
    lookback_column,
    rolling_vol,
    target_weight,
)
from barsweep.engine.rules import Rule, compile_rule
from barsweep.errors import SpecError

REVERSED = list(reversed(SYMBOLS))


@pytest.fixture(scope="module")
def universe():
    """Four random walks of different volatilities (the weights differ)."""
    out = {}
    for i, s in enumerate(SYMBOLS):
        bars = random_bars(1_200, seed=20 + i, gap=0.003)
        base = bars["close"][0]
        out[s] = {k: base * (v / base) ** (1 + 0.5 * i) for k, v in bars.items()}
    return out


def plain_vol(close, lookback):
    """numpy, one window at a time."""
    r = close[1:] / close[:-1] - 1
    return np.array([np.nan if t < lookback else np.std(r[t - lookback:t], ddof=1)
                     for t in range(len(close))])


@pytest.mark.parametrize("lookback", [2, 5, 20, 63])
def test_rolling_vol_equals_numpy_pandas_and_the_reference(universe, lookback):
    close = universe["BBB"]["close"]
    ours = rolling_vol(close, lookback)
    np.testing.assert_allclose(ours, plain_vol(close, lookback), rtol=1e-13)
    pandas = pd.Series(close).pct_change().rolling(lookback).std().to_numpy()
    np.testing.assert_allclose(ours, pandas, rtol=1e-9)
    assert np.isnan(ours[:lookback]).all() and np.isfinite(ours[lookback:]).all()
    ref = [ref_vol(close, t, lookback) for t in range(len(close))]
    assert ref[:lookback] == [None] * lookback
    np.testing.assert_allclose(ours[lookback:], ref[lookback:], rtol=1e-13)


def test_inverse_vol_weights_written_plainly(universe):
    """``w_i = (1 / vol_i) / (sum of the K largest 1 / vol_j)``: over all N without a
    limit (summing to 1); any K of them at most 1; 0 before ``lookback`` bars."""
    closes = np.stack([universe[s]["close"] for s in SYMBOLS])
    sizing = hoist_sizing(closes, np.array([10, 30]), "inverse_vol")
    for lb, lookback in enumerate((10, 30)):
        inverse = 1 / np.stack([plain_vol(c, lookback) for c in closes])
        for k in (1, 2, 4):
            for t in (lookback, 500, 1_199):
                expected = inverse[:, t] / np.sort(inverse[:, t])[::-1][:k].sum()
                ours = [target_weight(sizing, lb, i, t, k) for i in range(4)]
                np.testing.assert_allclose(ours, expected, rtol=1e-13)
                assert max(ours) <= 1 and sum(sorted(ours)[-k:]) == pytest.approx(1)
                ref = ref_weights(universe, t, k, lookback)
                np.testing.assert_allclose(ours, [ref[s] for s in SYMBOLS], rtol=1e-13)
        assert target_weight(sizing, lb, 0, lookback - 1, 4) == 0.0
    assert sum(target_weight(sizing, 0, i, 600, 4) for i in range(4)) == pytest.approx(1)
    equal = hoist_sizing(closes, np.array([20]))
    assert target_weight(equal, 0, 2, 5, 3) == 1 / 3


def _run(name, universe, execution, max_positions=None, lookback=20, **sizing):
    make, combos, signals_of = CASES[name]
    params = {k: np.array([c[k] for c in combos]) for k in combos[0]}
    lookbacks = np.resize(np.atleast_1d(lookback), len(combos))
    ours, per_symbol = sweep_portfolio(make(), universe, params, Execution(**execution), PPY,
                                       max_positions=max_positions, lookback=lookbacks,
                                       **sizing)
    refs = [ref_portfolio({s: signals_of(universe[s], combo) for s in universe}, universe,
                          ppy=PPY, max_positions=max_positions, lookback=int(lookbacks[c]),
                          **sizing, **execution)
            for c, combo in enumerate(combos)]
    return combos, ours, per_symbol, refs


def _assert_equal_to_reference(combos, ours, per_symbol, refs, where):
    for c, ref in enumerate(refs):
        assert_metrics_match(dict(zip(METRICS, ours[c], strict=True)), ref["metrics"],
                             where=f"{where} {combos[c]}")
        for i, s in enumerate(SYMBOLS):
            n_trades, exposure = ref["per_symbol"][s]
            assert per_symbol[c, i, 0] == n_trades, where
            assert per_symbol[c, i, 1] == pytest.approx(exposure, rel=1e-12), where
    assert sum(len(r["trades"]) for r in refs) >= 10 * len(refs), "runs must trade"


@pytest.mark.parametrize("max_positions", [None, 1, 2])
@pytest.mark.parametrize("execution", sorted(EXECUTIONS))
@pytest.mark.parametrize("name", ["ema_cross", "state_rule"])
def test_inverse_vol_kernel_equals_the_reference(universe, name, execution, max_positions):
    run = _run(name, universe, EXECUTIONS[execution], max_positions, weight="inverse_vol")
    _assert_equal_to_reference(*run, f"{name} {execution} {max_positions}")


@pytest.mark.parametrize("priority", [REVERSED, ["CCC"], "low_vol", "momentum"])
@pytest.mark.parametrize("weight", ["equal", "inverse_vol"])
@pytest.mark.parametrize("execution", ["close_costs", "next_open_costs"])
def test_priority_kernel_equals_the_reference(universe, priority, weight, execution):
    run = _run("rsi", universe, EXECUTIONS[execution], 2, lookback=30, weight=weight,
               priority=priority)
    _assert_equal_to_reference(*run, f"{priority} {weight} {execution}")


def test_lookback_per_combo_equals_the_reference(universe):
    """``lookback`` as one value per combo (a grid axis), distinct and repeated."""
    run = _run("ema_cross", universe, EXECUTIONS["next_open_costs"], 3,
               lookback=[5, 60, 5], weight="inverse_vol", priority="low_vol")
    _assert_equal_to_reference(*run, "lookback per combo")


def test_lookback_per_combo_on_threads_equals_each_value_alone(universe):
    strategy = get_strategy("ema_cross")
    fast, slow = np.meshgrid(np.arange(3, 13), np.array([20, 30, 45, 60]), indexing="ij")
    params = {"fast": fast.ravel(), "slow": slow.ravel()}
    lookback = np.array([10, 40, 120])[np.arange(40) % 3]
    execution = Execution(fill="close", fees=0.001)
    kwargs = dict(weight="inverse_vol", priority="momentum", max_positions=2)
    together, sym_together = sweep_portfolio(strategy, universe, params, execution, PPY,
                                             lookback=lookback, **kwargs)
    for value in (10, 40, 120):
        pick = lookback == value
        alone, sym_alone = sweep_portfolio(strategy, universe,
                                           {n: v[pick] for n, v in params.items()},
                                           execution, PPY, lookback=value, **kwargs)
        np.testing.assert_array_equal(together[pick], alone)
        np.testing.assert_array_equal(sym_together[pick], sym_alone)
    assert not np.array_equal(together[lookback == 10], together[lookback == 120])


def test_priority_decides_which_same_bar_entry_is_taken(universe):
    """``entry: close > 0`` enters every symbol at once: with one slot the first of the
    priority is held the whole run, the others never."""
    always = compile_rule(Rule("close > 0", "close < 0"), {})
    for priority, held in ((None, 0), (REVERSED, 3), (["BBB", "AAA"], 1)):
        _, per_symbol = sweep_portfolio(always, universe, {}, Execution(fill="close"), PPY,
                                        max_positions=1, priority=priority)
        exposure = per_symbol[0, :, 1]
        assert exposure[held] == 1.0 and np.delete(exposure, held).sum() == 0.0, priority


@pytest.mark.parametrize(("fill", "first"), [("close", 30), ("next_open", 31)])
def test_no_entry_before_lookback_bars(universe, fill, first):
    """With ``inverse_vol`` an entry needs ``lookback`` returns: a rule that enters on
    every bar holds each symbol from bar 30 (its close) or bar 31 (its open); buy and
    hold, which enters only at bar 0, never enters."""
    always = compile_rule(Rule("close > 0", "close < 0"), {})
    n = len(universe["AAA"]["close"])
    execution = Execution(fill=fill)
    metrics, per_symbol = sweep_portfolio(always, universe, {}, execution, PPY,
                                          weight="inverse_vol", lookback=30)
    np.testing.assert_allclose(per_symbol[0, :, 1], (n - first) / n, rtol=1e-15)
    ref = ref_portfolio({s: lambda *a: (True, False, False, False) for s in SYMBOLS},
                        universe, ppy=PPY, weight="inverse_vol", lookback=30, fill=fill)
    assert np.isnan(ref["targets"][:first if fill == "close" else first - 1]).all()
    assert_metrics_match(dict(zip(METRICS, metrics[0], strict=True)), ref["metrics"])
    hold, _ = sweep_portfolio(get_strategy("buy_and_hold"), universe, {}, execution, PPY,
                              weight="inverse_vol", lookback=30)
    m = dict(zip(METRICS, hold[0], strict=True))
    assert m["n_trades"] == 0 and m["total_return"] == 0.0


def test_refusals(universe):
    strategy = get_strategy("ema_cross")
    params = dict(fast=np.array([5]), slow=np.array([20]))
    for kwargs, match in ((dict(weight="risk_parity"), "weight"),
                          (dict(weight="inverse_vol", lookback=1), "lookback"),
                          (dict(priority=["AAA", "XYZ"]), "priority"),
                          (dict(priority=["AAA", "AAA"]), "priority"),
                          (dict(priority="high_vol"), "priority")):
        with pytest.raises(SpecError, match=match):
            sweep_portfolio(strategy, universe, params, Execution(), PPY, **kwargs)
    assert lookback_column(None, 2)[0].tolist() == [20]


# ------------------------------------------------------------------------- vectorbt

vbt = pytest.importorskip("vectorbt")


def test_inverse_vol_equals_vectorbt_from_orders_on_real_stocks():
    """Daily AAPL, MSFT, IBM and GOOG on their common dates, fees 0.1%, fill at close,
    no max_positions: vectorbt's targetpercent orders with the reference's targets
    (the inverse-volatility weights at entries, 0 at exits) and call sequence (exits,
    then entries in the symbols' order) give the reference's value at every bar, and
    the kernel's metrics are the reference's."""
    pytest.importorskip("bokeh_sampledata")
    from golden.cases import load_bars

    raw = {s: load_bars(s) for s in ("AAPL", "MSFT", "IBM", "GOOG")}
    common = sorted(set.intersection(*(set(b["time"].tolist()) for b in raw.values())))
    universe = {}
    for s, b in raw.items():
        keep = np.isin(b["time"], common)
        universe[s] = {k: np.ascontiguousarray(v[keep]) for k, v in b.items()}
    make, _, signals_of = CASES["ema_cross"]
    combos = [dict(fast=10, slow=30), dict(fast=20, slow=100)]
    params = {k: np.array([c[k] for c in combos]) for k in combos[0]}
    index = pd.date_range("2000-01-01", periods=len(common), freq="1D")
    close = pd.DataFrame({s: b["close"] for s, b in universe.items()}, index=index)
    for lookback in (20, 60):
        ours, _ = sweep_portfolio(make(), universe, params, Execution(fill="close", fees=0.001),
                                  252.0, weight="inverse_vol", lookback=lookback)
        for c, combo in enumerate(combos):
            ref = ref_portfolio({s: signals_of(universe[s], combo) for s in universe},
                                universe, fill="close", ppy=252.0, fees=0.001,
                                weight="inverse_vol", lookback=lookback)
            targets = ref["targets"]
            entries = targets[np.isfinite(targets) & (targets > 0)]
            assert entries.size >= 20 and entries.std() > 0.02, "weights must differ"
            pf = vbt.Portfolio.from_orders(close, size=pd.DataFrame(targets, index=index,
                                                                         columns=close.columns),
                                           size_type="targetpercent", group_by=True,
                                           cash_sharing=True, call_seq=ref["call_seq"],
                                           fees=0.001, init_cash=10_000.0, freq="1D")
            value = pf.value().to_numpy()
            np.testing.assert_allclose(ref["equity"], value, rtol=1e-9)
            mine = dict(zip(METRICS, ours[c], strict=True))
            for metric, expected in engine_way(value, 10_000.0, 252.0).items():
                assert mine[metric] == pytest.approx(expected, rel=1e-9, abs=1e-12), metric
            assert_metrics_match(mine, ref["metrics"], where=f"{combo} {lookback}")
