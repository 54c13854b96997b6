"""Turn the raw columns of an imported file into arrays, flagging what cannot be read.

Pure functions over pandas Series: they return the parsed values with boolean masks of
the rows that are missing or unreadable, and leave the wording of errors to the caller,
which knows the file. Rows are positions 0..n-1 here.

`typed_times` and `typed_numbers` are the fast path over columns pyarrow has already
typed: they return what `parse_times` and `parse_numbers` would for the same cells when
every cell is clean, and None when any cell is not (missing, unreadable, or a form the
two readers might take differently), so that the caller reads the file the slow way and
names the row.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "EPOCH_UNITS",
    "MISSING_TOKENS",
    "ParsedColumn",
    "ParsedTime",
    "epoch_unit_index",
    "guess_time_format",
    "parse_numbers",
    "parse_times",
    "text_of",
    "typed_numbers",
    "typed_times",
]

MISSING_TOKENS = frozenset({"", "nan", "na", "n/a", "null", "none", "nat"})
EPOCH_UNITS = ("s", "ms", "us", "ns")
EPOCH_BOUNDS = (1e11, 1e14, 1e17)  # s < 1e11 <= ms < 1e14 <= us < 1e17 <= ns
_INT64_MAX = np.iinfo(np.int64).max
# Text that parse_times reads as epoch integers (a subset of its own pattern, which also
# takes 1-7 digits and signed 8-digit numbers); eight bare digits are dates there.
_EPOCH_TEXT = r"^[+-]?[0-9]{9,19}$"
# Dates that are not ISO: day and month either way round (dd/mm/yyyy, mm/dd/yy, with
# '/', '.' or '-'), or year first with '/' or '.'; an optional time of day.
_DMY_TEXT = (r"^(?P<a>\d{1,2})(?P<sep>[/.-])(?P<b>\d{1,2})(?P=sep)(?P<year>\d{4}|\d{2})"
             r"(?:(?P<T>[ T])\d{1,2}:\d{2}(?P<sec>:\d{2})?)?$")
_YMD_TEXT = (r"^\d{4}(?P<sep>[/.])\d{1,2}(?P=sep)\d{1,2}"
             r"(?:(?P<T>[ T])\d{1,2}:\d{2}(?P<sec>:\d{2})?)?$")


@dataclass(frozen=True)
class ParsedColumn:
    """A numeric column: float64 values, shape (n,), and masks of shape (n,).

    ``missing`` marks empty or NaN cells, ``bad`` cells that hold something other than a
    finite number (``values`` is NaN there).
    """

    values: np.ndarray
    missing: np.ndarray
    bad: np.ndarray


@dataclass(frozen=True)
class ParsedTime:
    """A time column as int64 ns since the epoch (UTC), shape (n,), with masks.

    ``unit`` is how the times were written: ``"s"``, ``"ms"``, ``"us"``, ``"ns"`` (epoch
    integers), ``"iso"`` (strings) or ``"datetime"`` (typed datetimes). ``bad`` marks
    unreadable cells and ``bad_reason`` says why, for the first of them.
    """

    ts_ns: np.ndarray
    missing: np.ndarray
    bad: np.ndarray
    unit: str
    bad_reason: str = ""


def text_of(series: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Cells as stripped strings, and which of them are missing.

    Returns
    -------
    text : numpy.ndarray
        object array of str, shape (n,); ``""`` where the cell is null.
    missing : numpy.ndarray
        bool, shape (n,): null, empty or a NaN token (``nan``, ``NA``, ``null``, ...).
    """
    null = series.isna().to_numpy(dtype=bool)
    text = series.astype(str).fillna("").str.strip()
    missing = null | text.str.lower().isin(MISSING_TOKENS).to_numpy(dtype=bool)
    return text.to_numpy(dtype=object), missing


