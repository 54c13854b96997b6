"""Walk-forward: window lengths, window bounds, and the selection held to a literal loop
of ``backtest()`` runs (choices, train and test metrics, the stitched curve) and, on one
window, to vectorbt fed TA-Lib signals."""

import json
import math
import statistics

import numpy as np
import pyarrow as pa
import pytest
import xarray as xr
import yaml
from pydantic import ValidationError

from barsweep.datasets import open_bars, write_bars, write_synth
from barsweep.datasets.synth import synth_bars
from barsweep.engine import (
    BEST_WHEN_IDLE,
    LOWER_IS_BETTER,
    METRICS,
    Execution,
    backtest,
    get_strategy,
    sweep_block,
)
from barsweep.errors import DataError, SpecError
from barsweep.pipeline.analysis.walkforward import format_walkforward, walkforward
from barsweep.pipeline.config.windows import WalkForwardSpec, bars_of, window_bounds

PPY = 8760.0
FAST = [3, 5, 8, 12]
SLOW = [10, 20, 40]
N_BARS = 900


# ------------------------------------------------------------------ lengths and windows

@pytest.mark.parametrize(("length", "timeframe", "year_days", "bars"), [
    ("2y", "1d", 252, 504), ("6M", "1d", 252, 126), ("730d", "1h", 365, 17520),
    ("26w", "1d", 365, 182), ("1M", "1d", 365, 30), ("3d", "4h", 365, 18),
    ("1d", "2d", 365, 1),  # half a bar rounds up
    ("4d", "1w", 365, 1), (500, "1h", 365, 500), (1, "1d", 252, 1),
])
def test_lengths_in_bars(length, timeframe, year_days, bars):
    assert bars_of(length, timeframe, year_days) == bars


@pytest.mark.parametrize("length", ["0d", "1q", "1.5d", "-2y", "2 y", "1m", "", 0, -3, True,
                                    2.0, None])
def test_lengths_refused_name_the_key_and_the_forms(length):
    with pytest.raises(SpecError, match=r"walk_forward.train: expected a positive number of "
                                        r"bars, or a duration.*730d"):
        bars_of(length, "1h", 365, key="walk_forward.train")


def test_a_duration_below_one_bar_is_refused():
    with pytest.raises(SpecError, match=r"^walk_forward: '3d' is 0.429 bars of 1w bars"):
        bars_of("3d", "1w", 365)
    with pytest.raises(SpecError, match=r"^'3d' is 0.429 bars of 1w bars, less than one"):
        bars_of("3d", "1w", 365, key="")


def test_the_spec_section_defaults_step_to_test_and_refuses_by_key():
    spec = WalkForwardSpec(train="2y", test="6M")
    assert (spec.step, spec.anchored) == ("6M", False)
    assert spec.lengths("1d", 252) == (504, 126, 126)
    assert WalkForwardSpec(train=100, test=20, step=10, anchored=True).bounds(
        140, "1h", 365).tolist() == [[0, 100, 100, 120], [0, 110, 110, 130],
                                     [0, 120, 120, 140]]
    with pytest.raises(ValidationError, match=r"step\n.*expected a positive number of bars"):
        WalkForwardSpec(train=100, test=20, step="3q")
    with pytest.raises(ValidationError, match=r"1 validation error.*\ntest\n  Field required"):
        WalkForwardSpec(train=100)  # step is test's: only test is missing
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        WalkForwardSpec(train=100, test=20, stride=5)
    with pytest.raises(ValidationError, match="frozen"):
        spec.train = 3


def test_rolling_windows():
    bounds = window_bounds(100, 50, 20, 10)
    assert bounds.dtype == np.int64 and bounds.shape == (4, 4)
    assert bounds.tolist() == [[0, 50, 50, 70], [10, 60, 60, 80], [20, 70, 70, 90],
                               [30, 80, 80, 100]]
    assert window_bounds(70, 50, 20, 10).tolist() == [[0, 50, 50, 70]]  # exact fit
    assert window_bounds(99, 50, 20, 10).shape == (3, 4)  # the last test ends inside


def test_anchored_windows_train_from_bar_zero():
    assert window_bounds(100, 50, 20, 25, anchored=True).tolist() == [
        [0, 50, 50, 70], [0, 75, 75, 95]]


