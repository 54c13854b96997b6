"""One portfolio combo in full (:func:`barsweep.engine.backtest.portfolio.backtest_portfolio`):
its metrics are the sweep's, bit for bit; its recorded equity, shares and trades are the
slow reference's (tests/helpers/portfolio_reference.py) at every bar, with max_positions,
next_open, costs and ruin; its shares, cash and value are vectorbt's ``from_orders`` on
real daily stocks; and its picture draws."""

import numpy as np
import pandas as pd
import pytest
from helpers.portfolio_cases import CASES, EXECUTIONS, PPY, SYMBOLS, vectorbt_value
from helpers.portfolio_reference import ref_portfolio

from barsweep.engine import METRICS, Execution, get_strategy, sweep_portfolio
from barsweep.engine.backtest.portfolio import backtest_portfolio
from barsweep.errors import SpecError


@pytest.fixture(scope="module")
def universe():
    from helpers.bars import random_bars

    return {s: random_bars(1_200, seed=10 + i, gap=0.003) for i, s in enumerate(SYMBOLS)}


def _both(universe, name, combo, execution, max_positions):
    make, _, signals_of = CASES[name]
    result = backtest_portfolio(universe, make(), combo, ppy=PPY, max_positions=max_positions,
                                **execution)
    ref = ref_portfolio({s: signals_of(universe[s], combo) for s in universe}, universe,
                        ppy=PPY, max_positions=max_positions, **execution)
    return result, ref


def _assert_record_is_the_reference(result, ref, universe, where):
    np.testing.assert_allclose(result.equity.to_numpy(), ref["equity"], rtol=1e-12,
                               atol=1e-9, err_msg=where)
    held = np.array([[bar.get(s, 0.0) for s in SYMBOLS] for bar in ref["held"]])
    np.testing.assert_allclose(result.shares.to_numpy(), held, rtol=1e-12, err_msg=where)
    close = np.stack([universe[s]["close"] for s in SYMBOLS], axis=1)
    marked = result.cash.to_numpy() + (result.shares.to_numpy() * close).sum(axis=1)
    np.testing.assert_allclose(marked, result.equity.to_numpy(), rtol=1e-12, atol=1e-9)
    ours = result.trades.sort_values(["exit_bar", "symbol"], kind="stable")
    theirs = pd.DataFrame(ref["trades"]).sort_values(["exit_bar", "symbol"], kind="stable")
    assert len(ours) == len(theirs) == result.metrics["n_trades"], where
    assert ours["symbol"].tolist() == theirs["symbol"].tolist(), where
    for mine, other in (("entry_bar", "entry_bar"), ("exit_bar", "exit_bar")):
        np.testing.assert_array_equal(ours[mine], theirs[other], err_msg=where)
    for mine, other in (("pnl", "pnl"), ("return", "ret"), ("size", "size")):
        np.testing.assert_allclose(ours[mine], theirs[other], rtol=1e-10, atol=1e-8,
                                   err_msg=f"{where} {mine}")


@pytest.mark.parametrize("max_positions", [None, 2])
@pytest.mark.parametrize("execution", sorted(EXECUTIONS))
@pytest.mark.parametrize("name", ["ema_cross", "state_rule"])
def test_record_equals_the_reference_and_metrics_the_sweep(universe, name, execution,
                                                           max_positions):
    make, combos, _ = CASES[name]
    params = {k: np.array([c[k] for c in combos]) for k in combos[0]}
    swept, per_symbol = sweep_portfolio(make(), universe, params,
                                        Execution(**EXECUTIONS[execution]), PPY,
                                        max_positions=max_positions)
    for c, combo in enumerate(combos):
        where = f"{name} {combo} {execution} max_positions={max_positions}"
        result, ref = _both(universe, name, combo, EXECUTIONS[execution], max_positions)
        np.testing.assert_array_equal([result.metrics[m] for m in METRICS], swept[c],
                                      err_msg=where)
        np.testing.assert_array_equal(result.members.to_numpy(), per_symbol[c], err_msg=where)
        assert list(result.members.index) == list(SYMBOLS)
        _assert_record_is_the_reference(result, ref, universe, where)
        assert (result.trades["exit_reason"].iloc[:-4] == "signal").all()


@pytest.mark.parametrize("fill", ["close", "next_open"])
def test_ruin_is_recorded(universe, fill):
    """Fixed fees drive the account to zero: the record is 0 from that close on, the
    positions held then are booked as ruin trades, as the reference."""
    execution = dict(fill=fill, init_cash=100.0, fixed_fee=30.0)
    ruined = 0
    for combo in CASES["ema_cross"][1]:
        result, ref = _both(universe, "ema_cross", combo, execution, None)
        _assert_record_is_the_reference(result, ref, universe, f"{combo} {fill}")
        if result.metrics["ruined"]:
            ruined += 1
            at = int(np.argmax(result.equity.to_numpy() == 0.0))
            assert (result.equity.iloc[at:] == 0.0).all() and (result.cash.iloc[at:] == 0).all()
            assert (result.trades["exit_bar"] <= at).all()
            assert set(result.trades.loc[result.trades["exit_bar"] == at, "exit_reason"]) <= {
                "ruin", "signal"}
    assert ruined >= 2


