"""numba's on-disk cache in a folder of its own for each version of the engine's source,
and the marks that say a kernel was compiled into it.

numba stamps a cached function with its own file only. The engine's kernels inline
functions of other files (``simulate``, ``fills``, ``metrics``), and so does a custom
strategy's signal, so after an edit there an editable checkout would load a stale kernel.
Importing the engine (this module comes first) therefore points numba's cache
(``numba.config.CACHE_DIR``) at ``BASE/barsweep-engine-HASH``, HASH the start of
:func:`engine_source_hash` over every ``engine/**/*.py`` file: an edit anywhere in the
engine gives a new folder, where everything compiles once; an unchanged tree loads.

``BASE`` (:func:`cache_base`) is the first of: ``NUMBA_CACHE_DIR`` as the user set it,
numba's user-wide cache folder (``~/.cache/numba`` on Linux), ``numba-UID`` in the
temporary directory, where the folders that hold code (BASE itself, the engine version's,
``barsweep_kernels`` and ``barsweep_rules`` of the generated modules) are private: owned
by this user, writable by no one else, in folders no one else can rename
(:func:`folder_problem`); barsweep makes them with mode 0700. numba loads pickles from
that folder and the engine imports modules from it, so a folder others could have
planted files in is passed over, with a warning; when every candidate is, BASE is a
private ``numba-UID-XXXXXXXX`` folder of the temporary directory (reused by later
processes of the same user).

Only numba's setting is changed, never ``os.environ``: importing the engine leaves the
process's environment as it found it. The processes this one starts (Dask workers,
subprocesses) inherit the same environment and name the same folder when they import the
engine; a ``NUMBA_CACHE_DIR`` that ends in a ``barsweep-engine-HASH`` folder is taken as
``BASE/`` and replaced. numba re-reads its environment when a ``NUMBA_`` variable has
changed since it last read it (``numba.core.config.reload_config``, at every compile),
which resets the setting: :func:`point_numba` sets it again before the engine imports a
module it generated (:func:`barsweep.engine.strategies.kernels.import_file`), and numba
binds a function's cache folder when the function is defined, so what was defined before
stays where it is. Every function cached in the process goes to that folder, others'
too: they compile once per engine version as well (a module of the user's defined after
such a reset caches where numba's own setting says).
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
import stat
import sys
import tempfile
import warnings
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
    end), :func:`user_cache_dir` and ``numba-UID`` in the temporary directory where the
    folders barsweep keeps code in (:data:`SUBFOLDERS`, ``barsweep-engine-DIGEST``) are
    private (:func:`folder_problem`) and writable; else a private folder of this user's
    in the temporary directory (:func:`private_temp_folder`); when none can be made, a
    folder that does not exist there (then nothing is cached on disk). Passing over a
    candidate is said in a warning.

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
    candidates += [user_cache_dir(), Path(tempfile.gettempdir()) / f"numba-{user_name()}"]
    passed = []
    for base in candidates:
        problem = _base_problem(base, digest)
        if problem is None:
            break
        passed.append(problem)
    else:
        try:
            base = private_temp_folder(f"numba-{user_name()}-",
                                       lambda b: _base_problem(b, digest))
            _base_problem(base, digest)  # a new one: its folders made
        except OSError as err:  # no writable folder at all: nothing is cached on disk
            base = Path(tempfile.gettempdir()) / f"numba-{user_name()}-none"
            passed.append(f"a new folder in {base.parent} ({err.strerror or err})")
    if passed:
        warnings.warn(f"numba's cache is in {base}, not in {'; nor '.join(passed)}",
                      CacheFolderWarning, stacklevel=2)
    return base


class CacheFolderWarning(UserWarning):
    """numba's cache (and the modules barsweep generates) went to another folder than the
    first candidate: that one is not private or not writable."""


#: The folders barsweep keeps generated modules in, under the cache's base folder.
SUBFOLDERS = ("barsweep_kernels", "barsweep_rules")


def user_name() -> str:
    try:
        return str(os.getuid())
    except AttributeError:  # Windows
        return os.environ.get("USERNAME", "user")


def _base_problem(base: Path, digest: str) -> str | None:
    """Why ``base`` cannot hold numba's cache and barsweep's generated modules (None: it
    can): the problem of the first of its code folders that is not private, ``base`` and
    the engine version's folder made where missing (the :data:`SUBFOLDERS` are made with
    their first module, mode 0700, inside the private ``base``)."""
    engine = base / f"barsweep-engine-{digest}"
    problem = private_folder(base) or private_folder(engine, parents=False)
    for folder in (base / name for name in SUBFOLDERS):
        if problem is None and os.path.lexists(folder):
            problem = folder_problem(folder, parents=False)
    if problem is not None:
        return problem
    try:
        tempfile.TemporaryFile(dir=engine).close()
    except OSError as err:
        return f"{base} (not writable: {err.strerror or err})"
    return None


def private_folder(folder: Path, parents: bool = True) -> str | None:
    """Make ``folder`` where missing (mode 0700, its missing parents too) and say why it
    cannot hold code this process imports (None: it can); see :func:`folder_problem`."""
    try:
        _make_private(folder)
    except OSError as err:
        return f"{folder} (cannot be made: {err.strerror or err})"
    return folder_problem(folder, parents)


def _make_private(folder: Path) -> None:
    missing = []
    while not os.path.lexists(folder) and folder.parent != folder:
        missing.append(folder)
        folder = folder.parent
    for path in reversed(missing):
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:  # another process made it meanwhile: checked next
            pass


def folder_problem(folder: Path, parents: bool = True) -> str | None:
    """Why ``folder`` cannot hold code this process imports, as ``FOLDER (reason)``;
    None when it can: a folder (not a link) owned by this user that no one else may
    write (mode without group and other write), in folders that only this user or root
    own and that others may write only where sticky (as ``/tmp``), so that no one else
    can have planted a file in it or put another folder in its place (``parents=False``:
    those are known to be so). No check where there are no POSIX owners (Windows).

    >>> folder_problem(Path(tempfile.mkdtemp())) is None
    True
    """
    uid = _uid()
    if uid is None:
        return None
    try:
        info = os.lstat(folder)
    except OSError as err:
        return f"{folder} ({err.strerror or err})"
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        return f"{folder} (a {'link' if stat.S_ISLNK(info.st_mode) else 'file'}, not a folder)"
    if info.st_uid != uid:
        return f"{folder} (owned by uid {info.st_uid}, not by this user, uid {uid})"
    if info.st_mode & 0o022:
        return (f"{folder} (mode {stat.S_IMODE(info.st_mode):04o}: others may write it; "
                f"remove it, or chmod go-w it if all it holds is yours)")
    if not parents:
        return None
    path = os.path.abspath(folder)
    real = os.path.realpath(path)
    for parent in _parents(path) + (_parents(real) if real != path else []):
        problem = _parent_problem(parent, uid)
        if problem is not None:
            return f"{folder} (in {parent}: {problem})"
    return None


def _parents(path: str) -> list[str]:
    """The folders above the absolute ``path``, nearest first."""
    found = []
    parent = os.path.dirname(path)
    while parent != path:
        found.append(parent)
        path, parent = parent, os.path.dirname(parent)
    return found


def _parent_problem(parent: str, uid: int) -> str | None:
    try:
        info = os.lstat(parent)
    except OSError as err:
        return err.strerror or str(err)
    if info.st_uid not in (uid, 0):
        return f"owned by uid {info.st_uid}"
    if (stat.S_ISDIR(info.st_mode) and info.st_mode & 0o002
            and not info.st_mode & stat.S_ISVTX):
        return f"mode {stat.S_IMODE(info.st_mode):04o}: anyone may rename what it holds"
    return None


def _uid() -> int | None:
    getuid = getattr(os, "getuid", None)
    return None if getuid is None else getuid()


def private_temp_folder(prefix: str, problem=folder_problem) -> Path:
    """A folder of this user's in the temporary directory whose name starts with
    ``prefix``: the first one found of which ``problem`` (a function of the folder,
    :func:`folder_problem` by default) says nothing, else a new one
    (``tempfile.mkdtemp``: mode 0700, a name no one else has taken)."""
    tmp = Path(tempfile.gettempdir())
    try:
        found = sorted(p for p in tmp.iterdir() if p.name.startswith(prefix))
    except OSError:
        found = []
    for folder in found:
        if problem(folder) is None:
            return folder
    return Path(tempfile.mkdtemp(prefix=prefix))


def configure() -> Path:
    """Point numba's cache at this engine version's folder (see the module's docstring);
    returns that folder. The environment is only read."""
    digest = engine_source_hash()[:16]
    folder = cache_base(os.environ, digest) / f"barsweep-engine-{digest}"
    point_numba(folder)
    return folder


def point_numba(folder: Path | None = None) -> None:
    """Set numba's cache folder, ``numba.config.CACHE_DIR``, to ``folder`` (None: the
    engine's, :data:`CACHE_DIR`): where every function decorated ``cache=True`` from now
    on keeps its compiled code. Called again before a generated module is imported: numba
    resets the setting when it re-reads a changed environment (the module's docstring)."""
    from numba.core import config

    config.CACHE_DIR = str(CACHE_DIR if folder is None else folder)


#: This engine version's folder of numba's cache, set when the engine is imported.
CACHE_DIR = configure()
#: Where the kernels written per signal go (their source does not depend on the engine's).
BASE = CACHE_DIR.parent


def mark_compiled(function, variant: str = "") -> bool:
    """Write the mark saying that the jitted ``function`` is in numba's cache for this
    engine (call it after the function has run); False when nothing was written: it is
    not cached on disk (no source file, or numba keeps it in memory only), or the folder
    is not writable. ``variant`` names one of its specialisations marked on its own
    (``"record"``: a portfolio kernel compiled for a recording run)."""
    stamp = _stamp(function)
    if stamp is None:
        return False
    mark = _mark_path(function, variant)
    partial = mark.with_name(f".{mark.name}.{os.getpid()}.tmp")
    try:
        mark.parent.mkdir(parents=True, exist_ok=True)
        partial.write_text(json.dumps(stamp), encoding="utf-8")
        os.replace(partial, mark)
    except OSError:  # a folder numba could not write either
        return False
    return True


def is_marked(function, variant: str = "") -> bool:
    """Whether :func:`mark_compiled` marked ``function`` (its specialisation ``variant``)
    with its present stamp (its file unchanged since, the same numba and Python)."""
    stamp = _stamp(function)
    if stamp is None:
        return False
    try:
        return json.loads(_mark_path(function, variant).read_text(encoding="utf-8")) == stamp
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


def _mark_path(function, variant: str = "") -> Path:
    py_func = function.py_func
    path = os.path.abspath(py_func.__code__.co_filename)
    where = hashlib.sha256(f"{path}\0{py_func.__qualname__}".encode()).hexdigest()[:12]
    name = f"{Path(path).stem}.{py_func.__qualname__}-{where}"
    return CACHE_DIR / "barsweep-compiled" / (f"{name}.{variant}" if variant else name)
