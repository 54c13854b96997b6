"""A search store (dims ``symbol``, ``combo``) read as a grid's would be: ranked on its
last rung with the parameters as columns, its combos binned on two parameters for a
heatmap, a combo found by its parameter values.

The combos drawn are scattered over the grid's box; a heatmap cell holds the combos
whose two parameters take its values (``reduce`` over them: the best, the mean, the
median), only those that ran every bar (the last rung) unless ``rung`` says otherwise.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping

import numpy as np
import pandas as pd
import xarray as xr

from ...errors import SpecError


def with_params(ds: xr.Dataset, frame: pd.DataFrame) -> pd.DataFrame:
    """A search store's frame with each combo's parameters after ``combo``."""
    if "combo" not in frame:
        return frame
    at = frame.columns.get_loc("combo") + 1
    for k, name in enumerate(search_params(ds)):
        frame.insert(at + k, name, ds[name].values[frame["combo"].to_numpy()])
    return frame


def search_params(ds: xr.Dataset) -> list[str]:
    """A search store's parameters, in the grid's order (coordinates along ``combo``)."""
    import json

    names = ds.attrs.get("search_params", [])
    return json.loads(names) if isinstance(names, str) else list(names)


def last_rung(ds) -> int:
    """The rung whose combos ran every bar."""
    return int(ds.attrs.get("search_rungs", 1)) - 1


def search_grid(ds, metric: str, x: str, y: str | None, symbol: str | None,
                reduce: str = "max"):
    """``metric`` of a search store's last-rung combos of ``symbol`` over the values of
    parameters ``x`` (and ``y``) they take: a DataArray with dims ``(y, x)`` (or
    ``(x,)``), each cell ``reduce`` of its combos (NaN where none was drawn)."""
    import xarray as xr

    params = search_params(ds)
    for name, flag in ((x, "--x"), (y, "--y")):
        if name is not None and name not in params:
            raise SpecError(f"{flag}: no parameter {name!r}; parameters: {', '.join(params)}")
    if y is not None and x == y:
        raise SpecError("--x and --y name the same parameter")
    one = ds.sel(symbol=symbol) if symbol is not None else ds.isel(symbol=0)
    ran = np.asarray(one["rung"].values) == last_rung(ds)
    kept = [x] if y is None else [y, x]
    frame = pd.DataFrame({name: np.asarray(one[name].values)[ran] for name in kept})
    frame["value"] = np.asarray(one[metric].values, dtype=np.float64)[ran]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        cells = frame.groupby(kept)["value"].agg(reduce)
    from ..config.model import parse_spec

    grid_axes = dict(parse_spec(ds.attrs["spec"], source="the results store's spec",
                                modules=False).param_grid.axes)
    axes = {name: grid_axes[name] for name in kept}  # the grid's values: true spacing
    full = cells.reindex(pd.MultiIndex.from_product([axes[n] for n in kept], names=kept)
                         if len(kept) > 1 else pd.Index(axes[x], name=x))
    values = full.to_numpy().reshape([len(axes[n]) for n in kept])
    return xr.DataArray(values, dims=kept, coords=axes, name=metric,
                        attrs={"blank": "not drawn by the search, or excluded"})


def search_point(ds, asked: Mapping, names: list[str]) -> dict:
    """The combo of a search store whose parameters equal ``asked`` (text or numbers),
    as ``{name: value}``; refused when a name is unknown or missing, or the search did
    not draw that combo."""
    unknown = [name for name in asked if name not in names]
    if unknown:
        raise SpecError(f"--params: {unknown[0]!r} is not a parameter of the search; its "
                        f"parameters: {', '.join(names)}")
    missing = [name for name in names if name not in asked]
    if missing:
        raise SpecError(f"--params: give {' and '.join(missing)} too")
    found = combo_at(ds, asked)
    return {name: ds[name].values[found].item() for name in names}


def combo_at(ds, params: Mapping) -> int:
    """The position along ``combo`` of the combo whose parameters equal ``params``
    (text or numbers); SpecError when the search did not draw it."""
    hit = np.ones(ds.sizes["combo"], dtype=bool)
    for name in search_params(ds):
        try:
            value = float(params[name])
        except (KeyError, TypeError, ValueError):
            value = math.nan
        hit &= np.asarray(ds[name].values, dtype=np.float64) == value
    found = np.flatnonzero(hit)
    if not len(found):
        said = ", ".join(f"{k}={v}" for k, v in params.items())
        raise SpecError(f"--params {said}: not among the {ds.sizes['combo']:,} combos the "
                        f"search drew; `barsweep rank` lists them")
    return int(found[0])


def search_pairs(ds, by: str) -> list[tuple[str, str | None]]:
    """A search store's parameter pairs for its heatmaps, as ``report`` orders a grid's
    (:func:`~.report.important_pairs`): by the spread of ``by``'s best value per
    parameter value, over the last rung's combos of every symbol."""
    ran = np.asarray(ds["rung"].values) == last_rung(ds)
    params = search_params(ds)
    frame = pd.DataFrame({name: np.broadcast_to(np.asarray(ds[name].values),
                                                ran.shape)[ran] for name in params})
    value = np.asarray(ds[by].values, dtype=np.float64)[ran]
    frame["value"] = np.where(np.isfinite(value), value, np.nan)

    def spread(name: str) -> float:
        best = frame.groupby(name)["value"].max()
        gap = float(best.max() - best.min()) if len(best) else 0.0
        return gap if np.isfinite(gap) else 0.0

    ranked = sorted(params, key=lambda p: -spread(p))
    if len(ranked) == 1:
        return [(ranked[0], None)]
    return [(ranked[0], other) for other in ranked[1:3]]
