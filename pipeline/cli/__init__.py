"""The ``barsweep`` command line: data, run, check, rank, walkforward, plot, trades,
report, warm, demo.

Only this package turns flags into configuration values; everything it calls takes
explicit arguments. Each module holds a group of commands: its parsers and the
functions that run them (parse, then call; heavy imports wait for the call), so that
``barsweep --help`` loads no more than the parsers.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import logging
import os
import signal
import sys
import threading
import warnings

from ...errors import BarsweepError, Interrupted, Terminated
from .data import add_data_parser
from .demo import add_demo_parser
from .ranking import add_rank_parsers
from .runs import add_run_parsers, add_strategies_parser, add_warm_parser
from .views import add_plot_parser, add_report_parser, add_trades_parser


def command() -> int:
    """The ``barsweep`` program: :func:`main` on the command line's arguments; its exit
    status, for ``sys.exit``.

    The objects the command leaves (numba's, Dask's, pandas' and xarray's, a few
    hundred thousand after a run) are then frozen out of the garbage collector
    (``gc.freeze``), which the interpreter's exit would otherwise walk in collections
    that take about a second; finalizers and ``atexit`` handlers still run."""
    code = main()
    gc.freeze()
    return code


def main(argv: list[str] | None = None) -> int:
    """Run the ``barsweep`` command ``argv`` (default ``sys.argv[1:]``); its exit status:
    0, the command's own, or that of the error or stop, said in one line on stderr."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("barsweep").setLevel(logging.INFO)
    if args.verbose:  # here and in the worker processes the CLI starts
        os.environ["DASK_LOGGING__DISTRIBUTED"] = "info"
        logging.getLogger("distributed").setLevel(logging.INFO)
    else:
        quiet_dask()
    unawaited_closes_quiet()
    try:
        with sigterm_as_interrupt(), reading_store(args):
            if getattr(args, "import_modules", False):
                from ..run.store_modules import import_store_modules

                import_store_modules(args.results)
            code = int(args.func(args) or 0)
            sys.stdout.flush()  # a closed pipe is found here, not at the interpreter's exit
            return code
    except BrokenPipeError:
        return stdout_closed()
    except Interrupted as exc:
        word = "terminated (SIGTERM)" if exc.terminated else "interrupted"
        print(f"\nbarsweep: {word}: {exc}", file=sys.stderr)
        return stop_handled(exc.exit_code)
    except BarsweepError as exc:
        print(f"barsweep: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        stopped = Interrupted(terminated=isinstance(exc, Terminated))
        print(f"\nbarsweep: {'terminated (SIGTERM)' if stopped.terminated else 'interrupted'}",
              file=sys.stderr)
        return stop_handled(stopped.exit_code)


def reading_store(args) -> contextlib.AbstractContextManager:
    """For a command that reads a results store (``args.results``): an error from a
    damaged chunk said in one line naming it
    (:func:`~barsweep.pipeline.run.integrity.reading`); else nothing."""
    path = getattr(args, "results", None)
    if not isinstance(path, str):
        return contextlib.nullcontext()
    from ..run.integrity import reading

    return reading(path)


def stop_handled(code: int) -> int:
    """``code``, once CPython is told the stop was handled.

    A KeyboardInterrupt raised inside code run by ``exec()`` or ``eval()`` of a string
    (dataclasses, numba and Dask generate code that way, and a Ctrl-C may land there
    while they import or compile) marks the interpreter's "unhandled KeyboardInterrupt"
    flag as it leaves that call, although barsweep catches it further up; run as
    ``python -m``, the interpreter then ends itself by SIGINT at exit (status -2 rather
    than 130, after the one line was printed). ``exec`` of a string clears the flag
    when it begins, and running nothing leaves it clear."""
    from ..run.internals import clear_unhandled_interrupt

    clear_unhandled_interrupt()  # the flag's only reset reachable from Python
    return code


#: The exit status of a command whose reader closed its output (``barsweep rank --json |
#: head``): 128 + SIGPIPE, what a shell reports for a Unix tool that SIGPIPE ended.
BROKEN_PIPE_EXIT = 141


def stdout_closed() -> int:
    """The reader of stdout went away: point stdout at /dev/null (so that the
    interpreter's last flush at exit fails nowhere) and exit quietly, as Unix tools do."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return BROKEN_PIPE_EXIT


@contextlib.contextmanager
def sigterm_as_interrupt():
    """While the command runs, SIGTERM raises :class:`~barsweep.errors.Terminated` (a
    KeyboardInterrupt) in the main thread: a run stops as on Ctrl-C, in one line, its
    lock released, exit status 143. The previous handler is restored afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum, frame):
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def quiet_dask() -> None:
    """Dask's INFO lines (workers starting and closing) are not for people running a
    sweep: warnings and errors only, here and in the worker processes the CLI starts
    (they read the environment when they import distributed)."""
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")
    logging.getLogger("distributed").setLevel(logging.WARNING)


#: What Python says when it collects a coroutine never run: a Dask client or cluster
#: whose closing a Ctrl-C or SIGTERM cut before its event loop ran it.
UNAWAITED_CLOSE = r"coroutine '\w+\._?close' was never awaited"


def unawaited_closes_quiet() -> None:
    """A stop that lands while a Dask client or cluster closes leaves the closing
    coroutine unrun, and Python warns when it collects it (in two lines, at any later
    moment): not news after the one line saying the run stopped. Other warnings stay.

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     unawaited_closes_quiet()
    ...     warnings.warn("coroutine 'Client._close' was never awaited", RuntimeWarning)
    ...     warnings.warn("coroutine 'fetch' was never awaited", RuntimeWarning)
    >>> [str(w.message) for w in caught]
    ["coroutine 'fetch' was never awaited"]
    """
    warnings.filterwarnings("ignore", message=UNAWAITED_CLOSE, category=RuntimeWarning)


def build_parser() -> argparse.ArgumentParser:
    """The ``barsweep`` command's parser: each command's arguments, and the function
    that runs it (``func``)."""
    from ...version import __version__

    parser = argparse.ArgumentParser(
        prog="barsweep", description="Parameter sweeps of trading strategies over bars: "
        "numba kernels, Dask blocks, Zarr results.",
        epilog="`barsweep COMMAND --help` lists a command's options.")
    parser.add_argument("--version", action="version", version=f"barsweep {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="Dask's INFO logging too (workers starting, closing...)")
    sub = parser.add_subparsers(dest="command", required=True)
    add_data_parser(sub)
    add_run_parsers(sub)
    add_rank_parsers(sub)
    add_plot_parser(sub)
    add_trades_parser(sub)
    add_report_parser(sub)
    add_warm_parser(sub)
    add_strategies_parser(sub)
    add_demo_parser(sub)
    return parser
