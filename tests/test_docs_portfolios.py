"""docs/PORTFOLIOS.md's worked example: its commands, run as written on real daily
stocks (docs/portfolios_example.py), print the page's table, and its best combo is the
one the page's picture and text describe."""

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
pytest.importorskip("bokeh_sampledata")

SCRIPT = Path(__file__).resolve().parents[1] / "docs" / "portfolios_example.py"


def _example():
    spec = importlib.util.spec_from_file_location("portfolios_example", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_commands_print_the_page_table(tmp_path):
    example = _example()
    text = example.PAGE.read_text()
    commands = example.page_commands(text)
    assert [c[0] for c in commands].count("run") == 2 and ["plot", "best"] in [
        c[:2] for c in commands]
    example.run_page(tmp_path, text)
    shown = example.TABLE.search(text)
    assert shown is not None and shown.group(2) == example.table(tmp_path)
    assert (tmp_path / "portfolio_best.png").stat().st_size > 50_000
    assert (tmp_path / "trades.csv").read_text().startswith("symbol,entry_time,")
