"""Ranking that resists overfitting: probabilistic and deflated Sharpe ratios, the
probability of backtest overfitting (CSCV), parameter plateaus and Pareto fronts.

Plain numpy and xarray over a results store's arrays: nothing here reads a store or
prints. The formulas, their sources and the conventions chosen are in docs/ROBUST.md.

Sharpe ratios here are per bar (not annualised) unless a name says otherwise; kurtosis
is raw (a normal distribution has 3).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import xarray as xr
from numba import njit, prange

from ...engine import LOWER_IS_BETTER
from ...errors import DataError, SpecError
from ..config.dims import NON_PARAM_DIMS

#: The Euler-Mascheroni constant (the gamma of Bailey & Lopez de Prado 2014, eq. 2).
EULER_GAMMA = 0.5772156649015329

_NORMAL = NormalDist()


def normal_cdf(x):
    """The standard normal CDF, elementwise (``scipy.stats.norm.cdf``); NaN stays NaN.

    Written with :func:`math.erfc` (accurate in both tails), so that scipy is not a
    runtime dependency.

    >>> float(normal_cdf(0.0))
    0.5
    """
    x = np.asarray(x, dtype=np.float64)
    out = np.empty_like(x)
    _normal_cdf_cpu(x.ravel(), out.reshape(-1))
    return out if out.ndim else out[()]


@njit(cache=True)
def _normal_cdf_cpu(x, out):
    """``out[i] = Phi(x[i])`` (shape (n,), float64; ``out`` written)."""
    for i in range(x.shape[0]):
        out[i] = 0.5 * math.erfc(-x[i] / math.sqrt(2.0))


def probabilistic_sharpe(sharpe, n_obs, skew, kurtosis, benchmark=0.0):
    """The probabilistic Sharpe ratio: the probability that the true Sharpe ratio
    exceeds ``benchmark``, given an estimate from ``n_obs`` returns.

    Bailey & Lopez de Prado (2012), "The Sharpe ratio efficient frontier", J. of Risk
    15(2), eq. 9; restated as eq. 1 of Bailey & Lopez de Prado (2014)::

        PSR(SR*) = Phi( (SR - SR*) sqrt(n - 1) / sqrt(1 - g3 SR + (g4 - 1) / 4 SR^2) )

    Parameters
    ----------
    sharpe : array_like, float64
        Estimated Sharpe ratio per bar (mean / sample std of the bar returns), not
        annualised.
    n_obs : array_like
        Number of bar returns behind each estimate.
    skew : array_like
        Skewness g3 of the bar returns.
    kurtosis : array_like
        Raw kurtosis g4 of the bar returns (a normal distribution has 3).
    benchmark : array_like
        SR*, the per-bar Sharpe ratio to beat (default 0).

    Returns
    -------
    ndarray or float
        The probability, broadcast over the arguments; NaN where any argument is NaN,
        where ``n_obs < 2``, or where the variance term is not positive.

    >>> round(float(probabilistic_sharpe(0.1, 1001, 0.0, 3.0)), 4)
    0.9992
    """
    sr = np.asarray(sharpe, dtype=np.float64)
    n = np.asarray(n_obs, dtype=np.float64)
    g3 = np.asarray(skew, dtype=np.float64)
    g4 = np.asarray(kurtosis, dtype=np.float64)
    sr0 = np.asarray(benchmark, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        var = 1.0 - g3 * sr + (g4 - 1.0) / 4.0 * sr * sr
        z = (sr - sr0) * np.sqrt(n - 1.0) / np.sqrt(var)
        z = np.where((var > 0.0) & (n >= 2.0), z, np.nan)
    return normal_cdf(z)


def expected_max_sharpe(n_trials, sharpe_var):
    """SR*, the expected maximum of ``n_trials`` per-bar Sharpe ratio estimates whose
    true value is 0 and whose variance across trials is ``sharpe_var``.

    Bailey & Lopez de Prado (2014), "The deflated Sharpe ratio", J. of Portfolio
    Management 40(5), eq. 2 (from the false strategy theorem)::

        SR* = sqrt(V) ((1 - gamma) Phi^-1(1 - 1/N) + gamma Phi^-1(1 - 1/(N e)))

    with gamma the Euler-Mascheroni constant. One trial is not deflated: SR* = 0 for
    N = 1, whatever V (NaN from one value with ddof 1). NaN for N < 1, N or V NaN, or
    V < 0.

    >>> round(float(expected_max_sharpe(100, 0.5 / 250)), 4)
    0.1132
    """
    n = np.asarray(n_trials, dtype=np.float64)
    v = np.asarray(sharpe_var, dtype=np.float64)
    n_flat, v_flat = np.broadcast_arrays(n, v)
    out = np.full(n_flat.shape, np.nan)
    for i in np.ndindex(n_flat.shape):
        trials, var = n_flat[i], v_flat[i]
        if trials == 1.0:  # whatever V: one trial has no variance estimate (ddof 1)
            out[i] = 0.0
            continue
        if not (trials > 1.0 and var >= 0.0):
            continue
        z = ((1.0 - EULER_GAMMA) * _NORMAL.inv_cdf(1.0 - 1.0 / trials)
             + EULER_GAMMA * _NORMAL.inv_cdf(1.0 - 1.0 / (trials * math.e)))
        out[i] = math.sqrt(var) * z
    return out if out.ndim else out[()]


def deflated_sharpe(sharpe, n_obs, skew, kurtosis, n_trials, sharpe_var):
    """The deflated Sharpe ratio: the probabilistic Sharpe ratio against SR*, the
    Sharpe ratio the best of ``n_trials`` skill-less trials is expected to reach.

    Bailey & Lopez de Prado (2014), "The deflated Sharpe ratio: correcting for selection
    bias, backtest overfitting and non-normality", J. of Portfolio Management 40(5),
    eqs. 1-2: ``DSR = PSR(SR*)`` with SR* from :func:`expected_max_sharpe`.

    Parameters
    ----------
    sharpe, n_obs, skew, kurtosis : array_like
        As in :func:`probabilistic_sharpe` (per-bar Sharpe, raw kurtosis).
    n_trials : array_like
        N, the number of trials (combos) the chosen one was selected from.
    sharpe_var : array_like
        V, the variance of the trials' per-bar Sharpe ratios.

    Returns
    -------
    ndarray or float
        The probability; NaN as in :func:`probabilistic_sharpe` and
        :func:`expected_max_sharpe`.

    The paper's example (Section "A numerical example": N = 100, V = 1/2 annualised,
    T = 1250 daily returns, skew -3, kurtosis 10, annualised SR 2.5):

    >>> round(float(deflated_sharpe(2.5 / 250**0.5, 1250, -3.0, 10.0, 100, 0.5 / 250)), 4)
    0.9004
    """
    sr0 = expected_max_sharpe(n_trials, sharpe_var)
    return probabilistic_sharpe(sharpe, n_obs, skew, kurtosis, benchmark=sr0)


def has_dsr_inputs(ds: xr.Dataset) -> bool:
    """Whether ``ds`` holds what :func:`dsr_columns` needs."""
    return (all(name in ds.data_vars for name in ("sharpe", "skew", "kurtosis"))
            and "n_bars" in ds.variables and "periods_per_year" in ds.attrs)


def dsr_columns(ds: xr.Dataset) -> tuple[xr.DataArray, xr.DataArray]:
    """``psr`` (against 0) and ``dsr`` of every combo of a results Dataset.

    Parameters
    ----------
    ds : xarray.Dataset
        With metric variables ``sharpe`` (annualised), ``skew``, ``kurtosis`` (raw), a
        coordinate ``n_bars`` over ``symbol`` (the bars behind each symbol's metrics) and
        the attribute ``periods_per_year``.

    Returns
    -------
    psr, dsr : xarray.DataArray
        Shaped as ``ds.sharpe``; NaN where its Sharpe is. The trials of a combo are the
        combos with a finite Sharpe ratio of its symbol (and window and sample, where
        the Dataset has those dims): N is their count and V the variance (ddof 1) of
        their per-bar Sharpe ratios, sharpe / sqrt(periods_per_year).
    """
    missing = [name for name in ("sharpe", "skew", "kurtosis") if name not in ds.data_vars]
    if "n_bars" not in ds.coords and "n_bars" not in ds.data_vars:
        missing.append("n_bars")
    if "periods_per_year" not in ds.attrs:
        missing.append("the periods_per_year attribute")
    if missing:
        raise SpecError(f"--by psr/dsr: the results store lacks {', '.join(missing)}; "
                        f"rerun the sweep with this version of barsweep")
    sharpe, skew, kurtosis = (ds[name].astype(np.float64).compute()
                              for name in ("sharpe", "skew", "kurtosis"))
    sr = sharpe / math.sqrt(float(ds.attrs["periods_per_year"]))
    sr = sr.where(np.isfinite(sr))
    params = [d for d in sr.dims if d not in NON_PARAM_DIMS]
    n_trials = sr.notnull().sum(params)
    sharpe_var = sr.var(params, ddof=1)
    n_obs = ds["n_bars"].compute()
    sr0 = xr.apply_ufunc(expected_max_sharpe, n_trials, sharpe_var)
    psr = xr.apply_ufunc(probabilistic_sharpe, sr, n_obs, skew, kurtosis)
    dsr = xr.apply_ufunc(probabilistic_sharpe, sr, n_obs, skew, kurtosis, sr0)
    return psr.rename("psr"), dsr.rename("dsr")


@dataclass(frozen=True)
class PBOResult:
    """The probability of backtest overfitting and the CSCV splits behind it.

    Attributes
    ----------
    pbo : float
        Share of splits whose logit is <= 0 (the in-sample winner ranks in the lower half
        out of sample).
    n_splits : int
    sampled : bool
        True when the splits are a seeded random sample of all C(S, S/2).
    n_combos : int
        Combos that took part (finite segment sums).
    logit_quartiles : tuple of float
        The 25th, 50th and 75th percentiles of the logits.
    slope, intercept : float
        OLS of the in-sample winner's out-of-sample Sharpe on its in-sample Sharpe
        across splits (the performance degradation; NaN with fewer than two distinct
        in-sample values).
    is_segments : ndarray, shape (n_splits, S/2), int
        The in-sample segments of each split (the rest are out of sample).
    winner : ndarray, shape (n_splits,), int
        Row (in the arrays passed) of each split's in-sample winner.
    sharpe_is, sharpe_oos : ndarray, shape (n_splits,), float64
        The winner's per-bar Sharpe ratio in and out of sample.
    omega : ndarray, shape (n_splits,), float64
        The winner's relative out-of-sample rank, rank / (n_combos + 1).
    logit : ndarray, shape (n_splits,), float64
        ln(omega / (1 - omega)).
    """

    pbo: float
    n_splits: int
    sampled: bool
    n_combos: int
    logit_quartiles: tuple[float, float, float]
    slope: float
    intercept: float
    is_segments: np.ndarray
    winner: np.ndarray
    sharpe_is: np.ndarray
    sharpe_oos: np.ndarray
    omega: np.ndarray
    logit: np.ndarray


def pbo(seg_sum_r, seg_sum_r2, seg_n, *, max_splits: int = 5000, seed: int = 0,
        chunk: int = 4096) -> PBOResult:
    """The probability of backtest overfitting by combinatorially symmetric
    cross-validation (CSCV), from per-segment sums of bar returns.

    Bailey, Borwein, Lopez de Prado & Zhu (2015), "The probability of backtest
    overfitting", J. of Computational Finance 20(4), section 2.2: the bars are cut into
    S equal segments; every split of the segments into two halves gives an in-sample
    (IS) and an out-of-sample (OOS) set. For each split, the combo with the best IS
    Sharpe ratio is found; ``omega`` is its OOS rank among the N combos (1 the worst,
    N the best) over N + 1, and the logit ``ln(omega / (1 - omega))``; PBO is the
    share of splits whose logit is <= 0.

    The Sharpe ratio of a combo over a union of segments is exact from the sums: mean
    over sample std (ddof 1) of the union's bar returns. Conventions: a combo whose
    returns have no variance over a union (it did not trade there) has Sharpe 0 there;
    ties for the IS winner go to the lowest row; the OOS rank counts the combos strictly
    below the winner, plus one (tied combos do not lift the winner's rank).

    Parameters
    ----------
    seg_sum_r, seg_sum_r2 : array_like, shape (n_combos, S), float64
        Per combo and segment, the sum of the bar returns and of their squares. Rows
        with a non-finite value (excluded combos) do not take part.
    seg_n : array_like, shape (S,)
        Bars in each segment. S is even.
    max_splits : int
        Every split of the C(S, S/2) is used when there are at most this many, else a
        seeded random sample of ``max_splits`` distinct splits (``sampled`` says which).
    seed : int
        Seed of that sample.
    chunk : int
        Combos per parallel task (numba threads run over chunks).

    Returns
    -------
    PBOResult

    Examples
    --------
    One combo earns in every segment, the others are noise: it wins in sample and
    out of sample, so nothing is overfit.

    >>> rng = np.random.default_rng(0)
    >>> r = rng.normal(0.0, 0.01, size=(50, 8, 100))
    >>> r[0] += 0.01
    >>> res = pbo(r.sum(axis=2), (r * r).sum(axis=2), np.full(8, 100))
    >>> res.pbo, res.n_splits, res.sampled
    (0.0, 70, False)
    """
    sum_r = np.asarray(seg_sum_r, dtype=np.float64)
    sum_r2 = np.asarray(seg_sum_r2, dtype=np.float64)
    counts = np.asarray(seg_n, dtype=np.float64)
    if sum_r.ndim != 2 or sum_r.shape != sum_r2.shape or counts.shape != sum_r.shape[1:]:
        raise DataError(f"pbo: seg_sum_r and seg_sum_r2 must have shape (n_combos, S) and "
                         f"seg_n shape (S,); got {sum_r.shape}, {sum_r2.shape} and "
                         f"{counts.shape}")
    n_seg = sum_r.shape[1]
    if n_seg < 2 or n_seg % 2:
        raise DataError(f"pbo: the number of segments must be even and at least 2, got "
                         f"{n_seg}")
    keep = np.isfinite(sum_r).all(axis=1) & np.isfinite(sum_r2).all(axis=1)
    rows = np.flatnonzero(keep)
    if len(rows) < 2:
        raise DataError(f"pbo: needs at least two combos with finite segment sums, got "
                         f"{len(rows)}")
    sum_r, sum_r2 = sum_r[rows], sum_r2[rows]
    splits, sampled = _cscv_splits(n_seg, max_splits, seed)
    canon, is_half, oos_half = _canonical_halves(splits, n_seg)
    n_in = np.array([counts[list(h)].sum() for h in canon])
    n_out = counts.sum() - n_in
    if (n_in < 2).any() or (n_out < 2).any():
        raise DataError("pbo: every half of the segments needs at least two bars")
    canon = np.array(canon, dtype=np.int64)

    n_combos = len(rows)
    n_chunks = -(-n_combos // chunk)
    n_halves = 2 * len(canon)
    best = np.empty((n_chunks, n_halves))
    arg = np.empty((n_chunks, n_halves), dtype=np.int64)
    _cscv_best_cpu(sum_r, sum_r2, canon, n_in, n_out, chunk, best, arg)
    pick = np.argmax(best, axis=0)                      # the first chunk of a tie
    half_best = best[pick, np.arange(n_halves)]
    half_arg = arg[pick, np.arange(n_halves)]
    winner = half_arg[is_half]
    sharpe_is = half_best[is_half]
    sharpe_oos = np.empty(len(splits))
    values = np.empty(n_halves)
    for j, (w, b) in enumerate(zip(winner, oos_half)):
        _cscv_combo_cpu(sum_r, sum_r2, w, canon, n_in, n_out, values)  # same arithmetic
        sharpe_oos[j] = values[b]
    threshold = np.full(n_halves, np.nan)               # per half, as an OOS half
    threshold[oos_half] = sharpe_oos
    below = np.zeros((n_chunks, n_halves), dtype=np.int64)
    _cscv_below_cpu(sum_r, sum_r2, canon, n_in, n_out, chunk, threshold, below)
    n_below = below.sum(axis=0)[oos_half]

    omega = (n_below + 1.0) / (n_combos + 1.0)
    logit = np.log(omega / (1.0 - omega))
    slope, intercept = _ols(sharpe_is, sharpe_oos)
    q = np.percentile(logit, [25.0, 50.0, 75.0])
    return PBOResult(
        pbo=float(np.mean(logit <= 0.0)), n_splits=len(splits), sampled=sampled,
        n_combos=n_combos, logit_quartiles=(float(q[0]), float(q[1]), float(q[2])),
        slope=slope, intercept=intercept, is_segments=np.array(splits, dtype=np.int64),
        winner=rows[winner], sharpe_is=sharpe_is, sharpe_oos=sharpe_oos, omega=omega,
        logit=logit)


def _cscv_splits(n_seg: int, max_splits: int, seed: int) -> tuple[list[tuple[int, ...]], bool]:
    """The in-sample halves: all C(S, S/2) in lexicographic order, or a seeded sample
    of ``max_splits`` distinct ones (sorted)."""
    half = n_seg // 2
    total = math.comb(n_seg, half)
    if total <= max_splits:
        return list(itertools.combinations(range(n_seg), half)), False
    rng = np.random.default_rng(seed)
    chosen: set[tuple[int, ...]] = set()
    while len(chosen) < max_splits:
        chosen.add(tuple(sorted(rng.choice(n_seg, half, replace=False).tolist())))
    return sorted(chosen), True


def _canonical_halves(splits, n_seg):
    """The canonical halves (those holding segment 0) the splits use, and each split's
    in- and out-of-sample half as an index into the kernels' halves: ``2 p`` is
    canonical half ``p`` and ``2 p + 1`` its complement."""
    index: dict[tuple[int, ...], int] = {}
    canon: list[tuple[int, ...]] = []
    is_half, oos_half = [], []
    for s in splits:
        comp = tuple(k for k in range(n_seg) if k not in s)
        head, is_comp = (s, 0) if s[0] == 0 else (comp, 1)
        if head not in index:
            index[head] = len(canon)
            canon.append(head)
        is_half.append(2 * index[head] + is_comp)
        oos_half.append(2 * index[head] + 1 - is_comp)
    return canon, np.array(is_half), np.array(oos_half)


@njit(inline="always")
def _sharpe(s, s2, n):
    """Mean over sample std (ddof 1) from the sum ``s`` and the sum of squares ``s2`` of
    ``n`` returns; 0 without variance."""
    mean = s / n
    var = (s2 - s * mean) / (n - 1.0)
    if var > 0.0:
        return mean / math.sqrt(var)
    return 0.0


@njit(inline="always")
def _combo_halves(r, r2, i, canon, n_in, n_out, out):
    """Write combo ``i``'s Sharpe ratio over every canonical half (``out[2 p]``) and its
    complement (``out[2 p + 1]``). Sums run in segment order; a complement's sums are
    the totals less the canonical half's, so each half has one arithmetic whatever
    calls it (ties between combos stay ties)."""
    n_seg = r.shape[1]
    tot = 0.0
    tot2 = 0.0
    for k in range(n_seg):
        tot += r[i, k]
        tot2 += r2[i, k]
    for p in range(canon.shape[0]):
        s = 0.0
        s2 = 0.0
        for k in range(canon.shape[1]):
            s += r[i, canon[p, k]]
            s2 += r2[i, canon[p, k]]
        out[2 * p] = _sharpe(s, s2, n_in[p])
        out[2 * p + 1] = _sharpe(tot - s, tot2 - s2, n_out[p])


@njit(cache=True)
def _cscv_combo_cpu(r, r2, i, canon, n_in, n_out, out):
    """One combo's Sharpe ratio over every half (see :func:`_combo_halves`)."""
    _combo_halves(r, r2, i, canon, n_in, n_out, out)


@njit(cache=True, parallel=True)
def _cscv_best_cpu(r, r2, canon, n_in, n_out, chunk, out_best, out_arg):
    """Per chunk of ``chunk`` combos and per half, the best Sharpe ratio and its combo
    (the first of ties).

    Parameters
    ----------
    r, r2 : ndarray, shape (n, S), float64
        Segment sums of returns and of squared returns.
    canon : ndarray, shape (P, S/2), int64
        The canonical halves' segments.
    n_in, n_out : ndarray, shape (P,), float64
        Bars in each canonical half and in its complement.
    out_best : ndarray, shape (n_chunks, 2 P), float64, written
    out_arg : ndarray, shape (n_chunks, 2 P), int64, written
    """
    n = r.shape[0]
    n_halves = out_best.shape[1]
    for c in prange(out_best.shape[0]):
        values = np.empty(n_halves)
        for h in range(n_halves):
            out_best[c, h] = -np.inf
            out_arg[c, h] = -1
        for i in range(c * chunk, min((c + 1) * chunk, n)):
            _combo_halves(r, r2, i, canon, n_in, n_out, values)
            for h in range(n_halves):
                if values[h] > out_best[c, h]:
                    out_best[c, h] = values[h]
                    out_arg[c, h] = i


@njit(cache=True, parallel=True)
def _cscv_below_cpu(r, r2, canon, n_in, n_out, chunk, threshold, out_count):
    """Per chunk and per half, the combos whose Sharpe ratio there is below
    ``threshold[h]`` (none where it is NaN).

    ``out_count`` : ndarray, shape (n_chunks, 2 P), int64, written (added to).
    """
    n = r.shape[0]
    n_halves = out_count.shape[1]
    for c in prange(out_count.shape[0]):
        values = np.empty(n_halves)
        for i in range(c * chunk, min((c + 1) * chunk, n)):
            _combo_halves(r, r2, i, canon, n_in, n_out, values)
            for h in range(n_halves):
                if values[h] < threshold[h]:
                    out_count[c, h] += 1


def _ols(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Slope and intercept of the least-squares line of y on x (NaN when x is constant)."""
    dx = x - x.mean()
    sxx = float(dx @ dx)
    if not len(x) > 1 or sxx == 0.0:
        return math.nan, math.nan
    slope = float(dx @ (y - y.mean())) / sxx
    return slope, float(y.mean() - slope * x.mean())


def smooth(da: xr.DataArray, radius: int) -> xr.DataArray:
    """The mean of ``da`` over each combo's box of half-width ``radius`` (in grid steps)
    in every parameter dim, NaN-aware.

    Parameter dims are those not in ``NON_PARAM_DIMS`` (symbol, window, sample,
    segment). NaN (excluded, undefined) combos do not count in a neighbour's mean, and
    stay NaN themselves. At the grid's edges the box is cut short. The box sums of the
    values and of the finite-value counts are xarray ``rolling(..., center=True,
    min_periods=1)`` sums along one dim after another; it equals
    ``da.rolling({d: 2 R + 1 for d in params}, center=True, min_periods=1).mean()``
    without its (2 R + 1)^dims copies of the grid.

    >>> da = xr.DataArray([[1.0, 2.0, np.nan, 4.0]], dims=("symbol", "p"))
    >>> smooth(da, 1).values.tolist()
    [[1.5, 1.5, nan, 4.0]]
    """
    if radius < 0:
        raise DataError(f"smooth: radius must be >= 0, got {radius}")
    params = [d for d in da.dims if d not in NON_PARAM_DIMS]
    if radius == 0 or not params:
        return da.copy()
    values = da.where(np.isfinite(da))
    # a box sum is a 1-D rolling sum along each dim in turn: memory O(combos), where one
    # rolling over all dims at once would hold (2 R + 1)^dims values per combo
    total = values.fillna(0.0)
    count = values.notnull().astype(np.float64)
    for d in params:
        total = total.rolling({d: 2 * radius + 1}, center=True, min_periods=1).sum()
        count = count.rolling({d: 2 * radius + 1}, center=True, min_periods=1).sum()
    return (total / count).where(values.notnull()).transpose(*da.dims)


def pareto(data, metrics) -> np.ndarray:
    """The non-dominated rows: no other row is at least as good in every metric and
    strictly better in one. Each metric counts in its own better direction (lower for
    those in ``barsweep.engine.LOWER_IS_BETTER``, higher otherwise; max_drawdown is <= 0,
    so higher is better).

    Parameters
    ----------
    data : pandas.DataFrame or mapping of str to array_like, shape (n,)
    metrics : sequence of str

    Returns
    -------
    ndarray, shape (k,), int
        Positions of the non-dominated rows, ascending. Rows with a NaN metric take no
        part; duplicate rows are all kept.

    >>> pareto({"sharpe": [1.0, 2.0, 1.5], "max_drawdown": [-0.1, -0.3, -0.4]},
    ...        ["sharpe", "max_drawdown"]).tolist()
    [0, 1]
    """
    cols = []
    for name in metrics:
        values = np.asarray(data[name], dtype=np.float64)
        cols.append(-values if name in LOWER_IS_BETTER else values)  # higher is better
    points = np.column_stack(cols)
    candidates = np.flatnonzero(~np.isnan(points).any(axis=1))
    pts = points[candidates]
    # best first, lexicographically: a row is dominated only by rows before it
    order = np.lexsort(tuple(-pts[:, j] for j in range(pts.shape[1] - 1, -1, -1)))
    if pts.shape[1] == 2:
        return np.sort(candidates[order[_front_2d(pts[order])]])
    front = np.empty(len(order), dtype=np.int64)
    n_front = _front_cpu(np.ascontiguousarray(pts[order]), front)
    front = order[front[:n_front]]
    return np.sort(candidates[front])


def _front_2d(pts: np.ndarray) -> np.ndarray:
    """Positions of the non-dominated rows of ``pts`` (shape (n, 2), higher is better,
    sorted best first lexicographically): a row is dominated by an earlier row with a
    larger first value and a second value at least its own, or by an earlier row with
    the same first value and a larger second value (the first of its group)."""
    a, b = pts[:, 0], pts[:, 1]
    if not len(a):
        return np.zeros(0, dtype=np.int64)
    new_group = np.r_[True, a[1:] != a[:-1]]
    group = np.cumsum(new_group) - 1
    first = np.flatnonzero(new_group)
    head_b = b[first]                                  # each group's best second value
    best_before = np.r_[-np.inf, np.maximum.accumulate(head_b)[:-1]]
    dominated = (best_before[group] >= b) | (head_b[group] > b)
    return np.flatnonzero(~dominated)


@njit(cache=True)
def _front_cpu(pts, out_front):
    """The non-dominated rows of ``pts`` (shape (n, k), higher is better, sorted best
    first lexicographically, so that only earlier rows can dominate a row): written to
    ``out_front[:m]``, returns m. Each row is checked against the front found so far."""
    n_front = 0
    for i in range(pts.shape[0]):
        dominated = False
        for j in range(n_front):
            f = out_front[j]
            at_least = True
            better = False
            for k in range(pts.shape[1]):
                if pts[f, k] < pts[i, k]:
                    at_least = False
                    break
                if pts[f, k] > pts[i, k]:
                    better = True
            if at_least and better:
                dominated = True
                break
        if not dominated:
            out_front[n_front] = i
            n_front += 1
    return n_front
