"""Portfolios (docs/EXECUTION.md "Portfolios"): the kernel held to the slow reference of
tests/helpers/portfolio_reference.py (1e-12) for builtins and a rule with state, max_positions,
next_open, fees, fixed fees and slippage; and the reference and the kernel held to
vectorbt's ``from_orders`` with target percents, one group, cash sharing and an automatic
call sequence (1e-9), on random and on real daily stock bars."""

import numpy as np
import pytest
from helpers.bars import random_bars
from helpers.compare import assert_metrics_match
from helpers.portfolio_cases import (
    CASES,
    EXECUTIONS,
    PPY,
    SYMBOLS,
    assert_portfolio_matches,
    engine_way,
    vectorbt_value,
)
from helpers.portfolio_reference import ref_portfolio

from barsweep.engine import METRICS, Execution, get_strategy, sweep_block, sweep_portfolio
from barsweep.engine.cache import is_marked
from barsweep.engine.portfolio.sweep import equal_weight_benchmark, portfolio_kernel
from barsweep.engine.warm import check_portfolio
from barsweep.errors import SpecError


@pytest.fixture(scope="module")
def universe():
    return {s: random_bars(1_200, seed=10 + i, gap=0.003) for i, s in enumerate(SYMBOLS)}


def _run_both(name, universe, execution, max_positions):
    make, combos, signals_of = CASES[name]
    params = {k: np.array([c[k] for c in combos]) for k in combos[0]}
    ours, per_symbol = sweep_portfolio(make(), universe, params, Execution(**execution), PPY,
                                       max_positions=max_positions)
    refs = [ref_portfolio({s: signals_of(universe[s], combo) for s in universe}, universe,
                          ppy=PPY, max_positions=max_positions, **execution)
            for combo in combos]
    return combos, ours, per_symbol, refs


@pytest.mark.parametrize("max_positions", [None, 1, 2])
@pytest.mark.parametrize("execution", sorted(EXECUTIONS))
@pytest.mark.parametrize("name", sorted(CASES))
def test_kernel_equals_the_reference(universe, name, execution, max_positions):
    combos, ours, per_symbol, refs = _run_both(name, universe, EXECUTIONS[execution],
                                               max_positions)
    for c, ref in enumerate(refs):
        where = f"{name} {combos[c]} {execution} max_positions={max_positions}"
        assert_portfolio_matches(ours[c], per_symbol[c], ref, SYMBOLS, where)
        assert ours[c, METRICS.index("n_trades")] == per_symbol[c, :, 0].sum()
        if max_positions == 1:  # one symbol held at a time
            assert per_symbol[c, :, 1].sum() <= ours[c, METRICS.index("exposure")] + 1e-12
    assert sum(len(r["trades"]) for r in refs) >= 10 * len(refs), "runs must trade"


@pytest.mark.parametrize("fill", ["close", "next_open"])
def test_ruin_of_the_account_equals_the_reference(universe, fill):
    """Fixed fees larger than what small positions bring back drive the account to zero:
    liquidated at that close, 0 to the end, ``ruined`` 1, as the reference."""
    execution = dict(fill=fill, init_cash=100.0, fixed_fee=30.0)
    combos, ours, per_symbol, refs = _run_both("ema_cross", universe, execution, None)
    for c, ref in enumerate(refs):
        assert_metrics_match(dict(zip(METRICS, ours[c], strict=True)), ref["metrics"],
                             where=f"{combos[c]} {fill}")
        for i, s in enumerate(SYMBOLS):
            assert tuple(per_symbol[c, i]) == pytest.approx(ref["per_symbol"][s], rel=1e-12)
    assert ours[:, METRICS.index("ruined")].sum() >= 2


def test_max_positions_binds(universe):
    """With K = 1 fewer entries are taken than without a limit: the limit is exercised."""
    _, _, free, _ = _run_both("ema_cross", universe, EXECUTIONS["close"], None)
    _, _, one, _ = _run_both("ema_cross", universe, EXECUTIONS["close"], 1)
    assert one[:, :, 0].sum() < free[:, :, 0].sum()


