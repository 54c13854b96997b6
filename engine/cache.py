"""numba's on-disk cache keyed on the engine's source, not only on each function's file.

numba stamps a cached function with its own file's content. The engine's kernels inline
functions of other files (``simulate``, ``fills``, ``metrics``), so after an edit there an
editable checkout would load a stale kernel. The locators here add a hash of every
``engine/**/*.py`` file (:func:`engine_source_hash`) to the stamp of each cached
function that uses the engine: the engine's own, the strategies' kernels
(``strategies/kernels.py``) and any function of a module that imports from
``barsweep.engine`` (a custom strategy's ``signal``). An edit anywhere in the engine
recompiles them once; an unchanged tree loads them. Other functions keep numba's stamp.

The cache stays where numba puts it: under ``NUMBA_CACHE_DIR`` when it is set, else in
``__pycache__`` beside the source, else in the user-wide cache directory. Importing this
module (``barsweep.engine`` does, before any of its kernels is defined) puts the
locators in front of numba's own; a ``NUMBA_CACHE_LOCATOR_CLASSES`` list replaces them
all, as it replaces numba's (name ``barsweep.engine.cache.EngineInTreeLocator`` etc. in
it to keep the engine stamp).
"""

from __future__ import annotations

import functools
import hashlib
import os
from types import ModuleType

from numba.core import caching

ENGINE_DIR = os.path.dirname(os.path.abspath(__file__))
ENGINE_PACKAGE = __name__.rpartition(".")[0]  # "barsweep.engine"


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


def uses_engine(py_func) -> bool:
    """Whether ``py_func`` is the engine's or its module imported something from the
    engine (a module, function or class of ``barsweep.engine``) before defining it."""
    if _is_engine(getattr(py_func, "__module__", None)):
        return True
    for value in py_func.__globals__.values():
        if isinstance(value, ModuleType):
            name = value.__name__
        else:
            try:
                name = getattr(value, "__module__", None)
            except Exception:  # an object whose attribute lookup fails is not the engine's
                continue
        if _is_engine(name):
            return True
    return False


def _is_engine(module_name) -> bool:
    return isinstance(module_name, str) and (
        module_name == ENGINE_PACKAGE or module_name.startswith(ENGINE_PACKAGE + "."))


def _numba(name: str):
    """A class of ``numba.core.caching`` (named with a leading underscore before 0.65)."""
    return getattr(caching, name, None) or getattr(caching, "_" + name)


class _EngineStamp:
    """Mixin for numba's source-file locators: only for functions that use the engine,
    whose stamp becomes ``(numba's stamp of their file, engine_source_hash())``."""

    stamps_engine_source = True

    @classmethod
    def from_function(cls, py_func, py_file):
        if not uses_engine(py_func):
            return None
        return super().from_function(py_func, py_file)

    def get_source_stamp(self):
        return super().get_source_stamp(), engine_source_hash()


class EngineUserProvidedLocator(_EngineStamp, _numba("UserProvidedCacheLocator")):
    """Under ``NUMBA_CACHE_DIR``, when it is set."""


class EngineInTreeLocator(_EngineStamp, _numba("InTreeCacheLocator")):
    """In ``__pycache__`` beside the function's file."""


class EngineUserWideLocator(_EngineStamp, _numba("UserWideCacheLocator")):
    """In the user-wide cache directory (when ``__pycache__`` is not writable)."""


LOCATORS = (EngineUserProvidedLocator, EngineInTreeLocator, EngineUserWideLocator)


def install() -> None:
    """Put :data:`LOCATORS` in front of numba's (once per process)."""
    impl = _numba("CacheImpl")
    current = list(impl._locator_classes)
    if not any(getattr(c, "stamps_engine_source", False) for c in current):
        impl._locator_classes = [*LOCATORS, *current]


install()
