"""The standard normal CDF as a kernel
(:func:`barsweep.pipeline.analysis.robust.normal_cdf`)."""

from __future__ import annotations

import math

from numba import njit


@njit(cache=True)
def normal_cdf_cpu(x, out):
    """``out[i] = Phi(x[i])`` (shape (n,), float64; ``out`` written)."""
    for i in range(x.shape[0]):
        out[i] = 0.5 * math.erfc(-x[i] / math.sqrt(2.0))