def test_hand_computed_entries_share_the_value_and_the_last_takes_what_is_left():
    """buy_and_hold on two symbols, fill at the close, fees 1%: A takes 1/2 of 10,000
    (500 shares at 10, costing 5,050); B's 1/2 would cost 5,050 too but 4,950 is left, so
    it buys 4,950 / 1.01 / 20 shares and cash is 0."""
    a = np.array([10.0, 11.0, 12.0])
    b = np.array([20.0, 15.0, 19.0])
    bars = {s: dict(open=c, high=c, low=c, close=c) for s, c in (("A", a), ("B", b))}
    metrics, per_symbol = sweep_portfolio(get_strategy("buy_and_hold"), bars, {},
                                          Execution(fill="close", fees=0.01), 252.0)
    shares_b = 4_950.0 / 1.01 / 20.0
    equity = np.array([500 * a[t] + shares_b * b[t] for t in range(3)])
    m = dict(zip(METRICS, metrics[0], strict=True))
    assert m["total_return"] == pytest.approx(equity[-1] / 10_000 - 1, rel=1e-14)
    assert m["max_drawdown"] == pytest.approx(equity[1] / equity[0] - 1, rel=1e-14)
    assert m["max_drawdown"] < -0.05
    assert m["n_trades"] == 2 and m["exposure"] == 1.0
    np.testing.assert_array_equal(per_symbol[0], [[1.0, 1.0], [1.0, 1.0]])


def test_threads_and_per_combo_max_positions(universe):
    """Many combos run in pieces on threads equal one piece each; ``max_positions`` as
    one value per combo equals each value run on its own."""
    strategy = get_strategy("ema_cross")
    fast, slow = np.meshgrid(np.arange(3, 13), np.array([20, 30, 45, 60]), indexing="ij")
    params = {"fast": fast.ravel(), "slow": slow.ravel()}
    k = np.arange(40) % 3 + 1
    execution = Execution(fill="next_open", fees=0.001)
    together, sym_together = sweep_portfolio(strategy, universe, params, execution, PPY,
                                             max_positions=k)
    for value in (1, 2, 3):
        pick = k == value
        alone, sym_alone = sweep_portfolio(strategy, universe,
                                           {n: v[pick] for n, v in params.items()},
                                           execution, PPY, max_positions=value)
        np.testing.assert_array_equal(together[pick], alone)
        np.testing.assert_array_equal(sym_together[pick], sym_alone)


@pytest.mark.parametrize("execution", [dict(fill="close"), dict(fill="close", fees=0.001),
                                       dict(fill="next_open", fees=0.0005, slippage=0.0003,
                                            fixed_fee=1.0)])
def test_one_symbol_is_the_single_symbol_run(universe, execution):
    """A portfolio of one symbol puts all of its value in each entry: the single-symbol
    sweep's all-in sizing, so every metric equals it (fees take the entry to what the
    cash pays for, the same size up to rounding)."""
    strategy = get_strategy("ema_cross")
    params = {"fast": np.array([5, 12, 3]), "slow": np.array([20, 40, 9])}
    one = {"AAA": universe["AAA"]}
    ours, per_symbol = sweep_portfolio(strategy, one, params, Execution(**execution), PPY)
    single = sweep_block(strategy, universe["AAA"], params, Execution(**execution), PPY)
    for c in range(3):
        assert_metrics_match(dict(zip(METRICS, ours[c], strict=True)),
                             dict(zip(METRICS, single[c], strict=True)), where=str(c))
    np.testing.assert_array_equal(per_symbol[:, 0, 0], single[:, METRICS.index("n_trades")])
    assert single[:, METRICS.index("n_trades")].min() > 10


def test_refusals(universe):
    strategy = get_strategy("ema_cross")
    params = dict(fast=np.array([5]), slow=np.array([20]))
    for execution, match in ((dict(direction="both"), "rebalanced portfolio trades long"),
                             (dict(lot=1.0), "re-targets each position")):
        with pytest.raises(SpecError, match=match):
            sweep_portfolio(strategy, universe, params, Execution(**execution), PPY,
                            rebalance="1W")
    with pytest.raises(SpecError, match="market only"):
        sweep_portfolio(strategy, universe, params,
                        Execution(entry_order=dict(type="stop", offset=0.01)), PPY)
    with pytest.raises(SpecError, match="max_positions"):
        sweep_portfolio(strategy, universe, params, Execution(), PPY, max_positions=0)
    short = {s: {k: v[:100] for k, v in b.items()} for s, b in universe.items()}
    short["AAA"] = universe["AAA"]
    with pytest.raises(SpecError, match="align"):
        sweep_portfolio(strategy, short, params, Execution(), PPY)


