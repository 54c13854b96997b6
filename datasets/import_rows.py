"""The checks and choices that turn an imported file's parsed columns into bars.

Pure functions over the parsed arrays, called by `import_file` in order: refuse bad times,
non-numbers and missing values (or drop them), assemble the stored columns, refuse bad
prices and order (sorting by time first with ``--sort``), apply ``--price-column`` /
``--ohlc-from-close``, and check the spacing
against the timeframe (the last steps together: `checked_bars`, for either way of reading
a file). Every refusal is a `DataError` naming the file and the 1-based data
row (or what was measured); `values` dicts map column names to arrays of shape (n_rows,).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import DataError
from .import_hints import unsorted_hint
from .parse import EPOCH_UNITS, ParsedColumn, ParsedTime
from .rules import first_broken_price_rule
from .timeframes import timeframe_seconds

__all__ = [
    "PRICE_NAMES",
    "CheckedBars",
    "HeaderNotes",
    "ImportChoices",
    "assemble",
    "check_spacing",
    "checked_bars",
    "close_from",
    "fail",
    "missing_policy",
    "note_epoch_unit",
    "refuse_bad_order",
    "refuse_bad_prices",
    "refuse_bad_times",
    "refuse_non_numeric",
    "sort_by_time",
]

PRICE_NAMES = ("open", "high", "low", "close")
DROP_NAN_HINT = "use --drop-nan to drop such rows (drop_nan=True in Python)"


@dataclass(frozen=True)
class ImportChoices:
    """The arguments of `import_file` that decide how a file's cells become bars."""

    timeframe: str
    drop_nan: bool
    time_format: str | None
    price_column: str | None
    ohlc_from_close: bool
    force: bool
    sort: bool = False
    delimiter: str | None = None


@dataclass(frozen=True)
class CheckedBars:
    """A file's bars, checked and ready for the store (see `ImportReport`).

    ``values`` maps the stored column names to arrays of shape (n_bars,); ``read_as`` is
    ``"typed"`` or ``"text"``.
    """

    values: dict[str, np.ndarray]
    n_dropped: int
    time_unit: str
    messages: list[str]
    notes: list[str]
    read_as: str
    warnings: list[str] = field(default_factory=list)
    price_from: str | None = None
    adjusted: str | None = None


@dataclass(frozen=True)
class HeaderNotes:
    """What a file's header tells before its rows are read: notes (columns ignored),
    warnings (an adjusted close left unused) and the adjusted close column, if any."""

    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    adjusted: str | None = None


def fail(src: Path, row: int, rule: str, detail: str) -> DataError:
    """A DataError naming the file, the 1-based data row and the rule."""
    return DataError(f"{src}: row {row}: {rule}: {detail}")


def refuse_bad_times(
    src: Path, column: str, raw: pd.DataFrame, time: ParsedTime, rows: np.ndarray
) -> None:
    """Refuse the first unparseable timestamp."""
    bad = np.flatnonzero(time.bad)
    if bad.size:
        i = int(bad[0])
        raise fail(
            src,
            int(rows[i]),
            "unparseable timestamp",
            f"column {column!r} has {raw[column].iloc[i]!r}: {time.bad_reason}",
        )


def refuse_non_numeric(
    src: Path,
    raw: pd.DataFrame,
    columns: dict[str, str],
    numbers: dict[str, ParsedColumn],
    rows: np.ndarray,
) -> None:
    """Refuse the first cell that is neither a finite number nor missing."""
    first = {name: np.flatnonzero(col.bad) for name, col in numbers.items()}
    first = {name: int(hits[0]) for name, hits in first.items() if hits.size}
    if first:
        name = min(first, key=lambda n: (first[n], list(columns).index(n)))
        i = first[name]
        raise fail(
            src,
            int(rows[i]),
            "non-numeric value",
            f"column {columns[name]!r} has {raw[columns[name]].iloc[i]!r}; "
            "expected a finite number",
        )


def missing_policy(
    src: Path,
    time: ParsedTime,
    numbers: dict[str, ParsedColumn],
    rows: np.ndarray,
    drop_nan: bool,
    messages: list[str],
) -> tuple[np.ndarray, int]:
    """Rows to keep, and how many were dropped, under the missing-value policy."""
    checked = {"time": time.missing}
    checked.update({n: c.missing for n, c in numbers.items() if n != "funding_rate"})
    missing = np.logical_or.reduce(list(checked.values()))
    hits = np.flatnonzero(missing)
    if hits.size == 0:
        return np.ones(rows.size, dtype=bool), 0
    i = int(hits[0])
    where = [name for name, mask in checked.items() if mask[i]]
    if not drop_nan:
        raise fail(
            src,
            int(rows[i]),
            "missing value (empty or NaN)",
            f"in column(s) {', '.join(where)}; {hits.size} row(s) have missing values; "
            + DROP_NAN_HINT,
        )
    messages.append(
        f"dropped {hits.size} row(s) with missing values (the first: row {int(rows[i])})"
    )
    return ~missing, int(hits.size)


