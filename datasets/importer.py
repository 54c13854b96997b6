"""Import bars from CSV or Parquet into the store, refusing invalid input row by row.

Columns are matched in any case: time from ``time``, ``timestamp``, ``date`` or
``datetime``; ``open``, ``high``, ``low``, ``close`` required; ``volume`` optional (NaN
when absent); ``funding_rate`` optional (empty cells mean no funding at that bar and are
stored as 0). Other columns are ignored. Times are ISO strings (naive = UTC), datetimes,
or epoch integers whose unit (s, ms, us, ns) is inferred from magnitude.

Every refusal is a `DataError` whose message names the file, the 1-based data row (row 1
is the first row after the header) and the rule broken: empty input, missing columns,
unparseable timestamps, non-numeric values, missing values (unless ``drop_nan``),
non-positive prices, negative volume, ``high < max(open, close)``, ``low > min(open,
close)``, unsorted (unless ``sort``) or duplicate timestamps, bars already stored
(unless ``replace``), a median spacing other than the timeframe (unless ``force``).
Nothing is written unless the whole file passes. Where an option would read the file,
the message names it (``--ohlc-from-close``, ``--time-format``, ``--sort``,
``--delimiter``).

Bars stored as asked can still be wrong: a file with an adjusted close column (``Adj
Close``, ``adj_close``...) stores the raw close unless ``price_column`` names it, and a
one-bar close move beyond ±45 % is most often a split the prices are not adjusted for.
Both are reported in `ImportReport.warnings`; nothing is refused for them.

A file is first read with typed columns (pyarrow parses CSV prices as float64 and ISO or
epoch times; Parquet columns come as stored), which is fast. If that read fails or any
cell or rule is broken, the file is read again with every cell as text and checked cell
by cell; that slower reading words every refusal (`_import_text`).
"""
from __future__ import annotations

import csv
import gzip
import logging
import os
import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from ..errors import DataError, one_line
from .import_header import (
    TIME_NAMES,
    match_columns,
    refuse_repeated_header_names,
)
from .import_hints import delimiter_hint, split_warning
from .import_rows import (
    CheckedBars,
    ImportChoices,
    checked_bars,
    fail,
    note_epoch_unit,
    refuse_bad_times,
    refuse_non_numeric,
)
from .index import entry_name, read_index
from .parse import (
    ParsedTime,
    parse_numbers,
    parse_times,
    typed_numbers,
    typed_times,
)
from .store import TIME_TYPE, bar_path
from .writer import check_store_writable, write_bars

__all__ = ["ImportReport", "import_file"]

logger = logging.getLogger(__name__)

@dataclass(frozen=True)
class ImportReport:
    """What `import_file` did.

    Attributes
    ----------
    path : Path
        The store file written.
    n_rows : int
        Bars written.
    n_dropped : int
        Rows dropped for missing values (only with ``drop_nan=True``).
    time_unit : str
        How times were written in the file: ``"s"``, ``"ms"``, ``"us"``, ``"ns"`` (epoch
        integers), ``"iso"`` (strings), ``"format"`` (text read with `time_format`) or
        ``"datetime"`` (typed datetimes).
    messages : list of str
        Everything the import has to say: details (inferred units, dropped rows), which
        are logged at INFO level, then `notes` and `warnings`, which are not logged: the
        caller shows them (the CLI prints them, ``barsweep.sweep()`` warns).
    notes : list of str
        Those of `messages` about what is stored: columns ignored, and choices that change
        the bars (``price_column``, ``ohlc_from_close``, ``sort``, a spacing let through
        by ``force``, one bar).
    warnings : list of str
        Those of `messages` about bars stored as asked that are likely not what was meant:
        an adjusted close column left unused, one-bar moves beyond ±45 % (likely splits
        the prices are not adjusted for).
    read_as : str
        ``"typed"`` when pyarrow typed the columns (CSV prices as float64, times parsed
        by Arrow; Parquet as stored), ``"text"`` when every cell was read as text and
        parsed through pandas: with ``time_format``, or when the typed read did not
        apply (a cell that is missing, not a finite number, a time Arrow does not read),
        which is logged at DEBUG level. Both store the same bars.
    """

    path: Path
    n_rows: int
    n_dropped: int
    time_unit: str
    messages: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    read_as: str = "text"
    warnings: list[str] = field(default_factory=list)


