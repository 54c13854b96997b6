"""The ``barsweep`` command line: data, run, rank, walkforward, plot, report, warm, demo.

Only this module turns flags into configuration values; everything it calls takes
explicit arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import signal
import sys
import threading
from pathlib import Path

from ..errors import BarsweepError, Interrupted, RunError, Terminated

DEMO_BARS = 26_280  # three years of hourly bars


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("barsweep").setLevel(logging.INFO)
    if args.verbose:  # here and in the worker processes the CLI starts
        os.environ["DASK_LOGGING__DISTRIBUTED"] = "info"
        logging.getLogger("distributed").setLevel(logging.INFO)
    else:
        quiet_dask()
    try:
        with sigterm_as_interrupt():
            code = int(args.func(args) or 0)
            sys.stdout.flush()  # a closed pipe is found here, not at the interpreter's exit
            return code
    except BrokenPipeError:
        return stdout_closed()
    except Interrupted as exc:
        word = "terminated (SIGTERM)" if exc.terminated else "interrupted"
        print(f"\nbarsweep: {word}: {exc}", file=sys.stderr)
        return exc.exit_code
    except BarsweepError as exc:
        print(f"barsweep: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        stopped = Interrupted(terminated=isinstance(exc, Terminated))
        print(f"\nbarsweep: {'terminated (SIGTERM)' if stopped.terminated else 'interrupted'}",
              file=sys.stderr)
        return stopped.exit_code


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


def build_parser() -> argparse.ArgumentParser:
    from ..version import __version__

    parser = argparse.ArgumentParser(
        prog="barsweep", description="Parameter sweeps of trading strategies over bars: "
        "numba kernels, Dask blocks, Zarr results.",
        epilog="`barsweep COMMAND --help` lists a command's options.")
    parser.add_argument("--version", action="version", version=f"barsweep {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="Dask's INFO logging too (workers starting, closing...)")
    sub = parser.add_subparsers(dest="command", required=True)

    data = sub.add_parser("data", help="the bar store: synth, import, info, verify")
    data_sub = data.add_subparsers(dest="data_command", required=True)
    synth = data_sub.add_parser("synth", help="write synthetic bars (seeded, GBM with regimes)")
    synth.add_argument("--symbol", required=True, help="symbol to store them as, e.g. BTCUSDT")
    synth.add_argument("--timeframe", default="1h",
                       help="bar spacing: a number and s, m, h, d or w (default 1h)")
    synth.add_argument("--bars", type=int, default=DEMO_BARS,
                       help=f"how many bars (default {DEMO_BARS:,}: three years of hours)")
    synth.add_argument("--seed", type=int, default=7,
                       help="random seed: a seed always writes the same bars (default 7)")
    synth.add_argument("--store", required=True, help="the bar store (a directory)")
    synth.set_defaults(func=cmd_synth)
    imp = data_sub.add_parser("import", help="import a CSV or Parquet file, validated")
    imp.add_argument("file", help="the CSV or Parquet file")
    imp.add_argument("--symbol", required=True, help="symbol to store the bars as, e.g. AAPL")
    imp.add_argument("--timeframe", required=True,
                     help="the file's bar spacing, e.g. 1h or 1d (checked against its times)")
    imp.add_argument("--store", required=True, help="the bar store (a directory)")
    imp.add_argument("--drop-nan", action="store_true",
                     help="drop rows with missing values instead of refusing the file")
    imp.add_argument("--time-format", metavar="FMT",
                     help="strptime format of text times, e.g. '%%d/%%m/%%Y %%H:%%M'")
    imp.add_argument("--price-column", metavar="COL",
                     help="store this column (e.g. adj_close) as close; open/high/low are "
                          "scaled per bar by COL/close")
    imp.add_argument("--ohlc-from-close", action="store_true",
                     help="close-only data: open = high = low = close (stops then "
                          "checked on the close only)")
    imp.add_argument("--replace", action="store_true",
                     help="replace bars already stored for this symbol and timeframe")
    imp.add_argument("--force", action="store_true",
                     help="import bars whose measured spacing differs from --timeframe")
    imp.add_argument("--sort", action="store_true",
                     help="sort the rows by time before the checks (e.g. a file written "
                          "newest first); rows with the same time are still refused")
    imp.add_argument("--delimiter", metavar="CHAR",
                     help="the CSV's field delimiter, e.g. ';' or '\\t' for a tab "
                          "(default ',')")
    imp.set_defaults(func=cmd_import)
    info = data_sub.add_parser("info", help="list the store's files")
    info.add_argument("--store", required=True, help="the bar store (a directory)")
    info.set_defaults(func=cmd_info)
    verify = data_sub.add_parser(
        "verify", help="hash every file against the store's index and check every bar")
    verify.add_argument("--store", required=True, help="the bar store (a directory)")
    verify.add_argument("--update-index", action="store_true",
                        help="record files the index lacks whose bars pass, forget entries "
                             "whose file is gone, refresh mtimes (never adopts a changed file)")
    verify.set_defaults(func=cmd_verify)

    run = sub.add_parser("run", help="run a sweep spec on a Dask cluster into a Zarr store")
    run.add_argument("spec", help="the sweep spec (a YAML file)")
    run.add_argument("--out", help="results store (default: the spec's run.out)")
    run.add_argument("--scheduler", help="address of a running Dask scheduler "
                                         "(tcp://host:8786, or tls://... with --tls-*)")
    run.add_argument("--tls-ca", metavar="PEM", help="CA certificate of a TLS cluster")
    run.add_argument("--tls-cert", metavar="PEM", help="this client's TLS certificate")
    run.add_argument("--tls-key", metavar="PEM", help="this client's TLS private key")
    run.add_argument("--cluster", metavar="KIND", help="where the blocks run: auto (threads "
                     "of this process for a small sweep, else local), threads, local, cuda, "
                     "slurm, pbs or a scheduler address (default: the spec's cluster, auto)")
    run.add_argument("--backend", choices=["auto", "cpu", "cuda"],
                     help="where the kernels run: cpu, cuda, or auto (cuda when every worker "
                          "has a GPU of its own; default: the spec's run.backend, auto)")
    run.add_argument("--workers", type=int, help="workers of the local cluster (threads of "
                                                 "a threads one)")
    run.add_argument("--no-progress", action="store_true",
                     help="no progress line (on a terminal it is redrawn in place; in a "
                          "log it is a line every --progress-every seconds)")
    run.add_argument("--progress-every", type=float, metavar="S",
                     help="seconds between progress lines when stderr is not a terminal "
                          "(default: the spec's run.progress_every, 5)")
    run.add_argument("--quiet", action="store_true",
                     help="print only the final summary (for scripts)")
    run.add_argument("--perf-report", metavar="FILE.html",
                     help="write Dask's performance report of the run (task stream, "
                          "profiles, bandwidth) to this HTML file")
    run.add_argument("--max-combos", type=int, metavar="N",
                     help="refuse grids of more than N combos (default: the spec's "
                          "run.max_combos, 1,000,000,000)")
    again = run.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_true",
                       help="continue the results store at --out: compute only missing blocks")
    again.add_argument("--overwrite", action="store_true",
                       help="replace the results store at --out (never anything else)")
    run.add_argument("--worker-timeout", type=float, metavar="S",
                     help="stop when no worker is connected for S seconds "
                          "(default: the spec's run.worker_timeout, 60)")
    run.set_defaults(func=cmd_run)

    check = sub.add_parser("check", help="validate a sweep spec and compile its strategy "
                           "on this machine; run nothing, write no results")
    check.add_argument("spec", help="the sweep spec (YAML) to check")
    check.set_defaults(func=cmd_check)

    rank = sub.add_parser("rank", help="the best combos of a results store")
    add_rank_arguments(rank)
    rank.add_argument("results", help="the results store (a run's --out)")
    rank.add_argument("--partial", action="store_true",
                      help="rank an incomplete store (an interrupted run) as it is")
    rank.add_argument("--smooth", type=int, metavar="R",
                      help="rank by --by averaged over each combo's neighbourhood of radius "
                           "R grid steps in every parameter (excluded combos do not count)")
    rank.add_argument("--across", metavar="DIM",
                      help="rank parameter combos by --by aggregated across DIM (symbol); "
                           "with --pareto, one front of the aggregated metrics")
    rank.add_argument("--agg", default="median", metavar="HOW",
                      help="with --across: median (default), mean or min")
    rank.add_argument("--pareto", metavar="M1,M2",
                      help="print the non-dominated combos by these metrics, e.g. "
                           "sharpe,max_drawdown: one front per symbol (and walk-forward "
                           "window) unless --across symbol")
    rank.add_argument("--pbo", action="store_true",
                      help="print the probability of backtest overfitting (CSCV) per symbol")
    rank.set_defaults(func=cmd_rank)

    wf = sub.add_parser("walkforward", help="a walk-forward store: the combo chosen in each "
                        "window's train sample, its test, and the stitched out-of-sample run")
    wf.add_argument("results", help="a walk-forward results store (a run's --out)")
    wf.add_argument("--by", default="sharpe", help="metric the train sample chooses by "
                    "(default sharpe)")
    wf.add_argument("--where", help='filter, e.g. "n_trades >= 10"')
    wf.add_argument("--symbol", help="the symbol, when the store holds several")
    wf.add_argument("--json", action="store_true", help="print one JSON object for scripts")
    wf.set_defaults(func=cmd_walkforward)

    plot = sub.add_parser("plot", help="pictures of a results store (PNG)")
    plot_sub = plot.add_subparsers(dest="plot_command", required=True)
    heat = plot_sub.add_parser("heatmap", help="a metric over two parameters (a line over "
                               "one), every other dim reduced; the best cell marked")
    heat.add_argument("results", help="the results store (a run's --out)")
    heat.add_argument("--x", required=True, help="parameter across")
    heat.add_argument("--y", help="parameter up (omit for a line over --x)")
    heat.add_argument("--metric", default="sharpe", help="the metric drawn (default sharpe)")
    heat.add_argument("--symbol", help="the symbol, when the store holds several")
    heat.add_argument("--reduce", default="max", help="max (default), mean or median over "
                      "every other parameter")
    heat.add_argument("--sample", help="walk-forward: train or test (default test)")
    heat.add_argument("--window", type=int, help="walk-forward: the window (default 0)")
    heat.add_argument("--out", required=True, help="the PNG to write")
    heat.set_defaults(func=cmd_plot_heatmap)
    best = plot_sub.add_parser("best", help="combo N of the ranking rebuilt from the stored "
                               "spec (metrics checked): price with trades, equity against "
                               "buy and hold, drawdown")
    best.add_argument("results", help="the results store (a run's --out)")
    best.add_argument("--rank", type=int, default=1, help="which combo of the ranking (1)")
    best.add_argument("--by", default="sharpe", help="the ranking metric (default sharpe)")
    best.add_argument("--where", help='filter, e.g. "n_trades >= 10"')
    best.add_argument("--symbol", help="rank this symbol's combos only")
    best.add_argument("--out", required=True, help="the PNG to write")
    best.set_defaults(func=cmd_plot_best)
    wfplot = plot_sub.add_parser("walkforward", help="a walk-forward store's stitched "
                                 "out-of-sample equity (the combo chosen in each window's "
                                 "train sample, run on its test), buy and hold beside it")
    wfplot.add_argument("results", help="a walk-forward results store (a run's --out)")
    wfplot.add_argument("--by", default="sharpe", help="metric the train sample chooses by "
                        "(default sharpe)")
    wfplot.add_argument("--where", help='filter, e.g. "n_trades >= 10"')
    wfplot.add_argument("--symbol", help="the symbol, when the store holds several")
    wfplot.add_argument("--out", required=True, help="the PNG to write")
    wfplot.set_defaults(func=cmd_plot_walkforward)

    trades = sub.add_parser("trades", help="one combo rebuilt from the stored spec "
                            "(metrics checked): its stats beside buy and hold's, then its "
                            "trades")
    trades.add_argument("results", help="a results store (barsweep run's --out)")
    pick = trades.add_mutually_exclusive_group()
    pick.add_argument("--rank", type=int, metavar="N",
                      help="combo N of the ranking by --by (default: 1)")
    pick.add_argument("--params", metavar="K=V,...",
                      help="the combo with these parameter values, e.g. fast=12,slow=80 "
                           "(a parameter with one value in the grid may be left out)")
    trades.add_argument("--symbol", help="the symbol, when the store holds several")
    trades.add_argument("--by", help="with --rank: the metric to rank by (default sharpe)")
    trades.add_argument("--where", help='with --rank: filter, e.g. "n_trades >= 10"')
    trades.add_argument("--window", type=int, metavar="W",
                        help="a walk-forward store's window (0, 1, ...): the combo is "
                             "chosen among, and run over, its --sample")
    trades.add_argument("--sample", choices=["train", "test"], metavar="SAMPLE",
                        help="with --window: train (the default) or test, the window's "
                             "bars the combo is chosen among and run over")
    trades.add_argument("--csv", metavar="FILE",
                        help="write the trades table (every column) to this CSV file "
                             "instead of printing it")
    trades.set_defaults(func=cmd_trades)

    report = sub.add_parser("report", help="one self-contained HTML page of a results "
                            "store: spec, run facts, top combos and buy and hold, heatmaps, "
                            "each symbol's best combo (or walk-forward)")
    report.add_argument("results", help="the results store (a run's --out)")
    report.add_argument("--out", required=True, help="the HTML file to write")
    report.add_argument("--by", default="sharpe", help="the ranking metric (default sharpe)")
    report.add_argument("--top", type=int, default=20,
                        help="how many combos the top table shows (default 20)")
    report.add_argument("--symbol", help="this symbol only (default: every symbol)")
    report.set_defaults(func=cmd_report)

    warm = sub.add_parser("warm", help="compile strategies' kernels ahead of time (numba's "
                                       "on-disk cache): after an install, in a worker image")
    warm.add_argument("strategies", nargs="*", metavar="STRATEGY",
                      help="strategy names (default: every builtin one)")
    warm.set_defaults(func=cmd_warm)

    demo = sub.add_parser("demo", help="synthetic BTCUSDT bars, an ema_cross sweep, the top 10")
    demo.add_argument("--dir", default="barsweep-demo", help="where bars and results go")
    demo.add_argument("--workers", type=int, help="workers of a local cluster (threads of a "
                                                  "threads one; default: one per core)")
    demo.add_argument("--cluster", default="auto", metavar="KIND",
                      help="auto (threads here: the demo is small), threads or local")
    demo.set_defaults(func=cmd_demo)
    return parser


def add_rank_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--by", default="sharpe", help="metric to rank by (default sharpe)")
    parser.add_argument("--top", type=int, default=20, help="how many combos (default 20)")
    parser.add_argument("--where", help="filter over metrics, parameters and symbol, e.g. "
                                        "\"n_trades >= 10 and symbol == 'MSFT'\"")
    parser.add_argument("--symbol", help="rank this symbol's combos only")
    parser.add_argument("--sample", choices=["train", "test"],
                        help="a walk-forward store: the sample ranked (default train)")
    order = parser.add_mutually_exclusive_group()
    order.add_argument("--ascending", dest="ascending", action="store_true", default=None,
                       help="smaller --by first (the default for volatility, ulcer_index, ruined)")
    order.add_argument("--descending", dest="ascending", action="store_false",
                       help="larger --by first (the default for most metrics)")
    parser.add_argument("--json", action="store_true",
                        help="print a JSON array for scripts (combos only, no buy and hold)")


def cmd_synth(args) -> int:
    from ..datasets import write_synth

    path = write_synth(args.store, args.symbol, args.timeframe, args.bars, args.seed)
    print(f"wrote {args.bars:,} {args.timeframe} bars of {args.symbol} (seed {args.seed}) "
          f"to {path}")
    return 0


def cmd_import(args) -> int:
    """The import's line, then each note (stdout) and warning (stderr) once: the importer
    logs only the details (inferred units, ...), not what this prints."""
    from ..datasets import import_file

    report = import_file(args.file, args.store, args.symbol, args.timeframe,
                         drop_nan=args.drop_nan, time_format=args.time_format,
                         price_column=args.price_column,
                         ohlc_from_close=args.ohlc_from_close, replace=args.replace,
                         force=args.force, sort=args.sort, delimiter=args.delimiter)
    print(f"imported {report.n_rows:,} bars from {args.file} to {report.path}"
          + (f" ({report.n_dropped} rows with missing values dropped)" if report.n_dropped
             else ""), flush=True)
    for note in report.notes:  # what is stored, and the choices that changed it
        print(f"note: {note}", flush=True)
    for warning in report.warnings:  # stored as asked, but likely not what was meant
        print(f"barsweep: warning: {args.symbol}: {warning}", file=sys.stderr, flush=True)
    return 0


def cmd_info(args) -> int:
    """The store's files, one line each; a damaged file is named on stderr (one line),
    the others still listed, and the exit status is then 1."""
    from ..datasets import list_bars

    rows = list_bars(args.store)
    if not rows:
        print(f"no bars in {args.store}")
        return 0
    good = [r for r in rows if not r.problem]
    if good:
        print(f"{'symbol':<12} {'tf':<4} {'bars':>10} {'start':<26} {'end':<26} {'MiB':>8}")
    for r in good:
        print(f"{r.symbol:<12} {r.timeframe:<4} {r.n_bars:>10,} {str(r.start):<26} "
              f"{str(r.end):<26} {r.bytes / 2**20:>8.2f}", flush=True)
    for r in rows:
        if r.problem:
            print(f"barsweep: error: {r.problem}", file=sys.stderr, flush=True)
    return 1 if len(good) < len(rows) else 0


def cmd_verify(args) -> int:
    """One line per file (ok, or the problem); exit 1 when any file has a problem."""
    from ..datasets import verify_store

    reports = verify_store(args.store, update_index=args.update_index)
    if not reports:
        print(f"no bars in {args.store}")
        return 0
    for r in reports:
        print(f"{'ok' if r.ok else 'FAILED':<6} {r.name}: {r.detail}", flush=True)
        if r.warning:  # bars that pass every rule but look wrong: not a failure
            print(f"{'warn':<6} {r.name}: {r.warning}", flush=True)
    bad = sum(not r.ok for r in reports)
    warned = sum(bool(r.warning) for r in reports)
    also = f" ({warned} with a warning)" if warned else ""
    print(f"{len(reports)} files, all ok{also}" if not bad
          else f"{len(reports)} files: {len(reports) - bad} ok, {bad} with problems{also}")
    return 1 if bad else 0


def cmd_run(args) -> int:
    from .run.lock import refuse_locked

    if args.out:  # a run holding --out refuses this one before anything heavy is loaded
        refuse_locked(os.path.abspath(os.path.expanduser(args.out)))
    from .config.model import load_spec
    from .config.overrides import with_cluster, with_scheduler
    from .run.cluster import check_address

    if args.scheduler is not None:
        check_address(args.scheduler, "--scheduler")
        if args.cluster is not None:
            raise BarsweepError("--scheduler and --cluster both say where to run: give one")
    spec = load_spec(args.spec, overrides={"run": {
        "backend": args.backend, "out": args.out, "max_combos": args.max_combos,
        "progress_every": args.progress_every}})
    spec = with_scheduler(with_cluster(spec, args.cluster), args.scheduler,
                          {"ca": args.tls_ca, "cert": args.tls_cert, "key": args.tls_key})
    if args.worker_timeout is not None:
        if not 0 < args.worker_timeout < float("inf"):
            raise BarsweepError(f"--worker-timeout: expected seconds > 0, "
                                f"got {args.worker_timeout:g}")
        spec = spec.model_copy(update={"run": spec.run.model_copy(
            update={"worker_timeout": args.worker_timeout})})
    summary = run_spec(spec, n_workers=args.workers,
                       progress=not (args.no_progress or args.quiet), resume=args.resume,
                       overwrite=args.overwrite, spec_path=args.spec, quiet=args.quiet,
                       perf_report=args.perf_report)
    print(f"results in {summary.out}")
    return 0


def cmd_check(args) -> int:
    """What ``barsweep run SPEC`` checks before it makes a store or starts a cluster (the
    spec, its modules, the bars, the grid, that the strategy compiles), and OK with what
    was checked; the same one-line refusal as ``run`` otherwise."""
    from ..engine import get_strategy
    from ..engine.warm import describe
    from .config.model import load_spec
    from .run.prepare import prepare_run
    from .run.results import store_attrs

    spec = load_spec(args.spec)
    earlier = store_attrs(spec.run.out) is not None
    prepared = prepare_run(spec, overwrite=earlier, spec_path=args.spec,
                           say=lambda line: print(line, flush=True))
    compiled = ("its kernel is in numba's cache" if prepared.compile_seconds is None
                else f"compiled in {prepared.compile_seconds:.1f} s")
    valid, exact = prepared.grid.estimate_valid()
    symbols = ", ".join(f"{s} ({n:,} bars)" for s, n in
                        zip(prepared.spec.data.symbols, prepared.symbol_bars, strict=True))
    print(f"OK: {args.spec}")
    print(f"  {describe(get_strategy(spec.strategy))}: compiles ({compiled})")
    print(f"  bars: {spec.data.timeframe} of {symbols} in {spec.data.store}")
    print(f"  grid: {prepared.grid.size:,} combos per symbol, {'' if exact else 'at most '}"
          f"{valid:,} valid")
    print(f"  results: {prepared.out}" + (" holds earlier results: `barsweep run` needs "
                                          "--overwrite or --resume" if earlier else ""))
    return 0


def run_spec(spec, *, n_workers=None, progress=True, resume=False, overwrite=False,
             spec_path=None, client=None, quiet=False, perf_report=None, cluster=None):
    """Check the run on the driver (output, bars, grid, resume), then start or reach the
    cluster (``spec.cluster``; or use ``client``) and run it. Ctrl-C stops it with one
    line saying what is done and how to resume (:class:`~barsweep.errors.Interrupted`).
    ``perf_report``: a path for Dask's performance report of the run (HTML).
    ``cluster``: with ``client``, what it is and why, for the store's attributes.
    SIGTERM, which :func:`main` turns into the same KeyboardInterrupt
    (:func:`sigterm_as_interrupt`), stops it likewise.

    A run already writing the store at ``spec.run.out`` refuses this one at once; else
    it is locked (:func:`~barsweep.pipeline.run.lock.out_lock`) before anything is read,
    and hidden directories that a killed run left beside it are cleared (one line on
    stderr says what was done)."""
    from .run.lock import leftovers, out_lock, refuse_locked
    from .run.results import check_out, store_attrs

    # a run that holds --out refuses this one at once, before its bars are read or a
    # cluster starts; then --out is checked, and locked for all that follows
    out = os.path.abspath(spec.run.out)
    refuse_locked(out)
    try:
        check_out(out, overwrite=overwrite, resume=resume)
    except BarsweepError:
        if not leftovers(out):  # else checked again once they are cleared
            raise
    earlier = store_attrs(out)  # an earlier store --overwrite will replace (read again
    try:                        # under the lock; this for a stop while taking it)
        with out_lock(out) as cleared:
            for line in cleared:
                print(f"barsweep: {line}", file=sys.stderr, flush=True)
            earlier = store_attrs(out)
            return _run_spec_locked(
                spec, out, earlier, n_workers=n_workers, progress=progress, resume=resume,
                overwrite=overwrite, spec_path=spec_path, client=client, quiet=quiet,
                perf_report=perf_report, cluster=cluster)
    except KeyboardInterrupt as exc:
        logging.disable(logging.NOTSET)
        raise Interrupted(interrupted_message(out, earlier, resume),
                          terminated=isinstance(exc, Terminated)) from None


def _run_spec_locked(spec, out, earlier, *, n_workers, progress, resume, overwrite,
                     spec_path, client, quiet, perf_report, cluster):
    from distributed import performance_report

    from .run.cluster import choose, connect
    from .run.execute import run_prepared
    from .run.prepare import prepare_run
    from .run.results import resume_hint, store_attrs

    # (after distributed's import, which sets its loggers' levels from its config) a
    # block's report lost with its worker is fetched again: the run says what matters
    logging.getLogger("distributed.client").setLevel(logging.CRITICAL)
    # a block's result being fetched as Ctrl-C closes the client fails in a background
    # callback, which tornado logs with a traceback; the run says what happened
    logging.getLogger("tornado.application").addFilter(not_a_closed_comm)
    say = None if quiet else (lambda line: print(line, flush=True))
    try:
        prepared = prepare_run(spec, resume=resume, overwrite=overwrite, spec_path=spec_path,
                               say=say)
        chosen, reason = (None, None) if client is not None else choose(
            spec.cluster, prepared.combo_bars(), spec.run.backend)
        cluster = cluster if chosen is None else (chosen.describe(), reason)
        with (contextlib.nullcontext(client) if client is not None
              else connect(chosen, n_workers or spec.n_workers)) as client:
            if not quiet:
                print(f"{cluster[1]}; no dashboard (--cluster local starts one)"
                      if cluster and cluster[0] == "threads"
                      else f"dask dashboard: {client.dashboard_link}", flush=True)
            try:
                with (contextlib.nullcontext() if perf_report is None
                      else performance_report(os.path.abspath(perf_report))):
                    summary = run_prepared(
                        prepared, client, progress=progress,
                        on_start=say, cluster=cluster, locked=True)
            except KeyboardInterrupt:
                # the cluster's shutdown under Ctrl-C logs lost fetches and slow workers:
                # not news; the one line below says what is done
                logging.disable(logging.ERROR)
                raise
    except RunError as err:
        attrs = store_attrs(out)
        if attrs is None or (attrs == earlier and not resume):
            raise
        raise RunError(f"{err}; the store is incomplete: resume with "
                       f"`{resume_hint(out, attrs)}`") from None
    print(f"{summary.n_combos:,} combos in {summary.n_blocks} blocks on {summary.backend}: "
          f"{summary.seconds:.2f} s, "
          f"{summary.combo_bars_per_second / 1e6:,.0f} M combo-bars/s"
          + (f" ({summary.blocks_skipped} blocks were already done)"
             if summary.blocks_skipped else ""))
    return summary


def not_a_closed_comm(record: logging.LogRecord) -> bool:
    """A logging filter: False for records of a connection closed under a callback."""
    from distributed.comm.core import CommClosedError

    exc = record.exc_info[1] if record.exc_info else None
    return not isinstance(exc, CommClosedError)


def interrupted_message(out: str, earlier: dict | None = None, resume: bool = False) -> str:
    """What an interrupted run leaves: blocks done, and the command that resumes it
    (``earlier``: the attributes of the store at ``out`` before the run, if any)."""
    from .run.results import resume_hint, store_attrs, store_status

    attrs = store_attrs(out)
    if attrs is None:
        return f"stopped before the run began; nothing was written to {out}"
    if attrs == earlier and not resume:
        return f"stopped before the run began; the earlier results in {out} are unchanged"
    pending, total = store_status(out)
    return (f"{total - pending} of {total} blocks are done in {out}; "
            f"resume with `{resume_hint(out, attrs)}`")


def cmd_plot_heatmap(args) -> int:
    from .analysis.plots import metric_grid, plot_heatmap
    from .run.results import open_results

    ds = open_results(args.results)
    grid = metric_grid(ds, args.metric, args.x, args.y, symbol=args.symbol,
                       reduce=args.reduce, sample=args.sample, window=args.window)
    symbol = args.symbol or ds["symbol"].values[0]
    where = "".join(f", {k} {v}" for k, v in (("window", args.window),
                                               ("sample", args.sample)) if v is not None)
    others = [d for d in ds[args.metric].dims
              if d not in ("symbol", "window", "sample", args.x, args.y)]
    reduced = f" ({args.reduce} over {', '.join(others)})" if others else ""
    plot_heatmap(grid, args.out, title=f"{args.metric} of {symbol}{where}{reduced}")
    print(f"wrote {args.out}")
    return 0


def cmd_plot_best(args) -> int:
    from .analysis.plots import best_title
    from .analysis.rebuild import best_backtest
    from .run.results import open_results

    ds = open_results(args.results)
    result = best_backtest(ds, rank=args.rank, by=args.by, where=args.where,
                           symbol=args.symbol)
    result.plot(args.out, title=best_title(ds, result, rank=args.rank, by=args.by,
                                           where=args.where, symbol=args.symbol))
    print(f"wrote {args.out}")
    return 0


def cmd_plot_walkforward(args) -> int:
    from .analysis.buyhold import stitched_hold
    from .analysis.plots import plot_walkforward
    from .analysis.walkforward import walkforward
    from .run.results import open_results

    ds = open_results(args.results)
    wf = walkforward(ds, by=args.by, where=args.where, symbol=args.symbol)
    hold = stitched_hold(ds, wf)
    plot_walkforward(wf, args.out, hold=None if hold is None else hold.equity)
    print(f"wrote {args.out}")
    return 0


def cmd_trades(args) -> int:
    from .analysis.trades import combo_backtest, describe, parse_params, stats_table, trades_text

    if args.params is not None and (args.by or args.where):
        raise BarsweepError("--by and --where choose by the ranking: they go with --rank, "
                            "not --params")
    combo = combo_backtest(args.results,
                           None if args.params is None else parse_params(args.params),
                           rank=args.rank, symbol=args.symbol, by=args.by or "sharpe",
                           where=args.where, window=args.window, sample=args.sample)
    result = combo.result
    held = result.buy_and_hold()
    trades = result.trades
    if args.csv:
        text = trades.to_csv(index=False)
        try:
            Path(args.csv).write_text(text)
        except OSError as err:
            raise BarsweepError(f"--csv {args.csv}: cannot write it: "
                                f"{err.strerror or err}") from None
    print(describe(combo))
    print(stats_table(result.stats(buy_and_hold=False),
                      held.stats(buy_and_hold=False)).to_string())
    if args.csv:
        print(f"\nwrote {len(trades):,} trades to {args.csv}")
    elif len(trades):
        print(f"\n{len(trades):,} trades (times UTC):")
        print(trades_text(trades))
    else:
        print("\nno trades")
    return 0


def cmd_report(args) -> int:
    from .analysis.report import write_report

    path = write_report(args.results, args.out, by=args.by, top=args.top, symbol=args.symbol)
    print(f"wrote {path}")
    return 0


def cmd_walkforward(args) -> int:
    from .analysis.walkforward import format_walkforward, walkforward

    result = walkforward(args.results, by=args.by, where=args.where, symbol=args.symbol)
    print(json.dumps(result.to_json(), indent=1) if args.json else format_walkforward(result))
    return 0


def cmd_rank(args) -> int:
    from .analysis.rank import pareto_front, pbo_table, rank, select, to_records
    from .run.results import open_results, store_status

    clash = next((f"{a} and {b}" for a, b, both in (
        ("--agg", "no --across", args.agg != "median" and not args.across),
        ("--pbo", "--pareto", args.pbo and args.pareto),
        ("--pbo", "--smooth/--across", args.pbo and (args.smooth or args.across)),
        ("--pareto", "--smooth", args.pareto and args.smooth),
    ) if both), None)
    if clash:
        print(f"barsweep: error: {clash} do not go together; --agg needs --across symbol, "
              f"--pbo stands alone, and --pareto takes no --smooth", file=sys.stderr)
        return 2
    ds = open_results(args.results, partial=args.partial)
    if args.pbo:
        return print_pbo(pbo_table(select(ds, args.symbol), where=args.where), args.json)
    if args.pareto:
        metrics = [m.strip() for m in args.pareto.split(",")]
        frame = pareto_front(ds, metrics, where=args.where, symbol=args.symbol,
                             sample=args.sample, across=args.across, agg=args.agg)
        by = metrics[0]
    else:
        frame = rank(ds, by=args.by, top=args.top, where=args.where, ascending=args.ascending,
                     smooth=args.smooth, across=args.across, agg=args.agg,
                     symbol=args.symbol, sample=args.sample)
        by = args.by
    if "sample" in ds.dims:
        sample = args.sample or "train"
        print(f"barsweep: a walk-forward store: ranking every window's {sample} sample"
              + ("" if args.sample else " (--sample test for the test samples)")
              + f"; `barsweep walkforward {args.results}` chooses in each window's train "
                f"sample and chains the tests out of sample", file=sys.stderr)
    pending, total = store_status(args.results)
    if pending:
        n_done = int(ds["n_trades"].notnull().sum())
        n_all = ds.attrs.get("n_combos")
        bound = "" if ds.attrs.get("n_combos_exact", True) else "at most "
        of = f" of {bound}{n_all:,}" if isinstance(n_all, int) else ""
        print(f"barsweep: --partial: {pending} of {total} blocks missing; ranking the "
              f"{n_done:,}{of} combos computed so far", file=sys.stderr)
    if not len(frame):
        reason = (f"passes --where {args.where!r}" if args.where
                  else f"has a defined {by}" + (" on every symbol" if args.across else ""))
        print(f"barsweep: no combo of {args.results} to rank: none {reason}", file=sys.stderr)
        return 1
    reference = None
    if not args.json and not args.across:
        reference = buy_and_hold_or_note(ds, frame)
    if args.json:
        records = to_records(frame)
        if args.across and not args.pareto:
            records = across_records(records, args.by, args.agg)
        print(json.dumps(records, indent=1, allow_nan=False))
    elif args.pareto:
        each = (f"{args.agg} across symbols" if args.across
                else "one front per symbol" + (" and window" if "window" in ds.dims else ""))
        print(f"non-dominated by {', '.join(metrics)} ({each}; {len(frame)} combos):")
        print(format_across(frame) if args.across
              else format_table(frame, metrics[0], extra=metrics[1:], reference=reference))
    elif args.across:
        print(format_across(frame))
    else:
        extra = [c for c in ("psr", "dsr", f"{by}_smooth") if c in frame.columns and c != by]
        print(format_table(frame, by, extra=extra, reference=reference))
    return 0


def buy_and_hold_or_note(ds, frame):
    """Buy and hold beside the ranked rows' symbols (windows, samples), or None and a
    ``note:`` line on stderr saying why not (no spec, bars gone or changed)."""
    from .analysis.buyhold import buy_and_hold, groups_of

    try:
        return buy_and_hold(ds, groups_of(frame))
    except BarsweepError as err:
        print(f"barsweep: note: no buy&hold row: {err}", file=sys.stderr)
        return None


def across_records(records: list[dict], by: str, agg: str) -> list[dict]:
    """``rank --across symbol --json`` rows: the parameters, ``metric``, ``agg``, the
    aggregate as ``value`` (``smoothed`` with --smooth) and ``by_symbol``."""
    out = []
    for row in records:
        new, per_symbol = {}, {}
        for key, value in row.items():
            if key.startswith(f"{by}[") and key.endswith("]"):
                per_symbol[key[len(by) + 1:-1]] = value
            elif key == f"{by}_{agg}":
                new.update(metric=by, agg=agg, value=value)
            elif key == f"{by}_smooth_{agg}":
                new["smoothed"] = value
            else:
                new[key] = value
        new["by_symbol"] = per_symbol
        out.append(new)
    return out


def format_across(frame) -> str:
    """``rank --across``'s table: parameters, the aggregate, each symbol's value, as
    :func:`format_table` formats them."""
    from .analysis.formatting import cells, column_metric
    from .analysis.rank import COMPUTED

    known = {*_metric_names(), *COMPUTED}
    identity = [c for c in frame.columns if column_metric(c) not in known]
    return cells(frame, identity).to_string()


def print_pbo(table, as_json: bool) -> int:
    """``rank --pbo``: one block (or JSON object) per symbol."""
    rows = []
    for labels, res in table:
        rows.append({**labels, "pbo": res.pbo, "n_splits": res.n_splits,
                     "sampled": res.sampled, "n_combos": res.n_combos,
                     "logit_quartiles": list(res.logit_quartiles),
                     "degradation_slope": res.slope, "degradation_intercept": res.intercept})
    if as_json:
        def finite(value):
            return None if isinstance(value, float) and not math.isfinite(value) else value

        clean = [{k: [finite(q) for q in v] if k == "logit_quartiles" else finite(v)
                  for k, v in row.items()} for row in rows]
        print(json.dumps(clean, indent=1, allow_nan=False))
        return 0
    for row in rows:
        where = " ".join(f"{k}={row[k]}" for k in row if k not in _PBO_KEYS)
        how = "a seeded random sample of" if row["sampled"] else "all"
        q1, q2, q3 = row["logit_quartiles"]
        print(f"{where}: PBO {row['pbo']:.3f} over {how} {row['n_splits']:,} CSCV splits of "
              f"{row['n_combos']:,} combos; logit quartiles {q1:.3f} {q2:.3f} {q3:.3f}; "
              f"degradation slope {row['degradation_slope']:.3f} "
              f"(OOS Sharpe on IS Sharpe of the IS winner)")
    return 0


_PBO_KEYS = {"pbo", "n_splits", "sampled", "n_combos", "logit_quartiles",
             "degradation_slope", "degradation_intercept"}


def format_table(frame, by: str, extra=(), reference=None) -> str:
    """A compact table for people: identity (symbol, window, sample, the parameters as
    the grid wrote them), the ranking metric (then ``extra`` columns: psr, dsr, the
    smoothed metric), then key metrics, formatted by
    :mod:`barsweep.pipeline.analysis.formatting`; then the ``reference`` rows (buy and hold,
    :func:`barsweep.pipeline.analysis.buyhold.buy_and_hold`), unranked (``-``), ``buy&hold`` in
    the first parameter column."""
    from .analysis.formatting import ranking_cells

    key = ["total_return", "sharpe", "max_drawdown", "n_trades", "win_rate", "exposure"]
    return ranking_cells(frame, [by, *extra, *key], reference).to_string()


def _metric_names() -> tuple[str, ...]:
    from ..engine import METRICS

    return METRICS


def cmd_warm(args) -> int:
    from ..engine.strategies import get_strategy, strategy_names
    from ..engine.warm import warm

    names = args.strategies or [n for n in strategy_names() if not n.startswith("_")]
    strategies = [get_strategy(name) for name in names]  # refuse an unknown one up front
    for strategy in strategies:
        print(f"{strategy.name}: ", end="", flush=True)
        seconds, cached = warm(strategy)
        print(f"{'loaded from the cache' if cached else 'compiled'} in {seconds:.1f} s",
              flush=True)
    return 0


def cmd_demo(args) -> int:
    from ..datasets import write_synth
    from .analysis.rank import rank
    from .analysis.walkforward import walkforward
    from .config.cluster import ClusterSpec
    from .config.model import build_grid, load_spec, parse_spec
    from .run.cluster import choose, connect

    root = Path(args.dir)
    store = root / "bars"
    write_synth(store, "BTCUSDT", "1h", DEMO_BARS, 7)
    print(f"wrote {DEMO_BARS:,} synthetic 1h BTCUSDT bars to {store}")
    spec = parse_spec({
        "data": {"store": str(store), "symbols": ["BTCUSDT"], "timeframe": "1h"},
        "strategy": "ema_cross",
        "grid": {"fast": {"start": 2, "stop": 50, "step": 1},
                 "slow": {"start": 10, "stop": 200, "step": 2}},
        "constraints": ["fast < slow"],
        "execution": {"fill": "next_open", "fees": 0.001},
        "run": {"out": str(root / "results.zarr")},
    }, source="demo")
    out = root / "results.zarr"
    example = Path(__file__).parent / "examples" / "ema_cross_walkforward.yaml"
    wf_out = root / "results_wf.zarr"
    wf_spec = load_spec(example, {"data": {"store": str(store)}, "run": {"out": str(wf_out)}})
    try:
        asked = ClusterSpec.model_validate(args.cluster)
    except ValueError as err:
        raise BarsweepError(f"--cluster: {' '.join(str(err).split())}") from None
    cluster, reason = choose(asked, build_grid(spec).estimate_valid()[0] * DEMO_BARS,
                             spec.run.backend)
    with connect(cluster, args.workers) as client:
        summary = run_spec(spec, overwrite=out.exists(), client=client,
                           cluster=(cluster.describe(), reason))
        print(f"\ntop 10 of {summary.out} by sharpe, n_trades >= 10:")
        top = rank(summary.out, by="sharpe", top=10, where="n_trades >= 10")
        print(format_table(top, "sharpe"))
        print(f"\nwalk-forward ({example.name}):", flush=True)
        run_spec(wf_spec, overwrite=wf_out.exists(), progress=False, client=client,
                 quiet=True, cluster=(cluster.describe(), reason))
    wf = walkforward(wf_out, by="sharpe", where="n_trades >= 3")
    best = top.iloc[0]
    stitched = wf.stitched
    print(f"\nbest combo: fast {best['fast']}, slow {best['slow']}: sharpe "
          f"{best['sharpe']:.3f}, deflated sharpe (DSR) {best['dsr']:.3f} after "
          f"{summary.n_combos:,} trials")
    print(f"walk-forward, best train sharpe in each of {len(wf.windows)} windows: "
          f"out-of-sample cagr {stitched['cagr']:.1%}, sharpe {stitched['sharpe']:.2f}, "
          f"efficiency {stitched['efficiency']:.2f} (out-of-sample / in-sample cagr)")
    print(f"\nmore: barsweep rank {summary.out} --by dsr --top 20; barsweep rank "
          f"{summary.out} --pbo; barsweep walkforward {wf_out}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
