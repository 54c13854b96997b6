"""Rules with lags, nesting and the position state, compiled into the sweep kernel, held
to the slow reference (tests/helpers/rule_reference.py: the rule evaluated bar by bar in Python,
its indicators TA-Lib's, its state the reference simulator's) over whole runs, and to
vectorbt fed the same signals for rules that read no state. The five classic strategies
of docs/RULES.md are among them, read from the page."""

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from helpers.bars import random_bars
from helpers.compare import assert_metrics_match
from helpers.rule_reference import RuleReference, reference_run

from barsweep.engine import METRICS, Execution, backtest, sweep_block
from barsweep.engine.rules import Rule, compile_rule

PPY = 8760.0
RULES_PAGE = Path(__file__).resolve().parents[2] / "docs" / "RULES.md"


def page_rules() -> dict[str, tuple[Rule, dict]]:
    """The named rules of docs/RULES.md's YAML blocks, with their grids."""
    found = {}
    for block in re.findall(r"^```yaml\n(.*?)^```", RULES_PAGE.read_text(), re.M | re.S):
        spec = yaml.safe_load(block)
        strategy = spec.get("strategy")
        if isinstance(strategy, dict):
            found[strategy["name"]] = (Rule(**strategy["rule"], name=strategy["name"]),
                                       spec["grid"])
    return found


def first_values(grid: dict) -> list[dict]:
    """Three combos of a grid: its first values, its last, and a mix."""
    axes = _axes(grid)
    return [{k: v[0] for k, v in axes.items()}, {k: v[-1] for k, v in axes.items()},
            {k: v[i % len(v)] for i, (k, v) in enumerate(axes.items())}]


def _axes(grid: dict) -> dict:
    """Each axis's values (a ``{start, stop, step}`` range included)."""
    return {k: list(np.arange(e["start"], e["stop"] + 1, e["step"])) if isinstance(e, dict)
            else list(e) for k, e in grid.items()}


def _kinds(grid: dict) -> dict:
    return {k: "int" if all(float(v).is_integer() for v in vals) else "float"
            for k, vals in _axes(grid).items()}


#: Rules written for this test: lags by literals and parameters, nesting, crosses of
#: expressions, min/max/abs, != and not, every state name (``quantity``: the signed size
#: held, here capping the position's value), both sides.
OWN = {
    "lags": (Rule("close > close[lag] and close[1] < open[lag] * 1.01",
                  "close < sma(close, n)[lag] or not (high[2] > low[1])"),
             {"lag": [1, 3, 7], "n": [5, 12]}),
    "nested": (Rule("cross_above(ema(rsi(close, n), m), 50)",
                    "cross_below(sma(close - open, m) / stdev(close, n), -0.1)"),
               {"n": [7, 14], "m": [3, 5]}),
    "state": (Rule("cross_above(close, bbands(close, n, k).upper) and position == 0",
                   "bars_held >= hold or close < entry_price * (1 - stop) or "
                   "close > highest(high, n)[1] + atr(high, low, close, n)",
                   short_entry="close < lowest(low, n)[1] and abs(close - open) > 0",
                   short_exit="bars_held > hold or "
                              "close > entry_price + 2 * atr(high, low, close, n)"),
              {"n": [10, 20], "k": [1.0, 2.0], "hold": [3, 12], "stop": [0.01, 0.03]}),
    "nan": (Rule("rsi(close, n) != 50 and close > open", "close < open"), {"n": [10, 30]}),
    "quantity": (Rule("close > sma(close, n)", "abs(quantity) * close > cap",
                      short_entry="close < sma(close, n)",
                      short_exit="quantity * close < -cap * 0.98"),
                 {"n": [5, 20], "cap": [10_050.0, 10_300.0]}),
    "helpers": (Rule("min(open, close) > max(sma(close, n), ema(close, n)) and close != open",
                     "macd(close, n, 26, 9).macd < macd(close, n, 26, 9).signal or "
                     "stoch(high, low, close, 14, 3, 3).k > 80"),
                {"n": [5, 12]}),
}

