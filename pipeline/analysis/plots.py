"""Pictures of a results store: a heatmap of one metric over two parameters (a line
over one), every other dim reduced, its ticks the grid's values; a walk-forward run's
stitched out-of-sample equity. matplotlib draws on an Agg canvas of its own: no pyplot
state or GUI backend is touched."""

from __future__ import annotations

import os

import numpy as np

from ...engine import LOWER_IS_BETTER, METRICS
from ...errors import SpecError
from ..config.dims import NON_PARAM_DIMS
from .formatting import metric as metric_text
from .formatting import param

#: The most tick labels an axis shows; longer axes label every k-th grid value.
MAX_TICKS = 16

REDUCERS = {"max": np.nanmax, "mean": np.nanmean, "median": np.nanmedian}
#: The most cells a heatmap draws along x and y: about the pixels its axes span in an
#: 800 x 550 figure; a longer axis is drawn in bins of k grid values, each the best.
MAX_BINS = (640, 420)
#: The colour of cells whose combos never traded (no trade at all, metric undefined).
IDLE_COLOUR = "0.72"

#: Metrics with a natural zero: their colour scale is centred there.
CENTRED = frozenset({"total_return", "cagr", "sharpe", "sortino", "calmar", "alpha",
                     "avg_trade_return", "skew"})


def metric_grid(ds, metric: str, x: str, y: str | None = None, *, symbol: str | None = None,
                reduce: str = "max", sample: str | None = None, window: int | None = None):
    """``metric`` over the parameter dims ``x`` (and ``y``): a DataArray with dims
    ``(y, x)`` (or ``(x,)``), every other dim reduced by ``reduce`` (NaN ignored; a cell
    every combo of which is excluded stays NaN).

    Read slab by slab (:func:`~.grids.reduced_grid`: memory bounded by a slab and the
    drawn cells, whatever the grid's size); ``ds``, a whole store's Dataset, may be lazy
    (:func:`~.stream.open_store`, whose pending blocks read as NaN) or in memory.
    """
    import xarray as xr

    from .grids import marked, reduced_grid
    from .kinds import kind_of

    if metric not in ds:
        raise SpecError(f"--metric: no metric {metric!r}; metrics: {', '.join(METRICS)}")
    if reduce not in REDUCERS:
        raise SpecError(f"--reduce: expected one of {', '.join(REDUCERS)}, got {reduce!r}")
    ds = marked(ds)
    if "symbol" in ds[metric].dims:
        symbols = ds["symbol"].values.tolist()
        if symbol is None and len(symbols) > 1:
            raise SpecError(f"--symbol: the store holds {', '.join(symbols)}: choose one")
        if symbol is not None and symbol not in symbols:
            raise SpecError(f"--symbol: no symbol {symbol!r}; symbols: {', '.join(symbols)}")
        symbol = symbol or symbols[0]
    picks = {}  # walk-forward: the window and sample drawn
    for dim, value, flag in (("sample", sample, "--sample"), ("window", window, "--window")):
        if dim in ds[metric].dims:
            picks[dim] = value if value is not None else (
                "test" if dim == "sample" else ds[dim].values[0])
        elif value is not None:
            raise SpecError(f"{flag}: the store has no {dim} dim (not a walk-forward run)")
    if kind_of(ds).drawn:  # a search store: its combos binned on x and y
        from .search_views import search_grid

        return search_grid(ds.sel(picks), metric, x, y, symbol, reduce)
    if "symbol" in ds[metric].dims:
        ds = ds.sel(symbol=[symbol])
    ds = ds.sel({dim: [value] for dim, value in picks.items()})
    dims = [d for d in ds[metric].dims if d not in NON_PARAM_DIMS]
    kept = [x] if y is None else [y, x]
    for name, flag in zip(kept[::-1], ("--x", "--y"), strict=False):
        if name not in dims:
            raise SpecError(f"{flag}: no parameter {name!r}; parameters: {', '.join(dims)}")
    if y is not None and x == y:
        raise SpecError("--x and --y name the same parameter")
    reduced = reduced_grid(ds, metric, kept, reduce)
    return xr.DataArray(reduced, dims=kept, coords={d: ds[d].values for d in kept},
                        name=metric)


