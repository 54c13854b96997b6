"""The probabilistic and deflated Sharpe ratios (Bailey & Lopez de Prado 2012, 2014),
and the ``psr`` and ``dsr`` columns of a results store.

Sharpe ratios here are per bar (not annualised) unless a name says otherwise; kurtosis
is raw (a normal distribution has 3). The formulas and the conventions chosen are in
docs/ROBUST.md.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import xarray as xr

from ....engine.analysis import normal_cdf_cpu
from ....errors import SpecError
from ...config.dims import NON_PARAM_DIMS

__all__ = ["EULER_GAMMA", "deflated_sharpe", "dsr_columns", "expected_max_sharpe",
           "has_dsr_inputs", "normal_cdf", "probabilistic_sharpe"]

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
    normal_cdf_cpu(x.ravel(), out.reshape(-1))
    return out if out.ndim else out[()]


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
        their per-bar Sharpe ratios, sharpe / sqrt(periods_per_year). In a search store
        (a ``rung`` variable) N counts every combo evaluated (``n_trades`` defined: any
        rung, its Sharpe ratio defined or not), V the finite Sharpe ratios of the
        combo's own rung only (measured on the same bars), and the returns behind each
        Sharpe ratio are ``bars_run``.
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
    if "rung" in ds.data_vars:  # a search: the variance over the combos of each rung
        n_trials = ds["n_trades"].notnull().sum(params)
        rung = ds["rung"].compute()
        sharpe_var = xr.full_like(sr, np.nan)
        for r in np.unique(rung.values[np.isfinite(rung.values)]):
            same = rung == r
            sharpe_var = sharpe_var.where(~same, sr.where(same).var(params, ddof=1))
        n_obs = ds["bars_run"].compute()
    else:
        sharpe_var = sr.var(params, ddof=1)
        n_obs = ds["n_bars"].compute()
    sr0 = xr.apply_ufunc(expected_max_sharpe, n_trials, sharpe_var)
    psr = xr.apply_ufunc(probabilistic_sharpe, sr, n_obs, skew, kurtosis)
    dsr = xr.apply_ufunc(probabilistic_sharpe, sr, n_obs, skew, kurtosis, sr0)
    return psr.rename("psr"), dsr.rename("dsr")
