"""Bars and strategy modules to workers that cannot see them, results from workers that
cannot write them.

A run names its bars and its results store by absolute paths on the driver. With a
shared filesystem every worker memory-maps the bars and writes its own chunks. Where a
worker does not see the driver's files (other machines, containers, its own mounts), or
sees other files at those paths:

- each worker checks, once per process and bar file, that the path holds the bars the
  driver fingerprinted (:func:`~barsweep.datasets.store.bars_problem`);
- the driver ships the bars to the workers that do not (:class:`BarsShipper`): scattered
  once to each of them and published as a Dask dataset under the name the tasks carry,
  so a worker keeps them in memory for its later blocks;
- a worker that cannot write the results store at the driver's path (or finds another
  store there) returns its block's metrics, and the driver writes them;
- the strategy modules a spec finds in its ``module_dir`` (their ``.py`` files) go to
  every worker as a Dask worker plugin (:class:`ModuleShipper`): a worker that sees the
  same files at the driver's path imports them there, the others from a copy in a
  private folder of the worker's user, named by the files' hash and checked against it.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Iterable

import numpy as np
from distributed.diagnostics.plugin import WorkerPlugin

from ...datasets import bars_problem, mapped_arrays
from ...engine.core import read_only
from ...errors import DataError, SpecError

#: Shipped bars kept per worker process (each run names its own).
KEEP_SHIPPED = 8

#: Per-process answers of :func:`local_problem`: (store, symbol, timeframe, file hash,
#: run's dataset name) -> why this process cannot memory-map those bars, or None. The
#: answer the driver asked for (:func:`local_problems`) stays this worker's for the run,
#: and a block task does not check the file again: for a file the index does not list,
#: that check hashes it (a 48 MB file: 84 ms per task).
_PROBLEMS: dict[tuple, str | None] = {}

#: The bars the driver shipped to this worker, by dataset name, as read-only views; the
#: most recent KEEP_SHIPPED runs. A block task takes them from here rather than asking
#: the scheduler for the dataset (0.5 ms per task on a local cluster) and, where this
#: worker does not hold the scattered copy, fetching every column of the bars again.
_SHIPPED: OrderedDict[str, dict[str, np.ndarray]] = OrderedDict()


class BarsUnavailable(DataError):
    """A worker cannot read a run's bars, and the driver has not shipped them (yet)."""


def local_problem(ref) -> str | None:
    """Why this process cannot memory-map ``ref``'s bars as the driver fingerprinted
    them (None: it can); checked once per run (``ref.shipped`` names the run) and file."""
    if not ref.file_hash:  # not fingerprinted (a direct call): read as named
        return None
    key = (ref.store, ref.symbol, ref.timeframe, ref.file_hash, ref.shipped)
    if key not in _PROBLEMS:
        _PROBLEMS[key] = bars_problem(ref.store, ref.symbol, ref.timeframe, ref.file_hash)
    return _PROBLEMS[key]


def local_problems(refs: Iterable) -> dict[int, str]:
    """On a worker (``client.run``): the problem of each ref it cannot read, by index."""
    problems = {}
    for i, ref in enumerate(refs):
        try:
            problem = local_problem(ref)
        except Exception as exc:  # an unreadable path is a reason to ship, not to fail
            problem = f"{type(exc).__name__}: {exc}"
        if problem:
            problems[i] = problem
    return problems


def worker_bars(ref) -> dict[str, np.ndarray]:
    """``ref``'s bars in this process: the memory map when it holds the driver's bars,
    else the copy the driver shipped; BarsUnavailable when neither."""
    problem = local_problem(ref)
    if problem is None:
        return mapped_arrays(ref.store, ref.symbol, ref.timeframe, ref.start_ns, ref.end_ns)
    arrays = shipped_bars(ref.shipped) if ref.shipped else None
    if arrays is None:
        raise BarsUnavailable(f"{where()} cannot read the bars: {problem}; the driver has "
                              f"not shipped them")
    return arrays


def shipped_bars(name: str) -> dict[str, np.ndarray] | None:
    """The bars the driver published as ``name``, read-only (as a memory map's are, so
    the kernels' compiled types are the same); None when nothing is published."""
    if name in _SHIPPED:
        _SHIPPED.move_to_end(name)
        return _SHIPPED[name]
    from distributed import get_client, get_worker

    future = get_client().get_dataset(name, default=None)
    if future is None:
        return None
    data = get_worker().data
    views = {column: read_only(values) for column, values in
             (data[future.key] if future.key in data else future.result()).items()}
    _SHIPPED[name] = views
    while len(_SHIPPED) > KEEP_SHIPPED:
        _SHIPPED.popitem(last=False)
    return views


