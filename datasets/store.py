"""The bar store: one uncompressed Arrow IPC file per symbol and timeframe (reading side;
`barsweep.datasets.writer` writes).

Layout: ``{store}/{timeframe}/{symbol}.arrow``. Each file holds one record batch with the
columns of `BAR_SCHEMA` (plus, optionally, `FUNDING_RATE_FIELD`), time strictly
increasing and no nulls, so that readers can memory-map it and view every column as a
NumPy array without a copy. ``{store}/barsweep-index.json`` records each file's size,
mtime and hash as written; every read checks the file against it (see
`barsweep.datasets.index`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from .index import (
    check_digest,
    check_file,
    entry_name,
    file_blake2b,
    full_blake2b,
    read_index,
)
from .timeframes import timeframe_seconds

if TYPE_CHECKING:
    import pandas as pd
from ..errors import DataError, one_line

__all__ = [
    "BAR_SCHEMA",
    "FUNDING_RATE_FIELD",
    "BarsInfo",
    "bar_path",
    "check_store_dir",
    "column_array",
    "fingerprint",
    "list_bars",
    "read_table",
    "scan_store",
    "time_ns",
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
ARROW_MAGIC = b"ARROW1"

logger = logging.getLogger(__name__)


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
    problem : str
        "" for a file that reads; else why it does not, in one line naming the file and
        the fix (then `n_bars` is 0, `start` and `end` None, `columns` empty).
    """

    symbol: str
    timeframe: str
    path: Path
    n_bars: int
    start: pd.Timestamp | None
    end: pd.Timestamp | None
    bytes: int
    columns: tuple[str, ...]
    problem: str = ""


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


def os_reason(exc: OSError) -> str:
    """An OSError in words, without the file name (the caller names it)."""
    return exc.strerror or one_line(exc)


def check_time_increasing(time: pa.Array, where: str) -> None:
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
    from .timeframes import time_text

    return time_text(int(ts))


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
    if time.null_count == 0:
        return buffer_view(time, np.int64)
    return time.view(pa.int64()).to_numpy(zero_copy_only=True)  # raises: nulls


def buffer_view(array: pa.Array, dtype: type) -> np.ndarray:
    """The values of ``array``, a fixed-width Arrow array without nulls whose values are
    ``dtype``'s (float64; int64 or timestamp[ns] as int64), as a read-only NumPy view of
    its data buffer.

    pyarrow's ``to_numpy(zero_copy_only=True)`` gives the same view, but its first call
    in a process imports pandas (0.2-0.7 s, what a worker's first block paid).
    """
    dtype = np.dtype(dtype)
    view = np.frombuffer(array.buffers()[1], dtype=dtype, count=len(array),
                         offset=array.offset * dtype.itemsize)
    view.flags.writeable = False
    return view


def read_table(
    store: str | os.PathLike, symbol: str, timeframe: str, *, verify: bool = True
) -> pa.Table:
    """Memory-map `symbol`'s bars of `timeframe` as an Arrow table (no data is read yet).

    Parameters
    ----------
    store : path-like
        The store directory.
    symbol, timeframe : str
        See `bar_path`.
    verify : bool, default True
        Check the file against the store's index first (`barsweep.datasets.index.check_file`:
        size and mtime, and a hash when they changed).

    Returns
    -------
    pyarrow.Table
        n_bars rows, the columns of `BAR_SCHEMA` (and ``funding_rate`` if stored), backed by
        the memory map.

    Raises
    ------
    DataError
        If the file is missing (the message lists what the store holds), does not match
        the store's index, or is not a readable bar file; always one line naming the file.
    """
    path = _existing_path(store, symbol, timeframe)
    try:
        if verify:
            check_file(store, path)
        return open_mapped(path, store)
    except OSError as exc:
        raise DataError(f"{path} cannot be read: {os_reason(exc)}") from exc


def open_mapped(path: Path, store: str | os.PathLike) -> pa.Table:
    """Memory-map the bar file `path` of `store`, refusing anything but a bar file.

    Raises
    ------
    DataError
        One line naming the file, whatever is wrong with its bytes.
    """
    try:
        source = pa.memory_map(str(path))
        if source.read_at(len(ARROW_MAGIC), 0) != ARROW_MAGIC:  # pyarrow checks only the end
            raise pa.ArrowInvalid("the file does not start with the Arrow IPC magic bytes")
        table = pa.ipc.open_file(source).read_all()
        table.validate()
    except (pa.ArrowException, OSError, ValueError, IndexError, OverflowError) as exc:
        # A damaged header or footer surfaces as any of these (ValueError covers
        # UnicodeDecodeError from mangled column names).
        raise DataError(
            f"{path} is not a readable Arrow IPC bar file ({one_line(exc)}): it is damaged "
            f"or not a bar file; re-import it, or run `barsweep data verify --store {store}`"
        ) from exc
    _check_stored_schema(table.schema, path)
    return table