def import_file(path: str | os.PathLike, store: str | os.PathLike, symbol: str,
                timeframe: str, drop_nan: bool = False, *, time_format: str | None = None,
                price_column: str | None = None, ohlc_from_close: bool = False,
                replace: bool = False, force: bool = False, sort: bool = False,
                delimiter: str | None = None) -> ImportReport:
    """Validate a CSV (``.csv``, ``.csv.gz``) or Parquet file of bars and store it, by
    the rules of this module's docstring (the columns read, what is refused).

    Parameters
    ----------
    path : path-like
        The file to import.
    store : path-like
        The bar store directory.
    symbol, timeframe : str
        Where the bars go (see `bar_path`).
    drop_nan : bool, default False
        Drop rows with an empty or NaN time, price or volume instead of refusing the file.
    time_format : str, optional
        A strptime format for text times (``"%d/%m/%Y"``); typed datetimes ignore it.
    price_column : str, optional
        A column to store as close (``"adj_close"``; matched in any case, with spaces,
        ``_`` and ``-`` alike). Open, high and low are scaled per bar by
        ``price_column / close``, so each bar keeps its shape; the file's close is then
        needed for the factor but not stored.
    ohlc_from_close : bool, default False
        Close-only data: open, high and low are set to the close (or `price_column`), so
        a backtest checks stops on the close only. Open/high/low columns are ignored.
    replace : bool, default False
        Replace bars already stored for `symbol` and `timeframe` (atomically, index and
        file together); without it such an import is refused before the file is read.
    force : bool, default False
        Import bars whose median spacing differs from `timeframe` (noted, not refused).
    sort : bool, default False
        Sort the rows by time before the checks (a file written newest first); rows with
        the same time are still refused as duplicates.
    delimiter : str, optional
        The CSV's field delimiter, one character (``";"``; ``"\\t"`` or ``"tab"`` for a
        tab); default ``","``. Not used for Parquet.

    Returns
    -------
    ImportReport

    Raises
    ------
    DataError
        Naming the file, row and rule; the store is left untouched.

    Examples
    --------
    >>> report = import_file("btc_1h.csv", "bars", "BTCUSDT", "1h")  # doctest: +SKIP
    >>> report.n_rows, report.time_unit  # doctest: +SKIP
    (26280, 'ms')
    """
    bar_path(store, symbol, timeframe)
    check_store_writable(store)
    _refuse_existing(store, symbol, timeframe, replace)
    src = Path(path)
    checked = _checked(src, ImportChoices(timeframe, drop_nan, time_format, price_column,
                                          ohlc_from_close, force, sort, _delimiter(delimiter)))
    moved = split_warning(checked.values["time"], checked.values["close"],
                          price_column=checked.price_from, adjusted=checked.adjusted)
    warned = [*checked.warnings, *([moved] if moved else [])]
    table = _table(checked.values)
    written = write_bars(store, symbol, timeframe, table, price_column=checked.price_from)
    shown = {*checked.notes, *warned}  # the caller's to show, once
    for message in (m for m in checked.messages if m not in shown):
        logger.info("%s: %s", src, message)
    return ImportReport(written, table.num_rows, checked.n_dropped, checked.time_unit,
                        [*checked.messages, *warned[len(checked.warnings):]],
                        checked.notes, checked.read_as, warned)


class _NotTyped(Exception):
    """The typed read does not apply to this file; the message says why."""


def _checked(src: Path, choices: ImportChoices) -> CheckedBars:
    """The file's bars, read typed (:func:`_import_typed`) or, where that does not
    apply, as text (:func:`_import_text`, which words the refusal)."""
    try:
        checked = _import_typed(src, choices)
    except _NotTyped as reason:
        logger.debug("%s: not read as typed columns (%s); reading every cell as text",
                     src, reason)
        checked = None
    if checked is None:  # out of the except block: the typed columns are freed first
        checked = _import_text(src, choices)
    return checked


