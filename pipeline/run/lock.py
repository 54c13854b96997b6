"""The lock of a results store: ``.NAME.lock`` beside it while a run writes it, and
what a killed run left there (the hidden directories
:func:`~barsweep.pipeline.run.results.create_store` makes), cleared by the next run.

Only the standard library is imported here, so that ``barsweep run`` can refuse a
locked ``--out`` before it loads anything heavy.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ...errors import ResultsError


def lock_path(out: str | os.PathLike) -> Path:
    """``.NAME.lock`` beside the results store ``out``: who writes it now."""
    path = Path(out)
    return path.parent / f".{path.name}.lock"


def refuse_locked(out: str | os.PathLike) -> None:
    """ResultsError, naming its pid and host, when a live run holds ``out``'s lock;
    reads one small file and writes nothing (a run checks this before anything else)."""
    lock = lock_path(out)
    if lock.exists() and (holder := _lock_holder(lock)) is not None:
        raise ResultsError(_locked_message(out, lock, holder))


def _locked_message(out, lock: Path, holder: str) -> str:
    return (f"--out {out} is being written by another barsweep run ({holder}); wait for "
            f"it, or remove {lock} if it is gone")


@contextmanager
def out_lock(out: str) -> Iterator[list[str]]:
    """Hold ``.NAME.lock`` beside the results store ``out`` while a run writes it, so two
    runs never write one store (the second is refused, naming the first's pid and host).

    A lock left by a process that no longer runs on this host is taken over. Once the
    lock is held, what a killed run left beside ``out`` is cleared
    (:func:`clear_leftovers`); the context yields the lines that say what was done.
    Folders made to hold the lock are removed with it when they are still empty.
    """
    path = Path(out)
    lock = lock_path(path)
    me = f"{socket.gethostname()} {os.getpid()}"
    made = [d for d in (path.parent, *path.parent.parents) if not d.exists()]  # deepest first
    path.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            holder = _lock_holder(lock)
            if holder is not None:
                raise ResultsError(_locked_message(out, lock, holder)) from None
            lock.unlink(missing_ok=True)  # stale: its process is gone
            continue
        break
    else:  # taken over twice meanwhile: another run is starting on it right now
        raise ResultsError(_locked_message(out, lock, _lock_holder(lock) or "starting"))
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(me)
        yield clear_leftovers(path)
    finally:
        lock.unlink(missing_ok=True)
        for directory in made:  # a run that made no store leaves no folder for it
            try:
                directory.rmdir()
            except OSError:  # not empty: the store is in it
                break


def clear_leftovers(out: str | os.PathLike) -> list[str]:
    """Clear the hidden directories that
    :func:`~barsweep.pipeline.run.results.create_store` makes beside ``out`` and a killed
    run left there; call it holding ``out``'s lock (no run is using them then).

    ``.NAME.new-TAG`` (a store being made, no block in it yet) is removed.
    ``.NAME.old-TAG`` (an earlier store that ``--overwrite`` was replacing) is removed
    when ``out`` exists (the replacement was in place), and renamed back to ``out`` when
    ``out`` is missing (the run was killed between the two renames), if it is the only
    one. Returns one line per thing done or found, each naming it.
    """
    out = Path(out)
    found = leftovers(out)
    lines = []
    old = [p for p in found if ".old-" in p.name]
    if old and not (out.exists() or out.is_symlink()):
        if len(old) > 1:
            return [f"{out} is missing and {len(old)} earlier stores a killed --overwrite "
                    f"run left are beside it ({', '.join(p.name for p in old)}); rename "
                    f"the one to keep to {out.name}, remove the others"]
        os.rename(old[0], out)
        lines.append(f"put back {out} from {old[0].name}: a run killed while replacing "
                     f"it (--overwrite) had moved it aside")
        found.remove(old[0])
    removed, failed = [], []
    for leftover in found:
        shutil.rmtree(leftover, ignore_errors=True)
        (failed if leftover.exists() else removed).append(leftover.name)
    if removed:
        lines.append(f"removed {', '.join(removed)} beside {out}: left by a killed run "
                     f"(a store being made or replaced)")
    if failed:
        lines.append(f"could not remove {', '.join(failed)} beside {out}, left by a killed "
                     f"run; remove them by hand")
    return lines


def leftovers(out: str | os.PathLike) -> list[Path]:
    """The hidden ``.NAME.new-TAG`` and ``.NAME.old-TAG`` directories beside ``out``
    (:func:`~barsweep.pipeline.run.results.create_store`'s names), sorted."""
    out = Path(out)
    pattern = re.compile(rf"\.{re.escape(out.name)}\.(new|old)-[0-9a-f]{{8}}")
    try:
        return sorted(p for p in out.parent.iterdir()
                      if pattern.fullmatch(p.name) and p.is_dir() and not p.is_symlink())
    except OSError:
        return []


def _lock_holder(lock: Path) -> str | None:
    """``"host H, pid P"`` of a live lock, None for a stale one (its pid gone here)."""
    try:
        host, pid = lock.read_text().split()
    except (OSError, ValueError):
        return "unknown process"
    if host != socket.gethostname():
        return f"host {host}, pid {pid}"
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return None
    except (PermissionError, ValueError):
        pass
    return f"host {host}, pid {pid}"
