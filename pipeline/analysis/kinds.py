"""The kind of a results store, read once from its dims and attributes.

A store is made by one of the run's modes and their compositions, along three facets
that vary independently: whose runs it holds (each symbol's, or a portfolio's one
account over its members), over which bars (every bar, or walk-forward windows' train
and test samples), and which combos (a grid's box along one dim per parameter, or a
search's drawn combos along ``combo``, ranked rung by rung). :func:`kind_of` is the one
place that tells them from a store; the views (rank, trades, rebuild, walkforward,
report, heatmaps, buy and hold) ask the :class:`StoreKind` it returns, and what differs
between kinds in how a view reads a store (a combo's cell and its bars, the combos a
choice is made among, a view a kind cannot have) is the kind's to say.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np

from ...errors import ResultsError, SpecError

__all__ = ["StoreKind", "kind_of"]


@dataclass(frozen=True)
class StoreKind:
    """What made a results store.

    Attributes
    ----------
    portfolio : bool
        One account over several members (the one symbol ``portfolio``; the members'
        variables over ``member``).
    windows : int
        Walk-forward windows (the ``window`` and ``sample`` dims); 0: every bar.
    search : str
        ``grid`` (a box, one dim per parameter), or the search's method (``random``,
        ``sobol``, ``halving``: drawn combos along ``combo``).
    rungs : int
        The search's rungs (1 for a grid; 0 for drawn combos without their ``rung``).
    params : tuple of str
        The parameters, in the grid's order: dims of a grid, coordinates along
        ``combo`` of a search.
    """

    portfolio: bool
    windows: int
    search: str
    rungs: int
    params: tuple[str, ...]

    @property
    def walk_forward(self) -> bool:
        return self.windows > 0

    @property
    def drawn(self) -> bool:
        """Whether its combos were drawn (a search store: one ``combo`` dim)."""
        return self.search != "grid"

    @property
    def combo_dims(self) -> tuple[str, ...]:
        """The dims its combos lie along."""
        return ("combo",) if self.drawn else self.params

    def describe(self) -> str:
        """The kind in words, e.g. ``halving search in walk-forward windows over a
        portfolio``."""
        what = "grid" if not self.drawn else f"{self.search} search"
        where = " in walk-forward windows" if self.walk_forward else ""
        whose = " over a portfolio" if self.portfolio else ""
        return what + where + whose

    def ranked(self, where: str | None, rung: int | None = None) -> str | None:
        """``where`` limited to the combos a ranking or a choice is among: a search's
        whose last rung is ``rung`` (default the last: every bar of its lane); as it
        is for a grid (where ``rung`` is refused)."""
        if not self.drawn or self.rungs < 1:
            if rung is not None:
                raise SpecError("--rung: not a search store (no rungs)")
            return where
        rung = self.rungs - 1 if rung is None else rung
        if not 0 <= rung < self.rungs:
            raise SpecError(f"--rung: the search ran rungs 0 to {self.rungs - 1}, got {rung}")
        limit = f"rung == {rung}"
        return limit if not where else f"({limit}) and ({where})"

    def ranked_vars(self) -> tuple[str, ...]:
        """The variables besides the metrics that a ranking reads and shows: a search's
        ``rung`` and ``bars_run``."""
        return ("rung", "bars_run") if self.drawn and self.rungs else ()

    def combo_at(self, ds, flat: int) -> dict:
        """The parameters of the combo at flat position ``flat`` along its combo dims
        (C order), as plain values."""
        if self.drawn:
            return {p: _plain(ds[p].values[flat]) for p in self.params}
        index = np.unravel_index(flat, tuple(ds.sizes[d] for d in self.params))
        return {p: _plain(ds[p].values[i]) for p, i in zip(self.params, index, strict=True)}

    def cell(self, ds, symbol: str, params: dict, what: str, window: int | None = None,
             sample: str | None = None, n_bars: int = 0):
        """The store's cell of combo ``params`` of ``symbol`` (at a walk-forward
        ``window`` and ``sample``; a portfolio's member variables keep their ``member``
        dim) and the bars it ran as a span of the ``n_bars`` bars (None: every bar): a
        window's sample, and in a search store the most recent ``bars_run`` of those
        (the bars its last rung ran). ResultsError where the search never ran it."""
        at = {} if window is None else {"window": window, "sample": sample}
        span = None if window is None else (
            int(ds[f"{sample}_start_bar"].sel(window=window)),
            int(ds[f"{sample}_end_bar"].sel(window=window)))
        if not self.drawn:
            return ds.sel(symbol=symbol, **at, **params), span
        from .search_views import combo_at

        cell = ds.isel(combo=combo_at(ds, params)).sel(symbol=symbol, **at)
        ran = float(cell["bars_run"])
        if math.isnan(ran):
            raise ResultsError(f"{what}: the combo {params} of {symbol} did not run window "
                               f"{window}'s {sample} sample (the search stopped it at an "
                               f"earlier rung); choose one of its last rung")
        return cell, rung_span(span, int(ran), n_bars)

    def neighbours_refusal(self, flag: str) -> str | None:
        """Why ``--smooth`` or ``--across`` (a grid's neighbours and symbols) cannot
        read this store, or None."""
        if self.drawn and flag == "--across-pareto":
            return ("--across: a search store's combos differ by symbol after its first "
                    "rung; rank each symbol")
        if self.drawn:
            return ("--smooth and --across rank a grid's neighbours and symbols; a search "
                    "store's combos are drawn apart: rank it without them")
        return None

    def pbo_refusal(self) -> str | None:
        """Why this kind keeps no PBO segment sums, or None where it may."""
        if self.walk_forward:
            return ("--pbo: a walk-forward run keeps no segment sums (its windows are its "
                    "out-of-sample test): see `barsweep walkforward`")
        if self.drawn and self.rungs > 1:
            return ("--pbo: a halving search's pruned combos ran only the most recent bars, "
                    "so its trials have no returns over every segment; search with method "
                    "random or sobol to estimate PBO over the combos drawn")
        return None


def rung_span(span: tuple[int, int] | None, bars_run: int, n_bars: int,
              ) -> tuple[int, int] | None:
    """The bars a search's cell ran: the most recent ``bars_run`` of its lane's bars
    (``span``, a walk-forward window's sample, or every one of ``n_bars`` bars: None).

    >>> rung_span(None, 300, 900), rung_span(None, 900, 900), rung_span((100, 400), 100, 900)
    ((600, 900), None, (300, 400))
    """
    end = n_bars if span is None else span[1]
    return None if span is None and bars_run >= n_bars else (end - bars_run, end)


def kind_of(ds) -> StoreKind:
    """The kind of results store ``ds`` (a Dataset, lazy or loaded): the one function
    that reads a store's dims and attributes to tell which run made it."""
    attrs = ds.attrs
    drawn = "combo" in ds.dims and bool(_names(attrs.get("search_params", [])))
    params = (tuple(_names(attrs.get("search_params", []))) if drawn else
              tuple(d for d in ds[_first_metric(ds)].dims
                    if d not in ("symbol", "window", "sample")))
    return StoreKind(portfolio="portfolio" in attrs,
                     windows=int(ds.sizes.get("window", 0)),
                     search=str(attrs.get("search_method", "random")) if drawn else "grid",
                     rungs=(int(attrs.get("search_rungs", 1)) if "rung" in ds.data_vars
                            else 0 if drawn else 1),  # 0: drawn, no rung kept
                     params=params)


def _names(value) -> list[str]:
    return json.loads(value) if isinstance(value, str) else list(value)


def _first_metric(ds) -> str:
    from ...engine import METRICS

    return next(m for m in METRICS if m in ds.data_vars)


def _plain(value):
    return value.item() if hasattr(value, "item") else value
