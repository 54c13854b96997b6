"""The ``barsweep`` command line: data, run, rank, demo.

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
    from .. import __version__

    parser = argparse.ArgumentParser(prog="barsweep", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"barsweep {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="Dask's INFO logging too (workers starting, closing...)")
    sub = parser.add_subparsers(dest="command", required=True)

    data = sub.add_parser("data", help="the bar store: synth, import, info, verify")
    data_sub = data.add_subparsers(dest="data_command", required=True)
    synth = data_sub.add_parser("synth", help="write synthetic bars (seeded, GBM with regimes)")
    synth.add_argument("--symbol", required=True)
    synth.add_argument("--timeframe", default="1h")
    synth.add_argument("--bars", type=int, default=DEMO_BARS)
    synth.add_argument("--seed", type=int, default=7)
    synth.add_argument("--store", required=True)
    synth.set_defaults(func=cmd_synth)
    imp = data_sub.add_parser("import", help="import a CSV or Parquet file, validated")
    imp.add_argument("file")
    imp.add_argument("--symbol", required=True)
    imp.add_argument("--timeframe", required=True)
    imp.add_argument("--store", required=True)
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
    imp.set_defaults(func=cmd_import)
    info = data_sub.add_parser("info", help="list the store's files")
    info.add_argument("--store", required=True)
    info.set_defaults(func=cmd_info)
    verify = data_sub.add_parser(
        "verify", help="hash every file against the store's index and check every bar")
    verify.add_argument("--store", required=True)
    verify.add_argument("--update-index", action="store_true",
                        help="record files the index lacks whose bars pass, forget entries "
                             "whose file is gone, refresh mtimes (never adopts a changed file)")
    verify.set_defaults(func=cmd_verify)

    run = sub.add_parser("run", help="run a sweep spec on a Dask cluster into a Zarr store")
    run.add_argument("spec")
    run.add_argument("--out", help="results store (default: the spec's run.out)")
    run.add_argument("--scheduler", help="address of a running Dask scheduler "
                                         "(tcp://host:8786, or tls://... with --tls-*)")
    run.add_argument("--tls-ca", metavar="PEM", help="CA certificate of a TLS cluster")
    run.add_argument("--tls-cert", metavar="PEM", help="this client's TLS certificate")
    run.add_argument("--tls-key", metavar="PEM", help="this client's TLS private key")
    run.add_argument("--cluster", metavar="KIND", help="where the blocks run: auto (threads "
                     "of this process for a small sweep, else local), threads, local, cuda, "
                     "slurm, pbs or a scheduler address (default: the spec's cluster, auto)")
    run.add_argument("--backend", choices=["auto", "cpu", "cuda"])
    run.add_argument("--workers", type=int, help="workers of the local cluster (threads of "
                                                 "a threads one)")
    run.add_argument("--no-progress", action="store_true")
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

    rank = sub.add_parser("rank", help="the best combos of a results store")
    add_rank_arguments(rank)
    rank.add_argument("results")
    rank.add_argument("--partial", action="store_true",
                      help="rank an incomplete store (an interrupted run) as it is")
    rank.add_argument("--smooth", type=int, metavar="R",
                      help="rank by --by averaged over each combo's neighbourhood of radius "
                           "R grid steps in every parameter (excluded combos do not count)")
    rank.add_argument("--across", metavar="DIM",
                      help="rank parameter combos by --by aggregated across DIM (symbol)")
    rank.add_argument("--agg", default="median", metavar="HOW",
                      help="with --across: median (default), mean or min")
    rank.add_argument("--pareto", metavar="M1,M2",
                      help="print the non-dominated combos by these metrics, e.g. "
                           "sharpe,max_drawdown")
    rank.add_argument("--pbo", action="store_true",
                      help="print the probability of backtest overfitting (CSCV) per symbol")
    rank.set_defaults(func=cmd_rank)

    wf = sub.add_parser("walkforward", help="a walk-forward store: the combo chosen in each "
                        "window's train sample, its test, and the stitched out-of-sample run")
    wf.add_argument("results")
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
    heat.add_argument("results")
    heat.add_argument("--x", required=True, help="parameter across")
    heat.add_argument("--y", help="parameter up (omit for a line over --x)")
    heat.add_argument("--metric", default="sharpe")
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
    best.add_argument("results")
    best.add_argument("--rank", type=int, default=1, help="which combo of the ranking (1)")
    best.add_argument("--by", default="sharpe")
    best.add_argument("--where", help='filter, e.g. "n_trades >= 10"')
    best.add_argument("--out", required=True, help="the PNG to write")
    best.set_defaults(func=cmd_plot_best)

    report = sub.add_parser("report", help="one self-contained HTML page of a results "
                            "store: spec, run facts, top combos, heatmaps, the best combo")
    report.add_argument("results")
    report.add_argument("--out", required=True, help="the HTML file to write")
    report.add_argument("--by", default="sharpe", help="the ranking metric (default sharpe)")
    report.add_argument("--top", type=int, default=20)
    report.set_defaults(func=cmd_report)

    warm = sub.add_parser("warm", help="compile strategies' kernels ahead of time (numba's "
                                       "on-disk cache): after an install, in a worker image")
    warm.add_argument("strategies", nargs="*", metavar="STRATEGY",
                      help="strategy names (default: every builtin one)")
    warm.set_defaults(func=cmd_warm)

    demo = sub.add_parser("demo", help="synthetic BTCUSDT bars, an ema_cross sweep, the top 10")
    demo.add_argument("--dir", default="barsweep-demo", help="where bars and results go")
    demo.add_argument("--workers", type=int)
    demo.add_argument("--cluster", default="auto", metavar="KIND",
                      help="auto (threads here: the demo is small), threads or local")
    demo.set_defaults(func=cmd_demo)
    return parser


def add_rank_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--by", default="sharpe", help="metric to rank by (default sharpe)")
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--where", help='filter, e.g. "n_trades >= 10"')
    order = parser.add_mutually_exclusive_group()
    order.add_argument("--ascending", dest="ascending", action="store_true", default=None)
    order.add_argument("--descending", dest="ascending", action="store_false")
    parser.add_argument("--json", action="store_true", help="print a JSON array for scripts")


def cmd_synth(args) -> int:
    from ..datasets import write_synth

    path = write_synth(args.store, args.symbol, args.timeframe, args.bars, args.seed)
    print(f"wrote {args.bars:,} {args.timeframe} bars of {args.symbol} (seed {args.seed}) "
          f"to {path}")
    return 0


def cmd_import(args) -> int:
    from ..datasets import import_file

    report = import_file(args.file, args.store, args.symbol, args.timeframe,
                         drop_nan=args.drop_nan, time_format=args.time_format,
                         price_column=args.price_column,
                         ohlc_from_close=args.ohlc_from_close, replace=args.replace,
                         force=args.force)
    print(f"imported {report.n_rows:,} bars from {args.file} to {report.path}"
          + (f" ({report.n_dropped} rows with missing values dropped)" if report.n_dropped
             else ""))
    for note in report.notes:  # the choices that change what is stored
        print(f"note: {note}")
    return 0


def cmd_info(args) -> int:
    from ..datasets import list_bars

    rows = list_bars(args.store)
    if not rows:
        print(f"no bars in {args.store}")
        return 0
    print(f"{'symbol':<12} {'tf':<4} {'bars':>10} {'start':<26} {'end':<26} {'MiB':>8}")
    for r in rows:
        print(f"{r.symbol:<12} {r.timeframe:<4} {r.n_bars:>10,} {str(r.start):<26} "
              f"{str(r.end):<26} {r.bytes / 2**20:>8.2f}")
    return 0


def cmd_verify(args) -> int:
    """One line per file (ok, or the problem); exit 1 when any file has a problem."""
    from ..datasets import verify_store

    reports = verify_store(args.store, update_index=args.update_index)
    if not reports:
        print(f"no bars in {args.store}")
        return 0
    for r in reports:
        print(f"{'ok' if r.ok else 'FAILED':<6} {r.name}: {r.detail}", flush=True)
    bad = sum(not r.ok for r in reports)
    print(f"{len(reports)} files, all ok" if not bad
          else f"{len(reports)} files: {len(reports) - bad} ok, {bad} with problems")
    return 1 if bad else 0


def cmd_run(args) -> int:
    from .lock import refuse_locked

    if args.out:  # a run holding --out refuses this one before anything heavy is loaded
        refuse_locked(os.path.abspath(os.path.expanduser(args.out)))
    from .cluster import check_address
    from .spec import load_spec, with_scheduler
    from .spec_cluster import with_cluster

    if args.scheduler is not None:
        check_address(args.scheduler, "--scheduler")
        if args.cluster is not None:
            raise BarsweepError("--scheduler and --cluster both say where to run: give one")
    spec = load_spec(args.spec, overrides={"run": {
        "backend": args.backend, "out": args.out, "max_combos": args.max_combos}})
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
    it is locked (:func:`~barsweep.pipeline.lock.out_lock`) before anything is read,
    and hidden directories that a killed run left beside it are cleared (one line on
    stderr says what was done)."""
    from .lock import leftovers, out_lock, refuse_locked
    from .results import check_out, store_attrs

    # a run that holds --out refuses this one at once, before its bars are read or a
    # cluster starts; then --out is checked, and locked for all that follows
    out = os.path.abspath(spec.run.out)
    refuse_locked(out)
    try:
        check_out(out, overwrite=overwrite, resume=resume)
    except BarsweepError:
        if not leftovers(out):  # else checked again once they are cleared
            raise
    with out_lock(out) as cleared:
        for line in cleared:
            print(f"barsweep: {line}", file=sys.stderr, flush=True)
        earlier = store_attrs(out)  # an earlier store --overwrite will replace
        try:
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

    from .cluster import choose, connect
    from .prepare import prepare_run
    from .results import resume_hint, store_attrs
    from .run import run_prepared

    # (after distributed's import, which sets its loggers' levels from its config) a
    # block's report lost with its worker is fetched again: the run says what matters
    logging.getLogger("distributed.client").setLevel(logging.CRITICAL)
    # a block's result being fetched as Ctrl-C closes the client fails in a background
    # callback, which tornado logs with a traceback; the run says what happened
    logging.getLogger("tornado.application").addFilter(not_a_closed_comm)
    try:
        prepared = prepare_run(spec, resume=resume, overwrite=overwrite, spec_path=spec_path)
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
                        on_start=None if quiet else (lambda line: print(line, flush=True)),
                        cluster=cluster, locked=True)
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
    from .results import resume_hint, store_attrs, store_status

    attrs = store_attrs(out)
    if attrs is None:
        return f"stopped before the run began; nothing was written to {out}"
    if attrs == earlier and not resume:
        return f"stopped before the run began; the earlier results in {out} are unchanged"
    pending, total = store_status(out)
    return (f"{total - pending} of {total} blocks are done in {out}; "
            f"resume with `{resume_hint(out, attrs)}`")


