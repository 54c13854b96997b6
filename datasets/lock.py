"""Exclusive locks between processes: ``flock`` on a file or a directory.

One mechanism serves the bar store and the results store. The kernel releases a lock
when its holder exits, however it ends (SIGKILL included), so a lock never outlives its
process and nothing needs taking over. The bar store's writers wait their turn on the
store directory (:func:`~barsweep.datasets.index.store_lock`); a run holds a lock file
beside its results store and a second run is refused, naming the first
(:mod:`barsweep.pipeline.run.lock`, through :func:`lock_file` and :func:`lock_holder`).

Only the standard library is imported here: a run checks its lock before it loads
anything heavy. Where ``fcntl`` is missing (not POSIX) nothing is locked.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

try:  # POSIX; elsewhere nothing is locked
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None

__all__ = ["Locked", "lock_dir", "lock_file", "lock_holder"]

#: How long :func:`lock_file` retries a held lock before it refuses: longer than a
#: :func:`lock_holder` look holds it, far shorter than any real holder.
RETRY_S = 0.25


class Locked(Exception):
    """The lock is held by another open file; ``holder`` is what its holder wrote in it
    (``""`` when it has not written yet)."""

    def __init__(self, holder: str) -> None:
        super().__init__(holder)
        self.holder = holder


@contextmanager
def lock_dir(path: str | os.PathLike) -> Iterator[None]:
    """Hold an exclusive lock on the directory ``path``, waiting while another process
    (or another open of it in this one) holds it."""
    if fcntl is None:  # pragma: no cover
        yield
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


@contextmanager
def lock_file(path: str | os.PathLike, holder: str) -> Iterator[None]:
    """Hold an exclusive lock on the file ``path`` (made when missing) with ``holder``
    written in it, and remove it on release; :class:`Locked` at once when another
    holds it.

    A file left by a holder that died is locked as any other (its lock died with it).
    The file is removed before its lock is released, so a process that opened it
    meanwhile finds, once it has the lock, that the path is no longer its file, and
    starts again on the path as it is then.
    """
    if fcntl is None:  # pragma: no cover
        yield
        return
    path = Path(path)
    fd = _acquire(path)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, holder.encode())
        yield
    finally:
        path.unlink(missing_ok=True)
        os.close(fd)


def lock_holder(path: str | os.PathLike) -> str | None:
    """What the holder of the lock file ``path`` wrote in it (``""`` when it has not
    yet), or None when no process holds it (no file, or one a dead holder left).

    The look takes a shared lock for an instant; :func:`lock_file` retries for longer.
    """
    if fcntl is None:  # pragma: no cover
        return None
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # none; or there but not ours to read, taken as held
        return "" if os.path.exists(path) else None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read(fd)
        return None
    finally:
        os.close(fd)


def _acquire(path: Path) -> int:
    """An open file descriptor of ``path`` holding its exclusive lock."""
    deadline = time.monotonic() + RETRY_S
    while True:
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read(fd)
            os.close(fd)
            if time.monotonic() >= deadline:
                raise Locked(holder) from None
            time.sleep(0.01)
            continue
        except BaseException:
            os.close(fd)
            raise
        if _same_file(fd, path):
            return fd
        os.close(fd)  # removed by its holder after this opened it: the path is another


def _same_file(fd: int, path: Path) -> bool:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    here = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (here.st_dev, here.st_ino)


def _read(fd: int) -> str:
    try:
        return os.pread(fd, 4096, 0).decode(errors="replace").strip()
    except OSError:
        return ""