def test_windows_refused_in_one_line_with_the_numbers():
    with pytest.raises(SpecError, match=r"^walk_forward: no window fits: train 80 \+ test 30 "
                                        r"= 110 bars, the data has 100; shorten"):
        window_bounds(100, 80, 30, 10)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(SpecError, match=r"walk_forward: step must be a positive number"):
            window_bounds(100, 50, 20, bad)


# ------------------------------------------------------------------ a walk-forward store

def grid_combos():
    """Every (fast, slow) of the grid in flat (C) order; None where fast >= slow."""
    return [(f, s) if f < s else None for f in FAST for s in SLOW]


def write_store(tmp_path, bounds, execution, symbols=("SYN",), seed=11, returns=None):
    """A walk-forward results store from ``sweep_block(..., spans=...)``, laid out as a run
    writes it: metrics over (symbol, window, sample, fast, slow), bounds over window.
    The bars are synthetic, or with ``returns`` (log returns, one per bar) crafted."""
    bar_store = tmp_path / "bars"
    for k, symbol in enumerate(symbols):
        if returns is None:
            write_synth(bar_store, symbol, "1h", N_BARS, seed=seed + k)
        else:
            write_bars(bar_store, symbol, "1h", crafted_bars(returns))
    valid = [c for c in grid_combos() if c is not None]
    spans = [(a, b) for a, b, _, _ in bounds] + [(c, d) for _, _, c, d in bounds]
    n_w = len(bounds)
    data = np.full((len(symbols), n_w, 2, len(FAST) * len(SLOW), len(METRICS)), np.nan)
    for k, symbol in enumerate(symbols):
        ds = open_bars(bar_store, symbol, "1h").isel(symbol=0)
        cols = {c: ds[c].values for c in ("open", "high", "low", "close")}
        out = sweep_block(get_strategy("ema_cross"), cols,
                          dict(fast=np.array([f for f, _ in valid]),
                         slow=np.array([s for _, s in valid])),
                          Execution(**execution), PPY, spans=spans)
        where = [i for i, c in enumerate(grid_combos()) if c is not None]
        data[k, :, 0][:, where] = out[:n_w]
        data[k, :, 1][:, where] = out[n_w:]
    time = open_bars(bar_store, symbols[0], "1h")["time"].values.astype("datetime64[ns]")
    dims = ("symbol", "window", "sample", "fast", "slow")
    shaped = data.reshape(len(symbols), n_w, 2, len(FAST), len(SLOW), len(METRICS))
    coords = {"symbol": np.array(symbols, dtype=object), "window": np.arange(n_w),
              "sample": np.array(["train", "test"], dtype=object),
              "fast": np.array(FAST), "slow": np.array(SLOW)}
    for i, part in enumerate(("train_start", "train_end", "test_start", "test_end")):
        coords[f"{part}_bar"] = ("window", bounds[:, i])
        at = bounds[:, i] - (1 if part.endswith("end") else 0)  # first and last bar
        coords[part] = ("window", time[at])
    spec = {"data": {"store": str(bar_store), "symbols": list(symbols), "timeframe": "1h"},
            "strategy": "ema_cross", "grid": {"fast": FAST, "slow": SLOW},
            "constraints": ["fast < slow"], "execution": execution}
    ds = xr.Dataset({m: (dims, shaped[..., j]) for j, m in enumerate(METRICS)}, coords=coords,
                    attrs={"barsweep_results": 1, "complete": True,
                           "spec": yaml.safe_dump(spec), "periods_per_year": PPY})
    ds["done"] = ("block", np.ones(n_w, dtype=np.int8))
    path = tmp_path / "wf.zarr"
    ds.to_zarr(path, zarr_format=3, consolidated=False)
    return path, bar_store


def crafted_bars(returns):
    """Bars whose closes follow the log ``returns`` from 100, each opening at the last
    close, high and low 0.1% beyond the body (synth_bars' times and volumes)."""
    table = synth_bars(len(returns), 0, timeframe="1h")
    close = 100.0 * np.exp(np.cumsum(returns))
    open_ = np.concatenate([[100.0], close[:-1]])
    ohlc = dict(open=open_, high=np.maximum(open_, close) * 1.001,
                low=np.minimum(open_, close) * 0.999, close=close)
    for name, values in ohlc.items():
        table = table.set_column(table.schema.get_field_index(name), name,
                                 pa.array(values, pa.float64()))
    return table


