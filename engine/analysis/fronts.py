"""The kernel of a Pareto front in more than two dimensions
(:func:`barsweep.pipeline.analysis.robust.pareto`)."""

from __future__ import annotations

from numba import njit


@njit(cache=True)
def front_cpu(pts, out_front):
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
