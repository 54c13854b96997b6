"""The bar store: one uncompressed Arrow IPC file per symbol and timeframe.

Layout: ``{store}/{timeframe}/{symbol}.arrow``. Each file holds one record batch with the
columns of `BAR_SCHEMA` (plus, optionally, `FUNDING_RATE_FIELD`), time strictly
increasing and no nulls, so that readers can memory-map it and view every column as a
NumPy array without a copy.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather

from barsweep.datasets.timeframes import timeframe_seconds

if TYPE_CHECKING:
    import pandas as pd
from barsweep.errors import DataError

__all__ = [
    "BAR_SCHEMA",
    "FUNDING_RATE_FIELD",
    "BarsInfo",
    "bar_path",
    "fingerprint",
    "list_bars",
    "read_table",
    "time_ns",
    "write_bars",
]

SYMBOL_PATTERN = re.compile(r"^[A-Za-z0-9._-]+$")
TIME_TYPE = pa.timestamp("ns", tz="UTC")
BAR_SCHEMA = pa.schema(
    [
        pa.field("time", TIME_TYPE, nullable=False),
        pa.field("open", pa.float64(), nullable=False),
        pa.field("high", pa.float64(), nullable=False),
        pa.field("low", pa.float64(), nullable=False),
        pa.field("close", pa.float64(), nullable=False),
        pa.field("volume", pa.float64(), nullable=False),
    ]
)
FUNDING_RATE_FIELD = pa.field("funding_rate", pa.float64(), nullable=False)
SUFFIX = ".arrow"
_HASH_CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class BarsInfo:
    """What one file of the store holds (a row of ``barsweep data info``).

    Attributes
    ----------
    symbol, timeframe : str
        The file's symbol and timeframe.
    path : Path
        The file.
    n_bars : int
        Number of bars.
    start, end : pandas.Timestamp or None
        Times (UTC) of the first and last bar; None when the file has no bars.
    bytes : int
        File size.
    columns : tuple of str
        Column names, in file order.
    """

    symbol: str
    timeframe: str
    path: Path
    n_bars: int
    start: pd.Timestamp | None
    end: pd.Timestamp | None
    bytes: int
    columns: tuple[str, ...]


def bar_path(store: str | os.PathLike, symbol: str, timeframe: str) -> Path:
    """Path of the file holding `symbol`'s bars of `timeframe` in `store`.

    Parameters
    ----------
    store : path-like
        The store directory.
    symbol : str
        Letters, digits, ``.``, ``_`` and ``-`` only (it becomes a file name).
    timeframe : str
        A timeframe, e.g. ``"1h"`` (see `timeframe_seconds`).

    Returns
    -------
    Path
        ``{store}/{timeframe}/{symbol}.arrow`` (it may not exist).

    Raises
    ------
    DataError
        If `symbol` or `timeframe` is not valid.

    Examples
    --------
    >>> bar_path("bars", "BTCUSDT", "1h").as_posix()
    'bars/1h/BTCUSDT.arrow'
    """
    if not isinstance(symbol, str) or SYMBOL_PATTERN.match(symbol) is None:
        raise DataError(
            f"symbol {symbol!r} is not valid: use letters, digits, '.', '_' and '-' only"
        )
    timeframe_seconds(timeframe)
    return Path(store) / timeframe / f"{symbol}{SUFFIX}"


def write_bars(store: str | os.PathLike, symbol: str, timeframe: str, table: pa.Table) -> Path:
    """Write `table` as `symbol`'s bars of `timeframe`, replacing any previous file atomically.

    Parameters
    ----------
    store : path-like
        The store directory (created if missing).
    symbol, timeframe : str
        See `bar_path`.
    table : pyarrow.Table
        n_bars >= 1 rows with the columns of `BAR_SCHEMA` and optionally ``funding_rate``.
        Numeric columns are cast to float64 and a timestamp ``time`` to ns UTC (a naive one
        is taken as UTC). No nulls; time strictly increasing.

    Returns
    -------
    Path
        The file written, ``bar_path(store, symbol, timeframe)``.

    Raises
    ------
    DataError
        If the table is empty, has unknown or missing columns, types that cannot be cast,
        nulls, or times that do not strictly increase. Nothing is written then.
    """
    path = bar_path(store, symbol, timeframe)
    where = f"bars for {symbol} {timeframe}"
    table = conform_table(table, where)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{symbol}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        feather.write_feather(table, tmp_name, compression="uncompressed", chunksize=len(table))
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return path


def conform_table(table: pa.Table, where: str) -> pa.Table:
    """Check `table` against the store's schema and return it cast, in one chunk per column.

    Parameters
    ----------
    table : pyarrow.Table
        Bars, see `write_bars`.
    where : str
        What the table is, for error messages.

    Returns
    -------
    pyarrow.Table
        Columns in schema order, typed as `BAR_SCHEMA`, one chunk each, no metadata.

    Raises
    ------
    DataError
        See `write_bars`.
    """
    if not isinstance(table, pa.Table):
        raise DataError(f"{where}: expected a pyarrow.Table, got {type(table).__name__}")
    names = table.column_names
    fields = list(BAR_SCHEMA) + ([FUNDING_RATE_FIELD] if "funding_rate" in names else [])
    allowed = [f.name for f in fields]
    missing = [name for name in BAR_SCHEMA.names if name not in names]
    unknown = [name for name in names if name not in allowed]
    if missing or unknown or len(set(names)) != len(names):
        raise DataError(
            f"{where}: columns must be {', '.join(allowed)} (funding_rate optional); "
            f"missing: {missing or 'none'}; unexpected: {unknown or 'none'}; got {names}"
        )
    if table.num_rows == 0:
        raise DataError(f"{where}: the table has no rows")
    columns = [_cast_column(table.column(f.name), f, where) for f in fields]
    out = pa.Table.from_arrays(columns, schema=pa.schema(fields))
    _check_time_increasing(out.column("time").chunk(0), where)
    return out


def _cast_column(column: pa.ChunkedArray, field: pa.Field, where: str) -> pa.Array:
    """Cast one column to `field`'s type as a single chunk; refuse nulls and odd types."""
    source = column.type
    castable = (
        pa.types.is_timestamp(source)
        if field.name == "time"
        else pa.types.is_floating(source) or pa.types.is_integer(source)
    )
    if not castable:
        wanted = "a timestamp" if field.name == "time" else "numbers"
        raise DataError(f"{where}: column {field.name!r} must hold {wanted}, got {source}")
    if column.null_count:
        first = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
        raise DataError(
            f"{where}: column {field.name!r} has {column.null_count} null value(s), "
            f"the first at row {first + 1}; the store allows no nulls"
        )
    if field.name == "time" and source.tz is None:
        column = column.cast(pa.timestamp(source.unit, tz="UTC"))
    try:
        cast = column.cast(field.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise DataError(
            f"{where}: column {field.name!r} cannot be cast to {field.type}: {exc}"
        ) from exc
    return cast.combine_chunks() if cast.num_chunks != 1 else cast.chunk(0)


def _check_time_increasing(time: pa.Array, where: str) -> None:
    """Refuse times that do not strictly increase, naming the first 1-based row."""
    ts_ns = time_ns(time)
    bad = np.flatnonzero(np.diff(ts_ns) <= 0)
    if bad.size:
        row = int(bad[0]) + 2
        raise DataError(
            f"{where}: time must strictly increase, but row {row} "
            f"({_iso(ts_ns[row - 1])}) is not after row {row - 1} ({_iso(ts_ns[row - 2])})"
        )


def _iso(ts: int) -> str:
    return str(np.datetime64(int(ts), "ns")) + "Z"


def time_ns(time: pa.Array) -> np.ndarray:
    """View a timestamp[ns] array as int64 nanoseconds since the epoch, without a copy.

    Parameters
    ----------
    time : pyarrow.Array
        Timestamps in ns, no nulls, shape (n_bars,).

    Returns
    -------
    numpy.ndarray
        int64, shape (n_bars,), read-only view of the Arrow buffer.
    """
    return time.view(pa.int64()).to_numpy(zero_copy_only=True)


def read_table(store: str | os.PathLike, symbol: str, timeframe: str) -> pa.Table:
    """Memory-map `symbol`'s bars of `timeframe` as an Arrow table (no data is read yet).

    Parameters
    ----------
    store : path-like
        The store directory.
    symbol, timeframe : str
        See `bar_path`.

    Returns
    -------
    pyarrow.Table
        n_bars rows, the columns of `BAR_SCHEMA` (and ``funding_rate`` if stored), backed by
        the memory map.

    Raises
    ------
    DataError
        If the file is missing (the message lists what the store holds) or is not a bar
        file.
    """
    path = _existing_path(store, symbol, timeframe)
    try:
        table = pa.ipc.open_file(pa.memory_map(str(path))).read_all()
    except (pa.ArrowInvalid, OSError) as exc:
        raise DataError(f"{path} is not a readable Arrow IPC bar file: {exc}") from exc
    _check_stored_schema(table.schema, path)
    return table


def _check_stored_schema(schema: pa.Schema, path: Path) -> None:
    """Refuse a stored file whose columns are not the store's."""
    expected = list(BAR_SCHEMA) + ([FUNDING_RATE_FIELD] if "funding_rate" in schema.names else [])
    got = [(f.name, f.type) for f in schema]
    if got != [(f.name, f.type) for f in expected]:
        raise DataError(
            f"{path} does not have the bar store's columns: expected "
            f"{[f'{f.name}: {f.type}' for f in expected]}, got {[f'{n}: {t}' for n, t in got]}"
        )


def _existing_path(store: str | os.PathLike, symbol: str, timeframe: str) -> Path:
    """`bar_path`, refusing a missing file with a message listing what the store holds."""
    path = bar_path(store, symbol, timeframe)
    if not path.is_file():
        raise DataError(
            f"no bars for symbol {symbol!r} timeframe {timeframe!r} in store {store} "
            f"(looked for {path}); {_available(store)}"
        )
    return path


def _available(store: str | os.PathLike) -> str:
    """Describe the store's contents for an error message."""
    if not Path(store).is_dir():
        return f"the store directory {store} does not exist"
    found = [f"{symbol} {timeframe}" for symbol, timeframe, _ in _scan(store)]
    if not found:
        return "the store holds no bars"
    return "available: " + ", ".join(found)


def _scan(store: str | os.PathLike) -> list[tuple[str, str, Path]]:
    """(symbol, timeframe, path) of the store's files, by symbol then timeframe length."""
    found = []
    for tf_dir in Path(store).iterdir():
        if not tf_dir.is_dir():
            continue
        try:
            seconds = timeframe_seconds(tf_dir.name)
        except DataError:
            continue
        for file in tf_dir.glob(f"*{SUFFIX}"):
            symbol = file.name[: -len(SUFFIX)]
            if SYMBOL_PATTERN.match(symbol) and not symbol.startswith("."):
                found.append((symbol, seconds, tf_dir.name, file))
    found.sort(key=lambda item: item[:2])
    return [(symbol, tf, file) for symbol, _, tf, file in found]


def list_bars(store: str | os.PathLike) -> list[BarsInfo]:
    """Describe every bar file in `store`, by symbol then timeframe.

    Parameters
    ----------
    store : path-like
        The store directory.

    Returns
    -------
    list of BarsInfo
        One per file; the time column is read through the memory map, nothing else.

    Raises
    ------
    DataError
        If `store` is not a directory or a file in it is not a bar file.

    Examples
    --------
    >>> list_bars(tmp_store)  # doctest: +SKIP
    [BarsInfo(symbol='BTCUSDT', timeframe='1h', ..., n_bars=26280, ...)]
    """
    import pandas as pd  # only for the timestamps shown (keeps import of the store light)

    if not Path(store).is_dir():
        raise DataError(f"the store directory {store} does not exist")
    infos = []
    for symbol, timeframe, path in _scan(store):
        table = read_table(store, symbol, timeframe)
        ts_ns = time_ns(table.column("time").combine_chunks())
        infos.append(
            BarsInfo(
                symbol=symbol,
                timeframe=timeframe,
                path=path,
                n_bars=table.num_rows,
                start=pd.Timestamp(int(ts_ns[0]), tz="UTC") if ts_ns.size else None,
                end=pd.Timestamp(int(ts_ns[-1]), tz="UTC") if ts_ns.size else None,
                bytes=path.stat().st_size,
                columns=tuple(table.column_names),
            )
        )
    return infos


def fingerprint(
    store: str | os.PathLike, symbols: str | Iterable[str], timeframe: str
) -> dict[str, object]:
    """Sizes and BLAKE2b hashes of the files holding `symbols`' bars of `timeframe`.

    Parameters
    ----------
    store : path-like
        The store directory.
    symbols : str or iterable of str
        One symbol or several, in the order the results will use.
    timeframe : str
        See `bar_path`.

    Returns
    -------
    dict
        ``{"files": [{"symbol", "timeframe", "bytes", "blake2b"}, ...], "blake2b": hex}``,
        the combined hash covering every file's symbol, timeframe, size and hash in order.

    Raises
    ------
    DataError
        If a file is missing.
    """
    names = [symbols] if isinstance(symbols, str) else list(symbols)
    if not names:
        raise DataError("fingerprint needs at least one symbol, got none")
    files = []
    combined = hashlib.blake2b()
    for symbol in names:
        path = _existing_path(store, symbol, timeframe)
        digest = _file_blake2b(path)
        size = path.stat().st_size
        files.append({"symbol": symbol, "timeframe": timeframe, "bytes": size, "blake2b": digest})
        combined.update(f"{symbol}\0{timeframe}\0{size}\0{digest}\n".encode())
    return {"files": files, "blake2b": combined.hexdigest()}


def _file_blake2b(path: Path) -> str:
    """BLAKE2b hex digest of a file's bytes, read 1 MiB at a time."""
    h = hashlib.blake2b()
    with path.open("rb") as fh:
        while chunk := fh.read(_HASH_CHUNK_BYTES):
            h.update(chunk)
    return h.hexdigest()
