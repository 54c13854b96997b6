"""``barsweep plot``, ``trades`` and ``report``: pictures, one combo's trades, and an
HTML page of a results store."""

from __future__ import annotations

import argparse

from ...errors import BarsweepError
from ..config.dims import NON_PARAM_DIMS, SAMPLES
from .options import add_import_modules

#: ``--overwrite``'s help: what an output flag may replace without it.
OVERWRITE_HELP = ("write FILE even where it holds something else than an earlier {what} "
                  "barsweep wrote, or lies inside a bar or results store")


def add_plot_parser(sub: argparse._SubParsersAction) -> None:
    """``barsweep plot`` and its sub-commands."""
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
    heat.add_argument("--out", required=True, metavar="FILE", help="the PNG to write (a "
                      "new file, or a picture barsweep drew)")
    heat.add_argument("--overwrite", action="store_true",
                      help=OVERWRITE_HELP.format(what="picture"))
    add_import_modules(heat)
    heat.set_defaults(func=cmd_plot_heatmap)
    best = plot_sub.add_parser("best", help="combo N of the ranking rebuilt from the stored "
                               "spec (metrics checked): price with trades, equity against "
                               "buy and hold, drawdown; of a portfolio, the account's "
                               "equity against the equal-weight hold, each member's "
                               "holding beneath")
    best.add_argument("results", help="the results store (a run's --out)")
    best.add_argument("--rank", type=int, default=1, help="which combo of the ranking (1)")
    best.add_argument("--by", default="sharpe", help="the ranking metric (default sharpe)")
    best.add_argument("--where", help='filter, e.g. "n_trades >= 10"')
    best.add_argument("--symbol", help="rank this symbol's combos only")
    best.add_argument("--window", type=int, metavar="W",
                      help="a walk-forward store's window (0, 1, ...): the combo is ranked "
                           "among, and run over, that window's --sample")
    best.add_argument("--sample", choices=("train", "test"),
                      help="with --window: train (the default) or test")
    best.add_argument("--out", required=True, metavar="FILE", help="the PNG to write (a "
                      "new file, or a picture barsweep drew)")
    best.add_argument("--overwrite", action="store_true",
                      help=OVERWRITE_HELP.format(what="picture"))
    add_import_modules(best)
    best.set_defaults(func=cmd_plot_best)
    wfplot = plot_sub.add_parser("walkforward", help="a walk-forward store's stitched "
                                 "out-of-sample equity (the combo chosen in each window's "
                                 "train sample, run on its test), buy and hold beside it")
    wfplot.add_argument("results", help="a walk-forward results store (a run's --out)")
    wfplot.add_argument("--by", default="sharpe", help="metric the train sample chooses by "
                        "(default sharpe)")
    wfplot.add_argument("--where", help='filter, e.g. "n_trades >= 10"')
    wfplot.add_argument("--symbol", help="the symbol, when the store holds several")
    wfplot.add_argument("--out", required=True, metavar="FILE", help="the PNG to write (a "
                      "new file, or a picture barsweep drew)")
    wfplot.add_argument("--overwrite", action="store_true",
                      help=OVERWRITE_HELP.format(what="picture"))
    add_import_modules(wfplot)
    wfplot.set_defaults(func=cmd_plot_walkforward)


def add_trades_parser(sub: argparse._SubParsersAction) -> None:
    """``barsweep trades``."""
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
    trades.add_argument("--sample", choices=SAMPLES, metavar="SAMPLE",
                        help="with --window: train (the default) or test, the window's "
                             "bars the combo is chosen among and run over")
    trades.add_argument("--csv", metavar="FILE",
                        help="write the trades table (every column) to this CSV file "
                             "instead of printing it (a new file, or a trades CSV barsweep "
                             "wrote)")
    trades.add_argument("--overwrite", action="store_true",
                        help=OVERWRITE_HELP.format(what="trades CSV"))
    add_import_modules(trades)
    trades.set_defaults(func=cmd_trades)


def add_report_parser(sub: argparse._SubParsersAction) -> None:
    """``barsweep report``."""
    report = sub.add_parser("report", help="one self-contained HTML page of a results "
                            "store: spec, run facts, top combos and buy and hold, heatmaps, "
                            "each symbol's best combo (or walk-forward)")
    report.add_argument("results", help="the results store (a run's --out)")
    report.add_argument("--out", required=True, metavar="FILE", help="the HTML file to "
                        "write (a new file, or a report barsweep wrote)")
    report.add_argument("--overwrite", action="store_true",
                        help=OVERWRITE_HELP.format(what="report"))
    report.add_argument("--by", default="sharpe", help="the ranking metric (default sharpe)")
    report.add_argument("--top", type=int, default=20,
                        help="how many combos the top table shows (default 20)")
    report.add_argument("--symbol", help="this symbol only (default: every symbol)")
    add_import_modules(report)
    report.set_defaults(func=cmd_report)


