"""Overfitting-aware ranking: PSR and DSR against scipy and the
paper's example; PBO against a literal CSCV over an explicit returns matrix; smoothing,
Pareto fronts, the DSR columns, and the rank flags through the CLI on a Zarr store."""

import itertools
import json
import math
import warnings

import numpy as np
import pytest
import xarray as xr
import zarr
from scipy import stats

from barsweep.engine import METRICS
from barsweep.errors import SpecError
from barsweep.pipeline.analysis import robust
from barsweep.pipeline.analysis.rank import pareto_front, pbo_table, rank
from barsweep.pipeline.cli import main
from barsweep.pipeline.run.results import create_store, write_block

# ---------------------------------------------------------------------------------------
# PSR and DSR


def psr_scipy(sr, n, g3, g4, sr0=0.0):
    return stats.norm.cdf((sr - sr0) * np.sqrt(n - 1) / np.sqrt(1 - g3 * sr + (g4 - 1) / 4 * sr**2))


def test_psr_equals_a_direct_scipy_computation():
    rng = np.random.default_rng(1)
    sr = rng.normal(0.0, 0.1, 500)
    n = rng.integers(50, 5000, 500)
    g3 = rng.normal(0.0, 0.5, 500)
    g4 = 3.0 + rng.exponential(2.0, 500)
    sr0 = rng.normal(0.0, 0.05, 500)
    got = robust.probabilistic_sharpe(sr, n, g3, g4, benchmark=sr0)
    np.testing.assert_allclose(got, psr_scipy(sr, n, g3, g4, sr0), rtol=1e-12, atol=1e-15)
    # the far tails too (erfc, not 1 - erf)
    np.testing.assert_allclose(robust.normal_cdf([-30.0, -8.0, 8.0]),
                               stats.norm.cdf([-30.0, -8.0, 8.0]), rtol=1e-12)


def test_psr_nan_in_nan_out_and_undefined_variance():
    got = robust.probabilistic_sharpe(np.array([np.nan, 0.1, 0.1, 2.0]),
                                      np.array([100, np.nan, 1, 100]), 0.0,
                                      np.array([3.0, 3.0, 3.0, 0.0]))
    # NaN sharpe; NaN n; n < 2; 1 - 0 + (0 - 1)/4 * 4 = 0: no variance
    assert np.isnan(got).all()
    assert isinstance(robust.probabilistic_sharpe(0.1, 100, 0.0, 3.0), float)


def test_dsr_equals_a_direct_scipy_computation():
    rng = np.random.default_rng(2)
    sr = rng.normal(0.05, 0.05, 200)
    n = rng.integers(100, 3000, 200)
    g3 = rng.normal(0.0, 0.5, 200)
    g4 = 3.0 + rng.exponential(2.0, 200)
    n_trials = rng.integers(2, 10**6, 200)
    var = rng.uniform(1e-5, 1e-2, 200)
    g = np.euler_gamma
    sr0 = np.sqrt(var) * ((1 - g) * stats.norm.ppf(1 - 1 / n_trials)
                          + g * stats.norm.ppf(1 - 1 / (n_trials * np.e)))
    np.testing.assert_allclose(robust.expected_max_sharpe(n_trials, var), sr0, rtol=1e-12)
    np.testing.assert_allclose(robust.deflated_sharpe(sr, n, g3, g4, n_trials, var),
                               psr_scipy(sr, n, g3, g4, sr0), rtol=1e-10, atol=1e-15)
    # one trial is not deflated; no trials, or no variance estimate, gives NaN
    assert robust.expected_max_sharpe(1, 0.01) == 0.0
    assert robust.expected_max_sharpe(1, np.nan) == 0.0  # one trial's variance, ddof 1
    assert np.isnan(robust.expected_max_sharpe([0, 5], [0.01, np.nan])).all()


