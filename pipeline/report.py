"""``barsweep report``: one self-contained HTML page of a results store (the pictures
embedded as PNG data, no script, nothing fetched): the spec, the run's facts, the top
combos, heatmaps of the two most telling parameter pairs, the best combo's equity and
drawdown, and the walk-forward table when the run has one."""

from __future__ import annotations

import base64
import html
import io
import json
import os
from pathlib import Path

import numpy as np

from ..engine import METRICS

STYLE = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.85em}td,th{padding:.2em .6em;text-align:right;
border-bottom:1px solid #eee}th{background:#f4f4f4}pre{background:#f7f7f7;padding:.8em;
overflow-x:auto;font-size:.85em}img{max-width:100%}.facts td{text-align:left}"""


def write_report(results: str | os.PathLike, out: str | os.PathLike, *, by: str = "sharpe",
                 top: int = 20) -> Path:
    """Write the report of the store at ``results`` to ``out`` (HTML); returns its path."""
    from .results import open_results

    ds = open_results(results)
    walk = "window" in ds.dims
    sections = [f"<h1>barsweep report: {html.escape(os.fspath(results))}</h1>",
                "<h2>Run</h2>" + _facts(ds),
                f"<h2>Top {top} by {html.escape(by)}</h2>" + _top(ds, by, top, walk)]
    for x, y in important_pairs(ds, by)[:2]:
        sections.append(f"<h2>{html.escape(by)} over {html.escape(x)} and "
                        f"{html.escape(y or '')}</h2>" + _heatmap(ds, by, x, y, walk))
    if walk:
        sections.append("<h2>Walk-forward</h2>" + _walkforward(results, by))
    else:
        sections.append("<h2>Best combo</h2>" + _best(results, by))
    spec = ds.attrs.get("spec", "")
    sections.append(f"<h2>Spec</h2><pre>{html.escape(spec)}</pre>")
    page = (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>barsweep "
            f"report</title><style>{STYLE}</style></head><body>{''.join(sections)}"
            f"</body></html>")
    path = Path(out)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, path)  # never a half-written report under its name
    return path


def important_pairs(ds, by: str) -> list[tuple[str, str | None]]:
    """Parameter pairs ordered by how much the metric moves along them: each parameter's
    importance is the spread (max - min) of the metric's best value per parameter value;
    the two pairs are (1st, 2nd) and (1st, 3rd). One parameter: ``[(it, None)]``."""
    metric = ds[by]
    params = [d for d in metric.dims if d not in ("symbol", "window", "sample")]
    finite = metric.where(np.isfinite(metric))  # infinities would hide the spread

    def spread(name: str) -> float:
        best = finite.max([d for d in metric.dims if d != name])  # NaN-skipping
        value = float(best.max() - best.min())
        return value if np.isfinite(value) else 0.0

    ranked = sorted(params, key=lambda p: -spread(p))
    if len(ranked) == 1:
        return [(ranked[0], None)]
    return [(ranked[0], other) for other in ranked[1:3]]


def _facts(ds) -> str:
    attrs = ds.attrs
    timings = json.loads(attrs.get("timings_s", "{}") or "{}")
    phases = json.loads(attrs.get("block_phases_s", "{}") or "{}")
    prints = json.loads(attrs.get("bars_fingerprint", "{}") or "{}")
    rows = [("combos", f"{int(attrs.get('n_combos', 0)):,}"),
            ("blocks", f"{ds.sizes.get('block', 0):,}"),
            ("backend", f"{attrs.get('backend', '?')} ({attrs.get('backend_reason', '')})"),
            ("wall time", f"{timings.get('total', float('nan')):.2f} s"),
            ("symbols", ", ".join(map(str, ds["symbol"].values.tolist())))]
    if "n_bars" in ds.coords:
        rows.append(("bars", ", ".join(f"{int(n):,}" for n in ds["n_bars"].values)))
    for f, (first, last) in zip(prints.get("files", []), _bar_ranges(ds), strict=False):
        rows.append((f"bars of {f.get('symbol')}", f"{f.get('timeframe', '')} bars from "
                     f"{first} to {last}; {int(f.get('bytes', 0)):,} bytes, blake2b "
                     f"{str(f.get('blake2b', ''))[:16]}..."))
    for name, seconds in timings.items():
        rows.append((f"time: {name}", f"{seconds:.3f} s"))
    for name, stats in phases.items():
        rows.append((f"block phase: {name}", f"total {stats['total']:.3f} s, p50 "
                     f"{stats['p50']:.4f} s, p90 {stats['p90']:.4f} s, max {stats['p100']:.4f} s"))
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
    ranges = []
    for symbol in spec.data.symbols:
        time = stored_bars(spec, symbol)["time"].values[[0, -1]]
        time = time.astype("datetime64[ns]").astype("datetime64[s]")
        ranges.append((str(time[0]).replace("T", " "), str(time[1]).replace("T", " ")))
    return ranges


def _top(ds, by: str, top: int, walk: bool) -> str:
    from .rank import rank

    frame = rank(ds.sel(sample="test") if walk else ds, by=by, top=top)
    if walk:
        frame = frame.drop(columns=["sample"], errors="ignore")
    keep = [c for c in frame.columns if c not in METRICS or c in (
        by, "dsr", "psr", "total_return", "cagr", "max_drawdown", "n_trades", "win_rate",
        "ruined")]
    return _table(frame[keep])


def _table(frame) -> str:
    def cell(v):
        if isinstance(v, float | np.floating):
            return "" if np.isnan(v) else (f"{int(v):,}" if float(v).is_integer() and abs(v) < 1e12
                                            else f"{v:.4g}")
        return html.escape(str(v))

    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in [frame.index.name or "", *frame])
    rows = "".join("<tr><td>" + html.escape(str(i)) + "</td>" + "".join(
        f"<td>{cell(v)}</td>" for v in row) + "</tr>" for i, row in zip(
        frame.index, frame.itertuples(index=False), strict=True))
    return f"<table><tr>{head}</tr>{rows}</table>"


def _png(draw) -> str:
    buffer = io.BytesIO()
    draw(buffer)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f"<img alt=\"figure\" src=\"data:image/png;base64,{data}\">"


def _heatmap(ds, by: str, x: str, y: str | None, walk: bool) -> str:
    from .plots import metric_grid, plot_heatmap

    symbol = str(ds["symbol"].values[0])
    kw = {"window": int(ds["window"].values[-1]), "sample": "test"} if walk else {}
    grid = metric_grid(ds, by, x, y, symbol=symbol, **kw)
    where = ", last window's test" if walk else ""
    return _png(lambda f: plot_heatmap(grid, f, title=f"{by} of {symbol}{where} (max over "
                                                      f"the other parameters)"))


def _best(results, by: str) -> str:
    from .rebuild import best_backtest

    result = best_backtest(results, rank=1, by=by)
    return _png(lambda f: result.plot().savefig(f, format="png", dpi=80))


def _walkforward(results, by: str) -> str:
    from .walkforward import walkforward

    wf = walkforward(results, by=by)
    columns = ["train_start", "test_start", "test_end",
               *[c for c in wf.windows.columns if not c.startswith(("train_", "test_", "chosen",
                                                                     "combo"))],
               f"train_{by}", f"test_{by}", "test_total_return", "test_n_trades"]
    table = _table(wf.windows[[c for c in columns if c in wf.windows]])
    return f"{table}<h3>Stitched out of sample</h3>{_facts_table(wf.stitched.items())}"
