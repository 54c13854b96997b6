"""The calendar in rules (docs/RULES.md, "The calendar"): ``hour``, ``minute``, ``weekday``,
``day`` and ``month`` of each bar's time stamp, in UTC.

The series equal pandas' ``DatetimeIndex`` fields on time stamps across centuries, leap
days and the epoch; rules reading them equal the slow reference (the rule evaluated bar
by bar in Python, the calendar read from pandas) over whole runs, with lags and inside an
indicator; ``backtest()`` reads them from a DataFrame's index or a Dataset's time, and a
portfolio's members from their bars; bars without time stamps are refused in one line."""

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from helpers.bars import random_bars
from helpers.compare import assert_metrics_match
from helpers.rule_reference import reference_run

from barsweep.engine import METRICS, Execution, backtest, sweep_block, sweep_portfolio
from barsweep.engine.core.calendar import CALENDAR, calendar_field
from barsweep.engine.rules import Rule, compile_rule
from barsweep.errors import SpecError

PPY = 8760.0


def pandas_calendar(time_ns: np.ndarray) -> dict[str, np.ndarray]:
    """The calendar as pandas reads it from a UTC DatetimeIndex."""
    index = pd.DatetimeIndex(time_ns.astype("datetime64[ns]"), tz="UTC")
    return {"hour": index.hour, "minute": index.minute, "weekday": index.day_of_week,
            "day": index.day, "month": index.month}


def test_the_calendar_is_pandas_across_centuries_leap_days_and_the_epoch():
    rng = np.random.default_rng(5)
    low = np.datetime64("1901-01-01", "ns").view(np.int64)
    high = np.datetime64("2199-12-31", "ns").view(np.int64)
    times = np.concatenate([
        rng.integers(low, high, 20_000),
        np.array(["2024-02-29T23:59", "2000-02-29T00:00", "1970-01-01T00:00",
                  "1969-12-31T23:59:59", "2100-03-01T12:30"],
                 dtype="datetime64[ns]").view(np.int64)])
    want = pandas_calendar(times)
    for name in CALENDAR:
        np.testing.assert_array_equal(calendar_field(times, name), want[name], err_msg=name)


#: name -> (rule, kinds, combos)
RULES = {
    # a session filter: weekdays, from an hour on, out before another
    "session": (Rule("weekday < 5 and hour >= start and close > sma(close, n)",
                     "hour >= stop or weekday >= 5 or close < sma(close, n)",
                     short_entry="weekday == 4 and hour >= start and close < sma(close, n)",
                     short_exit="hour[1] >= stop or close > sma(close, n)"),
                {"n": "int", "start": "int", "stop": "int"},
                [dict(n=5, start=8, stop=16), dict(n=12, start=13, stop=21),
                 dict(n=3, start=0, stop=23)]),
    # months and days of the month, a minute, and the calendar inside an indicator
    "seasons": (Rule("(month == 2 or day > 20) and minute == 0 and close > open",
                     "sma(hour, m) > limit or day == 1"),
                {"m": "int", "limit": "float"},
                [dict(m=3, limit=12.0), dict(m=24, limit=11.6)]),
}

EXECUTIONS = {"close": dict(fill="close", fees=0.001),
              "next_open_both": dict(fill="next_open", direction="both", fees=0.0005,
                                     slippage=0.0003, stop_loss=0.03)}


@pytest.fixture(scope="module")
def bars():
    out = random_bars(2_000, seed=11, gap=0.003)  # hourly from 2020-01-01
    return out


