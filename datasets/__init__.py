"""barsweep.datasets: bars in.

An Arrow IPC bar store (one uncompressed file per symbol and timeframe), CSV/Parquet
import with validation, synthetic bars, and `open_bars`, which views the memory-mapped
store as an xarray Dataset over (time, symbol) without copying.
"""

from barsweep.datasets.bars import bars_arrays, open_bars
from barsweep.datasets.importer import ImportReport, import_file
from barsweep.datasets.store import (
    BAR_SCHEMA,
    BarsInfo,
    bar_path,
    fingerprint,
    list_bars,
    read_table,
    write_bars,
)
from barsweep.datasets.synth import synth_bars, write_synth
from barsweep.datasets.timeframes import periods_per_year, timeframe_seconds

__all__ = [
    "BAR_SCHEMA",
    "BarsInfo",
    "ImportReport",
    "bar_path",
    "bars_arrays",
    "fingerprint",
    "import_file",
    "list_bars",
    "open_bars",
    "periods_per_year",
    "read_table",
    "synth_bars",
    "timeframe_seconds",
    "write_bars",
    "write_synth",
]
