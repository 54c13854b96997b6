"""The store's index: what each bar file held when barsweep wrote it, and the cheap check.

``{store}/barsweep-index.json`` records, per file (its path relative to the store, e.g.
``1h/BTCUSDT.arrow``), the size, the mtime (ns) and the BLAKE2b hash of its bytes.
`write_bars` updates it under a lock on the store directory, through a temporary file
and ``os.replace``, so that it is never half-written::

    {"format": "barsweep-bar-store-index", "version": 1,
     "files": {"1h/BTCUSDT.arrow": {"bytes": 1050986, "mtime_ns": 1700000000000000000,
                                    "blake2b": "9f2c..."}}}

`check_file` is what every read does: a file whose size and mtime are as recorded is
trusted without reading it; otherwise its bytes are hashed once per process (the result
is remembered for that path, size and mtime) and must match the recorded hash. The
recorded mtime is not refreshed by readers (many Dask workers may read a store they
cannot write); ``barsweep data verify --update-index`` does it, e.g. after a copy. An
edit that keeps both size and mtime (``os.utime``, or one made within the filesystem's
timestamp granularity of the write) passes this check; ``data verify`` and
`barsweep.datasets.store.fingerprint` (what ``barsweep run`` records) hash every byte.

A file the index does not list (a store written before the index existed, or a file
copied in by hand) is read unverified, with one warning per process naming the command
that checks its bars and records it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from pathlib import Path
from types import MappingProxyType

from ..errors import DataError, one_line
from .lock import lock_dir

__all__ = [
    "INDEX_NAME",
    "FileRecord",
    "check_digest",
    "check_file",
    "clear_caches",
    "entry_name",
    "file_blake2b",
    "fsync_dir",
    "mismatch_text",
    "read_index",
    "store_lock",
    "write_index",
]

logger = logging.getLogger(__name__)

INDEX_NAME = "barsweep-index.json"
INDEX_FORMAT = "barsweep-bar-store-index"
INDEX_VERSION = 1
_HASH_CHUNK_BYTES = 1 << 20

#: Per-process cache of parsed indexes: index path -> ((size, mtime_ns, inode), records).
#: Every read of bars checks its file against the index, and a block task reads twice
#: (its bars, and whether this worker can read them); a 2,000-file index (450 kB) takes
#: 6 ms to parse, 0.006 ms from here. A writer replaces the index, so a new one has a new
#: stamp. :func:`clear_caches` empties it.
_INDEX_CACHE: dict[str, tuple[tuple[int, int, int], Mapping[str, FileRecord]]] = {}

#: Per-process cache of file hashes: (file path, size, mtime_ns, inode) -> BLAKE2b of its
#: bytes, for files whose size or mtime differ from the index (copied without their
#: mtime): without it every block task would hash the whole file again (a 1M-bar, 48 MB
#: file: 50-75 ms per task, against 0.015 ms from here).
_HASH_CACHE: dict[tuple[str, int, int, int], str] = {}

#: Files already warned about as missing from the index: the warning is said once per
#: process, not once per task (state, not a cache).
_WARNED: set[str] = set()


@dataclass(frozen=True)
class FileRecord:
    """One file as written: size in bytes, mtime in ns since the epoch, BLAKE2b hex digest."""

    bytes: int
    mtime_ns: int
    blake2b: str


def entry_name(store: str | os.PathLike, path: str | os.PathLike) -> str:
    """The index key of `path`: its path relative to `store`, with ``/`` separators."""
    return Path(path).relative_to(Path(store)).as_posix()


def file_blake2b(path: str | os.PathLike) -> str:
    """BLAKE2b hex digest of a file's bytes, read 1 MiB at a time."""
    h = hashlib.blake2b()
    with open(path, "rb") as fh:
        while chunk := fh.read(_HASH_CHUNK_BYTES):
            h.update(chunk)
    return h.hexdigest()


