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
from contextlib import ExitStack, contextmanager
from pathlib import Path

from ...datasets.lock import Locked, lock_file, lock_holder
from ...errors import ResultsError


def lock_path(out: str | os.PathLike) -> Path:
    """``.NAME.lock`` beside the results store ``out``: who writes it now."""
    path = Path(out)
    return path.parent / f".{path.name}.lock"


def refuse_locked(out: str | os.PathLike) -> None:
    """ResultsError, naming its pid and host, when a live run holds ``out``'s lock;
    reads one small file and writes nothing (a run checks this before anything else)."""
    holder = lock_holder(lock_path(out))
    if holder is not None:
        raise ResultsError(_locked_message(out, holder))


def _locked_message(out, holder: str) -> str:
    """Why a run cannot take ``out``: ``holder`` is what the lock file says, ``HOST
    PID`` (empty while its run is starting)."""
    host, _, pid = holder.partition(" ")
    who = f"host {host}, pid {pid}" if host and pid else "unknown process"
    return (f"--out {out} is being written by another barsweep run ({who}); wait for "
            f"it, or remove {lock_path(out)} if it is gone")


@contextmanager
def out_lock(out: str) -> Iterator[list[str]]:
    """Hold ``.NAME.lock`` beside the results store ``out`` while a run writes it, so two
    runs never write one store (the second is refused, naming the first's pid and host).

    The lock is :func:`~barsweep.datasets.lock.lock_file`'s: a lock file a killed run
    left is taken, its lock having died with it. Once the lock is held, what a killed
    run left beside ``out`` is cleared (:func:`clear_leftovers`); the context yields the
    lines that say what was done. Folders made to hold the lock are removed with it
    when they are still empty.
    """
    path = Path(out)
    made = [d for d in (path.parent, *path.parent.parents) if not d.exists()]  # deepest first
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with ExitStack() as held:
            try:
                held.enter_context(lock_file(lock_path(path),
                                             f"{socket.gethostname()} {os.getpid()}"))
            except Locked as locked:
                raise ResultsError(_locked_message(out, locked.holder)) from None
            yield clear_leftovers(path)
    finally:
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
