"""The Bokeh document of the ``/barsweep`` dashboard page: the run's counts, rate and
ETA, blocks per worker, the best combos so far, the heatmap of the best metric over two
parameters and, for a search, its rungs; redrawn from the scheduler's
:class:`~barsweep.pipeline.run.dashboard.RunState` twice a second."""

from __future__ import annotations

import html
import time

from bokeh.layouts import column, row
from bokeh.models import (
    ColorBar,
    ColumnDataSource,
    Div,
    FactorRange,
    FixedTicker,
    HoverTool,
    LinearColorMapper,
    Range1d,
)
from bokeh.palettes import Viridis256
from bokeh.plotting import figure

from ...engine.core import METRIC_INFO
from .internals import bokeh_page_look
from .progress import eta_text
from .watch import PLUGIN

#: Milliseconds between two redraws.
REDRAW_MS = 500


def page_doc(scheduler, extra: dict, doc) -> None:
    """Build the page into ``doc`` (distributed calls it for each browser tab)."""
    template, theme = bokeh_page_look()
    view = PageView()
    seen = [-1]

    def update() -> None:
        plugin = scheduler.plugins.get(PLUGIN)
        if plugin is None or plugin.version == seen[0]:
            if plugin is not None and plugin.state is not None and not plugin.state.ended:
                view.status(plugin.state)  # the elapsed time goes on
            return
        seen[0] = plugin.version
        view.draw(plugin.state)

    update()
    doc.add_periodic_callback(update, REDRAW_MS)
    doc.title = "Dask: barsweep"
    doc.add_root(view.root)
    doc.template = template
    doc.template_variables.update(extra)
    doc.template_variables["active_page"] = "barsweep"
    doc.theme = theme


