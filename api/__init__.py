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
