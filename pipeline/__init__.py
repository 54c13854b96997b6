"""Sweeps on Dask into Zarr, and what is read back from them. The names below load their
module when first used, so ``import barsweep.pipeline`` stays light."""

_LAZY = {"best_backtest": "analysis.rebuild", "sweep": "api"}


def __getattr__(name: str):
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
