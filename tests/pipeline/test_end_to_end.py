"""End to end: CLI -> real LocalCluster (2 processes) -> Zarr on disk -> xarray -> rank."""

import gzip
import json
import os
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import yaml
from helpers.compare import assert_metrics_match
from helpers.reference import ref_ema_cross_signals, ref_simulate

from barsweep.datasets import open_bars, periods_per_year
from barsweep.engine import METRICS, backtest
from barsweep.pipeline.cli import main
from barsweep.pipeline.config.cluster import ClusterSpec
from barsweep.pipeline.config.model import parse_spec
from barsweep.pipeline.run.cluster import connect
from barsweep.pipeline.run.orchestrate import run_spec

pytestmark = pytest.mark.slow

N_BARS = 2000


def write_spec(path: Path, store: Path, out: Path, block_size: int, **extra) -> Path:
    spec = {
        "data": {"store": str(store), "symbols": ["BTCUSDT"], "timeframe": "1h"},
        "strategy": "ema_cross",
        "grid": {"fast": {"start": 2, "stop": 40, "step": 1},
                 "slow": {"start": 10, "stop": 120, "step": 5}},
        "constraints": ["fast < slow"],
        "execution": {"fill": "next_open", "fees": 0.001, "slippage": 0.0002},
        "run": {"block_size": block_size, "out": str(out)},
    }
    spec.update(extra)
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.fixture(scope="module")
def synth_store(tmp_path_factory):
    store = tmp_path_factory.mktemp("bars")
    assert main(["data", "synth", "--symbol", "BTCUSDT", "--timeframe", "1h",
                 "--bars", str(N_BARS), "--seed", "7", "--store", str(store)]) == 0
    return store


@pytest.fixture(scope="module")
def cluster_client():
    """A plain-TCP local cluster: the tests hand its address to `--scheduler`, as a user
    hands the address of a scheduler they started (TLS-less) to a run."""
    plain = ClusterSpec.model_validate({"kind": "local", "security": "plain"})
    with connect(plain, n_workers=2) as client:
        yield client


