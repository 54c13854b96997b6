"""``barsweep data verify``: every file of a store, hashed in full and checked bar by bar.

Unlike the cheap check every read makes (size and mtime, see `barsweep.datasets.index`),
this reads every byte: it catches edits that kept a file's size and mtime, files the
index does not list, entries whose file is gone, and bars that break the store's rules.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..errors import DataError
from .import_hints import split_warning
from .index import (
    INDEX_NAME,
    FileRecord,
    entry_name,
    file_blake2b,
    mismatch_text,
    read_index,
    store_lock,
    write_index,
)
from .rules import first_broken_price_rule
from .store import (
    check_store_dir,
    check_time_increasing,
    column_array,
    open_mapped,
    os_reason,
    scan_store,
)
from .writer import PRICE_COLUMN_KEY

__all__ = ["FileReport", "verify_store"]


@dataclass(frozen=True)
class FileReport:
    """The verdict on one entry of a store (a line of ``barsweep data verify``).

    Attributes
    ----------
    name : str
        The file's path relative to the store (``1h/BTCUSDT.arrow``), or the index's name.
    ok : bool
        True when the file matches the index and its bars obey every rule (after
        ``update_index``: also when the index was brought up to date for it).
    detail : str
        What was found (and done), in words.
    n_bars : int or None
        Bars in the file, when it could be read.
    warning : str
        "" or what looks wrong in bars that obey every rule (one-bar close moves beyond
        ±45 %: likely splits the prices are not adjusted for); it does not make `ok` False.
    """

    name: str
    ok: bool
    detail: str
    n_bars: int | None = None
    warning: str = ""


def verify_store(store: str | os.PathLike, update_index: bool = False) -> list[FileReport]:
    """Hash every bar file of `store` against its index and check every bar.

    Parameters
    ----------
    store : path-like
        The store directory.
    update_index : bool, default False
        Bring the index up to date where that hides no damage: record files it does not
        list whose bars pass every check, drop entries whose file is gone, refresh the
        mtime of files whose hash matches (e.g. after a copy), and rebuild a broken
        index from the files whose bars pass. A file whose hash differs from its entry is
        never adopted: re-import it.

    Returns
    -------
    list of FileReport
        One per file (by symbol, then timeframe), then one per entry without a file, and
        one for the index itself when it is broken.

    Raises
    ------
    DataError
        If `store` is not a directory.

    Examples
    --------
    >>> [r.ok for r in verify_store("bars/")]  # doctest: +SKIP
    [True, True]
    """
    check_store_dir(store)
    try:
        records, index_problem = read_index(store, cached=False), ""
    except DataError as exc:
        records, index_problem = {}, str(exc)
    reports: list[FileReport] = []
    updates: dict[str, FileRecord | None] = {}
    seen = set()
    for _, _, path in scan_store(store):
        name = entry_name(store, path)
        seen.add(name)
        report, update = _verify_file(store, path, name, records.get(name), update_index)
        reports.append(report)
        if update is not None:
            updates[name] = update
    for name in sorted(set(records) - seen):
        if update_index:
            updates[name] = None
            reports.append(FileReport(name, True, "the file is gone: removed from the index"))
        else:
            reports.append(FileReport(
                name, False, "missing: listed in the store's index but not in the store "
                "(--update-index forgets it)"))
    if index_problem:
        reports.append(FileReport(INDEX_NAME, update_index, (
            "rebuilt from the files whose bars pass the checks" if update_index
            else index_problem)))
    if update_index and (updates or index_problem):
        _apply(store, updates, rebuild=bool(index_problem))
    return reports


def _verify_file(
    store: str | os.PathLike, path: Path, name: str, record: FileRecord | None,
    update_index: bool,
) -> tuple[FileReport, FileRecord | None]:
    """The report on one file, and the index entry ``update_index`` would write for it."""
    try:
        st = path.stat()
        digest = file_blake2b(path)
    except OSError as exc:
        return FileReport(name, False, f"cannot be read: {os_reason(exc)}"), None
    problem, n_bars, warning = _bar_problem(store, path)
    if record is not None and digest != record.blake2b:
        seen = f"; now: {problem}" if problem else ""
        return FileReport(name, False, mismatch_text(record, st.st_size, digest) + seen
                          + "; re-import it", n_bars), None
    fresh = FileRecord(st.st_size, st.st_mtime_ns, digest)
    if record is None:
        if problem:
            return FileReport(name, False, f"not in the store's index, and {problem}",
                              n_bars), None
        if update_index:
            return FileReport(name, True, f"{n_bars:,} bars, added to the index",
                              n_bars, warning), fresh
        return FileReport(name, False, (
            f"not in the store's index (written before barsweep kept one, or copied in by "
            f"hand); its {n_bars:,} bars pass the checks: --update-index records it"),
            n_bars, warning), None
    if problem:  # as recorded, yet broken: written by a barsweep with weaker checks
        return FileReport(name, False, f"hash as recorded, but {problem}; re-import it",
                          n_bars), None
    if record.mtime_ns != st.st_mtime_ns and update_index:
        return FileReport(name, True, f"{n_bars:,} bars, hash as recorded, mtime refreshed",
                          n_bars, warning), fresh
    return FileReport(name, True, f"{n_bars:,} bars, hash as recorded", n_bars,
                      warning), None


def _bar_problem(store: str | os.PathLike, path: Path) -> tuple[str, int | None, str]:
    """The first thing wrong with the file's bars (1-based rows), or ""; n_bars; and the
    warning on bars that obey every rule (see `FileReport.warning`), or ""."""
    problem, n_bars, values = _broken_rule(store, path)
    if problem:
        return problem, n_bars, ""
    moved = split_warning(values["time"], values["close"], price_column=_price_column(path))
    return "", n_bars, moved or ""


def _price_column(path: Path) -> str | None:
    """The source column the file's close was taken from, as its import recorded it
    (`~barsweep.datasets.writer.PRICE_COLUMN_KEY`): adjusted prices; None when the
    file's own close was stored, or no record was kept."""
    with pa.memory_map(str(path)) as source:  # its bars were read already: it opens
        metadata = pa.ipc.open_file(source).schema.metadata or {}
    column = metadata.get(PRICE_COLUMN_KEY)
    return None if column is None else column.decode("utf-8", "replace")


