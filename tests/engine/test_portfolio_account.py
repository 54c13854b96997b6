"""A portfolio's account beyond long-only all-in (docs/EXECUTION.md, "Portfolios: shorts,
leverage, funding and sizes"): shorts, funding, leverage with borrowing and margin calls,
and every ``execution.size``.

The kernel is held to the slow reference of tests/helpers/portfolio_reference.py (metrics
1e-12, per-symbol counts exactly) for builtins and a rule with state, with and without
``max_positions``; one combo's record (equity, shares, cash, trades with their side and
exit reason) to it at every bar; the cases are shown to exercise what they name (shorts
traded, margin calls made, leverage beyond the equity, lots, charges that change the
result); and hand-computed accounts pin shorts with borrowing and a margin call."""

import numpy as np
import pandas as pd
import pytest
from helpers.bars import random_bars
from helpers.portfolio_cases import CASES, PPY, SYMBOLS, assert_portfolio_matches
from helpers.portfolio_reference import ref_portfolio

from barsweep.engine import METRICS, Execution, get_strategy, sweep_portfolio
from barsweep.engine.backtest.portfolio import backtest_portfolio
from barsweep.engine.rules import Rule, compile_rule

#: name -> execution settings (as ``Execution`` takes them)
ACCOUNTS = {
    "both": dict(fill="close", direction="both", fees=0.001),
    "short_stops": dict(fill="next_open", direction="short", fees=0.001, slippage=0.0005,
                        stop_loss=0.02, trailing_stop=0.03, take_profit=0.05),
    "funding": dict(fill="close", direction="both", funding=True, fees=0.0005),
    "leverage": dict(fill="next_open", direction="both", leverage=2.5, borrow_rate=0.2,
                     maintenance_margin=0.3, fees=0.001, slippage=0.0002),
    "margin": dict(fill="close", leverage=4.0, maintenance_margin=0.3, borrow_rate=0.05,
                   fees=0.001),
    "percent_lots": dict(fill="next_open", size=dict(type="percent", value=0.3), lot=2.0,
                         leverage=1.5, fees=0.001),
    "risk": dict(fill="close", direction="both", size=dict(type="risk", value=0.01),
                 stop_loss=0.02),
    "vol_target": dict(fill="close", size=dict(type="vol_target", value=0.3, window=30),
                       leverage=2.0),
    "cash": dict(fill="close", direction="both", size=dict(type="cash", value=4000.0),
                 leverage=3.0, maintenance_margin=0.5, fixed_fee=1.0),
    "quantity": dict(fill="next_open", direction="short",
                     size=dict(type="quantity", value=10.0)),
}


@pytest.fixture(scope="module")
def universe():
    return {s: random_bars(800, seed=10 + i, gap=0.003) for i, s in enumerate(SYMBOLS)}


def reference_settings(execution: dict) -> dict:
    """``ref_portfolio``'s keywords for an execution's settings."""
    settings = dict(execution)
    size = settings.pop("size", None)
    if size:
        settings.update(size=size["type"], size_value=size["value"])
        if "window" in size:
            settings["window"] = size["window"]
    return settings


def _reference(universe, name, combo, execution, max_positions=None):
    signals_of = CASES[name][2]
    return ref_portfolio({s: signals_of(universe[s], combo) for s in universe}, universe,
                         ppy=PPY, max_positions=max_positions,
                         **reference_settings(execution))


@pytest.mark.parametrize("max_positions", [None, 2])
@pytest.mark.parametrize("account", sorted(ACCOUNTS))
@pytest.mark.parametrize("name", sorted(CASES))
def test_kernel_equals_the_reference(universe, name, account, max_positions):
    make, combos, _ = CASES[name]
    params = {k: np.array([c[k] for c in combos]) for k in combos[0]}
    ours, per_symbol = sweep_portfolio(make(), universe, params,
                                       Execution(**ACCOUNTS[account]), PPY,
                                       max_positions=max_positions)
    for c, combo in enumerate(combos):
        ref = _reference(universe, name, combo, ACCOUNTS[account], max_positions)
        where = f"{name} {combo} {account} max_positions={max_positions}"
        assert_portfolio_matches(ours[c], per_symbol[c], ref, SYMBOLS, where)


def _record(universe, name, combo, account):
    result = backtest_portfolio(universe, CASES[name][0](), combo, ppy=PPY,
                                **ACCOUNTS[account])
    return result, _reference(universe, name, combo, ACCOUNTS[account])


