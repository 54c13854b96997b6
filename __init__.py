"""barsweep: parameter sweeps of trading strategies at scale.

The distribution installs three packages under this name: ``barsweep.datasets``
(bars in), ``barsweep.engine`` (pure compute) and ``barsweep.pipeline``
(Dask graphs, Zarr results, the CLI).

The public functions, :func:`sweep` (:func:`barsweep.pipeline.api.sweep`: a sweep from
Python, as ``barsweep run`` runs a spec) and :func:`open_results`
(:func:`barsweep.pipeline.run.results.open_results`: a results store as an
``xarray.Dataset``), load their module when first used, so ``import barsweep`` stays
light.
"""

from typing import TYPE_CHECKING

from .version import __version__

if TYPE_CHECKING:  # what tools that read the tree see; at run time, __getattr__
    from .pipeline.api import sweep
    from .pipeline.run.results import open_results

__all__ = ["__version__", "open_results", "sweep"]

_LAZY = {"sweep": "pipeline.api", "open_results": "pipeline.run.results"}


def __getattr__(name: str):
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
