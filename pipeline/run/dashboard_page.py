"""The Bokeh document of the ``/barsweep`` dashboard page: the run's counts, rate and
ETA, blocks per worker, the best combos so far, the heatmap of the best metric over two
parameters and, for a search, its rungs; redrawn from the scheduler's
:class:`~barsweep.pipeline.run.dashboard.RunState` twice a second."""

from __future__ import annotations

import html
import time

from bokeh.layouts import column, row
from bokeh.models import (
    ColumnDataSource,
    DataTable,
    Div,
    FactorRange,
    HoverTool,
    LinearColorMapper,
    NumberFormatter,
    TableColumn,
)
from bokeh.palettes import Viridis256
from bokeh.plotting import figure

from .progress import eta_text
from .watch import PLUGIN

#: Milliseconds between two redraws.
REDRAW_MS = 500


def page_doc(scheduler, extra: dict, doc) -> None:
    """Build the page into ``doc`` (distributed calls it for each browser tab)."""
    from distributed.dashboard.components.scheduler import BOKEH_THEME, env

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
    doc.template = env.get_template("simple.html")
    doc.template_variables.update(extra)
    doc.template_variables["active_page"] = "barsweep"
    doc.theme = BOKEH_THEME


class PageView:
    """The page's Bokeh models (each named, ``barsweep-...``) and how a state draws them."""

    def __init__(self) -> None:
        self.head = Div(name="barsweep-status", text="<h3>barsweep</h3><p>no run yet</p>",
                        sizing_mode="stretch_width")
        self.top_source = ColumnDataSource({}, name="barsweep-top")
        self.top = DataTable(source=self.top_source, columns=[], height=520, index_position=None,
                             sizing_mode="stretch_width", name="barsweep-top-table")
        self.worker_source = ColumnDataSource({"worker": [], "blocks": []},
                                              name="barsweep-workers")
        self.workers = figure(title="blocks done per worker", height=300, width=420,
                              y_range=FactorRange(), tools="", toolbar_location=None)
        self.workers.hbar(y="worker", right="blocks", height=0.7, source=self.worker_source)
        self.workers.x_range.start = 0
        self.mapper = LinearColorMapper(palette=Viridis256)
        self.cell_source = ColumnDataSource({"a": [], "b": [], "best": []},
                                            name="barsweep-cells")
        self.heatmap = figure(title="best by parameter pair", height=300, width=520,
                              x_range=FactorRange(), y_range=FactorRange(),
                              tools="hover", toolbar_location=None)
        self.heatmap.rect(x="a", y="b", width=1, height=1, source=self.cell_source,
                          fill_color={"field": "best", "transform": self.mapper},
                          line_color=None)
        self.heatmap.select_one(HoverTool).tooltips = [("", "@a, @b"), ("best", "@best")]
        self.rung_source = ColumnDataSource({"rung": [], "blocks": [], "combos": []},
                                            name="barsweep-rungs")
        self.rungs = DataTable(source=self.rung_source, height=140, width=420, visible=False,
                               index_position=None, name="barsweep-rungs-table",
                               columns=[TableColumn(field=f, title=f)
                                        for f in ("rung", "blocks", "combos")])
        self.root = column(self.head, row(self.heatmap, column(self.workers, self.rungs)),
                           self.top, sizing_mode="stretch_width")
        self.run = None

    def draw(self, state) -> None:
        """Draw every part from ``state`` (None: no run yet)."""
        if state is None:
            return
        if state.run != self.run:
            self.run = state.run
            self.new_run(state.meta)
        self.status(state)
        rows = state.rows.get(state.rung, [])
        self.top_source.data = table_data(rows, state.meta)
        workers = sorted(state.workers)
        self.workers.y_range.factors = workers
        self.worker_source.data = {"worker": workers,
                                   "blocks": [state.workers[w] for w in workers]}
        cells = state.cells.get(state.rung, {})
        values = list(cells.values())
        if values:
            self.mapper.low, self.mapper.high = min(values), max(values)
        self.cell_source.data = {"a": [label(a) for a, _ in cells],
                                 "b": [label(b) for _, b in cells], "best": values}
        rungs = sorted(r for r in state.stages if r >= 0)
        self.rungs.visible = bool(rungs)
        self.rung_source.data = {
            "rung": rungs,
            "blocks": [f"{state.stages[r]['done']}/{state.stages[r]['blocks']}" for r in rungs],
            "combos": [f"{state.stages[r]['combos_done']:,}/{state.stages[r]['combos']:,}"
                       for r in rungs]}

    def new_run(self, meta: dict) -> None:
        """Columns and heatmap axes for a run described by ``meta``."""
        names = ["rank", "symbol", *meta.get("params", []), *dict.fromkeys(
            [meta["by"], "sharpe", "total_return", "max_drawdown", "n_trades"])]
        self.top_source.data = {n: [] for n in names}
        self.top.columns = [column_of(n, meta) for n in names]
        pair, axes = meta.get("pair", []), meta.get("axes", [])
        self.heatmap.x_range.factors = [label(v) for v in axes[0]] if pair else []
        self.heatmap.y_range.factors = ([label(v) for v in axes[1]] if len(pair) > 1
                                        else ["-"])
        self.heatmap.xaxis.axis_label = pair[0] if pair else ""
        self.heatmap.yaxis.axis_label = pair[1] if len(pair) > 1 else ""
        self.heatmap.title.text = f"best {meta['by']} by {' x '.join(pair) or 'run'}"

    def status(self, state) -> None:
        """The head: what runs, blocks and combos done, combo-bars/s, elapsed, ETA."""
        self.head.text = status_html(state, time.time())


def column_of(name: str, meta: dict) -> TableColumn:
    """The table's column of ``name``: metrics with four decimals."""
    plain = ("rank", "symbol", "n_trades", *meta.get("params", []))
    if name in plain:
        return TableColumn(field=name, title=name)
    return TableColumn(field=name, title=name, formatter=NumberFormatter(format="0.0000"))


def table_data(rows: list[dict], meta: dict) -> dict:
    """The top table's columns from the best ``rows``."""
    names = ["symbol", *meta.get("params", []), *dict.fromkeys(
        [meta["by"], "sharpe", "total_return", "max_drawdown", "n_trades"])]
    data = {"rank": list(range(1, len(rows) + 1))}
    data.update({n: [r.get(n) for r in rows] for n in names})
    return data


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