@pytest.mark.parametrize("account", sorted(ACCOUNTS))
def test_record_equals_the_reference(universe, account):
    """Equity, shares (signed) and cash at every close, and every trade with its side and
    exit reason, as the reference; the metrics are the sweep's bit for bit."""
    for name in ("ema_cross", "state_rule"):
        combo = CASES[name][1][0]
        result, ref = _record(universe, name, combo, account)
        where = f"{name} {combo} {account}"
        swept, _ = sweep_portfolio(CASES[name][0](), universe,
                                   {k: np.array([v]) for k, v in combo.items()},
                                   Execution(**ACCOUNTS[account]), PPY)
        np.testing.assert_array_equal([result.metrics[m] for m in METRICS], swept[0],
                                      err_msg=where)
        np.testing.assert_allclose(result.equity.to_numpy(), ref["equity"], rtol=1e-11,
                                   atol=1e-8, err_msg=where)
        held = np.array([[bar.get(s, 0.0) for s in SYMBOLS] for bar in ref["held"]])
        np.testing.assert_allclose(result.shares.to_numpy(), held, rtol=1e-11, atol=1e-9,
                                   err_msg=where)
        if not ref["trades"]:  # e.g. the rule's short side never enters
            assert result.trades.empty, where
            continue
        ours = result.trades.sort_values(["exit_bar", "symbol"], kind="stable")
        theirs = pd.DataFrame(ref["trades"]).sort_values(["exit_bar", "symbol"],
                                                         kind="stable")
        assert len(ours) == len(theirs), where
        for mine, other in (("symbol", "symbol"), ("entry_bar", "entry_bar"),
                            ("exit_bar", "exit_bar"), ("side", "side"),
                            ("exit_reason", "reason")):
            assert ours[mine].tolist() == theirs[other].tolist(), f"{where} {mine}"
        for mine, other in (("pnl", "pnl"), ("return", "ret"), ("size", "size")):
            np.testing.assert_allclose(ours[mine], theirs[other], rtol=1e-9, atol=1e-7,
                                       err_msg=f"{where} {mine}")


def test_the_cases_exercise_what_they_name(universe):
    """Shorts are traded, margin calls made, leverage takes the gross exposure above the
    equity, lots round the shares, and funding, borrowing and each size change the
    result: no case passes by doing nothing."""
    combo = CASES["ema_cross"][1][0]
    records = {a: _record(universe, "ema_cross", combo, a)[0] for a in ACCOUNTS}
    trades = {a: r.trades for a, r in records.items()}
    assert (trades["both"]["side"] == -1).any() and (trades["both"]["side"] == 1).any()
    assert (trades["short_stops"]["side"] == -1).all()
    assert {"stop", "trail", "target"} <= set(trades["short_stops"]["exit_reason"])
    assert (trades["margin"]["exit_reason"] == "margin").any()
    close = pd.DataFrame({s: universe[s]["close"] for s in SYMBOLS})
    for account in ("leverage", "margin", "cash"):
        shares = records[account].shares.to_numpy()
        gross = (np.abs(shares) * close.to_numpy()).sum(axis=1)
        assert (gross > 1.5 * records[account].equity.to_numpy()).any(), account
    lots = records["percent_lots"].shares.to_numpy()
    np.testing.assert_array_equal(lots, np.round(lots / 2.0) * 2.0)
    assert (records["quantity"].shares.to_numpy() % 10.0 == 0.0).all()
    assert (records["quantity"].shares.to_numpy() <= 0.0).all()
    base = records["both"].metrics["total_return"]
    assert records["funding"].metrics["total_return"] != base
    no_borrow = backtest_portfolio(universe, get_strategy("ema_cross"), combo, ppy=PPY,
                                   **{**ACCOUNTS["leverage"], "borrow_rate": 0.0})
    assert no_borrow.metrics["total_return"] > records["leverage"].metrics["total_return"]
    returns = {a: records[a].metrics["total_return"] for a in
               ("percent_lots", "risk", "vol_target", "cash", "quantity")}
    assert len(set(returns.values())) == len(returns), returns


SHORT_BOTH = Rule("close < 0", "close < 0", short_entry="close > 0", short_exit="close < 0")


def test_hand_computed_shorts_with_borrowing():
    """Two symbols shorted at the first close, half the value each: A sells 500 at 10,
    B 250 at 20 (cash 20,000). The borrow fee (0.252 a year at 252 bars: 0.1% a bar) is
    charged on each short's value at every close it is held through: bar 1 pays
    500 * 9 * 0.001 + 250 * 22 * 0.001 = 10, bar 2 pays 4 + 5 = 9."""
    a = np.array([10.0, 9.0, 8.0])
    b = np.array([20.0, 22.0, 20.0])
    bars = {s: dict(open=c, high=c, low=c, close=c) for s, c in (("A", a), ("B", b))}
    result = backtest_portfolio(bars, compile_rule(SHORT_BOTH, {}), {}, ppy=252.0,
                                fill="close", direction="short", borrow_rate=0.252)
    equity = [10_000.0, 20_000.0 - 10 - 4_500 - 5_500, 20_000.0 - 19 - 4_000 - 5_000]
    np.testing.assert_allclose(result.equity.to_numpy(), equity, rtol=1e-13)
    np.testing.assert_allclose(result.shares.to_numpy(), [[-500.0, -250.0]] * 3)
    assert result.trades["side"].tolist() == [-1, -1]
    np.testing.assert_allclose(result.trades["pnl"].sum(), equity[-1] - 10_000.0, rtol=1e-12)