def assemble(
    time: ParsedTime,
    numbers: dict[str, ParsedColumn],
    keep: np.ndarray,
    n: int,
    messages: list[str],
) -> dict[str, np.ndarray]:
    """The kept rows of every stored column; volume NaN if absent, empty funding = 0."""
    if keep.all():  # nothing dropped: the parsed arrays themselves, not copies
        keep = slice(None)
    values = {"time": time.ts_ns[keep]}
    for name in (*PRICE_NAMES, "volume", "price"):
        if name in numbers:
            values[name] = numbers[name].values[keep]
        elif name != "price":
            values[name] = np.full(n, np.nan)[keep]
    if "close" not in numbers:  # --ohlc-from-close with --price-column: no close column
        values["close"] = values["price"]
    if "funding_rate" in numbers:
        funding = numbers["funding_rate"]
        n_empty = int(funding.missing[keep].sum())
        if n_empty:
            messages.append(
                f"funding_rate empty in {n_empty} row(s): stored as 0 (no funding at those bars)"
            )
        values["funding_rate"] = np.where(funding.missing, 0.0, funding.values)[keep]
    return values


def refuse_bad_prices(src: Path, values: dict[str, np.ndarray], rows: np.ndarray) -> None:
    """Refuse non-positive prices, negative volume and inconsistent high/low (with
    open/high/low taken from the close where they are absent: ``--ohlc-from-close``)."""
    c = values["close"]
    o, h, lo = (_or_close(values[n], c) for n in PRICE_NAMES[:3])
    broken = first_broken_price_rule(o, h, lo, c, values["volume"])
    if broken is not None:
        rule, i, count = broken
        cells = {"open": o, "high": h, "low": lo, "close": c, "volume": values["volume"]}
        detail = ", ".join(f"{name}={float(v[i])!r}" for name, v in cells.items())
        raise fail(src, int(rows[i]), rule, f"{detail} ({count} row(s) break it)")


def _or_close(prices: np.ndarray, close: np.ndarray) -> np.ndarray:
    """`prices` with NaN (an absent open, high or low) replaced by the close."""
    nan = np.isnan(prices)
    return np.where(nan, close, prices) if nan.any() else prices


def refuse_bad_order(src: Path, ts_ns: np.ndarray, rows: np.ndarray) -> None:
    """Refuse times that go backwards, then times that repeat."""
    step = np.diff(ts_ns)
    back = np.flatnonzero(step < 0)
    if back.size:
        i = int(back[0]) + 1
        raise fail(
            src,
            int(rows[i]),
            "unsorted timestamps",
            f"{_iso(ts_ns[i])} is earlier than row {int(rows[i - 1])} ({_iso(ts_ns[i - 1])}); "
            + unsorted_hint(ts_ns),
        )
    dup = np.flatnonzero(step == 0)
    if dup.size:
        i = int(dup[0])
        raise fail(
            src,
            int(rows[i + 1]),
            "duplicate timestamps",
            f"rows {int(rows[i])} and {int(rows[i + 1])} both have {_iso(ts_ns[i])}; "
            "keep one row per time",
        )


def sort_by_time(values: dict[str, np.ndarray], rows: np.ndarray) -> tuple[
        dict[str, np.ndarray], np.ndarray, str | None]:
    """``--sort``: the rows in time order (stable: equal times keep the file's order, and
    are refused later as duplicates), their file row numbers, and the note saying so
    (None when they were in order already)."""
    ts_ns = values["time"]
    if ts_ns.size < 2 or (np.diff(ts_ns) >= 0).all():
        return values, rows, None
    newest_first = bool((np.diff(ts_ns) < 0).all())
    order = np.argsort(ts_ns, kind="stable")
    sorted_values = {name: v[order] for name, v in values.items()}
    how = "newest first" if newest_first else "not in time order"
    return sorted_values, rows[order], f"--sort: the rows were {how}: sorted by time"


