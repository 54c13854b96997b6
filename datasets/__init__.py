"""barsweep.datasets: bars in.

An Arrow IPC bar store (one uncompressed file per symbol and timeframe, each checked on
read against the store's index of sizes, mtimes and hashes), CSV/Parquet import with
validation, synthetic bars, `verify_store` (every byte and every bar), and `open_bars`,
which views the memory-mapped store as an xarray Dataset over (time, symbol) without
copying.

Names load lazily (PEP 562), so that a Dask task reading bars through
:func:`mapped_arrays` does not pay for importing xarray and pandas.
"""

from importlib import import_module

_WHERE = {
    "bars_arrays": "bars",
    "open_bars": "bars",
    "to_ns": "bars",
    "ImportReport": "importer",
    "import_file": "importer",
    "mapped_arrays": "mapped",
    "BAR_SCHEMA": "store",
    "BarsInfo": "store",
    "bar_path": "store",
    "bars_problem": "store",
    "check_store_writable": "writer",
    "fingerprint": "store",
    "list_bars": "store",
    "read_table": "store",
    "write_bars": "writer",
    "synth_bars": "synth",
    "write_synth": "synth",
    "periods_per_year": "timeframes",
    "timeframe_seconds": "timeframes",
    "FileReport": "verify",
    "verify_store": "verify",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'barsweep.datasets' has no attribute {name!r}")
    value = getattr(import_module(f"barsweep.datasets.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
