"""Writing the bar store: one file per call, all or nothing, recorded in the store's index."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather

from ..errors import DataError
from .index import (
    FileRecord,
    entry_name,
    file_blake2b,
    fsync_dir,
    read_index,
    store_lock,
    write_index,
)
from .store import (
    BAR_SCHEMA,
    FUNDING_RATE_FIELD,
    bar_path,
    check_time_increasing,
    os_reason,
)

__all__ = ["PRICE_COLUMN_KEY", "check_store_writable", "conform_table", "write_bars"]

PSEUDO_FILESYSTEMS = ("/proc", "/sys")  # kernel views; /dev/shm is a fine store


#: The key of a bar file's schema metadata naming the source column its close was taken
#: from (``--price-column``: adjusted prices), absent when the file's own close was
#: stored. ``data verify`` reads it to word its warnings.
PRICE_COLUMN_KEY = b"barsweep.price_column"


def write_bars(store: str | os.PathLike, symbol: str, timeframe: str, table: pa.Table,
               price_column: str | None = None) -> Path:
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
    price_column : str, optional
        The source column the close was taken from (adjusted prices), recorded in the
        file's schema metadata under `PRICE_COLUMN_KEY`.

    Returns
    -------
    Path
        The file written, ``bar_path(store, symbol, timeframe)``.

    Raises
    ------
    DataError
        If the table is empty, has unknown or missing columns, types that cannot be cast,
        nulls, or times that do not strictly increase; if `store` cannot hold files (see
        `check_store_writable`), its index is broken, or writing fails (disk full...).
        Nothing is changed then: no partial file, the old file and its index entry kept.

    Notes
    -----
    The bars go to a temporary file next to the target, which is flushed to disk and
    hashed; then, under the store's lock, the index gets the new entry (size, mtime,
    BLAKE2b) and the file its final name (``os.replace``, which keeps the mtime).
    """
    path = bar_path(store, symbol, timeframe)
    where = f"bars for {symbol} {timeframe}"
    table = conform_table(table, where)
    if price_column is not None:
        table = table.replace_schema_metadata({PRICE_COLUMN_KEY: price_column.encode("utf-8")})
    check_store_writable(store)
    created = [d for d in (path.parent, *path.parent.parents) if not d.exists()]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_durably(store, path, table)
    except BaseException as exc:
        for directory in created:  # deepest first: leave no empty store behind
            try:
                directory.rmdir()
            except OSError:
                break
        if isinstance(exc, OSError):
            raise DataError(
                f"cannot write {where} to store {store} ({path}): {os_reason(exc)}; "
                "nothing was changed"
            ) from exc
        raise
    return path


def _write_durably(store: str | os.PathLike, path: Path, table: pa.Table) -> None:
    """Write `table` to `path` and its entry to the store's index, all or nothing."""
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        feather.write_feather(table, tmp_name, compression="uncompressed", chunksize=len(table))
        with open(tmp_name, "rb+") as fh:
            os.fsync(fh.fileno())
        digest = file_blake2b(tmp_name)
        st = os.stat(tmp_name)
        name = entry_name(store, path)
        with store_lock(store):
            records = read_index(store, cached=False)
            old = records.get(name)
            records[name] = FileRecord(st.st_size, st.st_mtime_ns, digest)
            write_index(store, records)
            try:
                os.replace(tmp_name, path)
            except BaseException:
                if old is None:
                    records.pop(name)
                else:
                    records[name] = old
                write_index(store, records)
                raise
        fsync_dir(path.parent)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def check_store_writable(store: str | os.PathLike) -> None:
    """Refuse a store path that cannot hold bar files, before any work is done.

    Parameters
    ----------
    store : path-like
        A directory, or a path whose missing parts can be created.

    Raises
    ------
    DataError
        If `store` is a file, lies under a file or inside ``/proc`` or ``/sys``, or its
        nearest existing directory is not writable.
    """
    path = Path(store)
    resolved = path.resolve()
    for root in PSEUDO_FILESYSTEMS:
        if resolved == Path(root) or Path(root) in resolved.parents:
            raise DataError(
                f"store {store} is inside {root}, which cannot hold bar files; "
                "choose a directory on a disk"
            )
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        which = "is a file" if existing == path else f"cannot be created: {existing} is a file"
        raise DataError(f"store {store} {which}, not a directory; choose a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise DataError(
            f"store {store} is not writable ({existing}: permission denied); "
            "choose a directory you can write to"
        )


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
    check_time_increasing(out.column("time").chunk(0), where)
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
