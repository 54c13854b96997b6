"""Where ``barsweep report --out``, ``plot --out`` and ``trades --csv`` may write, and
the write itself.

An output file replaces only an earlier output of its own kind, which barsweep
recognises by a mark it writes into each (:data:`REPORT`: a ``generator`` meta tag;
:data:`PICTURE`: a PNG text chunk; :data:`TRADES_CSV`: its exact header row). Anything
else at the path (a spec, another CSV, a symbolic link, a device), and any path inside
a bar store or a results store, is refused in one line unless the user passes
``--overwrite``; a directory, a missing folder or a virtual filesystem is refused
always. The file is written beside its final name under a hidden temporary name and
renamed into place (:func:`write_output`), so the path holds the earlier file or the
whole new one, never part of one.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ...datasets.index import INDEX_NAME
from ...errors import OutputError
from ..run.results import store_attrs

#: How much of an existing file is read to recognise an earlier output.
HEAD_BYTES = 4096
_VIRTUAL_FS = ("/proc", "/sys", "/dev")


@dataclass(frozen=True)
class OutputKind:
    """One kind of output file: its flag, what it is in words, a name to suggest, and
    how an earlier one is recognised from the first :data:`HEAD_BYTES` of a file."""

    flag: str
    what: str
    example: str
    recognise: Callable[[bytes], bool]


#: The mark in a report's ``<head>``.
REPORT_MARK = '<meta name="generator" content="barsweep report">'
#: The PNG text chunk (keyword, text) in every picture ``barsweep plot`` writes.
PICTURE_MARK = ("barsweep", "plot")
#: The header rows of the trades tables ``barsweep trades --csv`` writes (one symbol's,
#: a portfolio's with its symbol first).
TRADE_COLUMNS = ("entry_time", "exit_time", "entry_bar", "exit_bar", "side", "entry_price",
                 "exit_price", "size", "pnl", "return", "bars_held", "exit_reason")
TRADES_HEADERS = (",".join(TRADE_COLUMNS), ",".join(("symbol", *TRADE_COLUMNS)))
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _is_report(head: bytes) -> bool:
    return REPORT_MARK.encode() in head


def _is_picture(head: bytes) -> bool:
    """Whether ``head`` starts a PNG with :data:`PICTURE_MARK` among its text chunks
    (matplotlib writes them before the image data)."""
    if not head.startswith(_PNG_SIGNATURE):
        return False
    wanted = "\0".join(PICTURE_MARK).encode("latin-1")
    at = len(_PNG_SIGNATURE)
    while at + 8 <= len(head):
        length = int.from_bytes(head[at:at + 4], "big")
        kind = head[at + 4:at + 8]
        if kind == b"tEXt" and head[at + 8:at + 8 + length] == wanted:
            return True
        if kind == b"IDAT":
            return False
        at += 12 + length
    return False


def _is_trades_csv(head: bytes) -> bool:
    first = head.split(b"\n", 1)[0].rstrip(b"\r")
    return first.decode("utf-8", "replace") in TRADES_HEADERS


REPORT = OutputKind("--out", "a report barsweep wrote", "report.html", _is_report)
PICTURE = OutputKind("--out", "a picture barsweep drew", "plot.png", _is_picture)
TRADES_CSV = OutputKind("--csv", "a trades CSV barsweep wrote", "trades.csv", _is_trades_csv)


def check_output(path: str | os.PathLike, kind: OutputKind, *,
                 overwrite: bool = False) -> Path:
    """Where an output of ``kind`` may be written: ``path`` made absolute, or
    OutputError in one line naming it. Reads at most :data:`HEAD_BYTES` of an existing
    file; writes nothing.

    Refused always: a directory, a path whose folder does not exist, a path in a
    virtual filesystem (/proc, /sys, /dev). Refused without ``overwrite``: a path
    inside a bar store or a results store, a symbolic link, and an existing file that
    is not an earlier output of ``kind``.
    """
    out = Path(os.path.abspath(os.fspath(path)))
    where = f"{kind.flag} {path}"
    if out.is_dir():
        raise OutputError(f"{where} is a directory; give a file name, e.g. "
                          f"{Path(path) / kind.example}")
    if not out.parent.is_dir():
        raise OutputError(f"{where}: the folder {out.parent} does not exist")
    real = out.resolve()
    for root in _VIRTUAL_FS:
        if real.is_relative_to(root):
            raise OutputError(f"{where}: {root} is a virtual filesystem, not a place for "
                              f"files; choose a path on disk")
    problem = None if overwrite else _replace_problem(out, kind)
    if problem:
        raise OutputError(f"{where} {problem}; choose another path, or pass --overwrite "
                          f"to write it there")
    return out


def _replace_problem(out: Path, kind: OutputKind) -> str | None:
    """Why writing ``out`` needs ``--overwrite``, or None."""
    store = enclosing_store(out.parent.resolve())
    if store is not None:
        return f"is inside the {store}"
    if out.is_symlink():
        return "is a symbolic link"
    if not out.exists():
        return None
    if not out.is_file():
        return "exists and is not a regular file"
    try:
        with open(out, "rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError as err:
        return f"exists and cannot be read ({err.strerror or err})"
    if not kind.recognise(head):
        return f"exists and is not {kind.what}"
    return None


def enclosing_store(folder: Path) -> str | None:
    """``bar store DIR`` or ``results store DIR`` when ``folder`` is, or is inside, one
    (a bar store: a folder holding its index, ``barsweep-index.json``; a results store:
    a Zarr group barsweep made); else None."""
    for directory in (folder, *folder.parents):
        if (directory / INDEX_NAME).is_file():
            return f"bar store {directory}"
        if (directory / "zarr.json").is_file() and store_attrs(directory) is not None:
            return f"results store {directory}"
    return None


def write_output(path: str | os.PathLike, kind: OutputKind, write: Callable[[BinaryIO], None],
                 *, overwrite: bool = False) -> Path:
    """Write an output of ``kind`` to ``path`` (checked again by :func:`check_output`):
    ``write(f)`` writes its bytes to a hidden temporary file beside ``path``, which is
    then renamed to ``path``; whatever fails on the way (``write`` itself, a full disk),
    the temporary file is removed and ``path`` keeps what it held. Returns the path
    written; OutputError in one line when the file system refuses."""
    out = check_output(path, kind, overwrite=overwrite)
    tmp = out.with_name(f".{out.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, out)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise OutputError(f"{kind.flag} {path}: cannot write it ({err.strerror or err}); "
                          f"nothing was written") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return out


def save_picture(fig, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Write the matplotlib Figure ``fig`` to ``path`` as PNG (100 dpi) marked
    :data:`PICTURE_MARK`, through :func:`write_output`."""
    return write_output(path, PICTURE, lambda f: fig.savefig(
        f, format="png", dpi=100, metadata=dict([PICTURE_MARK])), overwrite=overwrite)
