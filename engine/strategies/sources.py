"""A spec's strategy modules as files: where a module named in ``modules`` lies in
``module_dir``, which files make it, and importing it from that folder only.

A module there is a package (a folder holding ``__init__.py``) or one ``.py`` file; its
files are the ``.py`` files of the package and of every folder in it (subpackages and
namespace folders, both importable; hidden names and ``__pycache__`` left out), or the one
file. A symbolic link among them, or the package's folder itself, that leads out of the
package's folder (out of ``module_dir`` for the package or one file) is refused, and so
are more than :data:`MAX_MODULE_BYTES` of them, from their
sizes as they are listed (before anything is read). A name of the standard library is
refused too: the module would be imported in its place.

:func:`serve` imports a top-level module from a folder without putting the folder on
``sys.path``: another name there (a ``json.py`` beside it) is never imported from it. It
and its submodules are loaded from their ``.py`` sources only, never from an extension
module or a ``.pyc`` (a planted one could fake its source's stamp): what is imported is
what is listed, hashed and shipped.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Iterable, Iterator

from ...errors import SpecError

#: The most bytes of strategy modules a run ships to its workers (their ``.py`` files).
MAX_MODULE_BYTES = 32 << 20


def module_location(name: str, root: str | os.PathLike) -> str | None:
    """The real path of ``name``'s top-level package folder (``root/top/`` holding an
    ``__init__.py``) or module file (``root/top.py``) in ``root``; None when ``root``
    holds neither.

    >>> module_location("os.path", "/no/such/folder") is None
    True
    """
    top = name.partition(".")[0]
    package, module = os.path.join(root, top), os.path.join(root, f"{top}.py")
    if os.path.isfile(os.path.join(package, "__init__.py")):
        return os.path.realpath(package)
    if os.path.isfile(module):
        return os.path.realpath(module)
    return None


def not_a_module(name: str, root: str | os.PathLike) -> str | None:
    """Why ``root`` holds something called as ``name``'s top-level module that is not
    one to import (None: it holds a package or a module file, or nothing of that name):
    a folder without ``__init__.py``, or a standard library module's name."""
    top = name.partition(".")[0]
    package = os.path.join(os.path.abspath(root), top)
    if module_location(name, root) is not None:
        if top in sys.stdlib_module_names:
            return (f"{package}: {top!r} is the name of a standard library module; name "
                    f"your package otherwise")
        return None
    if os.path.isdir(package):
        return (f"{package} is a folder without __init__.py, not a Python package (a "
                f"module is a package or a .py file)")
    return None


def module_sources(root: str | os.PathLike, tops: Iterable[str],
                   limit: int = MAX_MODULE_BYTES) -> list[tuple[str, str, int]]:
    """The ``.py`` files of each top-level package or module ``top`` in ``root``, as
    ``(path relative to root, /-separated; path; size in bytes)``, listed without reading
    them.

    Raises
    ------
    SpecError
        Naming the file or folder: a ``top`` that is not a package or module file in
        ``root``, a symbolic link that leads out of the package (of ``root`` for a module
        file), a folder linked back into itself, or files over ``limit`` bytes in all
        (said as soon as the listed sizes pass it).
    """
    root, tops = os.path.abspath(root), tuple(tops)
    found, total = [], 0
    for top in tops:
        for rel, path, size in _sources(root, top):
            total += size
            if total > limit:
                raise SpecError(f"module_dir: the modules {', '.join(tops)} in {root} hold "
                                f"more than the {limit >> 20} MiB of Python files a run "
                                f"ships to its workers (at {path}, {size / 2**20:.0f} MiB); "
                                "install them on the workers instead")
            found.append((rel, path, size))
    return found


def _sources(root: str, top: str) -> Iterator[tuple[str, str, int]]:
    location = module_location(top, root)
    problem = not_a_module(top, root)
    if problem is not None or location is None:
        raise SpecError(problem or f"module_dir: {root} holds no package {top}/ (with "
                        f"__init__.py) and no {top}.py")
    if os.path.isfile(location):
        path = os.path.join(root, f"{top}.py")
        _inside(path, os.path.realpath(root))
        yield f"{top}.py", path, os.stat(path).st_size
        return
    _inside(os.path.join(root, top), os.path.realpath(root))
    seen = {location}
    folders = [(os.path.join(root, top), top)]
    while folders:
        folder, rel = folders.pop()
        with os.scandir(folder) as listing:
            entries = sorted(listing, key=lambda e: e.name)
        for entry in entries:
            if entry.name.startswith(".") or entry.name == "__pycache__":
                continue
            if entry.is_dir():  # a subpackage, or a namespace folder (importable too)
                if entry.is_symlink():
                    _inside(entry.path, location)
                real = os.path.realpath(entry.path)
                if real in seen:
                    raise SpecError(f"module_dir: {entry.path} is a link to {real}, a "
                                    f"folder of the package already: a loop")
                seen.add(real)
                folders.append((entry.path, f"{rel}/{entry.name}"))
            elif entry.name.endswith(".py") and entry.is_file():
                if entry.is_symlink():
                    _inside(entry.path, location)
                yield f"{rel}/{entry.name}", entry.path, entry.stat().st_size


def _inside(link: str, folder: str) -> None:
    """SpecError when the link ``link`` leads out of the real folder ``folder``."""
    real = os.path.realpath(link)
    if real != folder and not real.startswith(folder.rstrip(os.sep) + os.sep):
        raise SpecError(f"module_dir: {link} is a symbolic link to {real}, out of "
                        f"{folder}: a run ships only the module's own files (copy it in)")


class _SourceOnly(importlib.machinery.SourceFileLoader):
    """Loads a module from its ``.py`` file itself, never from a cached ``.pyc`` (whose
    header a planted file could fake) and writing none."""

    def path_stats(self, path):
        raise OSError("no stamp: compile the source")  # SourceLoader.get_code then does


class _Folders(importlib.abc.MetaPathFinder):
    """Finds each top-level module it was given in its folder, and its submodules in
    their package's folders, as ``.py`` sources only (never an extension module or a
    ``.pyc``: the files imported are the files :func:`module_sources` lists), and
    nothing else (first on ``sys.meta_path``: the named modules take precedence, as
    from the front of ``sys.path``, without the folder's other files)."""

    def __init__(self) -> None:
        self.folders: dict[str, str] = {}

    def find_spec(self, fullname, path=None, target=None):
        folder = self.folders.get(fullname.partition(".")[0])
        if folder is None or (path is None) != ("." not in fullname):
            return None
        places = [folder] if path is None else list(path)
        for place in places:
            spec = importlib.machinery.FileFinder(place, (_SourceOnly, [".py"])).find_spec(
                fullname)
            if spec is not None:
                return spec
        # no other finder may load it (a sourceless .pyc, an extension module)
        raise ModuleNotFoundError(f"no module named {fullname!r} as a .py source in "
                                  f"{', '.join(map(str, places))}", name=fullname)


_FOLDERS = _Folders()


def serve(top: str, folder: str) -> None:
    """Import the top-level package or module ``top`` (and so its submodules) from
    ``folder``, in this process, from now on; SpecError for a standard library
    module's name."""
    if top in sys.stdlib_module_names or "." in top:
        raise SpecError(f"{top!r} is not a name to import from {folder}: a standard "
                        "library module's name, or not a top-level one")
    if _FOLDERS not in sys.meta_path:
        sys.meta_path.insert(0, _FOLDERS)
    _FOLDERS.folders[top] = os.path.abspath(folder)