def _import_text(src: Path, choices: ImportChoices) -> CheckedBars:
    """Read every cell as text and check it, refusing the first bad row by number."""
    messages: list[str] = []
    raw = _read_source(src, messages, choices.delimiter)
    if len(raw) == 0:
        raise DataError(f"{src}: empty input: the file has no data rows")
    found = [str(c) for c in raw.columns]
    columns, header = match_columns(src, found, messages, choices.price_column,
                                     choices.ohlc_from_close)
    rows = np.arange(1, len(raw) + 1)
    time = _parse_time_column(src, raw[columns["time"]], choices.time_format, messages)
    refuse_bad_times(src, columns["time"], raw, time, rows)
    note_epoch_unit(columns, time, messages)
    numbers = {name: parse_numbers(raw[col]) for name, col in columns.items() if name != "time"}
    refuse_non_numeric(src, raw, columns, numbers, rows)
    return checked_bars(src, columns, time, numbers, choices, messages, "text", header)


def _import_typed(src: Path, choices: ImportChoices) -> CheckedBars:
    """Let pyarrow type the columns (float64 prices, ISO or epoch times) and check them.

    Raises
    ------
    _NotTyped
        When the file cannot be read this way or any check fails: then `_import_text`
        reads it and names the row (it refuses every file this refuses).
    """
    if choices.time_format is not None:
        raise _NotTyped("--time-format is read as text")
    messages: list[str] = []
    if not src.is_file():
        raise _NotTyped("no such file")
    name = src.name.lower()
    try:
        if name.endswith((".csv", ".csv.gz")):
            names = _csv_names(src, choices.delimiter)
            columns, header = match_columns(src, names, messages, choices.price_column,
                                             choices.ohlc_from_close)
            table = _read_csv_typed(src, names, columns, choices.delimiter)
        elif name.endswith((".parquet", ".pq")):
            table = _read_parquet_typed(src, messages)
            _note_unused_delimiter(choices.delimiter, messages)
            columns, header = match_columns(src, table.column_names, messages,
                                             choices.price_column, choices.ohlc_from_close)
        else:
            raise _NotTyped("unsupported file type")
    except DataError as exc:
        raise _NotTyped(one_line(exc)) from exc
    except (pa.ArrowException, OSError, ValueError, EOFError, zlib.error) as exc:
        raise _NotTyped(f"cannot be read by pyarrow: {one_line(exc)}") from exc
    if table.num_rows == 0:
        raise _NotTyped("no data rows")
    time = typed_times(table.column(columns["time"]))
    if time is None:
        raise _NotTyped(f"column {columns['time']!r} has times not read as typed")
    note_epoch_unit(columns, time, messages)
    numbers = {}
    for name, col in columns.items():
        if name != "time":
            numbers[name] = typed_numbers(table.column(col), nullable=name == "funding_rate")
            if numbers[name] is None:
                raise _NotTyped(f"column {col!r} has cells not read as finite numbers")
    try:
        return checked_bars(src, columns, time, numbers, choices, messages, "typed", header)
    except DataError as exc:
        raise _NotTyped(str(exc)) from exc


def _delimiter(delimiter: str | None) -> str | None:
    """`delimiter` as one character (``"\\t"`` and ``"tab"`` are a tab), or refused."""
    if delimiter is None:
        return None
    named = {"\\t": "\t", "tab": "\t"}.get(delimiter.lower(), delimiter)
    if len(named) != 1 or named in "\"\r\n":
        raise DataError(f"--delimiter {delimiter!r}: expected one character, e.g. ';', "
                        "'|' or '\\t' (a tab)")
    return named


def _note_unused_delimiter(delimiter: str | None, messages: list[str]) -> None:
    if delimiter is not None:
        messages.append(f"--delimiter {delimiter!r} not used: the file is Parquet")


def _parse_options(delimiter: str | None) -> pacsv.ParseOptions:
    return pacsv.ParseOptions(delimiter=delimiter or ",")