def test_dsr_the_papers_numerical_example():
    # Bailey & Lopez de Prado (2014), "A numerical example": N = 100 trials whose
    # annualised Sharpe ratios have variance 1/2, T = 1250 daily returns (5 years of 250
    # days), skew -3, kurtosis 10, the best annualised SR 2.5. By hand from eqs. 1-2:
    #   V = 0.5 / 250 = 0.002, sqrt(V) = 0.0447214
    #   Phi^-1(1 - 1/100) = 2.3263479, Phi^-1(1 - 1/(100 e)) = 2.6802104
    #   SR* = 0.0447214 * (0.4227843 * 2.3263479 + 0.5772157 * 2.6802104) = 0.1131720 a day
    #   SR = 2.5 / sqrt(250) = 0.1581139 a day
    #   z = (0.1581139 - 0.1131720) sqrt(1249) / sqrt(1 + 3 * 0.1581139 + 9/4 * 0.025)
    #     = 0.0449419 * 35.3411941 / 1.2371708 = 1.2838160
    #   DSR = Phi(1.2838160) = 0.9004 (the paper's 0.9004)
    assert robust.expected_max_sharpe(100, 0.5 / 250) == pytest.approx(0.1131720, abs=1e-7)
    dsr = robust.deflated_sharpe(2.5 / math.sqrt(250), 1250, -3.0, 10.0, 100, 0.5 / 250)
    assert dsr == pytest.approx(0.9004, abs=5e-5)
    assert dsr == pytest.approx(stats.norm.cdf(1.2838160), abs=1e-7)


# ---------------------------------------------------------------------------------------
# PBO: a slow, literal CSCV over combos x bars


def sharpe_of(returns):
    std = returns.std(ddof=1)
    return returns.mean() / std if std > 0 else 0.0


