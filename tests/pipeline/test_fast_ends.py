"""What a run spares at its ends: Bokeh without a dashboard, pandas on a worker's bars,
the replaced store removed while the blocks run, the exit's walk of the heap."""

from __future__ import annotations

import gc
import json
import subprocess
import sys

import numpy as np
import pyarrow as pa

from barsweep.datasets import mapped_arrays, write_synth
from barsweep.datasets.store import buffer_view, read_table
from barsweep.pipeline import cli
from barsweep.pipeline.run import results
from barsweep.pipeline.run.results import create_store, store_attrs, wait_removals


def run_python(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_worker_bars_are_the_arrow_buffers_without_pandas(tmp_path):
    """The columns a worker maps are the stored values, read-only, and reading them
    imports neither pandas nor pyarrow's pandas shim (a fresh process)."""
    write_synth(tmp_path, "BTCUSDT", "1h", 500, 7)
    out = run_python(
        "import sys, json; from barsweep.datasets import mapped_arrays\n"
        f"a = mapped_arrays({str(tmp_path)!r}, 'BTCUSDT', '1h')\n"
        "print(json.dumps(['pandas' in sys.modules, sorted(a)]))")
    pandas_loaded, names = json.loads(out)
    assert not pandas_loaded
    assert {"time", "open", "high", "low", "close"} <= set(names)
    arrays = mapped_arrays(tmp_path, "BTCUSDT", "1h")
    table = read_table(tmp_path, "BTCUSDT", "1h")
    for name, values in arrays.items():
        column = table.column(name).combine_chunks()
        expected = (column.cast(pa.int64()) if name == "time" else column).to_numpy()
        assert values.dtype == expected.dtype and values.tobytes() == expected.tobytes()
        assert not values.flags.writeable


def test_a_block_of_integer_axes_sweeps_without_pandas(tmp_path):
    """A worker's block (bars mapped, indicators hoisted, the kernel run) of a grid of
    integer axes imports no pandas (a fresh process)."""
    write_synth(tmp_path, "BTCUSDT", "1h", 500, 7)
    out = run_python(
        "import sys, json, numpy as np\n"
        "from barsweep.datasets import mapped_arrays\n"
        "from barsweep.engine import Execution, get_strategy, sweep_block\n"
        f"a = mapped_arrays({str(tmp_path)!r}, 'BTCUSDT', '1h')\n"
        "p = {'fast': np.array([3, 5, 3]), 'slow': np.array([20, 20, 30])}\n"
        "m = sweep_block(get_strategy('ema_cross'), a, p, Execution(), 8760.0)\n"
        "print(json.dumps(['pandas' in sys.modules, m.shape[0]]))")
    assert json.loads(out) == [False, 3]


def test_buffer_view_of_a_slice_starts_at_its_offset():
    array = pa.array(np.arange(10, dtype=np.float64)).slice(3, 4)
    view = buffer_view(array, np.float64)
    assert view.tolist() == [3.0, 4.0, 5.0, 6.0] and not view.flags.writeable


def test_a_threads_run_without_dashboard_imports_no_bokeh(tmp_path):
    """The /barsweep page's installer finds no dashboard without importing Bokeh."""
    out = run_python(
        "import sys\n"
        "from barsweep.pipeline.run.cluster import connect\n"
        "with connect('threads', 1) as client:\n"
        "    pass\n"
        "print('bokeh' in sys.modules)")
    assert out.strip() == "False"


def test_the_replaced_store_is_removed_on_a_thread(tmp_path, monkeypatch):
    """With remove_later the new store is in place at once; the earlier one, moved aside,
    is gone once wait_removals returns."""
    path = tmp_path / "results.zarr"
    axes = [("p", np.arange(4))]
    create_store(str(path), ["A"], axes, (2,), 2, {"spec": "first"})
    started = []
    real = results.remove_in_background
    monkeypatch.setattr(results, "remove_in_background",
                        lambda old: (started.append(old.name), real(old)))
    create_store(str(path), ["A"], axes, (2,), 2, {"spec": "second"}, remove_later=True)
    assert store_attrs(path)["spec"] == "second"
    assert len(started) == 1 and started[0].startswith(".results.zarr.old-")
    wait_removals()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.zarr"]


def test_command_returns_mains_status_and_freezes_the_heap(monkeypatch):
    frozen = []
    monkeypatch.setattr(cli, "main", lambda argv=None: 3)
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(True))
    assert cli.command() == 3 and frozen == [True]