def test_hand_computed_leverage_and_margin_call():
    """Leverage 3, two symbols at 10: each entry targets 1/2 * 10,000 * 3, both fill (the
    buying power after A is 3 * 10,000 - 15,000), cash -20,000. The equity over the
    gross exposure falls to 8,200 / 28,200 < 0.3 at bar 3's close: both positions are
    closed there, exit reason ``margin``, leaving 8,200."""
    a = np.array([10.0, 10.0, 9.8, 9.5, 9.6])
    b = np.array([10.0, 9.5, 9.4, 9.3, 9.9])
    bars = {s: dict(open=c, high=c, low=c, close=c) for s, c in (("A", a), ("B", b))}
    result = backtest_portfolio(bars, get_strategy("buy_and_hold"), {}, ppy=252.0,
                                fill="close", leverage=3.0, maintenance_margin=0.3)
    equity = [10_000.0, 9_250.0, 8_800.0, 8_200.0, 8_200.0]
    np.testing.assert_allclose(result.equity.to_numpy(), equity, rtol=1e-13)
    np.testing.assert_allclose(result.shares.to_numpy()[:3], [[1_500.0, 1_500.0]] * 3)
    np.testing.assert_array_equal(result.shares.to_numpy()[3:], 0.0)
    np.testing.assert_allclose(result.cash.to_numpy()[:3], -20_000.0)
    assert result.trades["exit_reason"].tolist() == ["margin", "margin"]
    assert result.trades["exit_bar"].tolist() == [3, 3]


def test_plot_draws_shorts_below_zero(universe, tmp_path):
    """A member's panel shows its shorts as negative value held (the axis goes below
    0); the picture is written."""
    result = _record(universe, "ema_cross", CASES["ema_cross"][1][0], "both")[0]
    fig = result.plot(tmp_path / "both.png")
    panels = fig.axes[1:1 + len(SYMBOLS)]
    assert all(ax.get_ylim()[0] < 0.0 for ax in panels)
    assert "shorts below 0" in panels[0].texts[0].get_text()
    assert (tmp_path / "both.png").stat().st_size > 20_000


@pytest.mark.parametrize(("size", "theirs"), [
    (dict(type="cash", value=1_500.0), dict(size=1_500.0, size_type="value")),
    (dict(type="quantity", value=7.0), dict(size=7.0, size_type="amount")),
])
def test_cash_and_quantity_sizes_are_vectorbt(universe, size, theirs):
    """A fixed value and a fixed quantity per entry from one account are vectorbt's
    ``from_signals`` with ``size_type`` value and amount, one group, cash sharing, fed
    the TA-Lib signals of ema_cross (fill at the close, fees): the account's value at
    every bar to 1e-9. The sizes stay under the weight's target and the cash here (what
    vectorbt has no notion of; the cap is held to the reference above)."""
    vbt = pytest.importorskip("vectorbt")
    from helpers.ref_strategies import ref_signals

    combo = dict(fast=5, slow=20)
    result = backtest_portfolio(universe, "ema_cross", combo, ppy=PPY, fill="close",
                                fees=0.001, size=size)
    index = pd.date_range("2020-01-01", periods=len(universe["AAA"]["close"]), freq="1h")
    close = pd.DataFrame({s: b["close"] for s, b in universe.items()}, index=index)
    signals = {s: ref_signals("ema_cross", b, combo) for s, b in universe.items()}
    entries = pd.DataFrame({s: np.asarray(v[0], bool) for s, v in signals.items()}, index=index)
    exits = pd.DataFrame({s: np.asarray(v[1], bool) for s, v in signals.items()}, index=index)
    pf = vbt.Portfolio.from_signals(close, entries, exits, direction="longonly", fees=0.001,
                                    init_cash=10_000.0, group_by=True, cash_sharing=True,
                                    call_seq="auto", freq="1h", **theirs)
    np.testing.assert_allclose(result.equity.to_numpy(), pf.value().to_numpy(), rtol=1e-9)
    assert len(result.trades) > 40
    gross = (np.abs(result.shares.to_numpy()) * close.to_numpy()).sum(axis=1)
    assert gross.max() > 2_500.0  # several positions at once