def cscv_reference(returns, n_seg, splits=None, seg_n=None):
    """Literal CSCV (Bailey et al. 2015, section 2.2) over ``returns`` (combos x bars):
    per split, concatenate the bars, compute every combo's Sharpe ratio in and out of
    sample, the IS winner (first of ties), its OOS rank 1 + #(worse) over N + 1. The
    segments are ``n_seg`` equal ones, or ``seg_n[k]`` bars each when given."""
    n_combos = returns.shape[0]
    bars = np.arange(returns.shape[1])
    segments = (np.split(bars, n_seg) if seg_n is None
                else np.split(bars, np.cumsum(seg_n)[:-1]))
    assert len(segments) == n_seg and sum(map(len, segments)) == returns.shape[1]
    if splits is None:
        splits = list(itertools.combinations(range(n_seg), n_seg // 2))
    winners, sh_is, sh_oos, logits = [], [], [], []
    for split in splits:
        is_bars = np.concatenate([segments[k] for k in split])
        oos_bars = np.concatenate([segments[k] for k in range(n_seg) if k not in split])
        is_sr = np.array([sharpe_of(returns[c, is_bars]) for c in range(n_combos)])
        oos_sr = np.array([sharpe_of(returns[c, oos_bars]) for c in range(n_combos)])
        w = int(np.argmax(is_sr))
        omega = (1 + np.sum(oos_sr < oos_sr[w])) / (n_combos + 1)
        winners.append(w)
        sh_is.append(is_sr[w])
        sh_oos.append(oos_sr[w])
        logits.append(np.log(omega / (1 - omega)))
    logits = np.array(logits)
    return dict(pbo=np.mean(logits <= 0), winner=np.array(winners), sharpe_is=np.array(sh_is),
                sharpe_oos=np.array(sh_oos), logit=logits)


def segment_sums(returns, n_seg):
    parts = np.split(returns, n_seg, axis=1)
    return (np.stack([p.sum(axis=1) for p in parts], axis=1),
            np.stack([(p * p).sum(axis=1) for p in parts], axis=1),
            np.array([p.shape[1] for p in parts]))


def test_pbo_equals_a_literal_cscv():
    rng = np.random.default_rng(3)
    returns = rng.normal(2e-4, 0.01, size=(40, 600))
    returns[:, :] += rng.normal(0, 5e-4, size=(40, 1))   # some edge, some not
    returns[7] = returns[3]                              # a tie: identical combos
    returns[11, :300] = 0.0                              # flat in the first segments
    r, r2, n = segment_sums(returns, 6)
    got = robust.pbo(r, r2, n, chunk=7)                  # several chunks, a ragged last
    ref = cscv_reference(returns, 6)
    assert (got.n_splits, got.sampled, got.n_combos) == (20, False, 40)
    assert got.pbo == ref["pbo"]
    np.testing.assert_array_equal(got.winner, ref["winner"])
    np.testing.assert_allclose(got.sharpe_is, ref["sharpe_is"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(got.sharpe_oos, ref["sharpe_oos"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(got.logit, ref["logit"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(got.logit_quartiles, np.percentile(ref["logit"], [25, 50, 75]))
    slope = np.polyfit(ref["sharpe_is"], ref["sharpe_oos"], 1)[0]
    assert got.slope == pytest.approx(slope, rel=1e-9)


def test_pbo_excludes_nan_rows_and_reports_original_rows():
    rng = np.random.default_rng(4)
    returns = rng.normal(0.0, 0.01, size=(12, 400))
    r, r2, n = segment_sums(returns, 4)
    r_nan, r2_nan = np.insert(r, 0, np.nan, axis=0), np.insert(r2, 0, np.nan, axis=0)
    got = robust.pbo(r_nan, r2_nan, n)
    ref = cscv_reference(returns, 4)
    assert got.n_combos == 12
    np.testing.assert_array_equal(got.winner, ref["winner"] + 1)
    np.testing.assert_allclose(got.logit, ref["logit"], atol=1e-12)


def test_pbo_samples_splits_when_there_are_too_many():
    rng = np.random.default_rng(5)
    returns = rng.normal(0.0, 0.01, size=(15, 16 * 20))
    r, r2, n = segment_sums(returns, 16)                 # C(16, 8) = 12,870 splits
    got = robust.pbo(r, r2, n, max_splits=60, seed=9)
    assert got.sampled and got.n_splits == 60
    assert len({tuple(s) for s in got.is_segments}) == 60
    again = robust.pbo(r, r2, n, max_splits=60, seed=9)
    np.testing.assert_array_equal(again.is_segments, got.is_segments)
    ref = cscv_reference(returns, 16, [tuple(s) for s in got.is_segments])
    np.testing.assert_allclose(got.logit, ref["logit"], atol=1e-12)
    assert got.pbo == ref["pbo"]


def test_pbo_zero_when_one_combo_dominates_every_segment():
    rng = np.random.default_rng(6)
    returns = rng.normal(0.0, 0.01, size=(30, 1000))
    returns[4] = rng.normal(0.005, 0.01, size=1000)      # earns in every segment
    got = robust.pbo(*segment_sums(returns, 10))
    assert got.pbo == 0.0 and (got.winner == 4).all()
    assert (got.omega == 30 / 31).all()                  # the best OOS, every split


def test_pbo_one_when_the_in_sample_winner_always_loses_out_of_sample():
    # one combo per half of the 6 segments: it earns on that half, loses on the other;
    # whichever half is in sample, its combo wins there and is the worst out of sample
    n_seg, per = 6, 50
    halves = list(itertools.combinations(range(n_seg), n_seg // 2))
    noise = np.tile([0.001, -0.001], per // 2)
    returns = np.array([np.concatenate([(0.01 if k in h else -0.01) + noise
                                        for k in range(n_seg)]) for h in halves])
    got = robust.pbo(*segment_sums(returns, n_seg))
    assert got.pbo == 1.0
    assert (got.omega == 1 / 21).all() and got.n_splits == 20
    assert (got.logit < 0).all()


def test_pbo_refuses_bad_shapes():
    with pytest.raises(ValueError, match="even"):
        robust.pbo(np.zeros((3, 3)), np.zeros((3, 3)), np.ones(3))
    with pytest.raises(ValueError, match="shape"):
        robust.pbo(np.zeros((3, 4)), np.zeros((3, 2)), np.ones(4))


def test_a_runs_pbo_on_unequal_segments_equals_a_literal_cscv_of_its_backtests(tmp_path,
                                                                                capsys):
    """A real run over 1001 bars cut into 6 segments (166 or 167 bars): PBO from the
    store equals a literal CSCV over every combo's explicit bar returns (backtest()'s
    equity), split at the store's own seg_n boundaries."""
    from barsweep.datasets import open_bars
    from barsweep.datasets.timeframes import periods_per_year
    from barsweep.engine import backtest

    n_bars, n_seg = 1001, 6
    bar_store, out = tmp_path / "bars", tmp_path / "results.zarr"
    assert main(["data", "synth", "--symbol", "SYN", "--timeframe", "1h", "--bars",
                 str(n_bars), "--seed", "5", "--store", str(bar_store)]) == 0
    execution = {"fill": "next_open", "fees": 0.001, "direction": "both"}
    spec = tmp_path / "spec.yaml"
    spec.write_text(json.dumps({
        "data": {"store": str(bar_store), "symbols": ["SYN"], "timeframe": "1h"},
        "strategy": "ema_cross", "grid": {"fast": [2, 3, 5, 8, 13], "slow": [20, 30, 50, 80]},
        "constraints": ["fast < slow"], "execution": execution,
        "analysis": {"pbo_segments": n_seg},
        "run": {"block_size": 7, "out": str(out)}}))
    assert main(["run", str(spec), "--workers", "1", "--no-progress"]) == 0
    capsys.readouterr()
    ds = xr.open_zarr(out, consolidated=False).load()
    seg_n = ds["seg_n"].values[0]
    assert seg_n.tolist() == [166, 167, 167, 167, 167, 167]  # 1001 // 6 is not whole
    ppy = periods_per_year("1h")
    bars = open_bars(bar_store, "SYN", "1h")
    returns, sum_r, sum_r2 = [], [], []
    for f in ds["fast"].values:
        for s in ds["slow"].values:
            equity = backtest(bars, "ema_cross", dict(fast=int(f), slow=int(s)), ppy=ppy,
                              **execution).equity.to_numpy()
            returns.append(equity / np.concatenate([[10_000.0], equity[:-1]]) - 1.0)
            sum_r.append(ds["seg_sum_r"].sel(symbol="SYN", fast=f, slow=s).values)
            sum_r2.append(ds["seg_sum_r2"].sel(symbol="SYN", fast=f, slow=s).values)
    returns = np.array(returns)
    assert returns.shape == (20, n_bars)
    ref = cscv_reference(returns, n_seg, seg_n=seg_n)
    got = robust.pbo(np.array(sum_r), np.array(sum_r2), seg_n)
    assert got.n_splits == 20 and got.n_combos == 20
    assert 0.0 < ref["pbo"] < 1.0                       # some splits overfit, some not
    assert got.pbo == ref["pbo"]
    np.testing.assert_array_equal(got.winner, ref["winner"])
    np.testing.assert_allclose(got.sharpe_is, ref["sharpe_is"], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got.sharpe_oos, ref["sharpe_oos"], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got.logit, ref["logit"], rtol=0, atol=1e-12)
    # the CLI reads the same store's sums and seg_n
    assert main(["rank", str(out), "--pbo", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert row["pbo"] == ref["pbo"] and row["n_splits"] == 20
    slope = np.polyfit(ref["sharpe_is"], ref["sharpe_oos"], 1)[0]
    assert got.slope == pytest.approx(slope, rel=1e-9)


# ---------------------------------------------------------------------------------------
# smoothing, Pareto


def test_smooth_ranks_a_broad_plateau_above_an_isolated_spike():
    values = np.zeros((1, 9, 9))
    values[0, 1:4, 1:4] = 1.0              # a plateau of 1.0
    values[0, 7, 7] = 3.0                  # a spike, alone
    values[0, 0, 8] = np.nan               # an excluded combo: never counts
    da = xr.DataArray(values, dims=("symbol", "fast", "slow"),
                      coords={"fast": np.arange(9), "slow": np.arange(9)})
    sm = robust.smooth(da, 1)
    assert sm.sel(fast=2, slow=2).item() == 1.0
    assert sm.sel(fast=7, slow=7).item() == pytest.approx(3.0 / 9)
    assert np.isnan(sm.sel(fast=0, slow=8).item())
    assert sm.sel(fast=0, slow=7).item() == 0.0        # 4 finite neighbours, NaN skipped
    best = np.unravel_index(np.nanargmax(sm.values), sm.shape)
    assert (best[1], best[2]) == (2, 2)
    # through rank: the spike is first raw, the plateau's centre first smoothed
    ds = xr.Dataset({m: da * 0.0 for m in METRICS}, coords={"symbol": ["A"]})
    ds["sharpe"], ds["n_trades"] = da.assign_coords(symbol=["A"]), da * 0.0 + 5.0
    assert rank(ds, by="sharpe", top=1)[["fast", "slow"]].values.tolist() == [[7, 7]]
    top = rank(ds, by="sharpe", top=1, smooth=1)
    assert top[["fast", "slow", "sharpe", "sharpe_smooth"]].values.tolist() == [[2, 2, 1, 1]]
    # the separable box sums equal xarray's multi-dim rolling mean
    rng = np.random.default_rng(7)
    noisy = xr.DataArray(rng.normal(size=(2, 7, 5, 4)), dims=("symbol", "a", "b", "c"))
    noisy = noisy.where(rng.uniform(size=noisy.shape) > 0.2)
    for radius in (1, 2):
        want = noisy.rolling({d: 2 * radius + 1 for d in "abc"}, center=True,
                             min_periods=1).mean().where(noisy.notnull())
        np.testing.assert_allclose(robust.smooth(noisy, radius), want, rtol=1e-12)
    # symbol is not a parameter: never averaged over
    two = xr.concat([da, da * 0 + 5.0], dim="symbol")
    assert robust.smooth(two, 1).isel(symbol=1, fast=7, slow=7).item() == 5.0


def test_pareto_on_a_small_known_set():
    data = {"sharpe": [1.0, 2.0, 1.5, 0.5, 2.0, np.nan, 1.0],
            "max_drawdown": [-0.1, -0.3, -0.2, -0.05, -0.35, 0.0, -0.1],
            "volatility": [0.2, 0.2, 0.1, 0.3, 0.2, 0.1, 0.2]}
    # by sharpe and drawdown: 4 is dominated by 1, 6 ties 0 (both kept)
    assert robust.pareto(data, ["sharpe", "max_drawdown"]).tolist() == [0, 1, 2, 3, 6]
    # volatility is lower-better: 0 and 6 are dominated by 2 (higher sharpe, lower vol);
    # 1 and 4 are the same point
    assert robust.pareto(data, ["sharpe", "volatility"]).tolist() == [1, 2, 4]
    # all three: 4 is dominated by 1 still; nothing beats 0 on drawdown and volatility both
    three = robust.pareto(data, ["sharpe", "max_drawdown", "volatility"]).tolist()
    assert three == [0, 1, 2, 3, 6]


# ---------------------------------------------------------------------------------------
# a hand-built results store: metrics from an explicit returns matrix

PPY = 252.0
N_SEG = 4


def build_store(path, n_bars=(400, 360), seed=0):
    """A two-symbol store over fast (4) x slow (3) whose sharpe, skew, kurtosis and
    segment sums come from explicit bar returns; combo (A, 0, 0) is excluded."""
    rng = np.random.default_rng(seed)
    fast, slow = np.array([2, 3, 4, 5]), np.array([10, 20, 30])
    symbols = ["A", "B"]
    shape = (2, 4, 3)
    returns = [rng.normal(3e-4, 0.01, size=(12, n)) + rng.normal(0, 4e-4, size=(12, 1))
               for n in n_bars]
    returns[0][5] += 2e-3                 # (A, fast 3, slow 30): a spike
    metrics = np.zeros((len(METRICS), *shape))
    metrics[METRICS.index("n_trades")] = 5.0
    extra = {name: np.zeros(shape) for name in ("skew", "kurtosis")}
    seg_r = np.zeros((2, N_SEG, 4, 3))
    seg_r2 = np.zeros((2, N_SEG, 4, 3))
    for s, ret in enumerate(returns):
        sr = ret.mean(axis=1) / ret.std(axis=1, ddof=1)
        metrics[METRICS.index("sharpe"), s] = (sr * np.sqrt(PPY)).reshape(4, 3)
        metrics[METRICS.index("max_drawdown"), s] = -rng.uniform(0.05, 0.5, 12).reshape(4, 3)
        metrics[METRICS.index("total_return"), s] = ret.sum(axis=1).reshape(4, 3)
        extra["skew"][s] = stats.skew(ret, axis=1).reshape(4, 3)
        extra["kurtosis"][s] = stats.kurtosis(ret, axis=1, fisher=False).reshape(4, 3)
        r, r2, _ = segment_sums(ret, N_SEG)
        seg_r[s] = r.T.reshape(N_SEG, 4, 3)
        seg_r2[s] = r2.T.reshape(N_SEG, 4, 3)
    for name in extra:
        if name in METRICS:
            metrics[METRICS.index(name)] = extra[name]
    metrics[:, 0, 0, 0] = np.nan
    seg_r[0, :, 0, 0] = seg_r2[0, :, 0, 0] = np.nan
    create_store(path, symbols, [("fast", fast), ("slow", slow)], (4, 3), 2, {"spec": "t"})
    for s in range(2):
        write_block(path, (slice(s, s + 1), slice(0, 4), slice(0, 3)), metrics[:, s:s + 1], s)
    dims = ("symbol", "fast", "slow")
    more = xr.Dataset(
        {name: (dims, extra[name]) for name in extra if name not in METRICS}
        | {"seg_sum_r": (("symbol", "segment", "fast", "slow"), seg_r),
           "seg_sum_r2": (("symbol", "segment", "fast", "slow"), seg_r2)},
        coords={"n_bars": ("symbol", np.array(n_bars)),
                "seg_n": (("symbol", "segment"),
                          np.array([[n // N_SEG] * N_SEG for n in n_bars]))})
    for name in ("skew", "kurtosis"):
        if name in more:
            more[name][0, 0, 0] = np.nan
    more.attrs = {**zarr.open_group(path, mode="r").attrs.asdict(), "periods_per_year": PPY}
    more.to_zarr(path, mode="a", consolidated=False, zarr_format=3)
    return returns


@pytest.fixture
def store(tmp_path):
    path = str(tmp_path / "robust.zarr")
    return path, build_store(path)


def test_dsr_columns_per_symbol(store):
    path, returns = store
    ds = xr.open_zarr(path, consolidated=False)
    psr, dsr = robust.dsr_columns(ds)
    assert psr.dims == ds["sharpe"].dims and np.isnan(dsr.values[0, 0, 0])
    for s, ret in enumerate(returns):
        sr = ret.mean(axis=1) / ret.std(axis=1, ddof=1)
        g3 = stats.skew(ret, axis=1)
        g4 = stats.kurtosis(ret, axis=1, fisher=False)
        keep = np.ones(12, dtype=bool)
        keep[0] = s != 0                                  # (A, 2, 10) is excluded
        n_trials, var = keep.sum(), sr[keep].var(ddof=1)
        g = np.euler_gamma
        sr0 = np.sqrt(var) * ((1 - g) * stats.norm.ppf(1 - 1 / n_trials)
                              + g * stats.norm.ppf(1 - 1 / (n_trials * np.e)))
        n = ret.shape[1]
        np.testing.assert_allclose(psr.values[s].ravel()[keep],
                                   psr_scipy(sr, n, g3, g4)[keep], rtol=1e-9)
        np.testing.assert_allclose(dsr.values[s].ravel()[keep],
                                   psr_scipy(sr, n, g3, g4, sr0)[keep], rtol=1e-9)


def test_rank_by_dsr_psr_smooth_across(store):
    path, _ = store
    top = rank(path, by="dsr", top=30)
    assert len(top) == 23 and {"psr", "dsr"} <= set(top.columns)
    assert top["dsr"].is_monotonic_decreasing and (top["dsr"] <= top["psr"]).all()
    assert rank(path, by="psr", top=1)["psr"].iloc[0] == top["psr"].max()
    plain = rank(path, by="sharpe", top=30)                # the store has their inputs
    assert {"psr", "dsr"} <= set(plain.columns) and plain["sharpe"].is_monotonic_decreasing
    picky = rank(path, by="dsr", top=30, where="psr > 0.9 and fast >= 3")
    assert (picky["psr"] > 0.9).all() and (picky["fast"] >= 3).all()
    sm = rank(path, by="sharpe", top=30, smooth=1)
    assert sm["sharpe_smooth"].is_monotonic_decreasing and "sharpe" in sm
    ds = xr.open_zarr(path, consolidated=False).load()
    want = robust.smooth(ds["sharpe"], 1)
    row = sm.iloc[0]
    assert row["sharpe_smooth"] == pytest.approx(
        want.sel(symbol=row["symbol"], fast=row["fast"], slow=row["slow"]).item())
    for agg in ("median", "mean", "min"):
        across = rank(path, by="sharpe", top=30, across="symbol", agg=agg)
        assert len(across) == 11                          # (2, 10) is excluded on A
        assert across[f"sharpe_{agg}"].is_monotonic_decreasing
        want = getattr(ds["sharpe"], agg)("symbol").values.ravel()
        np.testing.assert_allclose(
            across[f"sharpe_{agg}"], [want[list(ds.fast.values).index(f) * 3
                                          + list(ds.slow.values).index(s)]
                                     for f, s in zip(across["fast"], across["slow"])])
        assert {"sharpe[A]", "sharpe[B]"} <= set(across.columns)


def test_rank_flag_values_refused_naming_the_flag(store):
    path, _ = store
    with pytest.raises(SpecError, match="--smooth"):
        rank(path, smooth=0)
    with pytest.raises(SpecError, match="--across"):
        rank(path, across="fast")
    with pytest.raises(SpecError, match="--agg"):
        rank(path, across="symbol", agg="max")
    with pytest.raises(SpecError, match="--pareto"):
        pareto_front(path, ["sharpe", "nope"])


def test_pareto_front_and_pbo_table(store):
    path, returns = store
    front = pareto_front(path, ["sharpe", "max_drawdown"])
    assert front["symbol"].tolist() == sorted(front["symbol"])  # one front per symbol
    for _, one in front.groupby("symbol"):
        assert one["sharpe"].is_monotonic_decreasing
        assert one["max_drawdown"].is_monotonic_increasing
    table = pbo_table(path)
    assert [labels for labels, _ in table] == [{"symbol": "A"}, {"symbol": "B"}]
    for (_, res), ret, drop in zip([t for t in table], returns, (True, False)):
        kept = ret[1:] if drop else ret
        ref = cscv_reference(kept, N_SEG)
        assert res.pbo == ref["pbo"] and res.n_splits == 6
        np.testing.assert_allclose(res.logit, ref["logit"], atol=1e-12)


def test_rank_cli_flags_end_to_end(store, capsys):
    path, _ = store
    assert main(["rank", path, "--by", "dsr", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "dsr" in out and "psr" in out and len(out.strip().splitlines()) == 5
    assert main(["rank", path, "--by", "sharpe", "--smooth", "1", "--top", "3"]) == 0
    assert "sharpe_smooth" in capsys.readouterr().out
    assert main(["rank", path, "--pareto", "sharpe,max_drawdown"]) == 0
    assert "non-dominated by sharpe, max_drawdown" in capsys.readouterr().out
    assert main(["rank", path, "--pbo"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and out[0].startswith("symbol=A: PBO ")
    assert "all 6 CSCV splits" in out[0] and "degradation slope" in out[0]
    assert main(["rank", path, "--pbo", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[1]["symbol"] == "B" and rows[1]["n_splits"] == 6 and not rows[1]["sampled"]
    assert len(rows[1]["logit_quartiles"]) == 3
    assert main(["rank", path, "--across", "symbol", "--agg", "min", "--top", "2",
                 "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["metric"] == "sharpe" and rows[0]["agg"] == "min"
    assert rows[0]["value"] == min(rows[0]["by_symbol"].values())
    assert set(rows[0]["by_symbol"]) == {"A", "B"} and {"fast", "slow"} <= set(rows[0])
    assert main(["rank", path, "--across", "symbol", "--top", "2"]) == 0
    assert "sharpe_median" in capsys.readouterr().out


@pytest.mark.parametrize("argv, flag", [
    (["--smooth", "0"], "--smooth"),
    (["--across", "fast"], "--across"),
    (["--across", "symbol", "--agg", "max"], "--agg"),
    (["--agg", "min"], "--agg"),
    (["--pareto", "sharpe"], "--pareto"),
    (["--by", "nope"], "--by"),
    (["--pbo", "--smooth", "1"], "--pbo"),
    (["--pareto", "sharpe,max_drawdown", "--smooth", "1"], "--pareto"),
])
def test_rank_cli_bad_flag_is_one_line(store, capsys, argv, flag):
    path, _ = store
    assert main(["rank", path, *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flag in err[0] and "Traceback" not in err[0]


def test_pbo_and_dsr_refused_on_a_store_without_their_inputs(tmp_path, capsys):
    path = str(tmp_path / "plain.zarr")
    create_store(path, ["A"], [("p", np.arange(3))], (3,), 1, {"spec": "t"})
    metrics = np.ones((len(METRICS), 1, 3))
    write_block(path, (slice(0, 1), slice(0, 3)), metrics, 0)
    assert main(["rank", path, "--pbo"]) == 2
    assert "--pbo" in capsys.readouterr().err
    assert main(["rank", path, "--by", "dsr"]) == 2      # no n_bars, no periods_per_year
    err = capsys.readouterr().err
    assert "--by psr/dsr" in err and "n_bars" in err and "periods_per_year" in err


def test_smooth_of_a_lazy_grid_with_an_empty_box_says_no_numpy_warning():
    """A store read lazily (dask chunks) computes outside xarray's errstate: a box
    whose every combo is excluded must give NaN without "invalid value in divide"."""
    values = np.array([[[1.0, 2.0, np.nan, np.nan, np.nan, np.nan, 4.0]]])
    da = xr.DataArray(values, dims=("symbol", "fast", "slow")).chunk({"slow": 2})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = robust.smooth(da, 1).compute()
    np.testing.assert_array_equal(got.values, [[[1.5, 1.5, np.nan, np.nan, np.nan, np.nan,
                                                 4.0]]])


def test_rank_smooth_and_report_on_a_lazily_read_store_warn_nothing(tmp_path, monkeypatch,
                                                                    capsys):
    """`rank --smooth` and `report` through the CLI on a real run whose constraints
    exclude whole neighbourhoods and whose slowest combos never trade, the store read
    chunk by chunk (as one past the eager size is), every warning an error."""
    from helpers.runs import run_spec_file, synth

    import barsweep.pipeline.run.results as results

    synth(tmp_path / "bars", 400, seed=5)
    out = run_spec_file({
        "data": {"store": str(tmp_path / "bars"), "symbols": ["BTCUSDT"], "timeframe": "1h"},
        "strategy": "ema_cross",
        "grid": {"fast": {"start": 2, "stop": 40, "step": 4},
                 "slow": {"start": 10, "stop": 1000, "step": 60}},
        "constraints": ["fast < slow", "slow < 700"],
        "run": {"block_size": 20, "out": str(tmp_path / "r.zarr")}}, tmp_path / "s.yaml")
    monkeypatch.setattr(results, "EAGER_BYTES", 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert main(["rank", str(out), "--smooth", "1"]) == 0
        assert main(["report", str(out), "--out", str(tmp_path / "r.html")]) == 0
    assert "Warning" not in capsys.readouterr().err
