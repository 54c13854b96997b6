"""The probability of backtest overfitting by combinatorially symmetric cross-validation
(CSCV, Bailey, Borwein, Lopez de Prado & Zhu 2015), from per-segment sums of bar
returns; numba kernels run over chunks of combos in parallel.

Sharpe ratios here are per bar (not annualised). The conventions chosen are in
docs/ROBUST.md.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from ....engine.analysis import cscv_below_cpu, cscv_best_cpu, cscv_combo_cpu
from ....errors import DataError

__all__ = ["PBOResult", "pbo"]


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
    sum_r, sum_r2, counts, rows = _finite_sums(seg_sum_r, seg_sum_r2, seg_n)
    plan = cscv_plan(counts, max_splits, seed)
    best, arg = half_best(plan, sum_r, sum_r2, chunk)
    winner = arg[plan.is_half]
    sharpe_oos = half_sharpes(plan, sum_r, sum_r2, winner)
    threshold = np.full(len(best), np.nan)              # per half, as an OOS half
    threshold[plan.oos_half] = sharpe_oos
    n_below = count_below(plan, sum_r, sum_r2, threshold, chunk)[plan.oos_half]
    return cscv_result(plan, rows[winner], best[plan.is_half], sharpe_oos, n_below,
                       len(rows))


@dataclass(frozen=True)
class CSCVPlan:
    """The splits of a CSCV and the halves its kernels compute.

    Attributes
    ----------
    splits : list of tuple of int
        The in-sample segments of each split.
    sampled : bool
    canon : ndarray, shape (P, S/2), int64
        The canonical halves (those holding segment 0).
    is_half, oos_half : ndarray, shape (n_splits,), int
        Each split's in- and out-of-sample half: ``2 p`` is canonical half ``p``,
        ``2 p + 1`` its complement.
    n_in, n_out : ndarray, shape (P,), float64
        Bars in each canonical half and in its complement.
    """

    splits: list
    sampled: bool
    canon: np.ndarray
    is_half: np.ndarray
    oos_half: np.ndarray
    n_in: np.ndarray
    n_out: np.ndarray


def cscv_plan(counts: np.ndarray, max_splits: int, seed: int) -> CSCVPlan:
    """The CSCV splits of segments with ``counts`` bars each (see :func:`pbo`);
    DataError when a half holds fewer than two bars."""
    n_seg = len(counts)
    splits, sampled = _cscv_splits(n_seg, max_splits, seed)
    canon, is_half, oos_half = _canonical_halves(splits, n_seg)
    n_in = np.array([counts[list(h)].sum() for h in canon])
    n_out = counts.sum() - n_in
    if (n_in < 2).any() or (n_out < 2).any():
        raise DataError("pbo: every half of the segments needs at least two bars")
    return CSCVPlan(splits, sampled, np.array(canon, dtype=np.int64), is_half, oos_half,
                    n_in, n_out)


def half_best(plan: CSCVPlan, sum_r, sum_r2, chunk: int = 4096):
    """Per half, the best Sharpe ratio of the rows of ``sum_r`` and its row (the first of
    ties; -inf and -1 without rows)."""
    n_halves = 2 * len(plan.canon)
    n_chunks = max(1, -(-len(sum_r) // chunk))
    best = np.empty((n_chunks, n_halves))
    arg = np.empty((n_chunks, n_halves), dtype=np.int64)
    cscv_best_cpu(sum_r, sum_r2, plan.canon, plan.n_in, plan.n_out, chunk, best, arg)
    pick = np.argmax(best, axis=0)                      # the first chunk of a tie
    return best[pick, np.arange(n_halves)], arg[pick, np.arange(n_halves)]


def half_sharpes(plan: CSCVPlan, sum_r, sum_r2, winner: np.ndarray) -> np.ndarray:
    """Row ``winner[j]``'s Sharpe ratio over split ``j``'s out-of-sample half."""
    out = np.empty(len(winner))
    values = np.empty(2 * len(plan.canon))
    for j, (w, b) in enumerate(zip(winner, plan.oos_half)):
        cscv_combo_cpu(sum_r, sum_r2, w, plan.canon, plan.n_in, plan.n_out, values)
        out[j] = values[b]
    return out


def count_below(plan: CSCVPlan, sum_r, sum_r2, threshold, chunk: int = 4096):
    """Per half, the rows whose Sharpe ratio there is below ``threshold`` (none where it
    is NaN)."""
    n_chunks = max(1, -(-len(sum_r) // chunk))
    below = np.zeros((n_chunks, len(threshold)), dtype=np.int64)
    cscv_below_cpu(sum_r, sum_r2, plan.canon, plan.n_in, plan.n_out, chunk, threshold,
                    below)
    return below.sum(axis=0)


def cscv_result(plan: CSCVPlan, winner, sharpe_is, sharpe_oos, n_below,
                n_combos: int) -> PBOResult:
    """The :class:`PBOResult` of the splits' winners (rows), their Sharpe ratios and the
    combos below them out of sample, among ``n_combos``."""
    omega = (n_below + 1.0) / (n_combos + 1.0)
    logit = np.log(omega / (1.0 - omega))
    slope, intercept = _ols(sharpe_is, sharpe_oos)
    q = np.percentile(logit, [25.0, 50.0, 75.0])
    return PBOResult(
        pbo=float(np.mean(logit <= 0.0)), n_splits=len(plan.splits), sampled=plan.sampled,
        n_combos=n_combos, logit_quartiles=(float(q[0]), float(q[1]), float(q[2])),
        slope=slope, intercept=intercept, is_segments=np.array(plan.splits, dtype=np.int64),
        winner=winner, sharpe_is=sharpe_is, sharpe_oos=sharpe_oos, omega=omega,
        logit=logit)


def _finite_sums(seg_sum_r, seg_sum_r2, seg_n):
    """The segment sums of the combos that take part (every sum finite) as float64
    arrays, the bars per segment, and those combos' rows; DataError for arrays of the
    wrong shapes, an odd number of segments, or fewer than two combos."""
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
    return sum_r[rows], sum_r2[rows], counts, rows


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


def _ols(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Slope and intercept of the least-squares line of y on x (NaN when x is constant)."""
    dx = x - x.mean()
    sxx = float(dx @ dx)
    if not len(x) > 1 or sxx == 0.0:
        return math.nan, math.nan
    slope = float(dx @ (y - y.mean())) / sxx
    return slope, float(y.mean() - slope * x.mean())
