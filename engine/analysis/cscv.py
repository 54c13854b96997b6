"""The kernels of CSCV, the probability of backtest overfitting
(:func:`barsweep.pipeline.analysis.robust.pbo`): each combo's Sharpe ratio over every
half of the segments, the best combo per half and the combos below a threshold."""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange


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
def cscv_combo_cpu(r, r2, i, canon, n_in, n_out, out):
    """One combo's Sharpe ratio over every half (see :func:`_combo_halves`)."""
    _combo_halves(r, r2, i, canon, n_in, n_out, out)


@njit(cache=True, parallel=True)
def cscv_best_cpu(r, r2, canon, n_in, n_out, chunk, out_best, out_arg):
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
def cscv_below_cpu(r, r2, canon, n_in, n_out, chunk, threshold, out_count):
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
