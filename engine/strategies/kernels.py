"""Each strategy's ``step``, ``scan`` and sweep ``kernel``, compiled from its ``signal`` alone.

A signal takes 5 arguments, ``(ind, rows, fparams, bars, t)``, 8, ``(ind, rows,
fparams, bars, t, position, entry_price, entry_bar)``, or 11, those and ``equity,
pending, pending_price``: the longer forms also see the position state, and the
account and its pending entry order, at the close of bar ``t``
(:func:`barsweep.engine.core.simulate.simulate` says which values). The simulation
always calls the 11-argument form, ``step``: the signal itself when it takes 11
arguments, else a wrapper inlined into the kernel that drops the rest (a 5- or
8-argument signal compiles to the same code as before the longer forms existed).
:func:`signal_arity` tells the three apart and refuses any other. The module's
``ACCOUNT`` is True for an 11-argument signal: the portfolio kernel then marks the
account before its rules and searches no flat stretch ahead of time
(:func:`barsweep.engine.portfolio.sim.simulate_portfolio`).

All three are a few lines that only name the signal: ``scan`` searches flat stretches
(:func:`barsweep.engine.core.simulate.scan_flat`), ``kernel`` runs
:func:`barsweep.engine.core.simulate.simulate` over the combos, serially and without the GIL
(:func:`barsweep.engine.core.sweep.run_kernel` runs pieces of them on threads). A fourth,
``lockstep_kernel``, runs it as the GPU does, one bar per iteration (the same results;
compiled only when called: the tests hold it to ``kernel``). numba caches
a function on disk only when it is a module-level function of a file, and a kernel
that takes the signal as an argument, or closes over it, compiles again in every
process (measured in benchmarks/NOTES.md, "Strategy kernels"). So :func:`compiled`
writes them, once per signal, as a small module of their own (:data:`HEADER` completed
by :data:`SWEEP`) that imports the signal by its module path, and imports it: numba's
cache then works as for a hand-written module, with the same speed. Other kinds of
kernel module (:class:`KernelKind`: the portfolio's) are written the same way, by
:func:`write_kernels`.

The module is written when a kernel is first needed (:class:`~.base.Strategy` reads
it lazily), to ``BASE/barsweep_kernels/`` (:data:`barsweep.engine.cache.BASE`: the
user's ``NUMBA_CACHE_DIR``, else numba's user-wide cache folder, ``~/.cache/numba`` on
Linux; beside the signal's file in ``__pycache__/barsweep_kernels/`` when that is not
writable; a folder others may write is never used: :func:`~barsweep.engine.cache.private_folder`),
and numba caches the kernel as any module's functions, in the engine
version's folder (:mod:`barsweep.engine.cache`: an edited engine recompiles it). Its name
holds the signal's name and a hash of its file's path (two checkouts do not share it). It
records the hash of the signal's source, so an edited signal rewrites it and numba
recompiles. A signal that cannot be imported by name (defined in a function, or with no
source file) gets the same code compiled in this process only, with a warning.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import os
import re
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from ...errors import SpecError
from ..cache import BASE, point_numba, private_folder

ENGINE_PACKAGE = __name__.rsplit(".", 2)[0]  # "barsweep.engine"

#: The arguments of a signal, in its two forms.
SIGNAL_ARGS = ("ind", "rows", "fparams", "bars", "t")
STATE_ARGS = ("position", "entry_price", "entry_bar")
ACCOUNT_ARGS = ("equity", "pending", "pending_price")

HEADER = '''\
"""{title} of {module}.{name}, written by {writer}: do not edit.

