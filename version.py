"""The installed distribution's version (``0+unknown`` in a tree that is not installed)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("barsweep")
except PackageNotFoundError:  # pragma: no cover - running from an uninstalled tree
    __version__ = "0+unknown"