def hashes_path() -> Path:
    """Where full hashes are kept between runs: ``$BARSWEEP_CACHE_DIR/file-hashes.json``,
    else ``$XDG_CACHE_HOME/barsweep/`` or ``~/.cache/barsweep/`` (never in the bar
    store, which runs only read)."""
    folder = os.environ.get("BARSWEEP_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "barsweep")
    return Path(folder) / "file-hashes.json"


def full_blake2b(path: Path) -> tuple[int, str]:
    """Size and BLAKE2b of every byte of the file `path`, hashed only when it may have
    changed since it was last hashed on this machine.

    The last hash of each file (by absolute path) is kept in :func:`hashes_path` with the
    file's size, mtime, ctime and inode. The ctime moves on with any write to the file,
    and with ``os.utime`` too, and cannot be set back, so a file with all four as kept
    holds the bytes that were hashed: even an edit that put the size and mtime back is
    hashed again. Where that file cannot be written, every run hashes.
    """
    st = os.stat(path)
    stamp = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
    where, name = hashes_path(), os.path.abspath(path)
    kept = _read_hashes(where)
    entry = kept.get(name)
    if isinstance(entry, dict) and entry.get("stamp") == stamp:
        return st.st_size, str(entry["blake2b"])
    digest = file_blake2b(path)
    kept = {k: v for k, v in kept.items() if os.path.exists(k)}  # forget deleted files
    kept[name] = {"stamp": stamp, "blake2b": digest}
    try:  # atomically; the last of two runs hashing at once wins, both right
        where.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{where.name}.", suffix=".tmp",
                                        dir=where.parent)
        with os.fdopen(fd, "w") as fh:
            json.dump(kept, fh)
        os.replace(tmp_name, where)
    except OSError:  # no writable cache folder: hashed again next time
        pass
    return st.st_size, digest


def _read_hashes(where: Path) -> dict:
    try:
        with open(where) as fh:
            kept = json.load(fh)
    except (OSError, ValueError):  # none yet, or unreadable: hash again
        return {}
    return kept if isinstance(kept, dict) else {}


def read_index(store: str | os.PathLike, *, cached: bool = True) -> Mapping[str, FileRecord]:
    """The store's index: file name (relative to `store`) -> `FileRecord`.

    Parameters
    ----------
    store : path-like
        The store directory.
    cached : bool, default True
        Reuse this process's copy while the index file's size, mtime and inode are
        unchanged (writers replace it, so a new index has a new inode).

    Returns
    -------
    Mapping
        Read-only when `cached` (shared by this process's readers), a new dict to edit
        otherwise. Empty when the store has no index (written before barsweep kept one).

    Raises
    ------
    DataError
        If the index cannot be read or is not a barsweep index.
    """
    path = Path(store) / INDEX_NAME
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return {} if not cached else MappingProxyType({})
    except OSError as exc:
        raise _broken(store, path, exc.strerror or str(exc)) from exc
    key, stamp = os.path.abspath(path), (st.st_size, st.st_mtime_ns, st.st_ino)
    hit = _INDEX_CACHE.get(key)
    if cached and hit is not None and hit[0] == stamp:
        return hit[1]
    records = _parse_index(store, path)
    _INDEX_CACHE[key] = (stamp, MappingProxyType(records))
    return dict(records) if not cached else _INDEX_CACHE[key][1]


def _parse_index(store: str | os.PathLike, path: Path) -> dict[str, FileRecord]:
    try:
        document = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise _broken(store, path, f"not readable JSON ({one_line(exc)})") from exc
    if not isinstance(document, dict) or document.get("format") != INDEX_FORMAT:
        raise _broken(store, path, "not a barsweep bar store index")
    if document.get("version") != INDEX_VERSION:
        raise _broken(store, path, f"index version {document.get('version')!r} is not "
                                   f"{INDEX_VERSION} (written by another barsweep?)")
    files = document.get("files")
    try:
        return {
            str(name): FileRecord(int(e["bytes"]), int(e["mtime_ns"]), str(e["blake2b"]))
            for name, e in files.items()
        }
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise _broken(store, path, f"an entry is malformed ({one_line(exc)})") from exc