def ref_walkforward(bars, bounds, execution, by, where=None):
    """The literal loop: in each window, backtest() every combo on train, keep the best
    (never first: NaN, ruined, infinite, idle by a metric doing nothing wins; ties to the
    lower flat index), run it on test; chain the test runs (each up to the next chosen
    window's test start)."""
    ascending = by in LOWER_IS_BETTER
    idle_wins = ascending or by in BEST_WHEN_IDLE
    picks = []
    for a, b, c, d in bounds:
        best = None
        for flat, combo in enumerate(grid_combos()):
            if combo is None:
                continue
            fast, slow = combo
            m = backtest(bars, "ema_cross", dict(fast=fast, slow=slow), ppy=PPY,
                         span=(int(a), int(b)), **execution).metrics
            if math.isnan(m[by]) or (where is not None and not where(m, fast, slow)):
                continue
            key = (m["ruined"] == 1.0, math.isinf(m[by]), idle_wins and m["n_trades"] == 0,
                   m[by] if ascending else -m[by])
            if best is None or key < best[0]:
                best = (key, flat, combo, m)
        if best is None:
            picks.append(None)
            continue
        test = backtest(bars, "ema_cross", dict(fast=best[2][0], slow=best[2][1]), ppy=PPY,
                        span=(int(c), int(d)), **execution).metrics
        picks.append(dict(flat=best[1], combo=best[2], train=best[3], test=test))
    init = Execution(**execution).init_cash
    chosen = [w for w, p in enumerate(picks) if p is not None]
    curve, trades, level = [], 0.0, 1.0
    for k, w in enumerate(chosen):
        end = int(bounds[w, 3])
        if k + 1 < len(chosen):
            end = min(end, int(bounds[chosen[k + 1], 2]))
        fast, slow = picks[w]["combo"]
        run = backtest(bars, "ema_cross", dict(fast=fast, slow=slow), ppy=PPY,
                       span=(int(bounds[w, 2]), end), **execution)
        for value in run.equity:
            curve.append(level * value / init)
        level = curve[-1]
        trades += run.metrics["n_trades"]
    returns, prev, peak, drawdown = [], 1.0, -math.inf, 0.0
    for value in curve:
        returns.append(value / prev - 1.0 if prev > 0 else 0.0)
        prev = value
        peak = max(peak, value)
        drawdown = min(drawdown, value / peak - 1.0)
    growth_in, bars_in = 1.0, 0
    for w in chosen:
        growth_in *= 1.0 + picks[w]["train"]["total_return"]
        bars_in += int(bounds[w, 1] - bounds[w, 0])
    in_cagr = growth_in ** (PPY / bars_in) - 1.0
    cagr = curve[-1] ** (PPY / len(curve)) - 1.0
    stitched = dict(
        total_return=curve[-1] - 1.0, cagr=cagr,
        sharpe=statistics.mean(returns) / statistics.stdev(returns) * math.sqrt(PPY),
        max_drawdown=drawdown, n_trades=trades, n_bars=len(curve), n_windows=len(chosen),
        in_sample_cagr=in_cagr, efficiency=cagr / in_cagr if in_cagr > 0 else math.nan)
    return picks, stitched, np.array(curve) * init


def assert_close(ours, theirs, where):
    for key, value in theirs.items():
        if isinstance(value, float) and math.isnan(value):
            assert math.isnan(ours[key]), (where, key)
        else:
            assert ours[key] == pytest.approx(value, rel=1e-12, abs=1e-12), (where, key)


CASES = [
    # (train, test, step, anchored), execution, by, where, bars' seed
    ((300, 100, 100, False), dict(fill="close", fees=0.0005, direction="both"), "sharpe",
     None, 28),  # test windows tiling the data; in-sample CAGR > 0: a defined efficiency
    ((250, 100, 150, True), dict(fill="next_open", fees=0.0005, direction="both"),
     "total_return", None, 11),  # anchored, gaps between the test windows
    ((300, 100, 50, False), dict(fill="close", direction="both", stop_loss=0.02),
     "max_drawdown", "n_trades >= 3 and fast > 3", 11),  # overlapping test windows
]