class PageView:
    """The page's Bokeh models (each named, ``barsweep-...``) and how a state draws them."""

    def __init__(self) -> None:
        self.head = Div(name="barsweep-status", text="<h3>barsweep</h3><p>no run yet</p>",
                        sizing_mode="stretch_width")
        self.top = Div(name="barsweep-top", text="", sizing_mode="stretch_width")
        self.worker_source = ColumnDataSource({"worker": [], "blocks": []},
                                              name="barsweep-workers")
        self.workers = figure(title="blocks done per worker", height=300, width=420,
                              y_range=FactorRange(), tools="", toolbar_location=None)
        self.workers.hbar(y="worker", right="blocks", height=0.7, source=self.worker_source)
        self.workers.x_range.start = 0
        self.mapper = LinearColorMapper(palette=Viridis256)
        self.cell_source = ColumnDataSource({"x": [], "y": [], "a": [], "b": [], "best": []},
                                            name="barsweep-cells")
        self.heatmap = figure(title="best by parameter pair", height=320, width=560,
                              x_range=Range1d(-0.5, 0.5), y_range=Range1d(-0.5, 0.5),
                              tools="hover", toolbar_location=None)
        self.heatmap.rect(x="x", y="y", width=1, height=1, source=self.cell_source,
                          fill_color={"field": "best", "transform": self.mapper},
                          line_color=None)
        self.heatmap.add_layout(ColorBar(color_mapper=self.mapper, width=10), "right")
        self.heatmap.select_one(HoverTool).tooltips = [("", "@a, @b"), ("best", "@best")]
        self.cells: dict[str, tuple[dict, dict]] = {}
        self.rungs = Div(name="barsweep-rungs", text="", visible=False)
        self.root = column(self.head, row(self.heatmap, column(self.workers, self.rungs)),
                           self.top, sizing_mode="stretch_width")
        self.run = None
        self.edges: list[list[float]] = [[], [0.0]]

    def draw(self, state) -> None:
        """Draw every part from ``state`` (None: no run yet)."""
        if state is None:
            return
        if state.run != self.run:
            self.run = state.run
            self.new_run(state.meta)
        self.status(state)
        self.top.text = table_html(state.rows.get(state.rung, []), state.meta)
        workers = sorted(state.workers)
        self.workers.y_range.factors = workers
        self.worker_source.data = {"worker": workers,
                                   "blocks": [state.workers[w] for w in workers]}
        cells = state.cells.get(state.rung, {})
        values = list(cells.values())
        if values:
            self.mapper.low, self.mapper.high = min(values), max(values)
        xs, ys = self.edges
        self.cell_source.data = {"x": [a for a, _ in cells], "y": [b for _, b in cells],
                                 "a": [label(xs[int(a)]) for a, _ in cells],
                                 "b": [label(ys[int(b)]) for _, b in cells], "best": values}
        rungs = sorted(r for r in state.stages if r >= 0)
        self.rungs.visible = bool(rungs)
        self.rungs.text = rungs_html(state.stages, rungs)

    def new_run(self, meta: dict) -> None:
        """Columns and heatmap axes for a run described by ``meta``."""
        pair, axes = meta.get("pair", []), [list(map(float, v)) for v in meta.get("axes", [])]
        if len(axes) < 2:
            axes = [*axes, [0.0]][:2]
        self.edges = axes  # each bin's first value
        ranges = (self.heatmap.x_range, self.heatmap.y_range)
        for axis, span, values in zip((self.heatmap.xaxis, self.heatmap.yaxis), ranges, axes):
            span.start, span.end = -0.5, len(values) - 0.5  # the whole grid, filling in
            step = max(1, len(values) // 10)
            axis.ticker = FixedTicker(ticks=list(range(0, len(values), step)))
            axis.major_label_overrides = {i: label(v) for i, v in enumerate(values)}
        self.heatmap.xaxis.axis_label = pair[0] if pair else ""
        self.heatmap.yaxis.axis_label = pair[1] if len(pair) > 1 else ""
        self.heatmap.title.text = f"best {meta['by']} by {' x '.join(pair) or 'run'}"

    def status(self, state) -> None:
        """The head: what runs, blocks and combos done, combo-bars/s, elapsed, ETA."""
        self.head.text = status_html(state, time.time())


def table_html(rows: list[dict], meta: dict) -> str:
    """The best ``rows`` as an HTML table: rank, symbol, the parameters, ``by`` and a few
    metrics."""
    names = ["symbol", *meta.get("params", []), *dict.fromkeys(
        [meta["by"], "sharpe", "total_return", "max_drawdown", "n_trades"])]
    head = "".join(f"<th>{html.escape(n)}</th>" for n in ["rank", *names])
    body = "".join(
        f"<tr><td>{k}</td>" + "".join(f"<td>{cell_text(r.get(n), n, meta)}</td>"
                                      for n in names) + "</tr>"
        for k, r in enumerate(rows, 1))
    title = f"best combos by {html.escape(str(meta['by']))}"
    return (f"{CELL_STYLE}<b>{title}</b><table class='barsweep' style='{TABLE_STYLE}'>"
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


#: The table's look: numbers right-aligned, thin rules between rows.
TABLE_STYLE = "border-collapse:collapse;font-size:13px;text-align:right;min-width:60%"
CELL_STYLE = ("<style>table.barsweep td, table.barsweep th {padding: 2px 10px; "
              "border-bottom: 1px solid #ddd}</style>")


#: Metrics that are fractions (of equity, of trades, of bars, a year): shown in percent,
#: as rank's tables and the report show them (their unit in ``METRIC_INFO``).
PERCENT = frozenset(name for name, (_, unit) in METRIC_INFO.items()
                    if (unit or "").startswith("fraction"))


def cell_text(value, name: str, meta: dict) -> str:
    """A table cell: parameters as given, counts as integers, fractions in percent to 2
    decimals (``30.60%``), other metrics to 4 decimals."""
    if value is None:
        return ""
    if isinstance(value, str):
        return html.escape(value)
    if name in meta.get("params", []):
        return label(value)
    if name == "n_trades":
        return f"{value:.0f}"
    if name in PERCENT:
        return f"{value * 100:.2f}%"
    return f"{value:.4f}"


def rungs_html(stages: dict, rungs: list[int]) -> str:
    """A search's rungs as an HTML table: blocks and combos done of each."""
    body = "".join(f"<tr><td>{r}</td><td>{stages[r]['done']}/{stages[r]['blocks']}</td>"
                   f"<td>{stages[r]['combos_done']:,}/{stages[r]['combos']:,}</td></tr>"
                   for r in rungs)
    return (f"{CELL_STYLE}<b>search rungs</b><table class='barsweep' style='{TABLE_STYLE}'>"
            f"<thead><tr><th>rung</th><th>blocks</th><th>combos</th></tr></thead>"
            f"<tbody>{body}</tbody></table>")


def label(value: float) -> str:
    """A heatmap axis value as text (``12``, ``0.5``)."""
    value = float(value)
    return str(int(value)) if value.is_integer() else f"{value:g}"


def status_html(state, now: float) -> str:
    """The page's head as HTML: the run, its counts, rate, elapsed time and ETA."""
    done, blocks, combos_done, combos = state.totals()
    end = state.t_last if state.ended else now
    elapsed = max(end - state.t0, 1e-9)
    rate = state.combo_bars / elapsed
    combo_rate = combos_done / elapsed
    left = ("done" if state.ended else
            f"ETA {eta_text((combos - combos_done) / combo_rate)}" if combo_rate > 0
            else "ETA -")
    meta = state.meta
    return (f"<h3>barsweep: {html.escape(str(meta.get('strategy', '')))} &rarr; "
            f"{html.escape(str(meta.get('out', '')))}</h3>"
            f"<p><b id='barsweep-blocks'>{done}/{blocks} blocks</b>, "
            f"{combos_done:,}/{combos:,} combos, {rate:,.0f} combo-bars/s, "
            f"{eta_text(elapsed)} elapsed, {left}; ranked by "
            f"{html.escape(str(meta.get('by')))}</p>")