def _broken(store: str | os.PathLike, path: Path, why: str) -> DataError:
    return DataError(
        f"the store's index {path} is broken: {why}; run `barsweep data verify --store "
        f"{store} --update-index` to rebuild it from the files whose bars pass the checks"
    )


def write_index(store: str | os.PathLike, records: Mapping[str, FileRecord]) -> None:
    """Replace the store's index by `records`, atomically (temporary file, fsync, replace).

    Call it holding `store_lock`, on records read inside that lock (``cached=False``).
    """
    document = {
        "format": INDEX_FORMAT,
        "version": INDEX_VERSION,
        "files": {name: asdict(records[name]) for name in sorted(records)},
    }
    store = Path(store)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{INDEX_NAME}.", suffix=".tmp", dir=store)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(document, fh, indent=1)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp_name, store / INDEX_NAME)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    fsync_dir(store)


def fsync_dir(path: str | os.PathLike) -> None:
    """Make a rename in directory `path` durable (no-op where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - e.g. Windows
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some filesystems refuse fsync on directories
        pass
    finally:
        os.close(fd)


def store_lock(store: str | os.PathLike) -> AbstractContextManager[None]:
    """An exclusive lock on the store directory (:func:`~barsweep.datasets.lock.lock_dir`,
    waiting for another writer), so that writers that update the index one after another
    never lose each other's entries."""
    return lock_dir(store)


def check_file(store: str | os.PathLike, path: Path) -> None:
    """Refuse `path` if it no longer holds what the store's index recorded.

    Size and mtime as recorded: accepted without reading. Otherwise the file is hashed
    (once per process for a given path, size, mtime and inode) and the hash must be the
    recorded one. A file the index does not list is accepted with a one-time warning.

    Raises
    ------
    DataError
        Naming the file, if its hash differs from the recorded one, or if the index is
        broken.
    """
    record = read_index(store).get(entry_name(store, path))
    if record is None:
        _warn_unindexed(store, path)
        return
    st = os.stat(path)
    if (st.st_size, st.st_mtime_ns) == (record.bytes, record.mtime_ns):
        return
    key = (os.path.abspath(path), st.st_size, st.st_mtime_ns, st.st_ino)
    digest = _HASH_CACHE.get(key)
    if digest is None:
        digest = file_blake2b(path)
        _HASH_CACHE[key] = digest
    _compare(store, path, record, st.st_size, digest)


def check_digest(store: str | os.PathLike, path: Path, size: int, digest: str) -> None:
    """Refuse `path` if its freshly computed `digest` is not the one the index recorded.

    The caller hashed every byte (e.g. `fingerprint`), so this catches edits that keep
    size and mtime too.
    """
    record = read_index(store).get(entry_name(store, path))
    if record is None:
        _warn_unindexed(store, path)
        return
    _compare(store, path, record, size, digest)


def mismatch_text(record: FileRecord, size: int, digest: str) -> str:
    """Why a file does not match its record, e.g. for ``data verify``'s line."""
    sizes = (f"{size:,} bytes, recorded {record.bytes:,}" if size != record.bytes
             else f"{size:,} bytes as recorded")
    return (f"does not match the store's index (blake2b {digest[:16]}..., recorded "
            f"{record.blake2b[:16]}...; {sizes}): the file was changed or corrupted")


def _compare(store: str | os.PathLike, path: Path, record: FileRecord, size: int,
             digest: str) -> None:
    if digest != record.blake2b:
        raise DataError(
            f"{path} {mismatch_text(record, size, digest)}; re-import it or run "
            f"`barsweep data verify --store {store}`"
        )


def _warn_unindexed(store: str | os.PathLike, path: Path) -> None:
    key = os.path.abspath(path)
    if key in _WARNED:
        return
    _WARNED.add(key)
    logger.warning(
        "%s is not in the store's index (written before barsweep kept one, or copied in by "
        "hand): read unverified; `barsweep data verify --store %s --update-index` checks "
        "its bars and records it", path, store,
    )


def clear_caches() -> None:
    """Forget what this process verified and warned about (for tests)."""
    _INDEX_CACHE.clear()
    _HASH_CACHE.clear()
    _WARNED.clear()