@pytest.mark.parametrize(("windows", "execution", "by", "where", "seed"), CASES)
def test_walkforward_equals_a_literal_loop_of_backtests(tmp_path, windows, execution, by,
                                                        where, seed):
    train, test, step, anchored = windows
    bounds = window_bounds(N_BARS, train, test, step, anchored=anchored)
    path, bar_store = write_store(tmp_path, bounds, execution, seed=seed)
    bars = open_bars(bar_store, "SYN", "1h")
    check = None if where is None else (lambda m, fast, slow: m["n_trades"] >= 3 and fast > 3)
    picks, ref_stitched, ref_curve = ref_walkforward(bars, bounds, execution, by, check)

    wf = walkforward(path, by=by, where=where)
    assert wf.symbol == "SYN" and len(wf.windows) == len(bounds)
    for w, pick in enumerate(picks):
        row = wf.windows.loc[w]
        assert [row[f"{p}_bar"] for p in ("train_start", "train_end", "test_start",
                                          "test_end")] == bounds[w].tolist()
        if pick is None:
            assert not row["chosen"] and row["combo"] == -1
            continue
        assert row["chosen"] and row["combo"] == pick["flat"]
        assert (row["fast"], row["slow"]) == pick["combo"]
        for sample in ("train", "test"):
            assert_close({m: row[f"{sample}_{m}"] for m in METRICS}, pick[sample],
                         (w, sample))
    assert_close(wf.stitched, ref_stitched, "stitched")
    if seed == 28:
        assert ref_stitched["in_sample_cagr"] > 0 and math.isfinite(wf.stitched["efficiency"])
    np.testing.assert_allclose(wf.equity.to_numpy(), ref_curve, rtol=1e-12)
    assert wf.stitched["n_bars"] == len(wf.equity)

    # the Dataset itself, and bars passed in, give the same
    same = walkforward(xr.open_zarr(path, consolidated=False), by=by, where=where, bars=bars)
    assert same.stitched == wf.stitched
    doc = json.loads(json.dumps(wf.to_json()))
    assert set(doc) >= {"windows", "stitched"} and len(doc["windows"]) == len(bounds)
    assert doc["windows"][0]["train_start"].startswith("2020-01-01T00:00:00")
    text = format_walkforward(wf)
    assert "stitched out of sample" in text and "efficiency" in text


def bad_candidate_returns():
    """Log returns of 900 bars: noise; a steady fall from bar 150, a short rally at
    272..277 that turns only the faster combos long, then a 7.4x spike at bar 280 that
    ruins every combo short there; from bar 300 a smooth fall (a long-only combo with
    slow 40 never enters) with a small rally at 450..457 that the others trade."""
    rng = np.random.default_rng(3)
    r = rng.normal(0.0, 0.01, N_BARS)
    r[150:300] = -0.004 + rng.normal(0.0, 0.001, 150)
    r[272:278] = 0.008
    r[280] = 2.0
    r[300:600] = -0.003 + rng.normal(0.0, 0.0003, 300)
    r[450:458] = 0.006
    return r


def naive_choice(ds, w, by):
    """The best train combo of window ``w`` by ``by`` alone (NaN skipped), its flat
    index: what a choice blind to ruin, idleness and infinities would take."""
    values = ds[by].isel(symbol=0, window=w).sel(sample="train").values.ravel()
    return int(np.nanargmin(values) if by in LOWER_IS_BETTER else np.nanargmax(values))


@pytest.mark.parametrize(("execution", "by", "bad", "windows"), [
    (dict(fill="close", direction="both"), "volatility", "ruined", [0, 1]),
    (dict(fill="close", direction="long"), "volatility", "idle", [3]),
    (dict(fill="close", direction="long"), "max_drawdown", "idle", [3]),
])
def test_walkforward_never_chooses_a_ruined_or_idle_train_combo(tmp_path, execution, by,
                                                                bad, windows):
    """Crafted bars where a window's best train combo by ``by`` alone is ruined (a short
    through the spike: volatility about 5, the survivors' 34) or never traded
    (volatility and drawdown 0): walkforward() chooses as the literal loop does, a combo
    that traded and survived."""
    bounds = window_bounds(N_BARS, 300, 100, 100)
    path, bar_store = write_store(tmp_path, bounds, execution,
                                  returns=bad_candidate_returns())
    ds = xr.open_zarr(path, consolidated=False)
    for w in windows:   # the situation is there: the naive best is bad, and not alone
        naive = naive_choice(ds, w, by)
        train = ds.isel(symbol=0, window=w).sel(sample="train")
        ruined = train["ruined"].values.ravel()
        idle = train["n_trades"].values.ravel() == 0
        flag = ruined == 1.0 if bad == "ruined" else idle
        assert flag[naive], (w, naive)
        assert (~flag & ~np.isnan(ruined)).any(), w
    picks, ref_stitched, ref_curve = ref_walkforward(open_bars(bar_store, "SYN", "1h"),
                                                     bounds, execution, by)
    wf = walkforward(path, by=by)
    assert wf.windows["combo"].tolist() == [p["flat"] for p in picks]
    for w in windows:
        row = wf.windows.loc[w]
        assert row["combo"] != naive_choice(ds, w, by)
        assert row["train_ruined"] == 0.0 and row["train_n_trades"] > 0
    assert_close(wf.stitched, ref_stitched, "stitched")
    np.testing.assert_allclose(wf.equity.to_numpy(), ref_curve, rtol=1e-12)


