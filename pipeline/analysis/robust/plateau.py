"""Parameter plateaus: a metric smoothed over each combo's neighbours in the grid, so that
a ranking prefers a combo whose neighbours do well too over a lone spike.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from ....errors import DataError
from ...config.dims import NON_PARAM_DIMS

__all__ = ["smooth"]


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
    # an empty box (count 0) divides by NaN, not 0: NaN without numpy's warning, which
    # dask's chunks (a lazily read store) would otherwise raise outside xarray's errstate
    return (total / count.where(count > 0)).where(values.notnull()).transpose(*da.dims)