def can_write(out: str, store_id: str) -> bool:
    """Whether this process sees the run's results store at ``out`` (the one with
    attribute ``store_id``) and may write it; asked once per block (one small file read,
    0.02 ms)."""
    from .results import store_attrs

    attrs = store_attrs(out)
    return (attrs is not None and attrs.get("store_id", "") == store_id
            and os.access(out, os.W_OK))


def where() -> str:
    """``worker tcp://...`` inside a Dask worker, else ``this process``."""
    try:
        from distributed import get_worker

        return f"worker {get_worker().address}"
    except (ImportError, ValueError):
        return "this process"


class BarsShipper:
    """The driver's side: which workers cannot read the run's bars, and shipping the
    bars to them (each ref's ``shipped`` names the Dask dataset that holds them).

    :meth:`ensure` asks every connected worker and ships to those that need it; call it
    before the blocks run and again when a block reports :class:`BarsUnavailable` (a
    worker that joined later, or lost its copy). :meth:`close` unpublishes the bars.
    """

    def __init__(self, client, refs: Iterable) -> None:
        self.client = client
        self.refs = tuple(refs)
        self.futures: dict[str, object] = {}
        self.shipped_to: set[str] = set()

    def ensure(self) -> str | None:
        """Ship the bars to every connected worker that cannot read them; a line for
        people when it did (None when no worker needed them)."""
        answers = self.client.run(local_problems, self.refs, on_error="return")
        needy = {}
        for worker, answer in answers.items():
            if isinstance(answer, BaseException):
                answer = {0: f"{type(answer).__name__}: {answer}"}
            if answer:
                needy[worker] = next(iter(answer.values()))
        if not needy:
            return None
        self.ship(sorted(needy))
        worker, problem = sorted(needy.items())[0]
        return (f"{len(needy)} of {len(answers)} workers cannot read the bars at "
                f"{self.refs[0].store} ({worker}: {problem}): shipped them the bars")

    def ship(self, workers: list[str]) -> None:
        """Scatter each ref's bars to ``workers`` (one copy each) and publish them
        under the ref's ``shipped`` name, replacing an earlier copy."""
        for ref in self.refs:
            arrays = mapped_arrays(ref.store, ref.symbol, ref.timeframe, ref.start_ns,
                                   ref.end_ns)
            [future] = self.client.scatter([arrays], workers=workers, broadcast=True,
                                           hash=False)
            self.client.publish_dataset(future, name=ref.shipped, override=True)
            self.futures[ref.shipped] = future
        self.shipped_to.update(workers)

    def close(self) -> None:
        for name in self.futures:
            try:
                self.client.unpublish_dataset(name)
            except Exception:  # the scheduler is gone: nothing left to release
                pass
        self.futures.clear()


#: The strategy modules this process set up: top-level name -> digest of the files it
#: uses, so that another run's version of them replaces them (state, not a cache).
_MODULES_SET_UP: dict[str, str] = {}


class ModuleShipper(WorkerPlugin):
    """A spec's strategy modules found in its ``module_dir``, for every worker (a Dask
    worker plugin: workers that join later get it too).

    It carries the ``.py`` files of each named top-level package or module
    (:func:`module_files`). On each worker, :meth:`setup` imports those modules (and only
    those names: :func:`~barsweep.engine.strategies.sources.serve`) from the folder the
    driver read them from when the worker sees the same files there, else from a copy
    in a private folder of the worker's user, named by the files' hash and checked
    against them before use (:func:`module_folder`), and drops from the process an older
    version of the same modules (and the strategies it registered), so the blocks import
    these files.
    """

    idempotent = False

    def __init__(self, root: str, tops: Iterable[str]) -> None:
        self.root = os.path.abspath(root)
        self.tops = tuple(sorted(set(tops)))
        self.files = module_files(self.root, self.tops)
        self.digest = files_digest(self.files)
        self.name = f"barsweep-modules-{self.digest[:16]}"

    def setup(self, worker=None) -> None:
        import sys

        from ...engine.strategies import forget_modules, serve

        folder = module_folder(self.root, self.files, self.digest)
        for top in self.tops:
            if _MODULES_SET_UP.get(top, self.digest) != self.digest:
                for name in [m for m in sys.modules if m == top or m.startswith(top + ".")]:
                    del sys.modules[name]
                forget_modules(top)
            _MODULES_SET_UP[top] = self.digest
            serve(top, folder)