@pytest.mark.parametrize("execution", sorted(EXECUTIONS))
@pytest.mark.parametrize("name", sorted(RULES))
def test_a_rule_reading_the_calendar_equals_the_reference(bars, name, execution):
    rule, kinds, combos = RULES[name]
    settings = EXECUTIONS[execution]
    params = {k: np.array([c[k] for c in combos]) for k in kinds}
    ours = sweep_block(compile_rule(rule, kinds), bars, params, Execution(**settings), PPY)
    theirs_bars = {**bars, **pandas_calendar(bars["time"])}
    traded = 0
    for i, combo in enumerate(combos):
        metrics, _, trades = reference_run(rule, kinds, combo, theirs_bars, PPY, **settings)
        assert_metrics_match(dict(zip(METRICS, ours[i], strict=True)), metrics,
                             where=f"{name} {combo} {execution}")
        traded += len(trades) > 0
    assert traded >= 2, "the comparison must not be of idle runs"


def test_the_calendar_changes_the_trades(bars):
    rule, kinds, combos = RULES["session"]
    params = {k: np.array([c[k] for c in combos[:2]]) for k in kinds}
    plain = Rule("start >= 0 and close > sma(close, n)", "stop < 0 or close < sma(close, n)")
    execution = Execution(fill="close", fees=0.001)
    with_calendar = sweep_block(compile_rule(rule, kinds), bars, params, execution, PPY)
    without = sweep_block(compile_rule(plain, kinds), bars, params, execution, PPY)
    assert not (with_calendar == without).all(axis=1).any()


def test_backtest_reads_the_time_of_a_dataframe_and_a_dataset(bars):
    rule, kinds, combos = RULES["session"]
    combo = combos[0]
    swept = sweep_block(compile_rule(rule, kinds), bars,
                        {k: np.array([v]) for k, v in combo.items()}, Execution(), PPY)[0]
    index = pd.DatetimeIndex(bars["time"].astype("datetime64[ns]"), name="time")
    frame = pd.DataFrame({k: bars[k] for k in ("open", "high", "low", "close")}, index=index)
    dataset = xr.Dataset({k: ("time", bars[k]) for k in ("open", "high", "low", "close")},
                         coords={"time": index.values})
    for given in (frame, dataset):
        one = backtest(given, rule, combo, ppy=PPY)
        np.testing.assert_array_equal([one.metrics[m] for m in METRICS], swept)
        entered = pd.DatetimeIndex(one.trades["entry_time"]) - pd.Timedelta("1h")
        decided = entered[one.trades["side"].to_numpy() > 0]  # decided at the close before
        assert ((decided.day_of_week < 5) & (decided.hour >= combo["start"])).all()


def test_a_portfolio_member_reads_its_calendar(bars):
    universe = {s: random_bars(800, seed=20 + i, gap=0.003) for i, s in enumerate("ABC")}
    rule = Rule("weekday < 5 and hour >= start and close > sma(close, n)",
                "hour >= stop or close < sma(close, n)")
    kinds = {"n": "int", "start": "int", "stop": "int"}
    params = {"n": np.array([5, 12]), "start": np.array([8, 13]), "stop": np.array([16, 21])}
    ours, per_symbol = sweep_portfolio(compile_rule(rule, kinds), universe, params,
                                       Execution(fill="close", fees=0.001), PPY)
    assert (per_symbol[:, :, 0] > 0).all()
    plain = Rule("start >= 0 and close > sma(close, n)", "stop < 0 or close < sma(close, n)")
    theirs, _ = sweep_portfolio(compile_rule(plain, kinds), universe, params,
                                Execution(fill="close", fees=0.001), PPY)
    assert not (ours == theirs).all(axis=1).any()


@pytest.mark.parametrize("time", [None, np.linspace(0.0, 1.0, 300)])
def test_bars_without_time_stamps_are_refused_in_one_line(time):
    bars = {k: v for k, v in random_bars(300, seed=2).items() if k != "time"}
    if time is not None:
        bars["time"] = time  # floats: not date-times
    strategy = compile_rule(Rule("hour > 12", "hour < 3"), {})
    with pytest.raises(SpecError) as info:
        sweep_block(strategy, bars, {}, Execution(), PPY)
    message = str(info.value)
    assert message == ("the rule reads hour, but the bars have no time stamps to read it "
                       "from (give them a time column or a DatetimeIndex, as date-times)")