def _csv_names(src: Path, delimiter: str | None = None) -> list[str]:
    """A CSV's header as pyarrow reads it, when it is the header the text read gives."""
    with pacsv.open_csv(src, read_options=pacsv.ReadOptions(block_size=1 << 16),
                        parse_options=_parse_options(delimiter)) as reader:
        names = reader.schema.names
    # pandas names empty or repeated header cells itself ("Unnamed: 0", "close.1").
    if "" in names or len(set(names)) != len(names):
        raise _NotTyped("header cells that are empty or repeated")
    refuse_repeated_header_names(src, names)
    return names


def _read_csv_typed(src: Path, names: list[str], columns: dict[str, str],
                    delimiter: str | None = None) -> pa.Table:
    """Read a CSV with the numeric bar columns (`columns` but time) as float64, empty
    cells null, and every other column as text (time included, parsed by `typed_times`)."""
    numeric = {col for name, col in columns.items() if name != "time"}
    types = {n: pa.float64() if n in numeric else pa.string() for n in names}
    options = pacsv.ConvertOptions(column_types=types, null_values=[""],
                                   strings_can_be_null=False)
    return pacsv.read_csv(src, convert_options=options,
                          parse_options=_parse_options(delimiter))


def _read_parquet_typed(src: Path, messages: list[str]) -> pa.Table:
    """Read a Parquet file as stored, a DataFrame index stored with it turned into the
    first columns as `_index_as_columns` names them (only the index goes through pandas)."""
    table = pq.read_table(src)
    index = (table.schema.pandas_metadata or {}).get("index_columns", [])
    if any(isinstance(entry, dict) and entry.get("name") is not None for entry in index):
        raise _NotTyped("a named RangeIndex (pandas makes it a column)")
    odd = [f.name for f in table.schema if pa.types.is_nested(f.type)
           or pa.types.is_dictionary(f.type) or isinstance(f.type, pa.ExtensionType)]
    if odd or len(set(table.column_names)) != len(table.column_names):
        raise _NotTyped("nested, dictionary, extension or repeated columns")
    stored = [entry for entry in index if isinstance(entry, str)]
    if not stored:
        return table
    restored = table.select(stored).to_pandas(integer_object_nulls=True)
    data = [n for n in table.column_names if n not in stored]
    names = _index_names(src, restored.index, data, messages)
    return table.select([*stored, *data]).rename_columns([*names, *data])


def _refuse_existing(store: str | os.PathLike, symbol: str, timeframe: str,
                     replace: bool) -> None:
    """Refuse to overwrite stored bars (a file, or an index entry) unless `replace`."""
    if replace:
        return
    path = bar_path(store, symbol, timeframe)
    indexed = Path(store).is_dir() and entry_name(store, path) in read_index(store, cached=False)
    if path.exists() or indexed:
        raise DataError(
            f"store {store} already holds bars for {symbol} {timeframe} ({path}); "
            "pass --replace (replace=True in Python) to replace them"
        )


def _parse_time_column(src: Path, column: pd.Series, time_format: str | None,
                       messages: list[str]) -> ParsedTime:
    """The time column parsed, with `time_format` when given (refused if invalid)."""
    if time_format is not None and pd.api.types.is_datetime64_any_dtype(column):
        messages.append(f"--time-format {time_format!r} not used: the times are typed datetimes")
    try:
        return parse_times(column, time_format)
    except ValueError as exc:
        raise DataError(
            f"{src}: --time-format {time_format!r} is not a valid strptime format: "
            f"{one_line(exc)}"
        ) from exc