def cmd_plot_heatmap(args) -> int:
    from .plots import metric_grid, plot_heatmap
    from .results import open_results

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
    from .rebuild import best_backtest

    result = best_backtest(args.results, rank=args.rank, by=args.by, where=args.where)
    result.plot(args.out)
    print(f"wrote {args.out}")
    return 0


def cmd_report(args) -> int:
    from .report import write_report

    print(f"wrote {write_report(args.results, args.out, by=args.by, top=args.top)}")
    return 0


def cmd_walkforward(args) -> int:
    from .walkforward import format_walkforward, walkforward

    result = walkforward(args.results, by=args.by, where=args.where, symbol=args.symbol)
    print(json.dumps(result.to_json(), indent=1) if args.json else format_walkforward(result))
    return 0


def cmd_rank(args) -> int:
    from .rank import pareto_front, pbo_table, rank, to_records
    from .results import open_results, store_status

    clash = next((f"{a} and {b}" for a, b, both in (
        ("--agg", "no --across", args.agg != "median" and not args.across),
        ("--pbo", "--pareto", args.pbo and args.pareto),
        ("--pbo", "--smooth/--across", args.pbo and (args.smooth or args.across)),
        ("--pareto", "--smooth/--across", args.pareto and (args.smooth or args.across)),
    ) if both), None)
    if clash:
        print(f"barsweep: error: {clash} do not go together; --agg needs --across symbol, "
              f"and --pbo and --pareto each stand alone", file=sys.stderr)
        return 2
    ds = open_results(args.results, partial=args.partial)
    if args.pbo:
        return print_pbo(pbo_table(ds, where=args.where), args.json)
    if args.pareto:
        metrics = [m.strip() for m in args.pareto.split(",")]
        frame = pareto_front(ds, metrics, where=args.where)
        by = metrics[0]
    else:
        frame = rank(ds, by=args.by, top=args.top, where=args.where, ascending=args.ascending,
                     smooth=args.smooth, across=args.across, agg=args.agg)
        by = args.by
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
    if args.json:
        records = to_records(frame)
        if args.across:
            records = across_records(records, args.by, args.agg)
        print(json.dumps(records, indent=1, allow_nan=False))
    elif args.pareto:
        print(f"non-dominated by {', '.join(metrics)} ({len(frame)} combos):")
        print(format_table(frame, metrics[0], extra=metrics[1:]))
    elif args.across:
        print(format_across(frame))
    else:
        extra = [c for c in ("psr", "dsr", f"{by}_smooth") if c in frame.columns and c != by]
        print(format_table(frame, by, extra=extra))
    return 0


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
    """``rank --across``'s table: parameters, the aggregate, each symbol's value."""
    import pandas as pd

    with pd.option_context("display.width", 160, "display.max_columns", 20,
                           "display.float_format", "{:.4f}".format):
        return frame.to_string()


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


def format_table(frame, by: str, extra=()) -> str:
    """A compact table for people: identity, the ranking metric (then ``extra``
    columns: psr, dsr, the smoothed metric), then key metrics."""
    import pandas as pd

    key = ["total_return", "sharpe", "max_drawdown", "n_trades", "win_rate", "exposure"]
    shown = [by, *extra]
    computed = {"psr", "dsr", f"{by}_smooth"}
    params = [c for c in frame.columns if c not in _metric_names() and c not in computed]
    cols = params + shown + [k for k in key if k not in shown]
    frame = frame[cols].copy()
    for count in ("n_trades",):  # counts print as integers (NaN stays NaN)
        if count in frame and frame[count].dropna().eq(frame[count].dropna().round()).all():
            frame[count] = frame[count].astype("Int64")
    with pd.option_context("display.width", 160, "display.max_columns", 20,
                           "display.float_format", "{:.4f}".format):
        return frame.to_string()


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
    from .cluster import choose, connect
    from .rank import rank
    from .spec import build_grid, load_spec, parse_spec
    from .spec_cluster import ClusterSpec
    from .walkforward import walkforward

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
