"""How fast kernels are held to the reference: metrics equal to 1e-12, NaN where NaN."""

import json
import math

import numpy as np
import pytest
import yaml
import zarr

from barsweep.engine import METRICS

#: alpha compounds a per-bar mean over ppy bars, ``(1 + m)**ppy - 1``, and cagr (and
#: calmar = cagr / |max_drawdown|) raises the growth to ``ppy / n_bars``: both multiply
#: the last-bit rounding of their base by that exponent (up to 8760 for hourly bars), and
#: a result near 0 turns it into a large relative error. They get wider tolerances.
#: skew and kurtosis are expanded from raw power sums in one pass (the reference takes
#: moments about the mean): the expansion cancels terms of the mean's size, so they are
#: held to 1e-9 (the issue's bound against scipy).
#: profit_factor divides by the losers' summed pnl, each pnl a difference of two equities
#: (of the cash's size): a loser of a few cents carries their last-bit rounding as a
#: relative error near 1e-11 (hypothesis found a factor of 551 off by 1.8e-11).
RTOL = {"alpha": 1e-8, "cagr": 1e-9, "calmar": 1e-9, "skew": 1e-9, "kurtosis": 1e-9,
        "profit_factor": 1e-8}


def assert_metrics_match(ours, ref, rtol=1e-12, atol=1e-12, where=""):
    for name in METRICS:
        a, b = ours[name], ref[name]
        if math.isnan(b):
            assert math.isnan(a), (where, name, a, b)
        else:
            assert a == pytest.approx(b, rel=RTOL.get(name, rtol), abs=atol), (where, name, a, b)


#: Group attributes that two runs of one spec write differently however equal their
#: results, each for the reason given; :func:`assert_same_store` compares every other one.
RUN_ATTRS = {
    "timings_s": "wall-clock seconds of each phase",
    "block_phases_s": "wall-clock seconds of the blocks' phases",
    "blocks_resumed": "0 in a run that started afresh, the blocks found done in a resumed one",
    "bars_shipped_to": "the addresses of the workers of each run's cluster",
    "blocks_written_by_driver": "how many blocks a lost worker left to the driver to write",
    "cluster": "how each run got its cluster (--workers N, --scheduler, local)",
    "cluster_reason": "why that cluster, which names the flags each run was given",
    "backend_reason": "may name a worker address of the run that made the store",
    "store_id": "a fresh random id for every store a run makes (a resume keeps its own)",
    "spec_path": "where each test wrote its spec file",
}


def _same_values(a, b) -> bool:
    """Bit for bit: numbers by their bytes (NaN == NaN of the same payload, -0.0 != 0.0),
    strings and other objects by equality."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind in "biufcmM":
        return a.tobytes() == b.tobytes()
    return a.tolist() == b.tolist()


def assert_same_store(a, b) -> None:
    """Hold the results store ``a`` to ``b`` (e.g. a resumed run's to an undisturbed one's).

    Every array (metrics, ``done``, the PBO segment sums, every coordinate such as
    ``n_bars`` and the walk-forward windows' bounds) must have the same name, shape,
    dtype, chunks, fill value, dimension names, attributes and values bit for bit; every
    group attribute must be equal but those in :data:`RUN_ATTRS`; ``spec`` is compared
    without ``run.out``, ``cluster`` and ``n_workers``; both stores must be complete.
    """
    ga, gb = zarr.open_group(str(a), mode="r"), zarr.open_group(str(b), mode="r")
    names = sorted(k for k, _ in ga.arrays())
    assert names == sorted(k for k, _ in gb.arrays()), "the stores hold other arrays"
    for name in names:
        x, y = ga[name], gb[name]
        for what in ("shape", "dtype", "chunks", "fill_value", "metadata.dimension_names"):
            here, there = x, y
            for part in what.split("."):
                here, there = getattr(here, part), getattr(there, part)
            assert _same_values(here, there) if what == "fill_value" else here == there, (
                name, what, here, there)
        assert dict(x.attrs) == dict(y.attrs), (name, "attributes")
        u, v = x[...], y[...]
        if not _same_values(u, v):
            floats = u.dtype.kind == "f"
            differ = (u.view(f"i{u.itemsize}") != v.view(f"i{v.itemsize}")) if floats else (u != v)
            nans = f", NaN in a: {np.isnan(u).sum()}, in b: {np.isnan(v).sum()}" if floats else ""
            raise AssertionError(f"{name}: {np.count_nonzero(differ)} of {u.size} values "
                                 f"differ{nans}")
    attrs_a, attrs_b = dict(ga.attrs), dict(gb.attrs)
    assert attrs_a.get("complete") is True and attrs_b.get("complete") is True
    spec_a, spec_b = (yaml.safe_load(attrs.pop("spec")) for attrs in (attrs_a, attrs_b))
    for spec in (spec_a, spec_b):  # where each run wrote, and how it got its cluster
        spec.get("run", {}).pop("out", None)  # (--out, --cluster, --workers, --scheduler)
        spec.pop("cluster", None)
        spec.pop("n_workers", None)
    assert spec_a == spec_b, ("spec", spec_a, spec_b)
    kept_a = {k: v for k, v in attrs_a.items() if k not in RUN_ATTRS}
    kept_b = {k: v for k, v in attrs_b.items() if k not in RUN_ATTRS}
    assert kept_a == kept_b, json.dumps(
        {k: (kept_a.get(k), kept_b.get(k)) for k in kept_a.keys() | kept_b.keys()
         if kept_a.get(k) != kept_b.get(k)}, default=str)


def pending_copy(src, dst) -> None:
    """Copy the results store ``src`` to ``dst`` with every third block flagged pending
    again (an interrupted run's store, for ``--partial``)."""
    import shutil

    from barsweep.pipeline.run.results import PENDING

    shutil.copytree(src, dst)
    done = zarr.open_group(str(dst), mode="r+")["done"]
    flags = done[:]
    flags[::3] = PENDING
    done[:] = flags