EXECUTIONS = {
    "close": dict(fill="close", fees=0.001),
    "next_open_both": dict(fill="next_open", direction="both", fees=0.0005, slippage=0.0003),
    "stops_both": dict(fill="close", direction="both", stop_loss=0.02, take_profit=0.05,
                       trailing_stop=0.03),
}

CASES = {**OWN, **page_rules()}


def test_the_page_has_its_five_classic_strategies():
    # and the calendar's session filter
    assert set(page_rules()) == {"rsi_trend", "bollinger_breakout", "turtle", "macd_cross",
                                 "three_down", "session"}


@pytest.fixture(scope="module")
def bars():
    return random_bars(1_500, seed=42, gap=0.003)


@pytest.mark.parametrize("execution", sorted(EXECUTIONS))
@pytest.mark.parametrize("name", sorted(CASES))
def test_rule_equals_the_reference_over_whole_runs(bars, name, execution):
    rule, grid = CASES[name]
    kinds = _kinds(grid)
    strategy = compile_rule(rule, kinds)
    combos = first_values(grid)
    params = {k: np.array([c[k] for c in combos]) for k in kinds}
    settings = EXECUTIONS[execution]
    ours = sweep_block(strategy, bars, params, Execution(**settings), PPY)
    traded = 0
    for i, combo in enumerate(combos):
        metrics, equity, trades = reference_run(rule, kinds, combo, bars, PPY, **settings)
        assert_metrics_match(dict(zip(METRICS, ours[i], strict=True)), metrics,
                             where=f"{name} {combo}")
        one = backtest(bars, rule, combo, ppy=PPY, **settings)
        np.testing.assert_allclose(one.equity.to_numpy(), equity, rtol=1e-12)
        traded += len(trades) > 0
    assert traded >= 2, "the comparison must not be of idle runs"


# ------------------------------------------------------------------------- vectorbt

vbt = pytest.importorskip("vectorbt")


@pytest.mark.parametrize("name", ["lags", "nested", "helpers", "bollinger_breakout",
                                  "macd_cross"])
def test_stateless_rules_equal_vectorbt_fed_the_same_signals(bars, name):
    """The reference's signals (TA-Lib, bar by bar) fed to vectorbt ``from_signals``,
    long only, fill at the close, an entry and an exit on one bar resolved as barsweep's
    default (``opposite``): the same metrics as the compiled rule's sweep."""
    rule, grid = CASES[name]
    kinds = _kinds(grid)
    combos = first_values(grid)
    params = {k: np.array([c[k] for c in combos]) for k in kinds}
    ours = sweep_block(compile_rule(rule, kinds), bars, params,
                       Execution(fill="close", fees=0.001), PPY)
    n = len(bars["close"])
    entries, exits = [], []
    for combo in combos:
        ref = RuleReference(rule, kinds, combo, bars)
        signals = [ref.signal_at(t, 0.0, None, None) for t in range(n)]
        entries.append([s[0] for s in signals])
        exits.append([s[1] for s in signals])
    index = pd.date_range("2020-01-01", periods=n, freq="1h")
    pf = vbt.Portfolio.from_signals(pd.Series(bars["close"], index=index),
                                    pd.DataFrame(np.array(entries).T, index=index),
                                    pd.DataFrame(np.array(exits).T, index=index),
                                    fees=0.001, init_cash=10_000.0, freq="1h",
                                    upon_long_conflict="opposite")  # barsweep's default
    col = {m: i for i, m in enumerate(METRICS)}
    np.testing.assert_allclose(ours[:, col["total_return"]], pf.total_return().to_numpy(),
                               rtol=1e-9)
    np.testing.assert_allclose(ours[:, col["sharpe"]], pf.sharpe_ratio().to_numpy(), rtol=1e-9)
    np.testing.assert_allclose(ours[:, col["max_drawdown"]], pf.max_drawdown().to_numpy(),
                               rtol=1e-9)
    np.testing.assert_array_equal(ours[:, col["n_trades"]], pf.trades.count().to_numpy())
    assert (ours[:, col["n_trades"]] > 0).any()
