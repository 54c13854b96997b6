"""barsweep: parameter sweeps of trading strategies at scale.

The distribution installs three packages under this name: ``barsweep.datasets``
(bars in), ``barsweep.engine`` (pure compute) and ``barsweep.pipeline``
(Dask graphs, Zarr results, the CLI).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("barsweep")
except PackageNotFoundError:  # pragma: no cover - running from an uninstalled tree
    __version__ = "0+unknown"


def sweep(*args, **kwargs):
    """:func:`barsweep.pipeline.notebook.sweep`: a sweep from Python, as ``barsweep run``
    runs a spec; returns the results Dataset."""
    from .pipeline.notebook import sweep as run

    return run(*args, **kwargs)


def open_results(path, *, partial: bool = False):
    """:func:`barsweep.pipeline.results.open_results`: a results store as an
    ``xarray.Dataset`` (an incomplete store refused unless ``partial``)."""
    from .pipeline.results import open_results as opened

    return opened(path, partial=partial)