def test_stats_and_buy_and_hold(universe):
    """stats() reads the recorded trades (fees paid as the trades' gross less pnl); the
    buy and hold is the equal-weight one of sweep_portfolio's buy_and_hold."""
    result = backtest_portfolio(universe, "ema_cross", dict(fast=5, slow=20), ppy=PPY,
                                fill="close", fees=0.001)
    hold = result.buy_and_hold()
    expected, _ = sweep_portfolio(get_strategy("buy_and_hold"), universe, {},
                                  Execution(fill="close", fees=0.001), PPY)
    np.testing.assert_array_equal([hold.metrics[m] for m in METRICS], expected[0])
    assert (hold.shares.iloc[0] > 0).all() and len(hold.trades) == len(SYMBOLS)
    stats = result.stats()
    assert stats["n_trades"] == len(result.trades)
    assert stats["buy_and_hold_return"] == hold.metrics["total_return"]
    notional = (result.trades["size"] * (result.trades["entry_price"]
                                         + result.trades["exit_price"]))
    ended = result.trades["exit_reason"] == "end"  # marked, no exit fee
    fees = 0.001 * (notional - ended * result.trades["size"] * result.trades["exit_price"])
    assert stats["fees_paid"] == pytest.approx(fees.sum(), rel=1e-9)


def test_times_and_alignment(universe):
    times = np.arange(1_200, dtype=np.int64) * 3_600_000_000_000
    bars = {s: dict(b, time=times) for s, b in universe.items()}
    result = backtest_portfolio(bars, "ema_cross", dict(fast=5, slow=20), fill="close")
    assert isinstance(result.equity.index, pd.DatetimeIndex)
    assert result.ppy == pytest.approx(8760.0)
    first = result.trades.iloc[0]
    assert first["entry_time"] == result.equity.index[first["entry_bar"]]
    bars["BBB"] = dict(bars["BBB"], time=times + 1)
    with pytest.raises(SpecError, match="not aligned"):
        backtest_portfolio(bars, "ema_cross", dict(fast=5, slow=20), fill="close")


def test_plot_draws_every_member(universe, tmp_path):
    result = backtest_portfolio(universe, "ema_cross", dict(fast=5, slow=20), ppy=PPY,
                                max_positions=2, fill="close")
    fig = result.plot(tmp_path / "p.png")
    assert len(fig.axes) == len(SYMBOLS) + 2
    assert (tmp_path / "p.png").stat().st_size > 20_000
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["portfolio (the strategy)", "equal-weight buy and hold"]


vbt = pytest.importorskip("vectorbt")


def test_shares_and_cash_are_vectorbt_on_real_stocks():
    """Daily AAPL, MSFT, IBM, GOOG on their common dates, fees 0.1%, close fills: the
    recorded shares, cash and value are vectorbt's assets(), cash() and value()."""
    pytest.importorskip("bokeh_sampledata")
    from golden.cases import load_bars

    raw = {s: load_bars(s) for s in ("AAPL", "MSFT", "IBM", "GOOG")}
    common = sorted(set.intersection(*(set(b["time"].tolist()) for b in raw.values())))
    universe = {s: {k: np.ascontiguousarray(v[np.isin(b["time"], common)])
                    for k, v in b.items()} for s, b in raw.items()}
    combo = dict(fast=10, slow=30)
    result = backtest_portfolio(universe, "ema_cross", combo, ppy=252.0, fill="close",
                                fees=0.001)
    make, _, signals_of = CASES["ema_cross"]
    ref = ref_portfolio({s: signals_of(universe[s], combo) for s in universe}, universe,
                        fill="close", fees=0.001, ppy=252.0)
    index = pd.date_range("2000-01-01", periods=len(common), freq="1D")
    close = pd.DataFrame({s: b["close"] for s, b in universe.items()}, index=index)
    pf = vbt.Portfolio.from_orders(close, size=pd.DataFrame(ref["targets"], index=index,
                                                            columns=close.columns),
                                   size_type="targetpercent", group_by=True,
                                   cash_sharing=True, call_seq="auto", fees=0.001,
                                   init_cash=10_000.0, freq="1D")
    np.testing.assert_allclose(result.equity.to_numpy(), pf.value().to_numpy(), rtol=1e-9)
    np.testing.assert_allclose(result.cash.to_numpy(), pf.cash().to_numpy(), rtol=1e-9,
                               atol=1e-6)
    np.testing.assert_allclose(result.shares.to_numpy(), pf.assets().to_numpy(), rtol=1e-9,
                               atol=1e-9)
    np.testing.assert_allclose(result.equity.to_numpy(),
                               vectorbt_value(universe, ref["targets"], 0.001, 10_000.0),
                               rtol=1e-9)
    assert len(result.trades) >= 40 and pf.trades.count() == len(result.trades)