def test_walkforward_puts_an_infinite_train_metric_after_the_finite(tmp_path):
    """No engine metric is ever infinite (docs/EXECUTION.md, "Ruin"), so the value is
    set by hand in a real sweep's store: window 0's naive best by sortino becomes +inf
    on another combo; walkforward() keeps the best finite one, and a window whose only
    candidates are infinite still chooses (the lower flat index)."""
    execution = dict(fill="close", direction="both")
    bounds = window_bounds(N_BARS, 300, 100, 100)
    path, _ = write_store(tmp_path, bounds, execution)
    ds = xr.open_zarr(path, consolidated=False).load()
    before = walkforward(ds, by="sortino")
    best = int(before.windows.loc[0, "combo"])
    assert best == naive_choice(ds, 0, "sortino")
    other = next(i for i in (10, 9, 7) if i != best)     # valid combos (fast < slow)
    values = ds["sortino"].values                       # (symbol, window, sample, f, s)
    values[0, 0, 0].reshape(-1)[other] = np.inf
    assert naive_choice(ds, 0, "sortino") == other
    after = walkforward(ds, by="sortino")
    assert after.windows["combo"].tolist() == before.windows["combo"].tolist()
    train = values[0, 1, 0].reshape(-1)
    finite = np.flatnonzero(np.isfinite(train))
    train[finite] = np.inf                              # window 1: all infinite
    assert int(walkforward(ds, by="sortino").windows.loc[1, "combo"]) == finite[0]


def test_one_window_stitched_is_its_test_run(tmp_path):
    execution = dict(fill="next_open", fees=0.001, direction="both")
    bounds = window_bounds(N_BARS, 600, 300, 300)
    assert len(bounds) == 1
    path, _ = write_store(tmp_path, bounds, execution)
    wf = walkforward(path, by="sharpe")
    row = wf.windows.loc[0]
    for key in ("total_return", "cagr", "sharpe", "max_drawdown", "n_trades"):
        assert wf.stitched[key] == pytest.approx(row[f"test_{key}"], rel=1e-12), key
    assert wf.stitched["in_sample_cagr"] == pytest.approx(row["train_cagr"], rel=1e-12)


def test_several_symbols_need_one_named(tmp_path):
    bounds = window_bounds(N_BARS, 400, 250, 250)
    path, bar_store = write_store(tmp_path, bounds, dict(fill="close"), symbols=("AAA", "BBB"))
    with pytest.raises(SpecError, match=r"the store holds 2 symbols \(AAA, BBB\); name one"):
        walkforward(path)
    with pytest.raises(SpecError, match=r"symbol 'CCC' is not in the store; it holds AAA, BBB"):
        walkforward(path, symbol="CCC")
    one = walkforward(path, symbol="BBB")
    picks, stitched, _ = ref_walkforward(open_bars(bar_store, "BBB", "1h"), bounds,
                                         dict(fill="close"), "sharpe")
    assert one.symbol == "BBB"
    assert one.windows["combo"].tolist() == [p["flat"] for p in picks]
    assert_close(one.stitched, stitched, "BBB")