def parse_numbers(series: pd.Series) -> ParsedColumn:
    """Parse a column of numbers (numeric dtype or text).

    Parameters
    ----------
    series : pandas.Series
        n cells.

    Returns
    -------
    ParsedColumn
        Values float64 (n,); non-finite numbers (``inf``) count as bad.
    """
    numeric = pd.api.types.is_numeric_dtype(series)
    if numeric and not (pd.api.types.is_bool_dtype(series)
                        or pd.api.types.is_complex_dtype(series)):
        values = series.to_numpy(dtype=np.float64, na_value=np.nan)
        missing = np.isnan(values)
        return ParsedColumn(values, missing, np.isinf(values))
    text, missing = text_of(series)
    values = pd.to_numeric(pd.Series(text), errors="coerce").to_numpy(dtype=np.float64)
    bad = ~missing & ~np.isfinite(values)
    return ParsedColumn(np.where(bad | missing, np.nan, values), missing, bad)


def epoch_unit_index(values: np.ndarray) -> np.ndarray:
    """Index into `EPOCH_UNITS` of each epoch integer, from its magnitude.

    Parameters
    ----------
    values : numpy.ndarray
        int64, shape (n,).

    Returns
    -------
    numpy.ndarray
        intp, shape (n,), 0 (s) to 3 (ns).

    Examples
    --------
    >>> epoch_unit_index(np.array([1_600_000_000, 1_600_000_000_000])).tolist()
    [0, 1]
    """
    return np.searchsorted(EPOCH_BOUNDS, np.abs(values.astype(np.float64)), side="right")


def parse_times(series: pd.Series, time_format: str | None = None) -> ParsedTime:
    """Parse a time column: typed datetimes, ISO strings or epoch integers.

    The kind is taken from the first non-missing cell; cells of another kind are bad.
    Naive times are UTC; times with an offset are converted to UTC. Text of exactly eight
    digits is an ISO basic date (``20210131``). Other integers are epoch times in the unit
    their magnitude implies (see `EPOCH_BOUNDS`), which every cell must share.

    Parameters
    ----------
    series : pandas.Series
        n cells.
    time_format : str, optional
        A strptime format (``"%d/%m/%Y %H:%M"``) every non-missing cell must match, read
        as text; unit ``"format"``. Not used for typed datetimes.

    Returns
    -------
    ParsedTime

    Raises
    ------
    ValueError
        If `time_format` is not a valid format.
    """
    if pd.api.types.is_datetime64_any_dtype(series):
        return _typed_times(series)
    if time_format is not None:
        return _formatted_times(series, time_format)
    if pd.api.types.is_integer_dtype(series):
        # Nullable (Int64, from pandas metadata) or plain; uint64 past int64 is bad.
        missing = series.isna().to_numpy(dtype=bool)
        if pd.api.types.is_unsigned_integer_dtype(series):
            raw = series.to_numpy(dtype=np.uint64, na_value=0)
            bad = raw > _INT64_MAX
            return _epoch_times(np.where(bad, 0, raw).astype(np.int64), missing, bad)
        values = series.to_numpy(dtype=np.int64, na_value=0)
        return _epoch_times(values, missing, np.zeros(values.size, dtype=bool))
    if pd.api.types.is_float_dtype(series):
        floats = series.to_numpy(dtype=np.float64, na_value=np.nan)
        missing = np.isnan(floats)
        bad = ~missing & ((floats != np.round(floats)) | (np.abs(floats) > 2.0**63))
        values = np.where(missing | bad, 0.0, floats).astype(np.int64)
        return _epoch_times(values, missing, bad)
    text, missing = text_of(series)
    # Eight digits are an ISO basic date (20210131), not seconds in 1970-1973.
    is_int = pd.Series(text).str.fullmatch(r"[+-]?\d{1,7}|[+-]?\d{9,19}|[+-]\d{8}")
    is_int = is_int.to_numpy(dtype=bool)
    first = np.flatnonzero(~missing)
    if first.size and is_int[first[0]]:
        bad = ~missing & ~is_int
        values = np.zeros(text.size, dtype=np.int64)
        ok = ~missing & is_int
        bad |= _fill_ints(values, text, ok)
        return _epoch_times(values, missing, bad, "not an epoch integer like the first row")
    return _iso_times(text, missing, is_int)


