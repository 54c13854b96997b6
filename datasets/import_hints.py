"""What an import tells the user beyond its rules: the option that fixes a refused file,
and warnings about bars that are stored as asked but likely not what was meant.

Pure functions over header names and parsed arrays; each returns words (or None when
there is nothing to say) that the importer puts into its refusals and its report, and
that ``barsweep data verify`` reuses for the bars of a store.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .rules import SPLIT_MOVE, large_moves

__all__ = [
    "ADJUSTED_CLOSE_KEYS",
    "adjusted_close_column",
    "close_only_hint",
    "column_key",
    "delimiter_hint",
    "moves_text",
    "price_option",
    "split_warning",
    "unsorted_hint",
    "unused_adjusted_warning",
]

#: `column_key` of the columns that hold an adjusted close (``adj_close``, ``Adj Close``,
#: ``adjclose``, ``Adjusted Close``, ``adjusted-close``...).
ADJUSTED_CLOSE_KEYS = frozenset({"adjclose", "adjustedclose"})
#: Delimiters a CSV header is checked for when it reads as one column.
OTHER_DELIMITERS = (";", "\t", "|")
#: Moves listed by `moves_text` before "and N more".
MOVES_SHOWN = 5


def column_key(name: str) -> str:
    """A column name as compared with an option's: any case; spaces, ``_`` and ``-`` alike
    and dropped (``"Adj Close"``, ``"adj_close"`` and ``"adjclose"`` are one key).

    Examples
    --------
    >>> column_key("Adj Close"), column_key("adj-close")
    ('adjclose', 'adjclose')
    """
    return "".join(name.lower().replace("-", " ").replace("_", " ").split())


def adjusted_close_column(found: list[str]) -> str | None:
    """The first of `found` that holds an adjusted close (see `ADJUSTED_CLOSE_KEYS`)."""
    return next((c for c in found if column_key(c) in ADJUSTED_CLOSE_KEYS), None)


def price_option(column: str) -> str:
    """The ``--price-column`` value to type for `column`: ``adj_close`` for any spelling of
    it, else the name in lower case with ``_`` for spaces (matched as the same column).

    Examples
    --------
    >>> price_option("Adj Close"), price_option("Adjusted Close")
    ('adj_close', 'adjusted_close')
    """
    if column_key(column) == "adjclose":
        return "adj_close"
    return "_".join(column.lower().replace("-", " ").split())


def unused_adjusted_warning(column: str) -> str:
    """The warning for a file with an adjusted close whose raw close is stored."""
    option = price_option(column)
    return (f"column {column!r} holds adjusted prices, but the raw close is stored "
            f"(splits and dividends not adjusted for): pass --price-column {option} "
            f"(price_column={option!r} in Python) to store the adjusted prices")


def moves_text(ts_ns: np.ndarray, close: np.ndarray, positions: np.ndarray) -> str:
    """The moves at `positions` in words: ``"2000-06-21 -45.1 %, 2005-02-28 -49.6 %"``
    (times shown as dates when every bar is at midnight), at most `MOVES_SHOWN` of them."""
    daily = not (ts_ns % (86_400 * 10**9)).any()
    shown = []
    for t in positions[:MOVES_SHOWN]:
        when = pd.Timestamp(int(ts_ns[t]), tz="UTC")
        label = when.strftime("%Y-%m-%d" if daily else "%Y-%m-%d %H:%M")
        with np.errstate(all="ignore"):  # extreme prices: the move may overflow to inf
            percent = (close[t] / close[t - 1] - 1) * 100
        shown.append(f"{label} {percent:+.1f} %")
    more = positions.size - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more else "")


def split_warning(ts_ns: np.ndarray, close: np.ndarray, *,
                  price_column: str | None = None, adjusted: str | None = None) -> str | None:
    """The warning for one-bar close moves beyond ±`SPLIT_MOVE` (None when there is none);
    the caller names the symbol.

    Parameters
    ----------
    ts_ns, close : numpy.ndarray
        int64 ns and float64, shape (n_bars,): the stored time and close.
    price_column : str, optional
        The column the close was taken from (adjusted prices asked for): the moves are
        then named as such, real or an adjustment that column lacks.
    adjusted : str, optional
        An adjusted-close column the bars came with, named in the fix.
    """
    at = large_moves(close)
    if at.size == 0:
        return None
    limit = f"±{SPLIT_MOVE * 100:.0f} %"
    one = at.size == 1
    moves = (f"{at.size} one-bar close {'move' if one else 'moves'} beyond {limit}: "
             f"{moves_text(ts_ns, close, at)}")
    if price_column is not None:
        return (f"{moves} in the stored close (column {price_column!r}): "
                f"{'a real move' if one else 'real moves'}, or "
                f"{'a split' if one else 'splits'} that column is not adjusted for")
    option = price_option(adjusted) if adjusted else "adj_close"
    where = f"its column {adjusted!r}" if adjusted else "an adjusted close column"
    splits = "likely an unadjusted split" if one else "likely unadjusted splits"
    return (f"{moves}: {splits}, which a backtest takes as real "
            f"losses or gains; store split-adjusted prices (from {where}: --price-column "
            f"{option}, price_column={option!r} in Python)")


def close_only_hint(missing: list[str], found_close: bool) -> str:
    """The fix for a file that has a close but lacks open, high or low ("" otherwise)."""
    if not found_close or not missing or any(n not in ("open", "high", "low") for n in missing):
        return ""
    return ("; for close-only data pass --ohlc-from-close (ohlc_from_close=True in Python): "
            "open, high and low are then the close")


def delimiter_hint(header: list[str]) -> str:
    """The fix for a CSV whose header read as one column holding another delimiter."""
    if len(header) != 1:
        return ""
    for delimiter in OTHER_DELIMITERS:
        if delimiter in header[0]:
            shown = "'\\t'" if delimiter == "\t" else repr(delimiter)
            return (f"; the header looks {shown}-separated: pass --delimiter {shown} "
                    f"(delimiter={shown} in Python)")
    return ""


def unsorted_hint(ts_ns: np.ndarray) -> str:
    """The fix for times out of order: newest-first files named as such."""
    newest_first = ts_ns.size > 1 and bool((np.diff(ts_ns) < 0).all())
    what = "the rows are newest first: " if newest_first else ""
    return (f"{what}sort the file by time, or pass --sort (sort=True in Python) to sort "
            "the rows before the checks")