def column_array(table: pa.Table, name: str) -> np.ndarray:
    """View one stored column as a read-only NumPy array; copy (and log) if it cannot.

    Parameters
    ----------
    table : pyarrow.Table
        As returned by `read_table`.
    name : str
        A column; ``time`` comes back as int64 ns since the epoch.

    Returns
    -------
    numpy.ndarray
        shape (n_bars,): a view of the memory map when the column is one chunk without
        nulls (as `write_bars` writes it), else a copy.
    """
    column = table.column(name)
    if column.num_chunks == 1:
        chunk = column.chunk(0)
        try:
            if name == "time":
                return time_ns(chunk)
            if chunk.null_count == 0 and chunk.type == pa.float64():
                return buffer_view(chunk, np.float64)
            return chunk.to_numpy(zero_copy_only=True)
        except pa.ArrowInvalid:
            pass
    logger.warning("column %r cannot be viewed without a copy: copying it", name)
    if name == "time":
        column = column.cast(pa.int64())
    return column.to_numpy()



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


def check_store_dir(store: str | os.PathLike) -> None:
    """Refuse a store that is not an existing directory, in one line naming it."""
    problem = _store_dir_problem(store)
    if problem:
        raise DataError(problem)


def _store_dir_problem(store: str | os.PathLike) -> str:
    path = Path(store)
    if path.is_dir():
        return ""
    if path.exists():
        return f"the store {store} is a file, not a directory"
    return f"the store directory {store} does not exist"


def _available(store: str | os.PathLike) -> str:
    """Describe the store's contents for an error message."""
    problem = _store_dir_problem(store)
    if problem:
        return problem
    found = [f"{symbol} {timeframe}" for symbol, timeframe, _ in scan_store(store)]
    if not found:
        return "the store holds no bars"
    return "available: " + ", ".join(found)


def scan_store(store: str | os.PathLike) -> list[tuple[str, str, Path]]:
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
        One per file; the time column is read through the memory map, nothing else. Each
        file is checked against the store's index as every read does (size and mtime; a
        hash only when they changed; `barsweep.datasets.verify` hashes every byte). A file
        that is damaged, not a bar file or not what the index recorded is listed with its
        `BarsInfo.problem`.

    Raises
    ------
    DataError
        If `store` is not a directory, or its index is broken.

    Examples
    --------
    >>> list_bars(tmp_store)  # doctest: +SKIP
    [BarsInfo(symbol='BTCUSDT', timeframe='1h', ..., n_bars=26280, ...)]
    """
    import pandas as pd  # only for the timestamps shown (keeps import of the store light)

    check_store_dir(store)
    infos = []
    read_index(store)  # a broken index is the store's problem, not each file's
    for symbol, timeframe, path in scan_store(store):
        try:
            table = read_table(store, symbol, timeframe)
        except DataError as exc:
            size = path.stat().st_size if path.exists() else 0
            infos.append(BarsInfo(symbol, timeframe, path, 0, None, None, size, (),
                                  problem=one_line(exc)))
            continue
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
        If a file is missing, or its hash is not the one the store's index recorded (the
        hash covers every byte, so this catches edits that kept the size and mtime; it is
        taken again only when a file may have changed, see
        `barsweep.datasets.index.full_blake2b`).
    """
    names = [symbols] if isinstance(symbols, str) else list(symbols)
    if not names:
        raise DataError("fingerprint needs at least one symbol, got none")
    files = []
    combined = hashlib.blake2b()
    for symbol in names:
        path = _existing_path(store, symbol, timeframe)
        try:
            size, digest = full_blake2b(path)
        except OSError as exc:
            raise DataError(f"{path} cannot be read: {os_reason(exc)}") from exc
        check_digest(store, path, size, digest)
        files.append({"symbol": symbol, "timeframe": timeframe, "bytes": size, "blake2b": digest})
        combined.update(f"{symbol}\0{timeframe}\0{size}\0{digest}\n".encode())
    return {"files": files, "blake2b": combined.hexdigest()}


def bars_problem(store: str | os.PathLike, symbol: str, timeframe: str,
                 blake2b: str) -> str | None:
    """Why this machine cannot read `symbol`'s bars from `store` as the file with hash
    `blake2b` (e.g. the file a driver fingerprinted), or None when it can.

    What a Dask worker asks before it memory-maps bars the driver named by path: the
    path may be missing there (no shared filesystem) or hold other bars. The file is
    hashed only when the store's index does not vouch for it (no entry, or a size or
    mtime other than recorded), as every read does.
    """
    path = bar_path(store, symbol, timeframe)
    if not path.is_file():
        return f"no file {path}"
    try:
        check_file(store, path)
        record = read_index(store).get(entry_name(store, path))
        digest = record.blake2b if record is not None else file_blake2b(path)
    except (OSError, DataError) as exc:
        return one_line(exc)
    if digest != blake2b:
        return (f"{path} holds other bars (BLAKE2b {digest[:12]}..., the driver's "
                f"{blake2b[:12]}...)")
    return None