def close_from(
    src: Path,
    columns: dict[str, str],
    values: dict[str, np.ndarray],
    rows: np.ndarray,
    ohlc_from_close: bool,
) -> str | None:
    """Apply ``--price-column`` and ``--ohlc-from-close`` to the checked `values` (in place)
    and return the note that says what was stored (None when neither applies).

    The price column becomes the close; open, high and low are scaled per bar by
    price / close (clamped so the scaled bar still holds the new close), or set to the
    close with `ohlc_from_close`. The price column is checked as a price first.
    """
    price = values.pop("price", None)
    if price is not None:
        bad = np.flatnonzero(~np.isfinite(price) | (price <= 0))
        if bad.size:
            i = int(bad[0])
            raise fail(src, int(rows[i]), "non-positive price",
                        f"column {columns['price']!r} has {float(price[i])!r} "
                        f"({bad.size} row(s) break it)")
    if ohlc_from_close:
        close = values["close"] if price is None else price
        for name in PRICE_NAMES:
            values[name] = close
        which = "close" if price is None else f"column {columns['price']!r}"
        return (
            f"--ohlc-from-close: open, high, low and close are all the {which}; "
            "stops and take-profits are checked on the close only"
        )
    if price is None:
        return None
    factor = price / values["close"]
    open_ = values["open"] * factor
    values["high"] = np.maximum.reduce([values["high"] * factor, open_, price])
    values["low"] = np.minimum.reduce([values["low"] * factor, open_, price])
    values["open"], values["close"] = open_, price
    refuse_bad_prices(src, values, rows)  # e.g. an overflow to inf when scaling
    return (
        f"--price-column: close is column {columns['price']!r}; open, high and low are "
        f"scaled per bar by {columns['price']} / {columns['close']}; "
        f"column {columns['close']!r} is not stored"
    )


def check_spacing(src: Path, ts_ns: np.ndarray, timeframe: str, force: bool) -> str | None:
    """Refuse bars whose median spacing differs from `timeframe`; return a note when it
    could not be checked or `force` let it through (None when the spacing fits)."""
    if ts_ns.size < 2:
        return "one bar: its spacing cannot be checked against --timeframe"
    median_ns = int(np.median(np.diff(ts_ns), overwrite_input=True))  # its own diff
    expected_s = timeframe_seconds(timeframe)
    if median_ns == expected_s * 10**9:
        return None
    measured = _duration(median_ns)
    what = (f"the bars are {measured} apart (median of {ts_ns.size - 1} gaps) but "
            f"--timeframe {timeframe} is {_duration(expected_s * 10**9)}")
    if not force:
        raise DataError(
            f"{src}: {what}; pass the bars' own timeframe ({measured}), "
            "or --force (force=True in Python) to import them as they are"
        )
    return f"{what}: imported anyway (--force)"


def _duration(ns: int) -> str:
    """A duration in the largest timeframe unit that divides it (``"1d"``, ``"90m"``)."""
    for unit, seconds in (("w", 604_800), ("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)):
        if ns % (seconds * 10**9) == 0:
            return f"{ns // (seconds * 10**9)}{unit}"
    return f"{ns / 1e9:g}s"


def _iso(ts_ns: np.integer) -> str:
    """An int64 ns time as an ISO string (UTC)."""
    return pd.Timestamp(int(ts_ns), tz="UTC").isoformat()


def checked_bars(
    src: Path,
    columns: dict[str, str],
    time: ParsedTime,
    numbers: dict[str, ParsedColumn],
    choices: ImportChoices,
    messages: list[str],
    read_as: str,
    header: HeaderNotes = HeaderNotes(),
) -> CheckedBars:
    """Apply the missing-value policy and every rule to parsed columns with no bad cell
    (appending to `messages`), rows numbered from 1; `header`'s notes and warnings come
    first in the result's."""
    rows = np.arange(1, time.ts_ns.size + 1)
    keep, n_dropped = missing_policy(src, time, numbers, rows, choices.drop_nan, messages)
    values = assemble(time, numbers, keep, rows.size, messages)
    rows = rows[keep]
    if rows.size == 0:
        raise DataError(f"{src}: empty input: every row was dropped for missing values")
    notes = list(header.notes)
    if choices.sort:
        values, rows, sorted_note = sort_by_time(values, rows)
        notes.append(sorted_note)
    refuse_bad_prices(src, values, rows)
    notes.append(close_from(src, columns, values, rows, choices.ohlc_from_close))
    refuse_bad_order(src, values["time"], rows)
    notes.append(check_spacing(src, values["time"], choices.timeframe, choices.force))
    notes = [note for note in notes if note is not None]
    warnings = list(header.warnings)
    messages.extend([*notes, *warnings])
    return CheckedBars(values, n_dropped, time.unit, messages, notes, read_as, warnings,
                       columns.get("price"), header.adjusted)


def note_epoch_unit(columns: dict[str, str], time: ParsedTime, messages: list[str]) -> None:
    """Say which unit epoch integers were taken to be in (appended to `messages`)."""
    if time.unit in EPOCH_UNITS:
        messages.append(
            f"time column {columns['time']!r} holds epoch integers in {time.unit} "
            "(inferred from magnitude: s < 1e11 <= ms < 1e14 <= us < 1e17 <= ns)"
        )