The signal's source file is SIGNAL_FILE (sha256 {digest}).
"""

SIGNAL_FILE = {path!r}

{imports}{import_signal}
{step}
ACCOUNT = {account}  # the signal reads the account (``equity``, the pending order)


@njit(cache={cache})
def scan(ind, rows, fparams, bars, t, n, allow_long, allow_short, cash):
    return scan_flat(step, ind, rows, fparams, bars, t, n, allow_long, allow_short, cash)
{body}'''


@dataclass(frozen=True)
class KernelKind:
    """One kind of kernel module: what :data:`HEADER` is completed with.

    Attributes
    ----------
    what : str
        Its main kernel, for messages (``"sweep kernel"``).
    title : str
        What the module holds, for its docstring.
    imports : str
        Its import lines before the signal's (``{engine}``: the engine package); they
        must import ``njit`` and ``scan_flat``.
    body : str
        Its functions after ``step`` and ``scan`` (``{cache}``: numba's ``cache=``).
    prefix : str
        Of its file's name (kinds of one signal do not share a file).
    """

    what: str
    title: str
    imports: str
    body: str
    prefix: str = ""

    def text(self, signal, module: str, name: str, path: str, digest: str, cache: bool,
             import_signal: str) -> str:
        """The module's source for ``signal`` (``module.name``, in file ``path``): the
        names shown with word characters only and the path as a string literal, so no
        character of theirs leaves its place in the source (``import_signal`` names an
        importable module: :func:`source_of`)."""
        arity = signal_arity(signal)
        return HEADER.format(title=self.title, module=_word(module), name=_word(name),
                             writer=__name__,
                             path=path, digest=digest, cache=cache,
                             imports=self.imports.format(engine=ENGINE_PACKAGE),
                             import_signal=import_signal,
                             step=STEP[arity].format(cache=cache),
                             account=arity == len(SIGNAL_ARGS + STATE_ARGS + ACCOUNT_ARGS),
                             body=self.body.format(cache=cache))


#: The single-symbol kind: ``step``, ``scan`` and the sweep ``kernel``.
SWEEP = KernelKind("sweep kernel", "step, scan and sweep kernel", """\
from numba import njit

from {engine}.core.simulate import scan_flat, simulate
""", """

@njit(nogil=True, cache={cache})
def kernel(bars, ind, combos, run, out, rec):
    for c in range(combos.rows.shape[0]):
        simulate(step, scan, bars, ind, combos, c, run, out, False, rec)


@njit(nogil=True, cache={cache})
def lockstep_kernel(bars, ind, combos, run, out, rec):
    for c in range(combos.rows.shape[0]):
        simulate(step, scan, bars, ind, combos, c, run, out, True, rec)
""")

#: ``step`` in :data:`HEADER`, by the signal's number of arguments.
STEP = {
    5: '''
@njit(inline="always", cache={cache})
def step(ind, rows, fparams, bars, t, position, entry_price, entry_bar, equity, pending,
         pending_price):
    return signal(ind, rows, fparams, bars, t)
''',
    8: '''
@njit(inline="always", cache={cache})
def step(ind, rows, fparams, bars, t, position, entry_price, entry_bar, equity, pending,
         pending_price):
    return signal(ind, rows, fparams, bars, t, position, entry_price, entry_bar)
''',
    11: '''
step = signal  # it takes the position state and the account itself
''',
}

_COMPILED: dict[object, ModuleType] = {}  # signal -> the module of its step, scan and kernel


def compiled(signal) -> ModuleType:
    """The module whose ``step``, ``scan`` and ``kernel`` run ``signal`` (built once per
    process).

    Parameters
    ----------
    signal : numba dispatcher
        ``signal(ind, rows, fparams, bars, t) -> (long_entry, long_exit, short_entry,
        short_exit)``, or ``signal(ind, rows, fparams, bars, t, position, entry_price,
        entry_bar)``, or that and ``equity, pending, pending_price``: a module-level
        ``@njit`` function.

    Returns
    -------
    module with ``step(ind, rows, fparams, bars, t, position, entry_price, entry_bar,
    equity, pending, pending_price)`` (the signal in its 11-argument form), ``scan(ind,
    rows, fparams, bars, t, n, allow_long, allow_short, cash) -> t``, ``ACCOUNT`` and
    ``kernel(bars, ind, combos, run, out, rec)``, which runs every combo of ``combos``
    and writes ``out`` (the records :class:`~barsweep.engine.core.inputs.Bars`,
    :class:`~barsweep.engine.core.inputs.Combos`,
    :class:`~barsweep.engine.core.execution.RunSettings` and
    :class:`~barsweep.engine.core.simulate.Outputs`; ``ind`` the indicator table) and,
    when ``rec`` is a :class:`~barsweep.engine.core.records.Record` (one combo), that
    combo's equity and trades; None in a sweep (compiled without any recording).

    Raises
    ------
    SpecError
        When the signal takes another number of arguments (:func:`signal_arity`).

    Examples
    --------
    >>> from barsweep.engine.strategies import crossover
    >>> compiled(crossover.signal).kernel.__name__
    'kernel'
    """
    module = _COMPILED.get(signal)
    if module is None:
        module = _COMPILED[signal] = write_kernels(signal, SWEEP)
    return module


def signal_arity(signal) -> int:
    """How many arguments ``signal`` takes: 5 ``(ind, rows, fparams, bars, t)``, 8 (those
    and ``position, entry_price, entry_bar``) or 11 (those and ``equity, pending,
    pending_price``), read from its Python signature.

    Raises
    ------
    SpecError
        Naming the signal, for any other number or for ``*args``, ``**kwargs`` or
        keyword-only arguments.

    Examples
    --------
    >>> from barsweep.engine.strategies import rsi
    >>> signal_arity(rsi.signal)
    5
    """
    py_func = getattr(signal, "py_func", signal)
    try:
        params = list(inspect.signature(py_func).parameters.values())
    except (TypeError, ValueError):
        params = None
    if params is not None and len(params) in STEP and all(
            p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params):
        return len(params)
    name = (f"{getattr(py_func, '__module__', '?')}."
            f"{getattr(py_func, '__qualname__', repr(py_func))}")
    got = "an unreadable signature" if params is None else f"({', '.join(map(str, params))})"
    raise SpecError(f"signal {name} takes {got}; a signal takes 5 arguments "
                    f"({', '.join(SIGNAL_ARGS)}), 8 (and {', '.join(STATE_ARGS)}) or 11 "
                    f"(and {', '.join(STATE_ARGS + ACCOUNT_ARGS)}); see docs/STRATEGIES.md")


def built(signal) -> ModuleType | None:
    """The module :func:`compiled` built for ``signal`` in this process, None if none yet."""
    return _COMPILED.get(signal)


def source_of(signal) -> tuple[str, str, str] | None:
    """``(module, name, file)`` when ``signal`` is ``module.name``, a function of the module
    file ``file`` (loaded in this process); None when it cannot be imported by name."""
    py_func = getattr(signal, "py_func", signal)  # a plain function under NUMBA_DISABLE_JIT
    module, name = py_func.__module__, py_func.__qualname__
    loaded = sys.modules.get(module)
    path = getattr(loaded, "__file__", None)
    if (name.isidentifier() and all(part.isidentifier() for part in module.split("."))
            and path is not None and os.path.isfile(path)
            and getattr(loaded, name, None) is signal):
        return module, name, os.path.abspath(path)
    return None


def _word(text: str) -> str:
    """``text`` with every character but letters, digits, ``_ . < >`` as ``_``."""
    return re.sub(r"[^A-Za-z0-9_.<>]", "_", text)


def write_kernels(signal, kind: KernelKind) -> ModuleType:
    """The module of ``kind`` for ``signal``, written (when it differs) and imported:
    the one writer of kernel modules.

    Its file is ``{kind.prefix}{module}_{name}_{hash of module, name and path}.py`` in
    the first writable of :func:`_folders`; a signal that cannot be imported by name, or
    no writable folder, gets the same text compiled in this process only, with a warning.
    """
    source = source_of(signal)
    if source is None:
        py_func = getattr(signal, "py_func", signal)
        module, name = py_func.__module__, py_func.__qualname__
        warnings.warn(f"the signal {module}.{name} cannot be imported by name (define it at "
                      f"the top level of a module file): its {kind.what} is compiled in "
                      "every process, not cached", stacklevel=5)
        return _in_process(signal, kind, module, name)
    module, name, path = source
    alias = "" if name == "signal" else " as signal"
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    text = kind.text(signal, module, name, path, digest, True,
                     f"from {module} import {name}{alias}\n")
    where = hashlib.sha256(f"{module}\0{name}\0{path}".encode()).hexdigest()[:12]
    stem = f"{kind.prefix}{module.rpartition('.')[2]}_{name}_{where}"
    passed = []
    for folder in _folders(path):
        problem = private_folder(folder)
        if problem is None:
            try:
                target = write_module(folder / f"{stem}.py", text)
            except OSError as err:  # not writable: the next place
                problem = f"{folder} ({err.strerror or err})"
            else:
                return import_file(f"_barsweep_kernel_{stem}", target)
        passed.append(problem)
    warnings.warn(f"no private writable folder for the {kind.what} of {module}.{name} "
                  f"(tried {'; '.join(passed)}): it is compiled in every process, not "
                  "cached", stacklevel=5)
    return _in_process(signal, kind, module, name)


def _folders(signal_path: str) -> list[Path]:
    """Where a kernel module may go, the first private and writable one taken. Not beside
    the signal first: the package's own folders hold its sources only."""
    return [BASE / "barsweep_kernels",
            Path(signal_path).parent / "__pycache__" / "barsweep_kernels"]


def write_module(path: Path, text: str) -> Path:
    """``path`` holding ``text``: left alone when it does, else written atomically."""
    try:
        if path.read_text(encoding="utf-8") == text:
            return path
    except OSError:
        pass
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)
    return path


def import_file(name: str, path: Path) -> ModuleType:
    """Import the generated module at ``path`` as ``name``, its cached functions bound to
    the engine's cache folder (:func:`barsweep.engine.cache.point_numba`)."""
    point_numba()
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _in_process(signal, kind: KernelKind, module: str, name: str) -> ModuleType:
    text = kind.text(signal, module, name, "(none)", "-", False, "")
    kernels = ModuleType(f"_barsweep_kernel_{kind.prefix}{name}")
    kernels.signal = signal
    exec(compile(text, f"<{kind.what} of {module}.{name}>", "exec"), kernels.__dict__)
    return kernels
