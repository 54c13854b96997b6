"""``barsweep data``: the bar store's commands (synth, import, info, verify)."""

from __future__ import annotations

import argparse
import sys

#: Bars ``data synth`` writes by default, and the demo's: three years of hourly bars.
DEMO_BARS = 26_280


def add_data_parser(sub: argparse._SubParsersAction) -> None:
    """``barsweep data`` and its sub-commands."""
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


def cmd_synth(args) -> int:
    from ...datasets import write_synth

    path = write_synth(args.store, args.symbol, args.timeframe, args.bars, args.seed)
    print(f"wrote {args.bars:,} {args.timeframe} bars of {args.symbol} (seed {args.seed}) "
          f"to {path}")
    return 0


def cmd_import(args) -> int:
    """The import's line, then each note (stdout) and warning (stderr) once: the importer
    logs only the details (inferred units, ...), not what this prints."""
    from ...datasets import import_file

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
    from ...datasets import list_bars

    rows = list_bars(args.store)
    if not rows:
        print(f"no bars in {args.store}")
        return 0
    good = [r for r in rows if not r.problem]
    if good:
        print(f"{'symbol':<12} {'tf':<4} {'bars':>10} {'start':<26} {'end':<26} {'MiB':>8}")
    for r, start, end in zip(good, *_daily_or_str([r.start for r in good],
                                                   [r.end for r in good]), strict=True):
        print(f"{r.symbol:<12} {r.timeframe:<4} {r.n_bars:>10,} {start:<26} "
              f"{end:<26} {r.bytes / 2**20:>8.2f}", flush=True)
    for r in rows:
        if r.problem:
            print(f"barsweep: error: {r.problem}", file=sys.stderr, flush=True)
    return 1 if len(good) < len(rows) else 0


def _daily_or_str(*columns) -> list[list[str]]:
    """Columns of times as ``data info`` shows them: dates when every time is at
    midnight (daily bars), else as pandas writes them (with their UTC offset)."""
    times = [t for column in columns for t in column if t is not None]
    if times and all(t.value % (86_400 * 10**9) == 0 for t in times):
        return [[str(t) if t is None else t.strftime("%Y-%m-%d") for t in column]
                for column in columns]
    return [[str(t) for t in column] for column in columns]


def cmd_verify(args) -> int:
    """One line per file (ok, or the problem); exit 1 when any file has a problem."""
    from ...datasets import verify_store

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
