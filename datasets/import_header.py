"""A bar file's header: which of its columns are the time, the prices and the optional
columns, which are ignored, and what the header alone tells the user (an adjusted close
left unused, the option that reads a header the importer cannot).

Pure functions over the column names as read; every refusal is a `DataError` naming the
file and ``header``.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import DataError
from .import_hints import (
    adjusted_close_column,
    close_only_hint,
    column_key,
    delimiter_hint,
    unused_adjusted_warning,
)
from .import_rows import PRICE_NAMES, HeaderNotes

__all__ = ["OPTIONAL_NAMES", "TIME_NAMES", "match_columns", "refuse_repeated_header_names"]

TIME_NAMES = ("time", "timestamp", "date", "datetime")
OPTIONAL_NAMES = ("volume", "funding_rate")


def refuse_repeated_header_names(src: Path, columns: list[str]) -> None:
    """Refuse a CSV header naming a bar column twice (pandas would rename the second
    ``close`` to ``close.1`` and the first would be taken silently)."""
    wanted = (*TIME_NAMES, *PRICE_NAMES, *OPTIONAL_NAMES)
    for column in columns:
        base, dot, suffix = column.rpartition(".")
        if dot and suffix.isdigit() and base in columns and base.strip().lower() in wanted:
            raise DataError(
                f"{src}: header: ambiguous columns: {base!r} appears more than once; "
                "keep only one"
            )


def match_columns(
    src: Path,
    found: list[str],
    messages: list[str],
    price_column: str | None = None,
    ohlc_from_close: bool = False,
) -> tuple[dict[str, str], HeaderNotes]:
    """Map canonical names (time, open, ..., funding_rate, and ``price`` for
    `price_column`) to the file's column names. With `ohlc_from_close` only the close
    (or `price_column`) is required and open/high/low are not mapped. Also what the header
    tells: the columns ignored, an adjusted close left unused."""
    by_lower: dict[str, list[str]] = {}
    for name in found:
        by_lower.setdefault(name.strip().lower(), []).append(name)
    wanted = (*TIME_NAMES, *PRICE_NAMES, *OPTIONAL_NAMES)
    clashes = [names for lower, names in by_lower.items() if lower in wanted and len(names) > 1]
    time_cols = [by_lower[n][0] for n in TIME_NAMES if n in by_lower]
    if clashes or len(time_cols) > 1:
        same = clashes[0] if clashes else time_cols
        raise DataError(
            f"{src}: header: ambiguous columns: {same} could each be the same column; keep only one"
        )
    price = _price_column(src, found, price_column)
    needed = PRICE_NAMES
    if ohlc_from_close:
        needed = () if price else ("close",)
    missing = [n for n in needed if n not in by_lower]
    if not time_cols:
        missing.insert(0, "time (or timestamp, date, datetime)")
    if missing:
        hint = delimiter_hint(found) or close_only_hint(missing, "close" in by_lower or bool(price))
        if not time_cols and any(n in ("", "unnamed: 0") for n in by_lower):
            hint = ("; the unnamed first column looks like a pandas index written by to_csv: "
                    "name it (df.index.name = 'time') and write the file again")
        raise DataError(
            f"{src}: header: missing required column(s): {', '.join(missing)}; "
            f"columns found: {found}{hint}"
        )
    columns = {"time": time_cols[0]}
    columns.update({n: by_lower[n][0] for n in (*needed, *OPTIONAL_NAMES) if n in by_lower})
    if price:
        columns["price"] = price
    ignored = [c for c in found if c not in columns.values()]
    if "volume" not in columns:
        messages.append("no volume column: volume stored as NaN")
    adjusted = adjusted_close_column(found)
    unused = adjusted is not None and price_column is None
    return columns, HeaderNotes(
        notes=(f"ignored column(s): {ignored}",) if ignored else (),
        warnings=(unused_adjusted_warning(adjusted),) if unused else (),
        adjusted=adjusted)


def _price_column(src: Path, found: list[str], price_column: str | None) -> str | None:
    """The file's column named by `price_column` (any case; space, ``_``, ``-`` alike),
    or None when not asked for or when it is the close itself."""
    if price_column is None:
        return None
    key = column_key
    hits = [c for c in found if key(c) == key(price_column)]
    if not hits:
        raise DataError(
            f"{src}: header: --price-column {price_column!r} is not a column; "
            f"columns found: {found}"
        )
    if len(hits) > 1:
        raise DataError(
            f"{src}: header: ambiguous columns: {hits} could each be --price-column "
            f"{price_column!r}; keep only one"
        )
    return None if key(hits[0]) == "close" else hits[0]