def module_files(root: str, tops: Iterable[str]) -> dict[str, bytes]:
    """The ``.py`` files of each top-level package folder ``root/top/`` or module file
    ``root/top.py``, by path relative to ``root`` (``/``-separated), as
    :func:`~barsweep.engine.strategies.sources.module_sources` lists them (DataError for
    what it refuses: links out of the package, more than its bytes, not a module)."""
    from ...engine.strategies import module_sources

    try:
        listed = module_sources(root, tops)
    except SpecError as err:
        raise DataError(str(err)) from None
    files = {}
    for rel, path, size in listed:
        with open(path, "rb") as f:
            data = f.read(size + 1)
        if len(data) != size:
            raise DataError(f"module_dir: {path} changed while it was read; run again")
        files[rel] = data
    return files


def files_digest(files: dict[str, bytes]) -> str:
    """sha256 of the files' relative paths and contents."""
    import hashlib

    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(f"{name}\0{len(files[name])}\0".encode())
        digest.update(files[name])
    return digest.hexdigest()


def module_folder(root: str, files: dict[str, bytes], digest: str) -> str:
    """A folder holding ``files`` in this process's view: ``root`` when it does, else
    ``BASE/DIGEST`` in this user's private folder for shipped modules
    (:func:`modules_base`), holding those files and nothing else (``__pycache__``
    aside), written when missing or different (atomically, so that the workers of one
    machine share it, and numba's cache of its kernels)."""
    import contextlib
    import shutil
    import tempfile

    if _holds(root, files):
        return root
    base = modules_base()
    target = os.path.join(base, digest)
    if _exactly(target, files):
        return target
    partial = tempfile.mkdtemp(prefix=f".{digest[:16]}-", dir=base)
    for name, data in files.items():
        path = os.path.join(partial, *name.split("/"))
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    try:
        os.rename(partial, target)
    except OSError:  # another worker wrote it meanwhile, or a damaged copy is there
        if not _exactly(target, files):
            stale = tempfile.mkdtemp(prefix=".stale-", dir=base)
            with contextlib.suppress(OSError):  # another worker moved it first
                os.rename(target, os.path.join(stale, "copy"))
            with contextlib.suppress(OSError):  # ... and put its copy there
                os.rename(partial, target)
            shutil.rmtree(stale, ignore_errors=True)
        shutil.rmtree(partial, ignore_errors=True)
    if not _exactly(target, files):
        raise DataError(f"{where()}: the copy of the strategy modules at {target} does not "
                        f"hold the files shipped")
    return target


def modules_base() -> str:
    """This user's folder for shipped modules: ``barsweep-modules-UID`` in the temporary
    folder, made with mode 0700; when that one is not private (another user's, or
    others may write it: :func:`~barsweep.engine.cache.folder_problem`), a private
    ``barsweep-modules-UID-XXXXXXXX`` there, with a warning."""
    import tempfile
    import warnings
    from pathlib import Path

    from ...engine.cache import private_folder, private_temp_folder, user_name

    prefix = f"barsweep-modules-{user_name()}"
    base = Path(tempfile.gettempdir()) / prefix
    problem = private_folder(base)
    if problem is None:
        return str(base)
    other = private_temp_folder(f"{prefix}-")
    warnings.warn(f"{where()}: shipped strategy modules go to {other}, not to {problem}",
                  stacklevel=2)
    return str(other)


def _holds(folder: str, files: dict[str, bytes]) -> bool:
    """Whether ``folder`` holds each of ``files`` with the same bytes."""
    for name, data in files.items():
        try:
            with open(os.path.join(folder, *name.split("/")), "rb") as f:
                if f.read(len(data) + 1) != data:
                    return False
        except OSError:
            return False
    return True


def _exactly(folder: str, files: dict[str, bytes]) -> bool:
    """Whether ``folder`` holds ``files`` and nothing else but ``__pycache__`` folders,
    all of them plain files and folders (no links)."""
    found = set()
    for parent, subfolders, names in os.walk(folder):
        for sub in subfolders:
            if os.path.islink(os.path.join(parent, sub)):
                return False
        subfolders[:] = [d for d in subfolders if d != "__pycache__"]
        rel = os.path.relpath(parent, folder)
        for name in names:
            path = os.path.join(parent, name)
            if os.path.islink(path):
                return False
            found.add(name if rel == "." else f"{rel.replace(os.sep, '/')}/{name}")
    return found == set(files) and _holds(folder, files)


def module_shipper(spec) -> ModuleShipper | None:
    """The :class:`ModuleShipper` of ``spec``'s modules found in its ``module_dir``; None
    when it names none there."""
    from ...engine.strategies import module_location

    if spec.module_dir is None:
        return None
    tops = [name.partition(".")[0] for name in spec.modules
            if module_location(name, spec.module_dir) is not None]
    return ModuleShipper(spec.module_dir, tops) if tops else None
