"""Portfolio runs over a span of the bars (walk-forward windows) and the account's PBO
segment sums, held to the slow reference of tests/helpers/portfolio_reference.py: a span is the
reference run on the span's bars alone, its signals read from the whole series (the
indicators warmed up), against the equal-weight buy-and-hold bought at the span's first
bar; the segment sums are those of the reference's equity curve."""

import numpy as np
import pytest
from helpers.compare import assert_metrics_match
from helpers.portfolio_cases import CASES, EXECUTIONS, PPY, SYMBOLS
from helpers.portfolio_reference import ref_portfolio

from barsweep.engine import METRICS, Execution, sweep_portfolio
from barsweep.engine.core.simulate import segment_bounds
from barsweep.engine.portfolio.sweep import portfolio_runs


@pytest.fixture(scope="module")
def universe():
    from helpers.bars import random_bars

    return {s: random_bars(900, seed=40 + i, gap=0.003) for i, s in enumerate(SYMBOLS)}


def _shifted(signal, start):
    """``signal`` of the whole series read from bar ``start`` on (bars numbered in the
    span)."""
    return lambda t, position, price, bar: signal(t + start, position, price, bar + start)


def _ref(name, universe, combo, span, execution, max_positions):
    """The reference portfolio of one combo on bars ``[start, end)`` alone."""
    _, _, signals_of = CASES[name]
    start, end = span
    part = {s: {k: v[start:end] for k, v in b.items()} for s, b in universe.items()}
    signals = {s: _shifted(signals_of(universe[s], combo), start) for s in universe}
    return ref_portfolio(signals, part, ppy=PPY, max_positions=max_positions, **execution)


def _params(combos):
    return {k: np.array([c[k] for c in combos]) for k in combos[0]}


SPANS = [(0, 900), (150, 600), (600, 900), (37, 41)]


@pytest.mark.parametrize("max_positions", [None, 2])
@pytest.mark.parametrize("execution", ["close_costs", "next_open_costs"])
@pytest.mark.parametrize("name", ["ema_cross", "state_rule"])
def test_each_span_equals_the_reference_on_its_bars(universe, name, execution,
                                                    max_positions):
    make, combos, _ = CASES[name]
    ours, per_symbol = sweep_portfolio(make(), universe, _params(combos),
                                       Execution(**EXECUTIONS[execution]), PPY,
                                       max_positions=max_positions, spans=SPANS)
    assert ours.shape == (len(SPANS), len(combos), len(METRICS))
    assert per_symbol.shape == (len(SPANS), len(combos), len(SYMBOLS), 2)
    trades = 0
    for k, span in enumerate(SPANS):
        for c, combo in enumerate(combos):
            ref = _ref(name, universe, combo, span, EXECUTIONS[execution], max_positions)
            where = f"{name} {combo} {execution} {max_positions} span {span}"
            assert_metrics_match(dict(zip(METRICS, ours[k, c], strict=True)), ref["metrics"],
                                 where=where)
            for i, s in enumerate(SYMBOLS):
                n_trades, exposure = ref["per_symbol"][s]
                assert per_symbol[k, c, i, 0] == n_trades, where
                assert per_symbol[k, c, i, 1] == pytest.approx(exposure, rel=1e-12), where
            trades += len(ref["trades"])
    assert trades >= 20 * len(combos)


def test_the_whole_span_is_the_plain_run(universe):
    make, combos, _ = CASES["ema_cross"]
    execution = Execution(**EXECUTIONS["close_costs"])
    plain, plain_sym = sweep_portfolio(make(), universe, _params(combos), execution, PPY)
    spanned, spanned_sym = sweep_portfolio(make(), universe, _params(combos), execution, PPY,
                                           spans=[(0, 900)])
    np.testing.assert_array_equal(spanned[0], plain)
    np.testing.assert_array_equal(spanned_sym[0], plain_sym)


def test_window_benchmark_is_bought_at_the_span_start():
    closes = np.array([[1.0, 2.0, 4.0, 2.0], [1.0, 1.0, 1.0, 3.0]])
    (run, bench), = portfolio_runs(Execution(), 252.0, closes, [(1, 4)])
    level = np.array([1.0, 1.5, 2.0])  # mean of 2/2, 1/1; 4/2, 1/1; 2/2, 3/1
    np.testing.assert_allclose(bench, [0.0, 0.0, *(level[1:] / level[:-1] - 1)], rtol=1e-15)
    assert (run.start, run.end) == (1, 4)
    assert run.sum_b == pytest.approx(bench[2] + bench[3], rel=1e-15)


def _ref_segment_sums(ref, init_cash, bounds):
    equity = np.asarray(ref["equity"])
    returns = equity / np.concatenate([[init_cash], equity[:-1]]) - 1.0
    returns[~np.isfinite(returns)] = 0.0  # after a ruin: 0 / 0
    return np.array([[returns[a:b].sum(), (returns[a:b] ** 2).sum()] for a, b in bounds])


@pytest.mark.parametrize(("execution", "max_positions", "span"), [
    ("close_costs", None, None), ("next_open_costs", 1, None), ("close_costs", 2, (150, 600)),
    ("ruin", None, None)])
def test_segment_sums_are_the_reference_equity_returns(universe, execution, max_positions,
                                                       span):
    make, combos, _ = CASES["ema_cross"]
    costs = (dict(fill="close", init_cash=100.0, fixed_fee=30.0) if execution == "ruin"
             else EXECUTIONS[execution])
    n_segs = 6
    sums = np.full((len(combos), n_segs, 2), np.nan)
    spans = None if span is None else [span]
    metrics, _ = sweep_portfolio(make(), universe, _params(combos), Execution(**costs), PPY,
                                 max_positions=max_positions, spans=spans, seg_sums=sums)
    plain, _ = sweep_portfolio(make(), universe, _params(combos), Execution(**costs), PPY,
                               max_positions=max_positions, spans=spans)
    np.testing.assert_array_equal(metrics, plain)  # the sums change no metric
    start, end = span or (0, 900)
    bounds = segment_bounds(0, end - start, n_segs)
    for c, combo in enumerate(combos):
        ref = _ref("ema_cross", universe, combo, (start, end), costs, max_positions)
        if execution == "ruin":
            assert ref["metrics"]["ruined"] == 1.0
        np.testing.assert_allclose(sums[c], _ref_segment_sums(ref, costs.get(
            "init_cash", 10_000.0), bounds), rtol=1e-10, atol=1e-13, err_msg=str(combo))


def test_seg_sums_with_several_spans_are_refused(universe):
    make, combos, _ = CASES["ema_cross"]
    with pytest.raises(ValueError, match="one span"):
        sweep_portfolio(make(), universe, _params(combos), Execution(), PPY,
                        spans=[(0, 100), (100, 200)], seg_sums=np.empty((3, 2, 2)))
