"""barsweep: parameter sweeps of trading strategies at scale.

The distribution installs three packages under this name: ``barsweep.datasets``
(bars in), ``barsweep.engine`` (pure compute) and ``barsweep.pipeline``
(Dask graphs, Zarr results, the CLI).
"""

from .version import __version__

__all__ = ["__version__", "open_results", "sweep"]


def sweep(*args, **kwargs):
    """:func:`barsweep.pipeline.api.sweep`: a sweep from Python, as ``barsweep run``
    runs a spec; returns the results Dataset."""
    from .pipeline.api import sweep as run

    return run(*args, **kwargs)


def open_results(path, *, partial: bool = False):
    """:func:`barsweep.pipeline.run.results.open_results`: a results store as an
    ``xarray.Dataset`` (an incomplete store refused unless ``partial``)."""
    from .pipeline.run.results import open_results as opened

    return opened(path, partial=partial)
