"""The deflated Sharpe ratio of a search store (docs/ROBUST.md, docs/SEARCH.md): N counts
every combo evaluated, V is the variance of the Sharpe ratios of the combos measured on
the same bars as the combo ranked (its rung), never a mix of rungs of 334, 1,000 and
3,000 bars. Real halving and random searches over the same draw, on a threads cluster."""

import json
import math

import numpy as np
import pytest
import xarray as xr
import yaml
from helpers.rank_reference import with_computed
from scipy import stats

from barsweep.pipeline.analysis.rank import rank
from barsweep.pipeline.cli import main

N_BARS = 3_000
GRID = {"fast": {"start": 2, "stop": 40, "step": 1}, "slow": {"start": 10, "stop": 200, "step": 1}}
#: Rung 0: 1,200 combos on the last 334 bars, then 400 on 1,000, then 134 on every bar.
HALVING = {"method": "halving", "budget": 400, "seed": 7, "eta": 3, "rungs": 3}
#: The same 1,200 combos (the same seed and count draw the same), every one on every bar.
RANDOM = {"method": "random", "budget": 1200, "seed": 7}
EULER_GAMMA = 0.5772156649015329


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("search_dsr")
    bars = root / "bars"
    assert main(["data", "synth", "--symbol", "AAA", "--bars", str(N_BARS), "--seed", "5",
                 "--store", str(bars)]) == 0
    out = {}
    for name, search in (("halving", HALVING), ("random", RANDOM)):
        spec = {"data": {"store": str(bars), "symbols": ["AAA"], "timeframe": "1h"},
                "strategy": "ema_cross", "grid": GRID, "constraints": ["fast < slow"],
                "execution": {"fees": 0.001}, "run": {"out": str(root / f"{name}.zarr")},
                "search": search}
        (root / f"{name}.yaml").write_text(yaml.safe_dump(spec))
        assert main(["run", str(root / f"{name}.yaml"), "--no-progress", "--cluster",
                     "threads"]) == 0
        out[name] = root / f"{name}.zarr"
    return out


def dsr_by_hand(sr, n_obs, skew, kurt, n_trials, var):
    """Bailey & Lopez de Prado (2014), eqs. 1-2, with scipy's normal distribution."""
    z = ((1 - EULER_GAMMA) * stats.norm.ppf(1 - 1 / n_trials)
         + EULER_GAMMA * stats.norm.ppf(1 - 1 / (n_trials * math.e)))
    sr0 = math.sqrt(var) * z
    return stats.norm.cdf((sr - sr0) * math.sqrt(n_obs - 1)
                          / math.sqrt(1 - skew * sr + (kurt - 1) / 4 * sr * sr))


def trials(path):
    """A search store's per-bar Sharpe ratios, rungs, bars run, skew, kurtosis and the
    count of the combos it evaluated (``n_trades`` defined)."""
    ds = xr.open_zarr(path, consolidated=False).sel(symbol="AAA")
    sr = ds["sharpe"].values / math.sqrt(float(ds.attrs["periods_per_year"]))
    return (sr, ds["rung"].values, ds["bars_run"].values, ds["skew"].values,
            ds["kurtosis"].values, int(np.isfinite(ds["n_trades"].values).sum()))


@pytest.mark.parametrize("rung", [2, 0], ids=["last-rung", "rung-0"])
def test_a_halving_combos_dsr_takes_v_from_its_rung_and_n_from_every_trial(stores, rung,
                                                                            capsys):
    sr, rungs, bars_run, skew, kurt, n_trials = trials(stores["halving"])
    finite = np.isfinite(sr)
    assert n_trials == 1200  # every combo evaluated, pruned ones included
    assert np.count_nonzero(rungs == 2) == 134
    same = finite & (rungs == rung)
    var = np.var(sr[same], ddof=1)
    mixed = np.var(sr[finite], ddof=1)
    assert mixed > 2 * var  # the rungs' Sharpe ratios spread apart: mixing them inflates V
    frame = rank(stores["halving"], by="dsr", top=10, rung=None if rung == 2 else rung)
    assert set(frame["rung"]) == {rung}
    assert main(["rank", str(stores["halving"]), "--by", "dsr", "--top", "10", "--rung",
                 str(rung), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    ds, _ = with_computed(xr.open_zarr(stores["halving"], consolidated=False).load(), True)
    whole = ds["dsr"].sel(symbol="AAA").values  # the in-memory reference of rank
    for (_, row), cli in zip(frame.iterrows(), rows, strict=True):
        c = int(row["combo"])
        assert bars_run[c] == (N_BARS if rung == 2 else 334)
        want = dsr_by_hand(sr[c], bars_run[c], skew[c], kurt[c], n_trials, var)
        assert row["dsr"] == pytest.approx(want, rel=1e-9, abs=1e-12)
        assert cli["dsr"] == pytest.approx(want, rel=1e-9, abs=1e-12)
        assert whole[c] == pytest.approx(want, rel=1e-9, abs=1e-12)
    assert frame["dsr"].iloc[0] > 0.5  # the mixed rungs' V deflated it far below


def test_a_halving_combos_dsr_is_close_to_a_random_search_of_the_same_combos(stores):
    """The same combo, on the same bars: the halving store's DSR (V over the last rung's
    134 combos) near the random store's (V over all 1,200 on every bar), where mixing
    the rungs' Sharpe ratios deflated it to a fraction."""
    halving = rank(stores["halving"], by="dsr", top=5)
    random = rank(stores["random"], by="dsr", top=2000).set_index("combo")
    h, r = (xr.open_zarr(stores[n], consolidated=False) for n in ("halving", "random"))
    assert np.array_equal(h["box_position"].values, r["box_position"].values)
    sr, rungs, bars_run, skew, kurt, n_trials = trials(stores["halving"])
    assert trials(stores["random"])[-1] == n_trials == 1200  # the same N
    finite = np.isfinite(sr)
    for _, row in halving.iterrows():
        c = int(row["combo"])
        assert row["sharpe"] == random.loc[c, "sharpe"]  # the same bars, bit for bit
        assert row["dsr"] == pytest.approx(random.loc[c, "dsr"], abs=0.15)
        mixed = dsr_by_hand(sr[c], bars_run[c], skew[c], kurt[c], n_trials,
                            np.var(sr[finite], ddof=1))
        assert abs(mixed - random.loc[c, "dsr"]) > 0.3