def test_refusals(tmp_path):
    bounds = window_bounds(N_BARS, 400, 250, 250)
    path, bar_store = write_store(tmp_path, bounds, dict(fill="close"))
    with pytest.raises(SpecError, match="--by: unknown metric 'sharp'"):
        walkforward(path, by="sharp")
    with pytest.raises(SpecError, match="--where"):
        walkforward(path, where="nonsense > 1")
    plain = xr.open_zarr(path, consolidated=False).isel(window=0, sample=0, drop=True)
    with pytest.raises(SpecError, match="not a walk-forward run"):
        walkforward(plain)
    bare = xr.open_zarr(path, consolidated=False)
    bare.attrs.pop("spec")
    with pytest.raises(SpecError, match="the results store has no 'spec' attribute"):
        walkforward(bare)
    nothing = walkforward(path, where="n_trades > 1e9")
    assert not nothing.windows["chosen"].any() and nothing.stitched["n_windows"] == 0
    assert math.isnan(nothing.stitched["total_return"])
    assert json.loads(json.dumps(nothing.to_json()))["stitched"]["start"] is None
    assert "0 of 2 windows" in format_walkforward(nothing)
    later = open_bars(bar_store, "SYN", "1h", start="2020-01-02")  # 24 bars fewer
    with pytest.raises(DataError, match=r"the bars are not the run's: window 0 tests from "
                                        r"bar 400, at 2020-01-17 16:00:00 in the results"):
        walkforward(path, bars=later)



def test_bars_without_times_give_bar_numbers(tmp_path):
    bounds = window_bounds(N_BARS, 400, 250, 250)
    path, bar_store = write_store(tmp_path, bounds, dict(fill="close"))
    ds = open_bars(bar_store, "SYN", "1h").isel(symbol=0)
    bare = {c: ds[c].values for c in ("open", "high", "low", "close")}
    wf, timed = walkforward(path, bars=bare), walkforward(path)
    assert wf.stitched["total_return"] == timed.stitched["total_return"]
    assert (wf.stitched["start"], wf.stitched["end"]) == (400, N_BARS - 1)
    assert timed.stitched["start"].value == ds["time"].values.view(np.int64)[400]  # ns, UTC
    doc = json.loads(json.dumps(wf.to_json()))
    assert (doc["stitched"]["start"], doc["stitched"]["end"]) == (400, N_BARS - 1)
    assert "(400..899)" in format_walkforward(wf)

# ------------------------------------------------------------------ vectorbt, one window

def test_one_test_window_equals_vectorbt_fed_talib_signals(tmp_path):
    vbt = pytest.importorskip("vectorbt")
    talib = pytest.importorskip("talib")
    import pandas as pd

    from barsweep.engine.core.simulate import cross_above, cross_below

    execution = dict(fill="close", fees=0.001)
    bounds = window_bounds(N_BARS, 300, 100, 100)
    path, bar_store = write_store(tmp_path, bounds, execution)
    ds = xr.open_zarr(path, consolidated=False)
    close = open_bars(bar_store, "SYN", "1h")["close"].values[:, 0].astype(np.float64)
    index = pd.date_range("2020-01-01", periods=len(close), freq="1h")
    combos = [c for c in grid_combos() if c is not None]
    entries = np.zeros((len(close), len(combos)), dtype=bool)
    exits = np.zeros((len(close), len(combos)), dtype=bool)
    for j, (fast, slow) in enumerate(combos):
        f, s = talib.EMA(close, fast), talib.EMA(close, slow)  # on the whole series
        for t in range(1, len(close)):
            entries[t, j] = cross_above(f[t - 1], s[t - 1], f[t], s[t])
            exits[t, j] = cross_below(f[t - 1], s[t - 1], f[t], s[t])
    checked = 0
    for w in (0, 3):
        _, _, c, d = bounds[w]
        window = slice(int(c), int(d))  # then sliced to the window
        pf = vbt.Portfolio.from_signals(
            pd.Series(close[window], index=index[window]),
            pd.DataFrame(entries[window], index=index[window]),
            pd.DataFrame(exits[window], index=index[window]),
            fees=0.001, init_cash=10_000.0, freq="1h")
        total, count = pf.total_return().to_numpy(), pf.trades.count().to_numpy()
        for j, (fast, slow) in enumerate(combos):
            ours = ds.sel(symbol="SYN", sample="test", fast=fast, slow=slow).isel(window=w)
            assert float(ours["total_return"]) == pytest.approx(total[j], rel=1e-9,
                                                                abs=1e-12), (w, fast, slow)
            assert float(ours["n_trades"]) == count[j], (w, fast, slow)
            checked += float(ours["n_trades"]) > 0
    assert checked > 5


# ------------------------------------------------------------------ a real run's store

