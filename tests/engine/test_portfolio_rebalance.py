"""Portfolio rebalancing (docs/EXECUTION.md "Portfolios", ``rebalance``): the calendar
periods held to a datetime reference; the kernel held to the slow reference of
tests/helpers/portfolio_reference.py (1e-12) with fees, fixed fees, slippage, next_open and
max_positions; the reference and the kernel held to vectorbt's ``from_orders`` with the
weight as target on rebalance bars while held (1e-9), on random and real daily bars."""

import numpy as np
import pytest
from helpers.bars import random_bars
from helpers.portfolio_cases import (
    CASES,
    EXECUTIONS,
    PPY,
    SYMBOLS,
    assert_portfolio_matches,
    engine_way,
    vectorbt_value,
)
from helpers.portfolio_reference import ref_portfolio, ref_rebalance_bars

from barsweep.engine import METRICS, Execution, get_strategy, sweep_portfolio
from barsweep.engine.portfolio.periods import parse_period, rebalance_bars, rebalance_table
from barsweep.errors import SpecError


@pytest.fixture(scope="module")
def universe():
    return {s: random_bars(1_200, seed=10 + i, gap=0.003) for i, s in enumerate(SYMBOLS)}


# -------------------------------------------------------------------------- periods


@pytest.mark.parametrize("period", ["1D", "2D", "1W", "2W", "1M", "2M", "3M", "1Q", "2Q",
                                    "1Y", "2Y"])
def test_rebalance_bars_equal_the_datetime_reference(period):
    """Random times over ten years (hours apart to weeks apart)."""
    rng = np.random.default_rng(3)
    steps = rng.integers(3_600, 20 * 86_400, 2_000) * 10**9
    time = np.datetime64("2013-05-17T13:00", "ns").astype(np.int64) + np.cumsum(steps)
    ours = rebalance_bars(time, period)
    assert ours.tolist() == ref_rebalance_bars(time, period)
    assert 3 <= ours.sum() < len(time) - 3


def test_equivalent_periods_and_the_first_bar_of_each():
    time = np.arange("2019-12-30", "2022-01-03", dtype="datetime64[D]").astype(
        "datetime64[ns]").astype(np.int64)
    np.testing.assert_array_equal(rebalance_bars(time, "3M"), rebalance_bars(time, "1Q"))
    np.testing.assert_array_equal(rebalance_bars(time, "12M"), rebalance_bars(time, "1Y"))
    days = time.astype("datetime64[ns]").astype("datetime64[D]")
    months = days[rebalance_bars(time, "1M")].astype(str).tolist()
    assert months[:3] == ["2020-01-01", "2020-02-01", "2020-03-01"] and len(months) == 25
    weeks = days[rebalance_bars(time, "1W")]
    assert weeks[0] == np.datetime64("2020-01-06")  # Mondays
    assert np.all((weeks.astype(np.int64) - 4) % 7 == 0)
    assert not rebalance_bars(time, "1D")[0] and rebalance_bars(time, "1D")[1:].all()


def test_periods_are_refused_unless_count_and_unit():
    assert parse_period(" 2w ") == (2, "W")
    for bad in ("M", "0M", "1H", "1.5M", "monthly", 3):
        with pytest.raises(SpecError, match="rebalance period"):
            parse_period(bad)
    with pytest.raises(SpecError, match="timestamps"):
        rebalance_table(None, "1M", 2)
    table, row = rebalance_table(np.arange(5) * 86_400 * 10**9, ["1D", None, "1D", "2D"], 4)
    assert table.shape == (2, 5) and row.tolist() == [0, -1, 0, 1]


# ----------------------------------------------------------------- the reference


def _run_both(name, universe, execution, max_positions, rebalance):
    make, combos, signals_of = CASES[name]
    params = {k: np.array([c[k] for c in combos]) for k in combos[0]}
    ours, per_symbol = sweep_portfolio(make(), universe, params, Execution(**execution), PPY,
                                       max_positions=max_positions, rebalance=rebalance)
    refs = [ref_portfolio({s: signals_of(universe[s], combo) for s in universe}, universe,
                          ppy=PPY, max_positions=max_positions, rebalance=rebalance,
                          **execution)
            for combo in combos]
    return combos, ours, per_symbol, refs


@pytest.mark.parametrize("max_positions", [None, 2])
@pytest.mark.parametrize("execution", sorted(EXECUTIONS))
@pytest.mark.parametrize("name", sorted(CASES))
def test_kernel_equals_the_reference_with_rebalance(universe, name, execution,
                                                    max_positions):
    combos, ours, per_symbol, refs = _run_both(name, universe, EXECUTIONS[execution],
                                               max_positions, "1D")
    for c, ref in enumerate(refs):
        where = f"{name} {combos[c]} {execution} max_positions={max_positions}"
        assert_portfolio_matches(ours[c], per_symbol[c], ref, SYMBOLS, where)
    held = sum(int(np.sum(r["targets"] > 0)) for r in refs)
    entries = sum(len(r["trades"]) for r in refs)
    assert held > entries + 20, "the runs must rebalance"


