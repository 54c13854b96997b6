"""How fast kernels are held to the reference: metrics equal to 1e-12, NaN where NaN."""

import math

import pytest

from barsweep.engine import METRICS

#: alpha compounds a per-bar mean over ppy bars, ``(1 + m)**ppy - 1``, and cagr (and
#: calmar = cagr / |max_drawdown|) raises the growth to ``ppy / n_bars``: both multiply
#: the last-bit rounding of their base by that exponent (up to 8760 for hourly bars), and
#: a result near 0 turns it into a large relative error. They get wider tolerances.
#: skew and kurtosis are expanded from raw power sums in one pass (the reference takes
#: moments about the mean): the expansion cancels terms of the mean's size, so they are
#: held to 1e-9 (the issue's bound against scipy).
RTOL = {"alpha": 1e-8, "cagr": 1e-9, "calmar": 1e-9, "skew": 1e-9, "kurtosis": 1e-9}


def assert_metrics_match(ours, ref, rtol=1e-12, atol=1e-12, where=""):
    for name in METRICS:
        a, b = ours[name], ref[name]
        if math.isnan(b):
            assert math.isnan(a), (where, name, a, b)
        else:
            assert a == pytest.approx(b, rel=RTOL.get(name, rtol), abs=atol), (where, name, a, b)