def cmd_plot_heatmap(args) -> int:
    from ..analysis.outputs import PICTURE, check_output, save_picture
    from ..analysis.plots import idle_cells, metric_grid, plot_heatmap
    from ..analysis.stream import open_store

    check_output(args.out, PICTURE, overwrite=args.overwrite)
    ds = open_store(args.results)
    grid = metric_grid(ds, args.metric, args.x, args.y, symbol=args.symbol,
                       reduce=args.reduce, sample=args.sample, window=args.window)
    symbol = args.symbol or ds["symbol"].values[0]
    where = "".join(f", {k} {v}" for k, v in (("window", args.window),
                                               ("sample", args.sample)) if v is not None)
    others = [d for d in ds[args.metric].dims
              if d not in (*NON_PARAM_DIMS, "combo", args.x, args.y)]
    reduced = f" ({args.reduce} over {', '.join(others)})" if others else ""
    idle = idle_cells(ds, args.x, args.y, symbol=args.symbol, sample=args.sample,
                      window=args.window)
    fig = plot_heatmap(grid, None, title=f"{args.metric} of {symbol}{where}{reduced}",
                       idle=idle)
    save_picture(fig, args.out, overwrite=args.overwrite)
    print(f"wrote {args.out}")
    return 0


def cmd_plot_best(args) -> int:
    from ..analysis.outputs import PICTURE, check_output, save_picture
    from ..analysis.plots import best_title
    from ..analysis.rebuild import best_backtest, compile_note
    from ..run.results import open_results

    check_output(args.out, PICTURE, overwrite=args.overwrite)
    ds = open_results(args.results)
    with compile_note(ds, "plot best"):
        pick = dict(rank=args.rank, by=args.by, where=args.where, symbol=args.symbol,
                    window=args.window, sample=args.sample)
        result = best_backtest(ds, **pick)
        fig = result.plot(title=best_title(ds, result, **pick))
    save_picture(fig, args.out, overwrite=args.overwrite)
    print(f"wrote {args.out}")
    return 0


def cmd_plot_walkforward(args) -> int:
    from ..analysis.buyhold import stitched_hold
    from ..analysis.outputs import PICTURE, check_output, save_picture
    from ..analysis.plots import plot_walkforward
    from ..analysis.rebuild import compile_note
    from ..analysis.walkforward import walkforward
    from ..run.results import open_results

    check_output(args.out, PICTURE, overwrite=args.overwrite)
    ds = open_results(args.results)
    with compile_note(ds, "plot walkforward"):
        wf = walkforward(ds, by=args.by, where=args.where, symbol=args.symbol)
        hold = stitched_hold(ds, wf)
    fig = plot_walkforward(wf, None, hold=None if hold is None else hold.equity)
    save_picture(fig, args.out, overwrite=args.overwrite)
    print(f"wrote {args.out}")
    return 0


def cmd_trades(args) -> int:
    from ..analysis.outputs import TRADES_CSV, check_output, write_output
    from ..analysis.rebuild import compile_note
    from ..analysis.trades import combo_backtest, describe, parse_params, stats_table, trades_text

    if args.params is not None and (args.by or args.where):
        raise BarsweepError("--by and --where choose by the ranking: they go with --rank, "
                            "not --params")
    if args.overwrite and not args.csv:
        raise BarsweepError("--overwrite goes with --csv FILE (trades print otherwise)")
    if args.csv:
        check_output(args.csv, TRADES_CSV, overwrite=args.overwrite)
    with compile_note(args.results, "trades"):
        combo = combo_backtest(args.results,
                               None if args.params is None else parse_params(args.params),
                               rank=args.rank, symbol=args.symbol, by=args.by or "sharpe",
                               where=args.where, window=args.window, sample=args.sample)
        result = combo.result
        held = result.buy_and_hold()
    trades = result.trades
    if args.csv:
        text = trades.to_csv(index=False)
        write_output(args.csv, TRADES_CSV, lambda f: f.write(text.encode("utf-8")),
                     overwrite=args.overwrite)
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
    from ..analysis.report import write_report

    write_report(args.results, args.out, by=args.by, top=args.top, symbol=args.symbol,
                 overwrite=args.overwrite)
    print(f"wrote {args.out}")
    return 0
