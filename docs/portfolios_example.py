"""Run the worked example of docs/PORTFOLIOS.md and regenerate its numbers and picture.

    python docs/portfolios_example.py WORKDIR [--check | --write]

Writes the daily AAPL, MSFT, IBM and GOOG bars of ``bokeh_sampledata`` (Quandl WIKI,
public domain) as CSV files into ``WORKDIR/csv/``, writes the page's two YAML blocks
(the portfolio spec and the hold spec, in that order) into ``WORKDIR``, then runs every
``barsweep`` command of the page's bash blocks there, as written, with the real
command-line entry point. From the stores they made it prints the page's table (the best
combo, the equal-weight hold, each stock held alone). ``--check`` exits 1 when the
page's table differs; ``--write`` puts the table into the page and the ``plot best``
picture into docs/img/.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shlex
import shutil
import sys
from pathlib import Path

PAGE = Path(__file__).with_name("PORTFOLIOS.md")
IMAGE = Path(__file__).with_name("img") / "portfolio_best.png"
SYMBOLS = ("AAPL", "MSFT", "IBM", "GOOG")
SPEC_FILES = ("portfolio.yaml", "hold.yaml")
COLUMNS = ("total_return", "cagr", "sharpe", "max_drawdown", "exposure", "n_trades")
TABLE = re.compile(r"(<!-- table -->\n)(.*?)(<!-- /table -->)", re.S)


def write_csvs(folder: Path) -> None:
    """Each symbol's rows of bokeh_sampledata's stocks.csv.gz as ``csv/SYMBOL.csv``:
    time, open, high, low, close, volume and the dividend- and split-adjusted close."""
    import bokeh_sampledata
    import pandas as pd

    raw = pd.read_csv(Path(bokeh_sampledata.__file__).parent / "_data" / "stocks.csv.gz")
    (folder / "csv").mkdir(parents=True, exist_ok=True)
    for symbol in SYMBOLS:
        rows = raw[raw["Ticker"] == symbol]
        pd.DataFrame({"time": rows["Date"], "open": rows["Open"], "high": rows["High"],
                      "low": rows["Low"], "close": rows["Close"], "volume": rows["Volume"],
                      "adj_close": rows["Adj Close"]}).to_csv(folder / "csv" / f"{symbol}.csv",
                                                              index=False)


def page_blocks(text: str, lang: str) -> list[str]:
    """The bodies of the page's ```lang fenced blocks."""
    return [m.group(1) for m in re.finditer(rf"^```{lang}\n(.*?)^```", text, re.M | re.S)]


def page_commands(text: str) -> list[list[str]]:
    """Every ``barsweep`` command of the page's bash blocks, as arguments."""
    return [shlex.split(line)[1:] for block in page_blocks(text, "bash")
            for line in block.splitlines() if line.startswith("barsweep ")]


def run_page(folder: Path, text: str) -> None:
    """Write the CSVs and the specs, then run the page's commands in ``folder``."""
    from barsweep.pipeline.cli import main

    write_csvs(folder)
    for name, body in zip(SPEC_FILES, page_blocks(text, "yaml"), strict=True):
        (folder / name).write_text(body)
    here = os.getcwd()
    os.chdir(folder)
    try:
        for args in page_commands(text):
            with contextlib.redirect_stdout(io.StringIO()):
                code = main(args)
            if code != 0:
                raise SystemExit(f"barsweep {shlex.join(args)} exited {code}")
    finally:
        os.chdir(here)


def table(folder: Path) -> str:
    """The page's table, from the stores the commands made."""
    from barsweep import open_results
    from barsweep.pipeline.analysis.buyhold import buy_and_hold
    from barsweep.pipeline.analysis.rank import rank

    ports = open_results(folder / "portfolio.zarr")
    best = rank(ports, by="sharpe", top=1).iloc[0]
    params = ", ".join(f"{p} {best[p]}" for p in ("fast", "slow"))
    rows = [(f"the rule's best combo by sharpe ({params}), one account", best),
            ("equal-weight buy and hold of the four, one account",
             buy_and_hold(ports).iloc[0])]
    held = open_results(folder / "hold.zarr")
    for _, row in buy_and_hold(held).iterrows():
        rows.append((f"{row['symbol']} held alone", row))
    lines = ["| | " + " | ".join(COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    for label, row in rows:
        lines.append(f"| {label} | " + " | ".join(_cell(c, row[c]) for c in COLUMNS) + " |")
    return "\n".join(lines) + "\n"


def _cell(name: str, value) -> str:
    if name == "n_trades":
        return f"{int(value)}"
    if name == "sharpe":
        return f"{value:.2f}"
    return f"{value:+.1%}" if name != "exposure" else f"{value:.0%}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir", type=Path)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 if the page differs")
    mode.add_argument("--write", action="store_true", help="update the page and picture")
    args = parser.parse_args()
    text = PAGE.read_text()
    run_page(args.workdir, text)
    fresh = table(args.workdir)
    print(fresh, end="")
    shown = TABLE.search(text)
    if args.write:
        PAGE.write_text(TABLE.sub(lambda m: m.group(1) + fresh + m.group(3), text))
        shutil.copyfile(args.workdir / IMAGE.name, IMAGE)
    elif args.check and (shown is None or shown.group(2) != fresh):
        print(f"{PAGE.name}'s table differs from the run's (above)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