def test_rebalance_changes_the_run_and_per_combo_periods_equal_each_alone(universe):
    """One sweep with a period per combo (None among them) equals each period run on
    its own; rebalancing changes the result."""
    strategy = get_strategy("ema_cross")
    params = {"fast": np.array([5, 12, 3, 5, 8, 4]), "slow": np.array([20, 40, 9, 30, 25, 60])}
    periods = ["1D", None, "1W", "1D", None, "1W"]
    execution = Execution(fill="close", fees=0.001, fixed_fee=1.0)
    together, sym_together = sweep_portfolio(strategy, universe, params, execution, PPY,
                                             rebalance=periods)
    for period in ("1D", None, "1W"):
        pick = np.array([p == period for p in periods])
        sub = {k: v[pick] for k, v in params.items()}
        alone, sym_alone = sweep_portfolio(strategy, universe, sub, execution, PPY,
                                           rebalance=period)
        np.testing.assert_array_equal(together[pick], alone)
        np.testing.assert_array_equal(sym_together[pick], sym_alone)
    never, _ = sweep_portfolio(strategy, universe, params, execution, PPY)
    ret = METRICS.index("total_return")
    assert np.all(never[[0, 2, 3, 5], ret] != together[[0, 2, 3, 5], ret])
    np.testing.assert_array_equal(never[[1, 4]], together[[1, 4]])


def test_hand_computed_rebalance():
    """buy_and_hold on two symbols, daily bars, rebalance 1D, fill at close, no fees:
    on day 1 A (500 shares, 10 -> 20) is worth 10,000 of 13,750 and sells down to 6,875;
    B (250 shares, 20 -> 15) buys up to 6,875 with the 3,125 A's sale brought."""
    a = np.array([10.0, 20.0, 20.0])
    b = np.array([20.0, 15.0, 30.0])
    time = np.arange(3) * 86_400 * 10**9
    bars = {s: dict(open=c, high=c, low=c, close=c, time=time) for s, c in (("A", a), ("B", b))}
    metrics, per_symbol = sweep_portfolio(get_strategy("buy_and_hold"), bars, {},
                                          Execution(fill="close"), 252.0, rebalance="1D")
    value1 = 500 * 20 + 250 * 15  # 13,750
    value2 = value1 / 2 / 20 * 20 + value1 / 2 / 15 * 30
    m = dict(zip(METRICS, metrics[0], strict=True))
    assert m["total_return"] == pytest.approx(value2 / 10_000 - 1, rel=1e-14)
    assert m["n_trades"] == 2  # one round trip per symbol, marked at the end
    np.testing.assert_array_equal(per_symbol[0], [[1.0, 1.0], [1.0, 1.0]])


# ------------------------------------------------------------------------- vectorbt


def _vectorbt_check(universe, name, combos, costs, ppy, rebalance):
    make, _, signals_of = CASES[name]
    params = {k: np.array([c[k] for c in combos]) for k in combos[0]}
    ours, _ = sweep_portfolio(make(), universe, params,
                              Execution(fill="close", init_cash=10_000.0, **costs), ppy,
                              rebalance=rebalance)
    rebalances = 0
    for c, combo in enumerate(combos):
        ref = ref_portfolio({s: signals_of(universe[s], combo) for s in universe}, universe,
                            fill="close", ppy=ppy, rebalance=rebalance, **costs)
        value = vectorbt_value(universe, ref["targets"], costs.get("fees", 0.0), 10_000.0,
                               costs.get("slippage", 0.0), costs.get("fixed_fee", 0.0))
        np.testing.assert_allclose(ref["equity"], value, rtol=1e-9)
        mine = dict(zip(METRICS, ours[c], strict=True))
        for metric, expected in engine_way(value, 10_000.0, ppy).items():
            assert mine[metric] == pytest.approx(expected, rel=1e-9, abs=1e-12), (combo, metric)
        rebalances += int(np.sum(ref["targets"] > 0)) - len(ref["trades"])
    assert rebalances >= 20, "the comparison must rebalance"


@pytest.mark.parametrize("costs", [dict(fees=0.001), dict(fees=0.002, slippage=0.001,
                                                            fixed_fee=1.0)])
@pytest.mark.parametrize("name", ["ema_cross", "rsi"])
def test_equals_vectorbt_from_orders_with_rebalance_on_random_bars(universe, name, costs):
    _vectorbt_check(universe, name, CASES[name][1], costs, PPY, "1D")


def test_equals_vectorbt_from_orders_with_rebalance_on_real_stocks():
    """Daily AAPL, MSFT, IBM and GOOG on their common dates, fees 0.1%, monthly."""
    pytest.importorskip("bokeh_sampledata")
    from golden.cases import load_bars

    raw = {s: load_bars(s) for s in ("AAPL", "MSFT", "IBM", "GOOG")}
    common = sorted(set.intersection(*(set(b["time"].tolist()) for b in raw.values())))
    universe = {}
    for s, b in raw.items():
        keep = np.isin(b["time"], common)
        universe[s] = {k: np.ascontiguousarray(v[keep]) for k, v in b.items()}
    _vectorbt_check(universe, "ema_cross", [dict(fast=10, slow=30), dict(fast=20, slow=100)],
                    dict(fees=0.001), 252.0, "1M")
    _vectorbt_check(universe, "rsi", [dict(period=14, lower=30.0, upper=70.0)],
                    dict(fees=0.001, fixed_fee=1.0), 252.0, "1W")