def _fill_ints(out_values: np.ndarray, text: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Write int64 values of ``text[ok]`` into `out_values`; return the mask of overflows."""
    overflow = np.zeros(text.size, dtype=bool)
    try:
        out_values[ok] = text[ok].astype(str).astype(np.int64)
    except (OverflowError, ValueError):
        for i in np.flatnonzero(ok):
            number = int(text[i])
            if abs(number) > _INT64_MAX:
                overflow[i] = True
            else:
                out_values[i] = number
    return overflow


def _typed_times(series: pd.Series) -> ParsedTime:
    """Datetime columns: naive = UTC, aware converted to UTC."""
    index = pd.DatetimeIndex(series)
    index = index.tz_localize("UTC") if index.tz is None else index.tz_convert("UTC")
    missing = np.asarray(index.isna(), dtype=bool)
    # Times in s/ms/us (e.g. from Parquet) may lie outside the ns range (1677-2262).
    factor = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}[index.unit]
    raw = index.asi8
    bad = ~missing & (np.abs(raw.astype(np.float64)) > _INT64_MAX // factor)
    ts_ns = np.where(missing | bad, 0, raw).astype(np.int64) * factor
    reason = "outside the times nanoseconds can hold (1677-09-21 to 2262-04-11)"
    return ParsedTime(ts_ns, missing, bad, "datetime", reason)


def _epoch_times(
    values: np.ndarray, missing: np.ndarray, bad: np.ndarray, reason: str = "not an integer"
) -> ParsedTime:
    """Epoch integers: infer the unit from the first valid cell and scale to ns."""
    valid = np.flatnonzero(~missing & ~bad)
    if valid.size == 0:
        return ParsedTime(np.zeros(values.size, np.int64), missing, bad, "s", reason)
    units = epoch_unit_index(values)
    unit = int(units[valid[0]])
    factor = 10 ** (9 - 3 * unit)
    other_unit = ~missing & ~bad & (units != unit)
    out_of_range = ~missing & ~bad & (np.abs(values.astype(np.float64)) > _INT64_MAX // factor)
    first_bad = _first(bad)
    first_other, first_range = _first(other_unit), _first(out_of_range)
    if first_other < min(first_bad, first_range):
        reason = (
            f"epoch integer in {EPOCH_UNITS[units[first_other]]} by its magnitude, "
            f"but the first row's is in {EPOCH_UNITS[unit]}"
        )
    elif first_range < first_bad:
        reason = "epoch integer out of the representable range"
    ts_ns = np.where(bad | other_unit | out_of_range | missing, 0, values) * factor
    return ParsedTime(ts_ns, missing, bad | other_unit | out_of_range, EPOCH_UNITS[unit], reason)


def _formatted_times(series: pd.Series, time_format: str) -> ParsedTime:
    """Text in a strptime format, naive = UTC (``%z`` offsets converted to UTC)."""
    text, missing = text_of(series)
    parsed = pd.to_datetime(pd.Series(text), utc=True, format=time_format, errors="coerce")
    index = pd.DatetimeIndex(parsed).as_unit("ns")
    bad = ~missing & index.isna()
    ts_ns = np.where(index.isna(), 0, index.asi8).astype(np.int64)
    reason = f"does not match --time-format {time_format!r}"
    return ParsedTime(ts_ns, missing, bad, "format", reason)


def _iso_times(text: np.ndarray, missing: np.ndarray, is_int: np.ndarray) -> ParsedTime:
    """ISO 8601 strings, parsed as UTC."""
    parsed = pd.to_datetime(pd.Series(text), utc=True, format="ISO8601", errors="coerce")
    index = pd.DatetimeIndex(parsed).as_unit("ns")
    bad = ~missing & index.isna()
    reason = "not an ISO 8601 time (e.g. 2021-01-01T00:00:00Z)"
    if _first(is_int & ~missing) < _first(bad & ~is_int):
        reason = "an epoch integer, but the first row is an ISO time"
    elif bad.any():
        reason += guess_time_format(text[~missing])
    ts_ns = np.where(index.isna(), 0, index.asi8).astype(np.int64)
    return ParsedTime(ts_ns, missing, bad | (is_int & ~missing), "iso", reason)


def guess_time_format(text: np.ndarray) -> str:
    """The ``--time-format`` that reads every cell of `text`, as a hint to follow a
    refusal ("" when the cells are not all one known shape).

    Day and month are told apart by a value above 12 in either place; when none is, both
    readings are offered.

    Parameters
    ----------
    text : numpy.ndarray
        object array of str, shape (n,): the non-missing cells of a time column.

    Examples
    --------
    >>> guess_time_format(np.array(["04/01/2021", "25/01/2021"], dtype=object))
    "; the times look like dd/mm/yyyy: pass --time-format '%d/%m/%Y'"
    """
    if text.size == 0:
        return ""
    cells = pd.Series(text, dtype=object).astype(str)
    for pattern in (_DMY_TEXT, _YMD_TEXT):
        parts = cells.str.extract(pattern)
        if not parts["sep"].notna().all():  # a cell of another shape
            continue
        first = parts.iloc[0]
        clock = ""
        if isinstance(first["T"], str):
            clock = f"{first['T']}%H:%M" + (":%S" if isinstance(first["sec"], str) else "")
        sep = first["sep"]
        if "a" not in parts:
            fmt = f"%Y{sep}%m{sep}%d{clock}"
            return f"; the times look like yyyy{sep}mm{sep}dd: pass --time-format '{fmt}'"
        year = "%Y" if len(first["year"]) == 4 else "%y"
        yy = "yyyy" if year == "%Y" else "yy"
        day_first = f"%d{sep}%m{sep}{year}{clock}"
        month_first = f"%m{sep}%d{sep}{year}{clock}"
        a, b = parts["a"].astype(int), parts["b"].astype(int)
        if (a > 12).any() and not (b > 12).any():
            return f"; the times look like dd{sep}mm{sep}{yy}: pass --time-format '{day_first}'"
        if (b > 12).any() and not (a > 12).any():
            return (f"; the times look like mm{sep}dd{sep}{yy}: pass --time-format "
                    f"'{month_first}'")
        if not (a > 12).any():
            return (f"; the times look like dd{sep}mm{sep}{yy} or mm{sep}dd{sep}{yy}: pass "
                    f"--time-format '{day_first}' (day first) or '{month_first}' "
                    "(month first)")
    return ""


def _first(mask: np.ndarray) -> int:
    """Position of the first True in `mask`, or `mask.size` if none."""
    hits = np.flatnonzero(mask)
    return int(hits[0]) if hits.size else mask.size


def typed_numbers(column: pa.ChunkedArray, nullable: bool = False) -> ParsedColumn | None:
    """A numeric Arrow column as `parse_numbers` reads it, or None if a cell is not clean.

    Parameters
    ----------
    column : pyarrow.ChunkedArray
        n cells of an integer or float32/float64 type.
    nullable : bool, default False
        Whether nulls are clean (marked missing, as ``funding_rate``'s empty cells).

    Returns
    -------
    ParsedColumn or None
        None for another type, a NaN or infinite value, or a null unless `nullable`;
        otherwise values float64 (n,) (NaN where null), ``bad`` all False.

    Examples
    --------
    >>> typed_numbers(pa.chunked_array([[1, 2]])).values.tolist()
    [1.0, 2.0]
    >>> typed_numbers(pa.chunked_array([[1.0, float("nan")]])) is None
    True
    """
    kind = column.type
    numeric = pa.types.is_integer(kind) or kind in (pa.float32(), pa.float64())
    if not numeric or (column.null_count and not nullable):
        return None
    values = np.asarray(column.to_numpy(), dtype=np.float64)  # NaN where null
    clean = np.zeros(values.size, dtype=bool)
    missing = column.is_null().to_numpy(zero_copy_only=False) if column.null_count else clean
    if not (np.isfinite(values.min()) and np.isfinite(values.max())):  # NaN propagates
        if (~np.isfinite(values) & ~missing).any():
            return None
    return ParsedColumn(values, missing, clean)


def typed_times(column: pa.ChunkedArray) -> ParsedTime | None:
    """An Arrow time column as `parse_times` reads it, or None if a cell is not clean.

    Typed timestamps (any unit; naive = UTC) are ``"datetime"``; integers are epoch times
    (see `parse_times`); text is epoch integers of 9 to 19 digits, or ISO 8601 times that
    Arrow parses, either all with a zone (``Z``, ``+01:00``) or all naive (UTC).

    Parameters
    ----------
    column : pyarrow.ChunkedArray
        n cells.

    Returns
    -------
    ParsedTime or None
        None for a null, an unparseable cell, a time outside what nanoseconds hold,
        epoch integers of differing units, text with surrounding spaces or mixing
        zoned and naive times, and any other type; ``missing`` and ``bad`` all False
        otherwise.

    Examples
    --------
    >>> typed_times(pa.chunked_array([["2021-01-01T00:00:00Z"]])).ts_ns.tolist()
    [1609459200000000000]
    >>> typed_times(pa.chunked_array([["2021-01-01", " 2021-01-02"]])) is None
    True
    """
    kind = column.type
    if column.null_count or len(column) == 0:
        return None
    if pa.types.is_timestamp(kind):
        return _typed_timestamps(column)
    if pa.types.is_integer(kind):
        return _typed_epochs(column)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        if re.fullmatch(_EPOCH_TEXT, column[0].as_py()) is None:
            return _typed_iso(column)  # Arrow reads no cell of bare digits as a time
        if pc.all(pc.match_substring_regex(column, _EPOCH_TEXT)).as_py():
            return _typed_epochs(column)
    return None


def _typed_timestamps(column: pa.ChunkedArray) -> ParsedTime | None:
    """Timestamps as `_typed_times` reads them; None past the ns range."""
    factor = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}[column.type.unit]
    raw = np.asarray(column.cast(pa.int64()).to_numpy(), dtype=np.int64)
    extremes = np.array([raw.min(), raw.max()], dtype=np.int64)
    if (np.abs(extremes.astype(np.float64)) > _INT64_MAX // factor).any():
        return None
    clean = np.zeros(raw.size, dtype=bool)
    return ParsedTime(raw * factor if factor > 1 else raw, clean, clean, "datetime")


def _typed_epochs(column: pa.ChunkedArray) -> ParsedTime | None:
    """Epoch integers (typed, or text of digits) as `_epoch_times` reads them."""
    try:
        values = np.asarray(column.cast(pa.int64()).to_numpy(), dtype=np.int64)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # past int64, or odd text
        return None
    clean = np.zeros(values.size, dtype=bool)
    parsed = _epoch_times(values, clean, clean)
    return None if parsed.bad.any() else parsed


def _typed_iso(column: pa.ChunkedArray) -> ParsedTime | None:
    """ISO 8601 text parsed by Arrow, all zoned or all naive; None otherwise."""
    first = column[0].as_py()
    zoned_first = first.endswith("Z") or ("+" in first[10:] or "-" in first[10:])
    for tz in ("UTC", None) if zoned_first else (None, "UTC"):
        try:
            parsed = column.cast(pa.timestamp("ns", tz))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
        ts_ns = np.asarray(parsed.cast(pa.int64()).to_numpy(), dtype=np.int64)
        clean = np.zeros(ts_ns.size, dtype=bool)
        return ParsedTime(ts_ns, clean, clean, "iso")
    return None
