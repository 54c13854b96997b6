"""The progress line of a run, drawn by tqdm.

On a terminal the line is redrawn in place (``\\r``) at most every 0.1 s. Anywhere else
(a log file, a pipe, a CI job) it is printed as whole lines, at most one every
``every_s`` seconds, plus a final one, and never carries a ``\\r``.
"""

from __future__ import annotations

import math
import sys
from typing import TextIO

from tqdm import tqdm

from .blocks import BlockReport

#: Seconds between two redraws on a terminal.
REDRAW_S = 0.1


class ProgressBar:
    """The sweep's progress on ``file`` (default stderr): blocks done, combos done,
    combos/s, connected workers (and a threads worker's threads), elapsed time, the time
    left at the run's average rate and the best Sharpe so far.

    Parameters
    ----------
    n_blocks, n_combos : int
        What the run computes (``n_combos`` may be a bound: each block reports its exact
        count as it ends).
    every_s : float
        Off a terminal, the fewest seconds between two lines (a run's
        ``run.progress_every``); :meth:`close` prints the last line whatever the time.
    file : text stream, optional
        Where the line goes; a terminal (``isatty()``) gets a redrawn line.

    Examples
    --------
    >>> import io
    >>> out = io.StringIO()
    >>> bar = ProgressBar(2, 200, every_s=5, file=out)
    >>> bar.update(BlockReport(0, 100, 500, 0.1, best_sharpe=0.8))
    >>> bar.close()
    >>> out.getvalue().splitlines()[-1].startswith("1/2 blocks, 100/200 combos, ")
    True
    """

    def __init__(self, n_blocks: int, n_combos: int, *, every_s: float,
                 file: TextIO | None = None) -> None:
        self.n_blocks, self.n_combos = n_blocks, n_combos
        self.blocks = self.combos = 0
        self.best = -math.inf
        self.n_workers: int | None = None
        self.n_threads: int | None = None
        file = sys.stderr if file is None else file
        self.terminal = terminal = bool(getattr(file, "isatty", lambda: False)())
        self._meter = _Meter(
            total=max(n_combos, 1),  # tqdm draws no bar of a total of 0
            file=file, text=self.text, lines=not terminal,
            bar_format="|{bar:24}| {sweep}" if terminal else "{sweep}",
            mininterval=REDRAW_S if terminal else every_s, miniters=0, smoothing=0,
            dynamic_ncols=terminal, leave=terminal)

    def update(self, report: BlockReport) -> None:
        """Count a finished block (redrawn when the line is due)."""
        self.blocks += 1
        self.combos += report.n_combos
        if report.best_sharpe > self.best:
            self.best = report.best_sharpe
        self._meter.update(report.n_combos)

    def workers(self, n: int, threads: int | None = None) -> None:
        """Note the connected workers (and their threads; redrawn when the line is due)."""
        self.n_workers, self.n_threads = n, threads
        self._meter.update(0)

    def close(self) -> None:
        """Print the final line (ended by a newline), once: off a terminal, unless the
        last line printed already counts every block."""
        if not self.terminal and self._meter.shown_n != self._meter.n:
            self._meter.refresh()  # a terminal's close() redraws the line itself
        self._meter.close()

    def text(self, elapsed_s: float) -> str:
        """The line's words after ``elapsed_s`` seconds of the run."""
        rate = self.combos / elapsed_s if elapsed_s > 0 else 0.0
        workers = "" if self.n_workers is None else (
            f", {self.n_workers} worker{'s' if self.n_workers != 1 else ''}")
        if self.n_workers and (self.n_threads or self.n_workers) != self.n_workers:
            workers += f" ({self.n_threads} threads)"
        left = (f", ETA {eta_text((self.n_combos - self.combos) / rate)}"
                if self.combos and rate > 0 and self.blocks < self.n_blocks else "")
        best = f", best sharpe {self.best:.3f}" if math.isfinite(self.best) else ""
        return (f"{self.blocks}/{self.n_blocks} blocks, {self.combos:,}/{self.n_combos:,} "
                f"combos, {rate:,.0f} combos/s{workers}, {eta_text(elapsed_s)} elapsed"
                f"{left}{best}")


class _Meter(tqdm):
    """tqdm drawing :meth:`ProgressBar.text` as its ``{sweep}`` field; with ``lines``
    each display is a whole line (a repeated line is not printed again)."""

    monitor_interval = 0  # every display follows an update: no monitor thread

    def __init__(self, *, text, lines: bool, **kwargs) -> None:
        self._text, self._lines, self._last = text, lines, ""
        self.shown_n = -1  # the count the last line printed showed (lines only)
        super().__init__(**kwargs)

    @property
    def format_dict(self) -> dict:
        d = super().format_dict  # on a terminal it reads the size into ncols and nrows
        self._forget_no_size()
        return {**d, "ncols": None if self._lines else self.ncols,
                "sweep": self._text(d["elapsed"])}

    def display(self, msg: str | None = None, pos: int | None = None) -> bool:
        if not self._lines:
            self._forget_no_size()
            return super().display(msg, pos)
        line = str(self) if msg is None else msg
        if line and line != self._last:
            self.fp.write(line + "\n")
            self.fp.flush()
            self._last, self.shown_n = line, self.n
        return False  # nothing to clear: close() adds no "\r"

    def _forget_no_size(self) -> None:
        """A terminal that reports no size (0 x 0, read as -1 x -1) gets the whole line,
        where tqdm would draw nothing."""
        if (self.ncols is not None and self.ncols < 1) or (
                self.nrows is not None and self.nrows < 1):
            self.ncols = self.nrows = None


def eta_text(seconds: float) -> str:
    """``seconds`` as ``42s``, ``3m05s`` or ``2h07m``."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