def test_cli_run_then_rank_equals_backtest_and_reference(synth_store, tmp_path, capsys):
    out = tmp_path / "results.zarr"
    spec = write_spec(tmp_path / "spec.yaml", synth_store, out, block_size=200)
    # worker processes, as a large sweep gets (this small one would run on threads)
    assert main(["run", str(spec), "--cluster", "local", "--workers", "2",
                 "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "dask dashboard: http://127.0.0.1:" in printed

    ds = xr.open_zarr(out, consolidated=False)
    assert ds["sharpe"].dims == ("symbol", "fast", "slow")
    assert ds["fast"].dtype == np.int64 and ds["slow"].dtype == np.int64
    assert (ds["done"].values > 0).all()
    assert "fast < slow" in ds.attrs["spec"]
    assert json.loads(ds.attrs["bars_fingerprint"])["blake2b"]
    assert json.loads(ds.attrs["timings_s"])["total"] > 0
    fast, slow = np.meshgrid(ds["fast"].values, ds["slow"].values, indexing="ij")
    sharpe = ds["sharpe"].values[0]
    assert np.isnan(sharpe[fast >= slow]).all()          # excluded combos are NaN
    assert not np.isnan(ds["n_trades"].values[0][fast < slow]).any()

    assert main(["rank", str(out), "--by", "sharpe", "--top", "5",
                 "--where", "n_trades >= 10", "--json"]) == 0
    ranked = json.loads(capsys.readouterr().out)
    assert len(ranked) == 5
    assert [r["sharpe"] for r in ranked] == sorted((r["sharpe"] for r in ranked), reverse=True)
    assert all(r["n_trades"] >= 10 and r["symbol"] == "BTCUSDT" for r in ranked)
    assert set(METRICS) | {"symbol", "fast", "slow", "psr", "dsr"} == set(ranked[0])

    bars = open_bars(synth_store, "BTCUSDT", "1h")
    close, open_ = list(bars["close"].values[:, 0]), list(bars["open"].values[:, 0])
    ppy = periods_per_year("1h")
    rng = np.random.default_rng(3)
    valid = np.argwhere(fast < slow)
    picks = [tuple(valid[i]) for i in rng.choice(len(valid), 6, replace=False)]
    picks += [(ds.indexes["fast"].get_loc(r["fast"]), ds.indexes["slow"].get_loc(r["slow"]))
              for r in ranked[:2]]
    execution = dict(fill="next_open", fees=0.001, slippage=0.0002)
    for i, j in picks:
        f, s = int(ds["fast"][i]), int(ds["slow"][j])
        stored = {m: float(ds[m].values[0, i, j]) for m in METRICS}
        single = backtest(bars, "ema_cross", dict(fast=f, slow=s), ppy=ppy, **execution)
        assert single.metrics == pytest.approx(stored, rel=0, abs=0, nan_ok=True), (f, s)
        entries, exits = ref_ema_cross_signals(close, f, s)
        ref, _, _ = ref_simulate(open_, close, entries, exits, ppy=ppy, **execution)
        assert_metrics_match(stored, ref, where=(f, s))


def test_block_size_does_not_change_results(synth_store, tmp_path, cluster_client):
    stores = []
    for block_size in (37, 256, 5000):
        out = tmp_path / f"b{block_size}.zarr"
        spec = parse_spec(yaml.safe_load(
            write_spec(tmp_path / f"s{block_size}.yaml", synth_store, out, block_size)
            .read_text()))
        run_spec(spec, client=cluster_client)
        stores.append(xr.open_zarr(out, consolidated=False))
    chunks = {ds["sharpe"].encoding["chunks"] for ds in stores}
    assert len(chunks) == 3
    for other in stores[1:]:
        for m in METRICS:
            np.testing.assert_array_equal(stores[0][m].values, other[m].values)


def test_run_on_an_existing_scheduler(synth_store, tmp_path, cluster_client, capsys):
    out = tmp_path / "r.zarr"
    spec = write_spec(tmp_path / "spec.yaml", synth_store, out, block_size=500)
    address = cluster_client.scheduler.address
    assert main(["run", str(spec), "--scheduler", address, "--no-progress"]) == 0
    assert (xr.open_zarr(out, consolidated=False)["done"].values == 1).all()


def test_blocks_excluded_by_constraints_are_not_computed(synth_store, tmp_path, cluster_client):
    out = tmp_path / "x.zarr"
    spec = parse_spec(yaml.safe_load(write_spec(
        tmp_path / "x.yaml", synth_store, out, block_size=23 * 2,
        constraints=["fast + 80 < slow"]).read_text()))
    summary = run_spec(spec, client=cluster_client)
    ds = xr.open_zarr(out, consolidated=False)
    done = ds["done"].values
    assert (done == 2).any() and (done == 1).any() and not (done == 0).any()
    assert summary.n_blocks == int((done == 1).sum())


def test_real_data_aapl_daily(tmp_path, cluster_client, capsys):
    import bokeh_sampledata

    source = Path(bokeh_sampledata.__file__).parent / "_data" / "stocks.csv.gz"
    with gzip.open(source, "rt") as fh:
        header, *rows = fh.read().splitlines()
    csv = tmp_path / "AAPL.csv"
    csv.write_text("\n".join([header] + [r for r in rows if r.startswith("AAPL,")]) + "\n")
    store = tmp_path / "bars"
    assert main(["data", "import", str(csv), "--symbol", "AAPL", "--timeframe", "1d",
                 "--store", str(store)]) == 0
    assert "imported 3,270 bars" in capsys.readouterr().out

    out = tmp_path / "aapl.zarr"
    spec = parse_spec({
        "data": {"store": str(store), "symbols": ["AAPL"], "timeframe": "1d",
                 "year_days": 252},
        "strategy": "ema_cross",
        "grid": {"fast": [5, 10, 20, 50], "slow": [50, 100, 200]},
        "constraints": ["fast < slow"],
        "execution": {"fill": "next_open", "fees": 0.0005},
        "run": {"block_size": 4, "out": str(out)},
    })
    run_spec(spec, client=cluster_client)
    ds = xr.open_zarr(out, consolidated=False)
    bars = open_bars(store, "AAPL", "1d")
    single = backtest(bars, "ema_cross", dict(fast=20, slow=100), year_days=252,
                      fill="next_open", fees=0.0005)
    stored = {m: float(ds[m].sel(symbol="AAPL", fast=20, slow=100)) for m in METRICS}
    assert single.metrics == pytest.approx(stored, rel=0, abs=0, nan_ok=True)
    assert stored["n_trades"] > 5


def test_two_symbols_and_two_runs_sharing_a_scheduler(synth_store, tmp_path, cluster_client):
    from concurrent.futures import ThreadPoolExecutor

    from distributed import Client

    assert main(["data", "synth", "--symbol", "ETHUSDT", "--timeframe", "1h", "--bars", "1500",
                 "--seed", "8", "--store", str(synth_store)]) == 0

    def one_run(name):
        spec = parse_spec(yaml.safe_load(write_spec(
            tmp_path / f"{name}.yaml", synth_store, tmp_path / f"{name}.zarr", block_size=100,
            data={"store": str(synth_store), "symbols": ["BTCUSDT", "ETHUSDT"],
                  "timeframe": "1h"}).read_text()))
        with Client(cluster_client.scheduler.address) as client:
            return run_spec(spec, client=client)

    with ThreadPoolExecutor(2) as pool:
        summaries = list(pool.map(one_run, ["a", "b"]))
    assert summaries[0].n_blocks == summaries[1].n_blocks
    a = xr.open_zarr(tmp_path / "a.zarr", consolidated=False)
    b = xr.open_zarr(tmp_path / "b.zarr", consolidated=False)
    assert (a["done"].values == 1).all() and (b["done"].values == 1).all()
    np.testing.assert_array_equal(a["sharpe"].values, b["sharpe"].values)
    ppy = periods_per_year("1h")
    for symbol in ("BTCUSDT", "ETHUSDT"):
        bars = open_bars(synth_store, symbol, "1h")
        single = backtest(bars, "ema_cross", dict(fast=7, slow=30), ppy=ppy, fill="next_open",
                          fees=0.001, slippage=0.0002)
        stored = {m: float(a[m].sel(symbol=symbol, fast=7, slow=30)) for m in METRICS}
        assert single.metrics == pytest.approx(stored, rel=0, abs=0, nan_ok=True)
    assert not np.array_equal(a["sharpe"].values[0], a["sharpe"].values[1], equal_nan=True)


def test_empty_time_range_is_refused_before_the_store_is_made(synth_store, tmp_path, capsys):
    out = tmp_path / "never.zarr"
    spec = write_spec(tmp_path / "s.yaml", synth_store, out, block_size=100,
                      data={"store": str(synth_store), "symbols": ["BTCUSDT"],
                            "timeframe": "1h", "start": "2030-01-01"})
    assert main(["run", str(spec), "--workers", "1", "--no-progress"]) == 2
    assert "2030" in capsys.readouterr().err
    assert not out.exists()


def test_custom_strategy_module_stops_grid_and_both_directions(synth_store, tmp_path,
                                                               cluster_client, monkeypatch):
    """A user's strategy module named in the spec, a stop swept as a grid axis, shorts."""
    where = str(Path(__file__).resolve().parents[1] / "engine")  # docs/STRATEGIES.md's example
    monkeypatch.syspath_prepend(where)
    def add_path(path):  # a user's PYTHONPATH, on the workers
        import sys

        if path not in sys.path:
            sys.path.insert(0, path)

    cluster_client.run(add_path, where)
    out = tmp_path / "custom.zarr"
    spec_path = tmp_path / "custom.yaml"
    spec_path.write_text(yaml.safe_dump({
        "data": {"store": str(synth_store), "symbols": ["BTCUSDT"], "timeframe": "1h"},
        "modules": ["custom_strategy_example"],
        "strategy": "sma_trend",
        "grid": {"period": [10, 20, 40], "stop_loss": [0.01, 0.03]},
        "execution": {"fill": "next_open", "direction": "both", "fees": 0.001,
                      "take_profit": 0.05},
        "run": {"block_size": 2, "out": str(out)},
    }))
    assert main(["run", str(spec_path), "--scheduler", cluster_client.scheduler.address,
                 "--no-progress"]) == 0
    ds = xr.open_zarr(out, consolidated=False)
    assert ds["sharpe"].dims == ("symbol", "period", "stop_loss")
    assert ds["stop_loss"].dtype == np.float64
    bars = open_bars(synth_store, "BTCUSDT", "1h")
    for period in (10, 40):
        for stop in (0.01, 0.03):
            single = backtest(bars, "sma_trend", dict(period=period), ppy=periods_per_year("1h"),
                              fill="next_open", direction="both", fees=0.001, take_profit=0.05,
                              stop_loss=stop)
            stored = {m: float(ds[m].sel(symbol="BTCUSDT", period=period, stop_loss=stop))
                      for m in METRICS}
            assert single.metrics == pytest.approx(stored, rel=0, abs=0, nan_ok=True)
            assert set(single.trades["side"]) == {-1, 1}


def test_a_module_that_does_not_import_is_named(tmp_path, capsys):
    spec_path = tmp_path / "bad.yaml"
    spec_path.write_text(yaml.safe_dump({
        "data": {"store": "bars", "symbols": ["X"], "timeframe": "1h"},
        "modules": ["no_such_module_here"], "strategy": "ema_cross",
        "grid": {"fast": [5], "slow": [20]}}))
    assert main(["run", str(spec_path)]) == 2
    err = capsys.readouterr().err
    assert "modules[0]" in err and "no_such_module_here" in err


#: What the engine says on a machine with no trace of an NVIDIA driver.
NO_DRIVER = ("no NVIDIA driver on this machine (none of /proc/driver/nvidia/version, "
             "/dev/nvidiactl, /dev/dxg)")


def cuda_problem_of_this_host() -> str | None:
    """Why the local cluster's workers (this host, this environment) cannot run CUDA
    kernels, or None when they can: the no-driver line when the host has no trace of a
    driver, else the engine's own probe (a driver without a working CUDA stack)."""
    from barsweep.engine.backend import cuda_problem_here

    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") in ("", "0") and not any(
            os.path.exists(p) for p in ("/proc/driver/nvidia/version", "/dev/nvidiactl",
                                        "/dev/dxg")):
        return NO_DRIVER
    return cuda_problem_here()


def test_backend_cuda_without_a_gpu_is_refused_and_auto_runs_on_the_cpu(
        synth_store, tmp_path, cluster_client, capsys):
    """Without a GPU, `cuda` fails before anything is written, naming each worker's
    problem; `auto` runs on the CPU and records why in the store's attributes. With a GPU
    the two workers of this host share it: `cuda` runs on it, `auto` stays on the CPU."""
    address = cluster_client.scheduler.address
    workers = sorted(cluster_client.scheduler_info()["workers"])
    assert len(workers) == 2
    problem = cuda_problem_of_this_host()
    out = tmp_path / "cuda.zarr"
    spec = write_spec(tmp_path / "cuda.yaml", synth_store, out, block_size=500,
                      run={"block_size": 500, "out": str(out), "backend": "cuda"})
    if problem is None:  # a usable GPU here
        assert main(["run", str(spec), "--scheduler", address, "--no-progress"]) == 0
        capsys.readouterr()
        attrs = xr.open_zarr(out, consolidated=False).attrs
        assert attrs["backend"] == "cuda"
        assert attrs["backend_reason"] == "run.backend is cuda; all 2 workers see a CUDA GPU"
        out = tmp_path / "auto.zarr"
    else:
        assert main(["run", str(spec), "--scheduler", address, "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert err == (f"barsweep: error: run.backend: 'cuda' needs a CUDA GPU on every "
                       f"worker: {workers[0]}: {problem}; {workers[1]}: {problem}. Use "
                       f"backend 'cpu' or 'auto', or a cluster of GPU workers (cluster: "
                       f"cuda, with the [cuda] extra)\n")
        assert not out.exists()
    assert main(["run", str(spec), "--scheduler", address, "--backend", "auto",
                 "--out", str(out), "--no-progress"]) == 0
    assert "blocks on cpu" in capsys.readouterr().out
    attrs = xr.open_zarr(out, consolidated=False).attrs
    assert attrs["backend"] == "cpu" and attrs["backend_requested"] == "auto"
    if problem is None:
        assert attrs["backend_reason"].startswith("auto: CPU, since 2 workers would share "
                                                  "GPU ")
    else:
        assert attrs["backend_reason"] == f"auto: CPU, since {workers[0]}: {problem}"


def literal_cscv_pbo(ds: xr.Dataset) -> dict:
    """PBO of the store's one symbol by a literal CSCV (Bailey et al. 2015, 2.2) over
    its per-segment sums, in plain numpy: each of the C(S, S/2) in-sample halves and its
    complement; a combo's Sharpe over a set of segments is mean / std (ddof 1) of its bar
    returns there, from the sums (0 with no variance); the in-sample best (lowest row on
    a tie) ranks 1 + (combos strictly below it) out of sample, omega = rank / (N + 1),
    and the split counts when the logit ln(omega / (1 - omega)) is <= 0 (the rank at most
    the OOS median). Also the logits' quartiles and the least-squares line of the
    winners' OOS Sharpe on their IS Sharpe."""
    import itertools

    n_seg = ds.sizes["segment"]
    flat = {name: np.moveaxis(ds[name].values[0], 0, -1).reshape(-1, n_seg)
            for name in ("seg_sum_r", "seg_sum_r2")}
    trial = np.isfinite(ds["sharpe"].values[0]).ravel()  # the combos of the grid
    sum_r, sum_r2 = flat["seg_sum_r"][trial], flat["seg_sum_r2"][trial]
    seg_n = ds["seg_n"].values[0].astype(np.float64)

    def sharpe(segments):
        s = sum_r[:, segments].sum(axis=1)
        s2 = sum_r2[:, segments].sum(axis=1)
        n = seg_n[segments].sum()
        mean = s / n
        var = (s2 - n * mean**2) / (n - 1)
        return np.where(var > 0, mean / np.sqrt(np.where(var > 0, var, 1.0)), 0.0)

    n_combos = len(sum_r)
    logits, winner_is, winner_oos = [], [], []
    for is_half in itertools.combinations(range(n_seg), n_seg // 2):
        oos_half = [k for k in range(n_seg) if k not in is_half]
        in_sample = sharpe(list(is_half))
        best = int(np.argmax(in_sample))
        oos = sharpe(oos_half)
        rank = 1 + int((oos < oos[best]).sum())
        omega = rank / (n_combos + 1)
        logits.append(np.log(omega / (1 - omega)))
        winner_is.append(in_sample[best])
        winner_oos.append(oos[best])
    slope, intercept = np.polyfit(winner_is, winner_oos, 1)
    return {"pbo": float(np.mean(np.array(logits) <= 0)), "n_combos": n_combos,
            "logit_quartiles": np.percentile(logits, [25, 50, 75]).tolist(),
            "degradation": [slope, intercept]}


def test_a_run_keeps_pbo_segments_and_dsr_inputs(synth_store, tmp_path, capsys):
    """The store carries what the analyses need: the segment sums (equal to each combo's
    bar returns summed per segment), n_bars, periods_per_year; rank --pbo and --by dsr
    run on it."""
    out = tmp_path / "results.zarr"
    spec = write_spec(tmp_path / "spec.yaml", synth_store, out, block_size=150,
                      analysis={"pbo_segments": 6})
    assert main(["run", str(spec), "--workers", "2", "--no-progress"]) == 0
    capsys.readouterr()
    ds = xr.open_zarr(out, consolidated=False)
    assert ds["seg_sum_r"].dims == ("symbol", "segment", "fast", "slow")
    assert ds["n_bars"].values.tolist() == [N_BARS]
    assert ds["seg_n"].values.tolist() == [[333, 333, 334, 333, 333, 334]]
    assert ds.attrs["periods_per_year"] == periods_per_year("1h")
    bars = open_bars(synth_store, "BTCUSDT", "1h")
    edges = np.cumsum([0, *ds["seg_n"].values[0]])
    for f, s in [(2, 10), (7, 45), (30, 115)]:
        i, j = ds.indexes["fast"].get_loc(f), ds.indexes["slow"].get_loc(s)
        single = backtest(bars, "ema_cross", dict(fast=f, slow=s), ppy=periods_per_year("1h"),
                          fill="next_open", fees=0.001, slippage=0.0002)
        equity = single.equity.to_numpy()
        r = equity / np.concatenate([[10_000.0], equity[:-1]]) - 1
        sums = [[r[a:b].sum(), (r[a:b] ** 2).sum()] for a, b in zip(edges[:-1], edges[1:])]
        stored = np.stack([ds["seg_sum_r"].values[0, :, i, j],
                           ds["seg_sum_r2"].values[0, :, i, j]], axis=1)
        np.testing.assert_allclose(stored, sums, rtol=1e-10, atol=1e-15)
        assert float(ds["sharpe"].values[0, i, j]) == single.metrics["sharpe"]
    excluded = ds["seg_sum_r"].values[0, :, ds.indexes["fast"].get_loc(30),
                                      ds.indexes["slow"].get_loc(10)]
    assert np.isnan(excluded).all()  # fast >= slow: excluded, as its metrics are
    assert main(["rank", str(out), "--pbo", "--json"]) == 0
    pbo = json.loads(capsys.readouterr().out)
    expected = literal_cscv_pbo(ds)
    assert len(pbo) == 1 and pbo[0]["n_splits"] == 20 and not pbo[0]["sampled"]
    assert pbo[0]["pbo"] == expected["pbo"] == 0.3  # 6 of the 20 splits
    assert pbo[0]["n_combos"] == expected["n_combos"] == 785
    assert pbo[0]["logit_quartiles"] == expected["logit_quartiles"]
    assert [pbo[0]["degradation_slope"], pbo[0]["degradation_intercept"]] == pytest.approx(
        expected["degradation"], rel=1e-9)
    assert main(["rank", str(out), "--by", "dsr", "--top", "3", "--json"]) == 0
    top = json.loads(capsys.readouterr().out)
    assert len(top) == 3 and all(0.0 <= t["dsr"] <= 1.0 for t in top)
    assert top[0]["dsr"] >= top[1]["dsr"] >= top[2]["dsr"]