def bin_best(values: np.ndarray, factors: tuple[int, int], better_low: bool) -> np.ndarray:
    """``values`` (2-D) in bins of ``factors`` (rows, columns) cells, each bin the best
    of its finite cells (lowest when ``better_low``), NaN when it has none; no warning.

    >>> bin_best(np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, 2.0]]), (2, 2), False)
    array([[1., 3.]])
    """
    fy, fx = factors
    ny, nx = -(-values.shape[0] // fy), -(-values.shape[1] // fx)
    padded = np.full((ny * fy, nx * fx), np.nan)
    padded[:values.shape[0], :values.shape[1]] = np.where(np.isfinite(values), values, np.nan)
    cells = padded.reshape(ny, fy, nx, fx)
    return (np.fmin if better_low else np.fmax).reduce(cells, axis=(1, 3))  # NaN-skipping


def bin_factors(shape: tuple[int, int]) -> tuple[int, int]:
    """Grid cells per drawn bin along (y, x): 1 up to :data:`MAX_BINS` cells."""
    return tuple(-(-n // most) for n, most in zip(shape, MAX_BINS[::-1], strict=True))


def idle_cells(ds, x: str, y: str | None, **where) -> np.ndarray | None:
    """Which cells of :func:`metric_grid` ``(ds, ..., x, y, **where)`` never traded:
    ``n_trades`` 0 in every combo of the cell (True), NaN-excluded ones False; None
    for a store without ``n_trades``."""
    if "n_trades" not in ds:
        return None
    trades = metric_grid(ds, "n_trades", x, y, reduce="max", **where).values
    return trades == 0


def plot_heatmap(grid, path: str | os.PathLike | None, *, title: str | None = None,
                 idle=None):
    """Draw :func:`metric_grid`'s result as a PNG: a heatmap with a colour bar (centred
    at 0 for metrics with a natural zero that take both signs), the best cell outlined;
    a line when the grid has one dim. A grid with more cells than :data:`MAX_BINS` is
    drawn in bins, each its best cell (:func:`bin_best`). Cells the constraints exclude
    are blank (white); cells whose combos never traded (``idle``, bool like ``grid``,
    e.g. ``n_trades == 0``) grey, with a legend. The ticks are the grid's values as it
    wrote them (every k-th when more labels would crowd the axis: :func:`_grid_ticks`).
    Returns the matplotlib Figure, saved to ``path`` (a file name or a binary file)
    unless it is None."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import TwoSlopeNorm
    from matplotlib.figure import Figure

    metric = grid.name
    values = grid.values
    better_low = metric in LOWER_IS_BETTER
    fig = Figure(figsize=(8, 5.5) if grid.ndim == 2 else (8, 4), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    finite = np.isfinite(values)
    best = None
    if finite.any():
        pick = np.where(finite, values, np.inf if better_low else -np.inf)
        best = np.unravel_index(np.argmin(pick) if better_low else np.argmax(pick),
                                values.shape)
    if grid.ndim == 1:
        x = grid[grid.dims[0]].values
        ax.plot(x, values, marker="o", ms=3, lw=1.2, color="tab:blue")
        if best is not None:
            ax.plot(x[best[0]], values[best], marker="*", ms=14, color="tab:red",
                    label=f"best {param(x[best[0]])}: {metric_text(metric, values[best])}")
            ax.legend(loc="best", frameon=False)
        if metric in CENTRED:
            ax.axhline(0, color="0.5", lw=0.8)
        _grid_ticks(ax.xaxis, x)
        ax.set_xlabel(grid.dims[0])
        ax.set_ylabel(metric)
        ax.grid(alpha=0.3)
    else:
        ydim, xdim = grid.dims
        xs, ys = grid[xdim].values, grid[ydim].values
        lo, hi = (np.nanmin(values), np.nanmax(values)) if finite.any() else (0.0, 1.0)
        centred = metric in CENTRED and lo < 0 < hi
        norm = TwoSlopeNorm(0.0, lo, hi) if centred else None
        cmap = "RdYlGn_r" if better_low else "RdYlGn"
        mesh = _draw_cells(ax, values, xs, ys, better_low, idle, cmap=cmap, norm=norm)
        fig.colorbar(mesh, ax=ax, label=metric + (" (0 centred)" if centred else ""))
        handles = _cell_legend(values, idle, **({"blank": grid.attrs["blank"]}
                                                if "blank" in grid.attrs else {}))
        if best is not None:
            handles.insert(0, ax.plot(
                xs[best[1]], ys[best[0]], marker="o", ms=12, mfc="none", mec="black", mew=2,
                ls="none", label=f"best: {xdim} {param(xs[best[1]])}, {ydim} "
                                 f"{param(ys[best[0]])}: {metric_text(metric, values[best])}")[0])
        if handles:
            ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.12),
                      frameon=False, ncol=len(handles))
        _grid_ticks(ax.xaxis, xs)
        _grid_ticks(ax.yaxis, ys)
        ax.set_xlabel(xdim)
        ax.set_ylabel(ydim)
    ax.set_title(title or metric)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path if hasattr(path, "write") else os.fspath(path), format="png")
    return fig


def _draw_cells(ax, values, xs, ys, better_low: bool, idle, **colours):
    """The heatmap's cells, binned past :data:`MAX_BINS`: idle bins (every cell idle or
    excluded, one at least idle) grey under the metric's colours, excluded ones white."""
    factors = bin_factors(values.shape)
    ey, ex = _edges(ys), _edges(xs)
    ey = ey[np.r_[0:len(ys):factors[0], len(ys)]]
    ex = ex[np.r_[0:len(xs):factors[1], len(xs)]]
    ax.set_facecolor("white")  # excluded combos: blank
    if idle is not None and np.any(idle):
        flags = np.where(np.asarray(idle, dtype=bool), 1.0, np.nan)
        ax.pcolormesh(ex, ey, np.ma.masked_invalid(bin_best(flags, factors, False)),
                      cmap=_one_colour(IDLE_COLOUR), shading="flat")
    binned = bin_best(values, factors, better_low)
    return ax.pcolormesh(ex, ey, np.ma.masked_invalid(binned), shading="flat", **colours)


def _one_colour(colour: str):
    from matplotlib.colors import ListedColormap

    return ListedColormap([colour])


def _cell_legend(values: np.ndarray, idle, blank: str = "excluded by the constraints") -> list:
    """Legend patches for the cells without a value: never traded, ``blank`` (excluded,
    or not drawn by a search)."""
    from matplotlib.patches import Patch

    idle = np.zeros(values.shape, bool) if idle is None else np.asarray(idle, dtype=bool)
    empty = ~np.isfinite(values)
    handles = []
    if (empty & idle).any():
        handles.append(Patch(facecolor=IDLE_COLOUR, edgecolor="0.4", label="never traded"))
    if (empty & ~idle).any():
        handles.append(Patch(facecolor="white", edgecolor="0.4", label=blank))
    return handles


def _grid_ticks(axis, values: np.ndarray) -> None:
    """Ticks at the grid's values, labelled as the grid wrote them: every k-th, k the
    smallest that keeps at most :data:`MAX_TICKS` labels and leaves each label room
    along the axis (:func:`tick_every`)."""
    labels = [param(v) for v in values]
    ax = axis.axes
    horizontal = axis is ax.xaxis
    room = ax.bbox.width if horizontal else ax.bbox.height
    em = _tick_em(ax.figure.dpi)
    every = tick_every(len(labels), room, max(map(len, labels)) * 0.64 * em + 0.5 * em
                       if horizontal else 1.6 * em)
    shown = np.asarray(values)[::every]
    axis.set_ticks(np.asarray(shown, dtype=float), labels[::every])


def tick_every(n: int, room: float, per_label: float) -> int:
    """Label every k-th of ``n`` values along ``room`` pixels, each label taking
    ``per_label`` pixels: the smallest k that fits, and leaves at most
    :data:`MAX_TICKS` labels.

    >>> tick_every(48, 500.0, 26.0), tick_every(2500, 500.0, 44.0), tick_every(5, 500.0, 9e9)
    (3, 228, 5)
    """
    most = max(1, min(MAX_TICKS, int(room // per_label)))
    return max(1, -(-n // most))


def _tick_em(dpi: float) -> float:
    """The tick labels' font size in pixels at ``dpi``."""
    from matplotlib import rcParams
    from matplotlib.font_manager import FontProperties

    return FontProperties(size=rcParams["xtick.labelsize"]).get_size_in_points() * dpi / 72


def best_title(ds, result, *, rank: int = 1, by: str = "sharpe", where: str | None = None,
               symbol: str | None = None, window: int | None = None,
               sample: str | None = None) -> str:
    """The title of :func:`barsweep.pipeline.analysis.rebuild.best_backtest`'s picture: the
    symbol, strategy and parameters of combo ``rank`` of the ranking (of a walk-forward
    store's ``window`` and ``sample``, named), then its metrics."""
    from .rank import rank as ranked
    from .rebuild import window_view

    view, window, sample = window_view(ds, window, sample)
    row = ranked(view, by=by, top=rank, where=where, symbol=symbol).iloc[rank - 1]
    title = combo_title(view, row, result, rank=rank, by=by)
    return title if window is None else f"window {window} {sample}: {title}"


def combo_title(ds, row, result, *, rank: int, by: str) -> str:
    """The title of a ranked combo's picture: ``row`` (a row of a ranking) names its
    symbol and parameters; ``result`` (its rebuilt backtest) gives the metrics."""
    from .formatting import metrics_text, params_text
    from .rank import combo_params
    from .rebuild import stored_spec

    spec, _ = stored_spec(ds, "plot best")
    params = {p: row[p] for p in combo_params(ds)}
    return (f"{row['symbol']} {spec.strategy_name} {params_text(params)} (#{rank} by {by}): "
            f"{metrics_text(result.metrics)}")


def plot_walkforward(wf, path: str | os.PathLike | None, *, hold=None,
                     title: str | None = None):
    """Draw a walk-forward's stitched out-of-sample equity as a PNG: the chained test
    runs of the chosen combos (:func:`barsweep.pipeline.analysis.walkforward.walkforward`), buy
    and hold over the same bars (``hold``: an equity Series, optional), each window's
    test part shaded and labelled with its combo; drawdown below. Returns the Figure,
    saved to ``path`` unless it is None."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from .formatting import metrics_text, params_text

    fig = Figure(figsize=(12, 6.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax, ax_dd = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1.2]})
    equity = wf.equity
    x = _x(equity.index)
    ax.plot(x, equity.to_numpy(), color="tab:purple", lw=1.0, label="out of sample "
            f"(best train {wf.by})")
    if hold is not None and len(hold):
        ax.plot(_x(hold.index), hold.to_numpy(), color="0.55", lw=0.8, label="buy and hold")
    frame = wf.windows
    params = [c for c in frame.columns if c not in _WINDOW_COLUMNS
              and not c.startswith(("train_", "test_"))]
    for k, (w, row) in enumerate(frame[frame["chosen"]].iterrows()):
        start, end = _x_at(row["test_start"]), _x_at(row["test_end"])
        ax.axvspan(start, end, color="tab:blue" if k % 2 else "tab:green", alpha=0.07, lw=0)
        ax.text(start, 1.0, f" w{w}: {params_text({p: row[p] for p in params})}",
                transform=ax.get_xaxis_transform(), va="top", fontsize="x-small",
                rotation=90 if len(frame) > 6 else 0)
    ax.set_ylabel("equity")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize="small", framealpha=0.8)
    values = equity.to_numpy()
    if len(values):
        drawdown = (values / np.maximum.accumulate(values) - 1.0) * 100.0
        ax_dd.fill_between(x, drawdown, 0.0, color="tab:red", alpha=0.35, lw=0)
    ax_dd.set_ylabel("drawdown (%)")
    ax_dd.grid(alpha=0.3)
    s = wf.stitched
    fig.suptitle(title or f"{wf.symbol}: walk-forward out of sample, {s['n_windows']} of "
                 f"{s['windows_total']} windows: {metrics_text(s)}")
    if path is not None:
        fig.savefig(path if hasattr(path, "write") else os.fspath(path), format="png",
                    dpi=100)
    return fig


_WINDOW_COLUMNS = frozenset({"chosen", "combo", "train_start", "train_end", "test_start",
                             "test_end"})


def _x(index) -> np.ndarray:
    """Plot coordinates of an index: naive UTC times, or bar numbers."""
    import pandas as pd

    if isinstance(index, pd.DatetimeIndex):
        if index.tz is not None:
            index = index.tz_convert("UTC").tz_localize(None)
        return index.to_numpy(dtype="datetime64[ns]")
    return np.asarray(index)


def _x_at(value):
    """One time (or bar number) as a plot coordinate."""
    import pandas as pd

    if isinstance(value, int | np.integer):
        return value
    stamp = pd.Timestamp(value)
    return (stamp.tz_convert("UTC").tz_localize(None) if stamp.tz else stamp).to_datetime64()


def _edges(centres: np.ndarray) -> np.ndarray:
    """Cell edges around sorted axis values (half-way between neighbours)."""
    c = np.asarray(centres, dtype=float)
    if len(c) == 1:
        return np.array([c[0] - 0.5, c[0] + 0.5])
    mid = (c[:-1] + c[1:]) / 2
    return np.concatenate([[c[0] - (mid[0] - c[0])], mid, [c[-1] + (c[-1] - mid[-1])]])

