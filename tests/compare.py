"""How fast kernels are held to the reference: metrics equal to 1e-12, NaN where NaN."""

import math

import pytest

from barsweep.engine import METRICS

#: alpha compounds a per-bar mean over ppy bars, ``(1 + m)**ppy - 1``, which multiplies
#: the rounding of ``m`` by about ppy (8760 for hourly bars): it gets a wider tolerance.
RTOL = {"alpha": 1e-8}


def assert_metrics_match(ours, ref, rtol=1e-12, atol=1e-12, where=""):
    for name in METRICS:
        a, b = ours[name], ref[name]
        if math.isnan(b):
            assert math.isnan(a), (where, name, a, b)
        else:
            assert a == pytest.approx(b, rel=RTOL.get(name, rtol), abs=atol), (where, name, a, b)