def _broken_rule(store: str | os.PathLike, path: Path) -> tuple[
        str, int | None, dict[str, np.ndarray]]:
    """The first thing wrong with the file's bars (1-based rows), or ""; n_bars; and
    the columns as arrays (empty when the file cannot be read)."""
    try:
        table = open_mapped(path, store)
    except DataError as exc:
        return _without_path(str(exc).split("; re-import it")[0], path), None, {}
    n_bars = table.num_rows
    if n_bars == 0:
        return "the file holds no bars", 0, {}
    nulls = [name for name in table.column_names if table.column(name).null_count]
    if nulls:
        return f"column(s) {nulls} hold nulls", n_bars, {}
    values = {name: column_array(table, name) for name in table.column_names}
    try:
        check_time_increasing(table.column("time").combine_chunks(), "bars")
    except DataError as exc:
        return str(exc).removeprefix("bars: "), n_bars, values
    broken = first_broken_price_rule(
        values["open"], values["high"], values["low"], values["close"], values["volume"]
    )
    if broken is not None:
        rule, i, count = broken
        cells = ", ".join(f"{n}={float(values[n][i])!r}"
                          for n in ("open", "high", "low", "close", "volume"))
        return f"row {i + 1}: {rule}: {cells} ({count} row(s) break it)", n_bars, values
    funding = values.get("funding_rate")
    if funding is not None and not np.isfinite(funding).all():
        i = int(np.flatnonzero(~np.isfinite(funding))[0])
        return f"row {i + 1}: non-finite funding_rate {float(funding[i])!r}", n_bars, values
    return "", n_bars, values


def _without_path(message: str, path: Path) -> str:
    """A read error about `path` as a verdict: 'not a readable ...', 'does not have ...'."""
    return message.removeprefix(f"{path}: ").removeprefix(f"{path} ").removeprefix("is ")


def _apply(store: str | os.PathLike, updates: dict[str, FileRecord | None],
           rebuild: bool) -> None:
    """Write `updates` into the index (None removes), under the store's lock."""
    try:
        with store_lock(store):
            records = {} if rebuild else read_index(store, cached=False)
            for name, record in updates.items():
                if record is None:
                    records.pop(name, None)
                else:
                    records[name] = record
            write_index(store, records)
    except OSError as exc:
        raise DataError(
            f"cannot update the index of store {store}: {os_reason(exc)}"
        ) from exc
