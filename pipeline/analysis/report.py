"""``barsweep report``: one self-contained HTML page of a results store (the pictures
embedded as PNG data, no script, nothing fetched): the spec, the run's facts, the top
combos with buy and hold of each symbol beside them, heatmaps of the two most telling
parameter pairs per symbol, each symbol's best combo in full; for a walk-forward run,
each symbol's windows, its stitched out-of-sample result and equity. Numbers are
formatted for people (:mod:`barsweep.pipeline.analysis.formatting`)."""

from __future__ import annotations

import base64
import html
import io
import json
import os
from pathlib import Path

import numpy as np

from ...datasets.timeframes import times_text
from ...errors import BarsweepError
from ..config.dims import NON_PARAM_DIMS
from .formatting import count, metric, metrics_text, param, ranking_cells, significant
from .kinds import kind_of
from .outputs import REPORT, REPORT_MARK, check_output, write_output

STYLE = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.85em}td,th{padding:.2em .6em;text-align:right;
border-bottom:1px solid #eee}th{background:#f4f4f4}pre{background:#f7f7f7;padding:.8em;
overflow-x:auto;font-size:.85em}img{max-width:100%}.facts td{text-align:left}
tr.reference td{color:#555;font-style:italic;background:#fafafa}p.note{color:#555}
td{white-space:nowrap}.facts td{white-space:normal}div.wide{overflow-x:auto}"""

#: The metric columns of the report's top table, after the ranking metric.
TOP_COLUMNS = ("dsr", "psr", "total_return", "cagr", "max_drawdown", "n_trades", "win_rate",
               "exposure", "ruined")


def write_report(results: str | os.PathLike, out: str | os.PathLike, *, by: str = "sharpe",
                 top: int = 20, symbol: str | None = None, overwrite: bool = False) -> Path:
    """Write the report of the store at ``results`` to ``out`` (HTML); returns its path.

    ``out`` must be new or an earlier report (:data:`~.outputs.REPORT`), unless
    ``overwrite``: checked before the store is read, and the page written whole or not
    at all (:func:`~.outputs.write_output`). ``symbol``: that symbol's combos only
    (every symbol by default). A walk-forward store's top table ranks the train samples
    of every window; its walk-forward section chooses in each window's train sample and
    chains the tests.
    """
    from .rebuild import compile_note

    check_output(out, REPORT, overwrite=overwrite)
    with compile_note(results, "report"):
        page = report_page(results, by=by, top=top, symbol=symbol)
    return write_output(out, REPORT, lambda f: f.write(page.encode("utf-8")),
                        overwrite=overwrite)


def report_page(results: str | os.PathLike, *, by: str = "sharpe", top: int = 20,
                symbol: str | None = None) -> str:
    """The HTML page :func:`write_report` writes, marked :data:`~.outputs.REPORT_MARK`."""
    from .rank import select
    from .rebuild import stored_spec
    from .stream import open_store

    ds = open_store(results)  # lazy: every part below reads it slab by slab
    walk = kind_of(ds).walk_forward
    select(ds, symbol)  # refuses an unknown symbol before anything is drawn
    symbols = [symbol] if symbol else [str(s) for s in ds["symbol"].values]
    spec, _ = stored_spec(ds, "report")
    sections = [f"<h1>barsweep report: {html.escape(os.fspath(results))}</h1>",
                f"<p>{html.escape(spec.strategy_name)} over {html.escape(', '.join(symbols))}"
                + (", walk-forward" if walk else "") + "</p>"
                + ("" if isinstance(spec.strategy, str) else
                   f"<pre>{html.escape(spec.strategy_def.doc)}</pre>"),
                "<h2>Run</h2>" + _facts(ds),
                f"<h2>Top {top} by {html.escape(by)}"
                + (" (train samples)" if walk else "") + "</h2>"
                + _top(ds, by, top, symbol, walk)]
    for name in symbols:
        for x, y in important_pairs(ds.sel(symbol=[name]), by)[:2]:
            sections.append(f"<h2>{html.escape(by)} of {html.escape(name)} over "
                            f"{html.escape(x)}" + (f" and {html.escape(y)}" if y else "")
                            + "</h2>" + _heatmap(ds, by, x, y, name, walk))
    for name in symbols:
        if walk:
            sections.append(f"<h2>Walk-forward of {html.escape(name)}</h2>"
                            + _walkforward(ds, by, name))
        else:
            sections.append(f"<h2>Best combo of {html.escape(name)}</h2>"
                            + _best(ds, by, name))
    sections.append(f"<h2>Spec</h2><pre>{html.escape(ds.attrs.get('spec', ''))}</pre>")
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">{REPORT_MARK}"
            f"<title>barsweep report</title><style>{STYLE}</style></head><body>"
            f"{''.join(sections)}</body></html>")


def important_pairs(ds, by: str) -> list[tuple[str, str | None]]:
    """Parameter pairs ordered by how much the metric moves along them: each parameter's
    importance is the spread (max - min) of the metric's best finite value per parameter
    value (:func:`~.grids.spreads`, read slab by slab; a search store's over its last
    rung's combos); the two pairs are (1st, 2nd) and (1st, 3rd). One parameter:
    ``[(it, None)]``."""
    from .grids import marked, spreads

    if kind_of(ds).drawn:
        from .search_views import search_pairs

        return search_pairs(ds, by)

    params = [d for d in ds[by].dims if d not in NON_PARAM_DIMS]
    spread = spreads(marked(ds), by, params)
    ranked = sorted(params, key=lambda p: -spread[p])
    if len(ranked) == 1:
        return [(ranked[0], None)]
    return [(ranked[0], other) for other in ranked[1:3]]


def _facts(ds) -> str:
    attrs = ds.attrs
    timings = json.loads(attrs.get("timings_s", "{}") or "{}")
    phases = json.loads(attrs.get("block_phases_s", "{}") or "{}")
    fingerprint = json.loads(attrs.get("bars_fingerprint", "{}") or "{}")
    rows = [("combos", count(attrs.get("n_combos", 0))),
            ("blocks", count(ds.sizes.get("block", 0))),
            ("backend", f"{attrs.get('backend', '?')} ({attrs.get('backend_reason', '')})"),
            ("wall time", f"{significant(timings.get('total', float('nan')))} s"),
            ("symbols", ", ".join(map(str, ds["symbol"].values.tolist())))]
    if "n_bars" in ds.coords:
        rows.append(("bars", ", ".join(count(n) for n in np.ravel(ds["n_bars"].values))))
    if "periods_per_year" in attrs:
        rows.append(("bars a year", f"{significant(attrs['periods_per_year'])} (annualised "
                                    f"metrics use it)"))
    for f, (first, last) in zip(fingerprint.get("files", []), _bar_ranges(ds), strict=False):
        rows.append((f"bars of {f.get('symbol')}", f"{f.get('timeframe', '')} bars from "
                     f"{first} to {last}; {count(f.get('bytes', 0))} bytes, blake2b "
                     f"{str(f.get('blake2b', ''))[:16]}..."))
    for name, seconds in timings.items():
        rows.append((f"time: {name}", f"{significant(seconds)} s"))
    for name, stats in phases.items():
        rows.append((f"block phase: {name}", f"total {significant(stats['total'])} s, p50 "
                     f"{significant(stats['p50'])} s, p90 {significant(stats['p90'])} s, "
                     f"max {significant(stats['p100'])} s"))
    rows.append(("barsweep", attrs.get("barsweep_version", "?")))
    return _facts_table(rows)


def _facts_table(rows) -> str:
    """``(name, value)`` rows as a two-column table."""
    body = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>"
                   for k, v in rows)
    return f"<table class=\"facts\">{body}</table>"


def _bar_ranges(ds) -> list[tuple[str, str]]:
    """The first and last bar time of each symbol's run, from the stored spec's bars."""
    from .rebuild import stored_bars, stored_spec

    spec, _ = stored_spec(ds, "report")
    ends = [stored_bars(spec, symbol)["time"].values[[0, -1]] for symbol in spec.data.symbols]
    texts = times_text(np.concatenate(ends).astype("datetime64[ns]")) if ends else []
    return list(zip(texts[::2], texts[1::2]))


def _top(ds, by: str, top: int, symbol: str | None, walk: bool) -> str:
    from .buyhold import buy_and_hold, groups_of
    from .rank import rank

    frame = rank(ds, by=by, top=top, symbol=symbol)
    note = ("<p class=\"note\">Every window's train sample, ranked together; the "
            "walk-forward sections below choose in each window's train sample and run the "
            "choice on its test.</p>" if walk else "")
    try:
        reference = buy_and_hold(ds, groups_of(frame))
    except BarsweepError as err:
        reference = None
        note += f"<p class=\"note\">No buy-and-hold row: {html.escape(str(err))}</p>"
    return note + _table(ranking_cells(frame, [by, *TOP_COLUMNS], reference))


def _table(cells) -> str:
    """A frame of text cells (:func:`barsweep.pipeline.analysis.formatting.ranking_cells`) as an
    HTML table; rows indexed ``-`` (references, not ranked) marked."""
    head = "".join(f"<th>{html.escape(str(c).replace('_', ' '))}</th>"
                   for c in [cells.index.name or "", *cells])
    rows = "".join(
        ("<tr class=\"reference\">" if str(i) == "-" else "<tr>")
        + f"<td>{html.escape(str(i))}</td>"
        + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>"
        for i, row in zip(cells.index, cells.itertuples(index=False), strict=True))
    return f"<div class=\"wide\"><table><tr>{head}</tr>{rows}</table></div>"


def _png(draw) -> str:
    buffer = io.BytesIO()
    draw(buffer)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f"<img alt=\"figure\" src=\"data:image/png;base64,{data}\">"


def _heatmap(ds, by: str, x: str, y: str | None, symbol: str, walk: bool) -> str:
    from .plots import idle_cells, metric_grid, plot_heatmap

    kw = {"window": int(ds["window"].values[-1]), "sample": "test"} if walk else {}
    grid = metric_grid(ds, by, x, y, symbol=symbol, **kw)
    others = [d for d in ds[by].dims if d not in (*NON_PARAM_DIMS, "combo", x, y)]
    where = f", window {kw['window']}'s test" if walk else ""
    reduced = f" (max over {', '.join(others)})" if others else ""
    idle = idle_cells(ds, x, y, symbol=symbol, **kw)
    return _png(lambda f: plot_heatmap(grid, f, title=f"{by} of {symbol}{where}{reduced}",
                                       idle=idle))


def _best(ds, by: str, symbol: str) -> str:
    """The best combo of ``symbol`` by ``by`` rebuilt and drawn, or a note when none of
    its combos has a defined ``by``."""
    from .plots import combo_title
    from .rank import combo_params, rank
    from .rebuild import rebuild_combo

    top = rank(ds, by=by, top=1, symbol=symbol)
    if not len(top):
        return (f"<p class=\"note\">No combo of {html.escape(symbol)} has a defined "
                f"{html.escape(by)} (none traded, or the constraints exclude them all): "
                f"there is no best combo to draw.</p>")
    row = top.iloc[0]
    params = {p: row[p].item() if isinstance(row[p], np.generic) else row[p]
              for p in combo_params(ds)}
    result = rebuild_combo(ds, row["symbol"], params, "report")
    title = combo_title(ds, row, result, rank=1, by=by)
    return _png(lambda f: result.plot(title=title).savefig(f, format="png", dpi=80))


def _walkforward(ds, by: str, symbol: str) -> str:
    from .buyhold import stitched_hold
    from .plots import plot_walkforward
    from .walkforward import bound_texts, walkforward

    wf = walkforward(ds, by=by, symbol=symbol)
    frame = wf.windows
    s = wf.stitched
    params = [c for c in frame.columns if c not in ("chosen", "combo")
              and not c.startswith(("train_", "test_"))]
    cells = frame[[]].copy()
    bounds = ("train_start", "test_start", "test_end")
    texts = bound_texts([t for name in bounds for t in frame[name]] + [s["start"], s["end"]])
    for i, name in enumerate(bounds):
        cells[name.replace("_", " ")] = texts[i * len(frame):(i + 1) * len(frame)]
    for p in params:
        cells[p] = [param(v) if ok else "-"
                    for v, ok in zip(frame[p], frame["chosen"], strict=True)]
    for name in dict.fromkeys((f"train_{by}", f"test_{by}", "test_total_return",
                               "test_max_drawdown", "test_n_trades")):
        cells[name.replace("_", " ")] = [metric(name.split("_", 1)[1], v)
                                         for v in frame[name]]
    hold = stitched_hold(ds, wf)
    facts = [("windows chained", f"{s['n_windows']} of {s['windows_total']}"),
             ("bars", f"{count(s['n_bars'])} ({texts[-2]} to {texts[-1]})")]
    facts += [(k.replace("_", " "), metric(k, s[k]))
              for k in ("total_return", "cagr", "sharpe", "max_drawdown", "n_trades")]
    facts += [("in-sample cagr", metric("cagr", s["in_sample_cagr"])),
              ("efficiency", significant(s["efficiency"]) + " (out-of-sample cagr over "
                                                              "in-sample cagr)")]
    if hold is not None:
        facts.append(("buy and hold, same bars", metrics_text(hold.metrics)))
    picture = _png(lambda f: plot_walkforward(wf, f, hold=None if hold is None
                                              else hold.equity))
    return (_table(cells) + "<h3>Stitched out of sample</h3>" + _facts_table(facts)
            + picture)