def _read_source(src: Path, messages: list[str], delimiter: str | None = None) -> pd.DataFrame:
    """Read a CSV (every column as text) or a Parquet file into a DataFrame.

    A Parquet file written from a DataFrame keeps its index (pandas metadata): the index
    becomes a column, named ``time`` when it is an unnamed DatetimeIndex and the file has
    no time column, so a frame indexed by time imports as it is.
    """
    if not src.is_file():
        raise DataError(f"{src}: no such file")
    name = src.name.lower()
    try:
        if name.endswith((".csv", ".csv.gz")):
            with warnings.catch_warnings():
                # A row longer than the header would otherwise be read as an index.
                warnings.simplefilter("error", pd.errors.ParserWarning)
                frame = pd.read_csv(src, dtype=str, na_filter=False, index_col=False,
                                    sep=delimiter or ",")
        elif name.endswith((".parquet", ".pq")):
            _note_unused_delimiter(delimiter, messages)
            # Integers with nulls stay exact ints (not float64, which would round ns times).
            table = pq.read_table(src)
            frame = _index_as_columns(src, table.to_pandas(integer_object_nulls=True), messages)
        else:
            raise DataError(f"{src}: unsupported file type; use .csv, .csv.gz or .parquet")
    except pd.errors.EmptyDataError as exc:
        raise DataError(f"{src}: empty input: the file has no header and no rows") from exc
    except (pd.errors.ParserWarning, pd.errors.ParserError) as exc:
        raise _csv_shape_error(src, exc, delimiter) from exc
    except (pa.ArrowException, ValueError, OSError, EOFError, zlib.error, csv.Error) as exc:
        # ValueError covers UnicodeDecodeError; EOFError and zlib.error a truncated .gz.
        kind = "csv" if name.endswith((".csv", ".csv.gz")) else "parquet"
        raise DataError(f"{src}: cannot be read as {kind}: {one_line(exc)}") from exc
    frame.columns = [str(c) for c in frame.columns]
    if name.endswith((".csv", ".csv.gz")):
        refuse_repeated_header_names(src, frame.columns)
    return frame


def _csv_shape_error(src: Path, exc: Exception, delimiter: str | None = None) -> DataError:
    """The error for a CSV pandas cannot tokenize, naming the first row longer than the
    header (pandas names file lines, which count the header and blank lines)."""
    try:
        opener = gzip.open if src.name.lower().endswith(".gz") else open
        with opener(src, "rt", newline="") as fh:
            reader = csv.reader(fh, delimiter=delimiter or ",")
            header = next(reader, [])
            rows = (r for r in reader if r)  # pandas skips blank lines
            for row, fields in enumerate(rows, start=1):
                if len(fields) > len(header):
                    return fail(src, row, "more fields than the header has columns",
                                 f"{len(fields)} fields, the header has {len(header)}"
                                 + delimiter_hint(header))
    except (OSError, EOFError, ValueError, zlib.error, csv.Error):
        pass
    return DataError(f"{src}: cannot be read as csv: {one_line(exc)}")


def _index_as_columns(src: Path, frame: pd.DataFrame, messages: list[str]) -> pd.DataFrame:
    """Turn the index pandas restored from a Parquet file into columns (see `_read_source`)."""
    if isinstance(frame.index, pd.RangeIndex) and frame.index.name is None:
        return frame
    names = _index_names(src, frame.index, [str(c) for c in frame.columns], messages)
    return frame.reset_index(names=names)


def _index_names(src: Path, index: pd.Index, columns: list[str],
                 messages: list[str]) -> list[str]:
    """The column names of a DataFrame index's levels next to `columns`: an unnamed
    DatetimeIndex is ``time`` unless a time column exists, other unnamed levels
    ``index_{i}``; a name that is also a column's is refused as ambiguous."""
    lower = {c.strip().lower() for c in columns}
    has_time = any(n in lower for n in TIME_NAMES)
    names = []
    for i, name in enumerate(index.names):
        level = index.get_level_values(i)
        if name is None:
            is_time = isinstance(level, pd.DatetimeIndex) and not has_time
            name = "time" if is_time and "time" not in names else f"index_{i}"
        name = str(name)
        if name.strip().lower() in lower or name.strip().lower() in {n.lower() for n in names}:
            raise DataError(
                f"{src}: header: ambiguous columns: the DataFrame index {name!r} and a column "
                "of the same name; keep only one"
            )
        names.append(name)
        has_time = has_time or name.strip().lower() in TIME_NAMES
        messages.append(f"the DataFrame index ({level.dtype}) is read as column {name!r}")
    return names



def _table(values: dict[str, np.ndarray]) -> pa.Table:
    """The store table of the validated columns."""
    arrays = {"time": pa.array(values["time"], type=pa.int64()).view(TIME_TYPE)}
    arrays.update(
        {name: pa.array(v, type=pa.float64()) for name, v in values.items() if name != "time"}
    )
    return pa.table(arrays)