@pytest.mark.slow
def test_a_run_with_walk_forward_equals_the_literal_loop(tmp_path):
    from barsweep.pipeline.config.model import parse_spec
    from barsweep.pipeline.run.cluster import connect
    from barsweep.pipeline.run.orchestrate import run_spec
    bar_store = tmp_path / "bars"
    write_synth(bar_store, "SYN", "1h", N_BARS, seed=28)
    execution = dict(fill="close", fees=0.0005, direction="both")
    spec = parse_spec({
        "data": {"store": str(bar_store), "symbols": ["SYN"], "timeframe": "1h"},
        "strategy": "ema_cross", "grid": {"fast": FAST, "slow": SLOW},
        "constraints": ["fast < slow"], "execution": execution,
        "walk_forward": {"train": "12d", "test": 100},  # 12 days: 288 bars
        "run": {"block_size": 4, "out": str(tmp_path / "wf.zarr")}})
    with connect("local", n_workers=2) as client:
        summary = run_spec(spec, client=client)
    bounds = window_bounds(N_BARS, 288, 100, 100)
    n_combos = sum(f < s for f in FAST for s in SLOW)
    spans = (bounds[:, 1] - bounds[:, 0] + bounds[:, 3] - bounds[:, 2]).sum()
    assert summary.combo_bars == n_combos * spans  # each window's train and test bars
    wf = walkforward(tmp_path / "wf.zarr", by="sharpe")
    assert wf.windows[["train_start_bar", "train_end_bar", "test_start_bar",
                       "test_end_bar"]].to_numpy().tolist() == bounds.tolist()
    picks, ref_stitched, ref_curve = ref_walkforward(open_bars(bar_store, "SYN", "1h"),
                                                     bounds, execution, "sharpe")
    for w, pick in enumerate(picks):
        row = wf.windows.loc[w]
        assert row["combo"] == pick["flat"], w
        for sample in ("train", "test"):
            assert_close({m: row[f"{sample}_{m}"] for m in METRICS}, pick[sample],
                         (w, sample))
    assert_close(wf.stitched, ref_stitched, "stitched")
    np.testing.assert_allclose(wf.equity.to_numpy(), ref_curve, rtol=1e-12)


def test_a_walk_forward_window_ruined_on_its_first_bar_runs_and_ranks(tmp_path):
    """A test window whose first close enters shorts slipped by 60% (worth < 0 at once):
    the run completes, those combos' test metrics are a ruin's (ruined 1, total_return
    and max_drawdown -1, ulcer_index 100: -100% on every bar), nothing raised, and
    walkforward never chooses a combo ruined on its train bars."""

    from helpers.gpu_cases import RUIN_BARS, ruin_bars

    from barsweep.pipeline.cli import main

    wild = ruin_bars(**RUIN_BARS)  # 300 bars of 12% a bar
    table = synth_bars(len(wild["close"]), 0, timeframe="1h")
    for name in ("open", "high", "low", "close"):
        table = table.set_column(table.schema.get_field_index(name), name,
                                 pa.array(wild[name], pa.float64()))
    write_bars(tmp_path / "bars", "WILD", "1h", table)
    spec = {"data": {"store": str(tmp_path / "bars"), "symbols": ["WILD"], "timeframe": "1h"},
            "strategy": "donchian", "grid": {"period": {"start": 3, "stop": 66, "step": 1}},
            "execution": {"fill": "close", "direction": "short", "slippage": 0.6},
            "walk_forward": {"train": 200, "test": 60},  # one window: test bars 200-260
            "run": {"out": str(tmp_path / "wf.zarr")}}
    (tmp_path / "wf.yaml").write_text(yaml.safe_dump(spec))
    assert main(["run", str(tmp_path / "wf.yaml"), "--no-progress", "--cluster",
                 "threads"]) == 0
    ds = xr.open_zarr(tmp_path / "wf.zarr", consolidated=False)
    test = ds.sel(symbol="WILD", window=0, sample="test")
    first = test["ulcer_index"].values == 100.0  # ruined on the window's first bar
    assert first.sum() > 0
    for name, value in (("ruined", 1.0), ("total_return", -1.0), ("max_drawdown", -1.0),
                        ("calmar", -1.0)):
        assert (test[name].values[first] == value).all(), name
    assert not np.isinf(np.stack([test[m].values for m in METRICS])).any()
    wf = walkforward(tmp_path / "wf.zarr", by="sharpe")
    assert len(wf.windows) == 1
