"""numba's on-disk cache in a folder of its own for each version of the engine's source,
and the marks that say a kernel was compiled into it.

numba stamps a cached function with its own file only. The engine's kernels inline
functions of other files (``simulate``, ``fills``, ``metrics``), and so does a custom
strategy's signal, so after an edit there an editable checkout would load a stale kernel.
Importing the engine (this module comes first) therefore points numba's cache, through
its ``NUMBA_CACHE_DIR`` setting, at ``BASE/barsweep-engine-HASH``, HASH the start of
:func:`engine_source_hash` over every ``engine/**/*.py`` file: an edit anywhere in the
engine gives a new folder, where everything compiles once; an unchanged tree loads.

``BASE`` (:func:`cache_base`) is the first writable of: ``NUMBA_CACHE_DIR`` as the user
set it, numba's user-wide cache folder (``~/.cache/numba`` on Linux), a folder in the
temporary directory. The setting goes into ``os.environ``, so the processes this one
starts (Dask workers, subprocesses) inherit it, and they name the same folder when they
import the engine (a ``barsweep-engine-HASH`` folder ending ``NUMBA_CACHE_DIR`` is taken
as ``BASE/`` and replaced). numba reads the variable when it is imported; when it was
imported first (a module that imports numba before the engine), ``numba.config.CACHE_DIR``
is set as well, before any of the engine's functions is defined. Every function cached in
the process goes to that folder, others' too: they compile once per engine version as well.
The folders of earlier versions stay (about 1 MB each for the engine's kernels): delete
them freely.

numba's own cache files are not read here. After a kernel has run, :func:`mark_compiled`
writes a small mark beside them, in the engine's folder, holding the stamp of the
kernel's file and the numba and Python versions (what numba's cache is keyed on besides
the folder); :func:`is_marked` compares it with the present ones.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import sys
import tempfile
from pathlib import Path

ENGINE_DIR = os.path.dirname(os.path.abspath(__file__))
#: The name of the folder of one engine version, under the base folder.
FOLDER = re.compile(r"barsweep-engine-[0-9a-f]{16}")


@functools.cache
def engine_source_hash() -> str:
    """sha256 of every ``.py`` file under the engine's folder (``__pycache__`` excluded),
    with its path relative to it; computed once per process (about 1 ms).

    >>> len(engine_source_hash())
    64
    """
    digest = hashlib.sha256()
    for folder, subfolders, files in os.walk(ENGINE_DIR):
        subfolders[:] = sorted(d for d in subfolders if not d.startswith(("__", ".")))
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                source = f.read()
            digest.update(f"{os.path.relpath(path, ENGINE_DIR)}\0{len(source)}\0".encode())
            digest.update(source)
    return digest.hexdigest()


def user_cache_dir() -> Path:
    """numba's user-wide cache folder, where numba puts caches it cannot keep beside
    their source: ``$XDG_CACHE_HOME/numba`` (default ``~/.cache/numba``) on Linux,
    ``~/Library/Caches/numba`` on macOS, ``%LOCALAPPDATA%\\numba\\Cache`` on Windows."""
    home = Path.home()
    if sys.platform == "win32":
        local = os.environ.get("LOCALAPPDATA") or home / "AppData" / "Local"
        return Path(local) / "numba" / "Cache"
    if sys.platform == "darwin":
        return home / "Library" / "Caches" / "numba"
    return Path(os.environ.get("XDG_CACHE_HOME") or home / ".cache") / "numba"


def cache_base(environ: dict[str, str], digest: str) -> Path:
    """The folder that holds the engine versions' folders: the first of the user's
    ``NUMBA_CACHE_DIR`` in ``environ`` (less a ``barsweep-engine-HASH`` folder at its
    end), :func:`user_cache_dir` and a folder in the temporary directory where
    ``barsweep-engine-DIGEST`` can be made and written (else the first).

    >>> base = Path(tempfile.mkdtemp())
    >>> given = base / f"barsweep-engine-{'a' * 16}"  # as a parent process set it
    >>> cache_base({"NUMBA_CACHE_DIR": str(given)}, "b" * 16) == base
    True
    """
    candidates = []
    given = environ.get("NUMBA_CACHE_DIR")
    if given:
        given_path = Path(given)
        candidates.append(given_path.parent if FOLDER.fullmatch(given_path.name) else given_path)
    candidates += [user_cache_dir(), Path(tempfile.gettempdir()) / f"numba-{_user()}"]
    for base in candidates:
        if _writable(base / f"barsweep-engine-{digest}"):
            return base
    return candidates[0]


def _user() -> str:
    try:
        return str(os.getuid())
    except AttributeError:  # Windows
        return os.environ.get("USERNAME", "user")


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError:
        return False
    return True


def configure() -> Path:
    """Point numba's cache at this engine version's folder (see the module's docstring);
    returns that folder."""
    digest = engine_source_hash()[:16]
    folder = cache_base(os.environ, digest) / f"barsweep-engine-{digest}"
    os.environ["NUMBA_CACHE_DIR"] = str(folder)
    numba = sys.modules.get("numba")
    if numba is not None:  # imported before the engine: it read the variable already
        numba.config.CACHE_DIR = str(folder)
    return folder


#: This engine version's folder of numba's cache, set when the engine is imported.
CACHE_DIR = configure()
#: Where the kernels written per signal go (their source does not depend on the engine's).
BASE = CACHE_DIR.parent


def mark_compiled(function) -> bool:
    """Write the mark saying that the jitted ``function`` is in numba's cache for this
    engine (call it after the function has run); False when nothing was written: it is
    not cached on disk (no source file, or numba keeps it in memory only), or the folder
    is not writable."""
    stamp = _stamp(function)
    if stamp is None:
        return False
    mark = _mark_path(function)
    partial = mark.with_name(f".{mark.name}.{os.getpid()}.tmp")
    try:
        mark.parent.mkdir(parents=True, exist_ok=True)
        partial.write_text(json.dumps(stamp), encoding="utf-8")
        os.replace(partial, mark)
    except OSError:  # a folder numba could not write either
        return False
    return True


def is_marked(function) -> bool:
    """Whether :func:`mark_compiled` marked ``function`` with its present stamp (its file
    unchanged since, the same numba and Python)."""
    stamp = _stamp(function)
    if stamp is None:
        return False
    try:
        return json.loads(_mark_path(function).read_text(encoding="utf-8")) == stamp
    except (OSError, ValueError):
        return False


def _stamp(function) -> dict | None:
    """What numba's cache of ``function`` is keyed on besides the folder: its file's
    modification time and size, numba's version, Python's; None when it is not cached
    on disk."""
    py_func = getattr(function, "py_func", None)
    stats = getattr(function, "stats", None)
    if py_func is None or (stats is not None and not getattr(stats, "cache_path", True)):
        return None
    path = py_func.__code__.co_filename
    try:
        info = os.stat(path)
    except OSError:  # no source file: compiled in memory only
        return None
    numba = sys.modules.get("numba")
    return {"file": os.path.abspath(path), "function": py_func.__qualname__,
            "stamp": [info.st_mtime_ns, info.st_size],
            "numba": getattr(numba, "__version__", "?"), "python": sys.version.split()[0]}


def _mark_path(function) -> Path:
    py_func = function.py_func
    path = os.path.abspath(py_func.__code__.co_filename)
    where = hashlib.sha256(f"{path}\0{py_func.__qualname__}".encode()).hexdigest()[:12]
    return CACHE_DIR / "barsweep-compiled" / f"{Path(path).stem}.{py_func.__qualname__}-{where}"