def test_benchmark_is_equal_weight_buy_and_hold():
    closes = np.array([[10.0, 11.0, 12.1], [20.0, 18.0, 18.0]])
    level = np.array([1.0, (1.1 + 0.9) / 2, (1.21 + 0.9) / 2])
    expected = np.concatenate([[0.0], level[1:] / level[:-1] - 1])
    np.testing.assert_allclose(equal_weight_benchmark(closes), expected, rtol=1e-15)


# ------------------------------------------------------------------------- vectorbt

pytest.importorskip("vectorbt")


def _vectorbt_check(universe, name, combos, costs, ppy):
    make, _, signals_of = CASES[name]
    params = {k: np.array([c[k] for c in combos]) for k in combos[0]}
    ours, _ = sweep_portfolio(make(), universe, params,
                              Execution(fill="close", init_cash=10_000.0, **costs), ppy)
    orders = 0
    for c, combo in enumerate(combos):
        ref = ref_portfolio({s: signals_of(universe[s], combo) for s in universe}, universe,
                            fill="close", ppy=ppy, **costs)
        value = vectorbt_value(universe, ref["targets"], costs.get("fees", 0.0), 10_000.0,
                               costs.get("slippage", 0.0), costs.get("fixed_fee", 0.0))
        np.testing.assert_allclose(ref["equity"], value, rtol=1e-9)
        mine = dict(zip(METRICS, ours[c], strict=True))
        for metric, expected in engine_way(value, 10_000.0, ppy).items():
            assert mine[metric] == pytest.approx(expected, rel=1e-9, abs=1e-12), (combo, metric)
        orders += int(np.isfinite(ref["targets"]).sum())
    assert orders >= 20, "the comparison must not be of idle runs"


@pytest.mark.parametrize("costs", [dict(fees=0.001), dict(fees=0.002, slippage=0.001,
                                                            fixed_fee=1.0)])
@pytest.mark.parametrize("name", ["ema_cross", "rsi"])
def test_equals_vectorbt_from_orders_on_random_bars(universe, name, costs):
    _vectorbt_check(universe, name, CASES[name][1], costs, PPY)


def test_equals_vectorbt_from_orders_on_real_stocks():
    """Daily AAPL, MSFT, IBM and GOOG on their common dates, fees 0.1%."""
    pytest.importorskip("bokeh_sampledata")
    from golden.cases import load_bars

    raw = {s: load_bars(s) for s in ("AAPL", "MSFT", "IBM", "GOOG")}
    common = sorted(set.intersection(*(set(b["time"].tolist()) for b in raw.values())))
    universe = {}
    for s, b in raw.items():
        keep = np.isin(b["time"], common)
        universe[s] = {k: np.ascontiguousarray(v[keep]) for k, v in b.items()}
    assert len(common) > 1_000
    _vectorbt_check(universe, "ema_cross", [dict(fast=10, slow=30), dict(fast=20, slow=100)],
                    dict(fees=0.001), 252.0)


def test_one_compiled_kernel_serves_any_number_of_members():
    """The portfolio kernel's argument types do not depend on how many members it runs:
    a portfolio of 12 compiles no specialisation that one of 3 did not (the members' bars
    travel stacked, not as a tuple of N records, another type for each N whose compile
    grows with N)."""
    strategy = get_strategy("ema_cross")
    kernel = portfolio_kernel(strategy.signal)
    params = dict(fast=np.array([5, 12]), slow=np.array([20, 40]))

    def run(n):
        bars = {f"S{i}": random_bars(300, seed=40 + i) for i in range(n)}
        return sweep_portfolio(strategy, bars, params, Execution(fill="close"), PPY)

    run(3)
    signatures = list(kernel.signatures)
    _, per_symbol = run(12)
    assert kernel.signatures == signatures
    assert per_symbol.shape == (2, 12, 2)


def test_check_compiles_the_portfolio_kernel_once_for_any_members():
    """What ``check`` and ``run`` do on the driver: the portfolio kernel compiled (on two
    synthetic members) and marked, then found marked."""
    strategy = get_strategy("ema_cross")
    check_portfolio(strategy)  # compiles it, or finds it marked by an earlier test
    assert is_marked(portfolio_kernel(strategy.signal))
    assert check_portfolio(strategy) is None
