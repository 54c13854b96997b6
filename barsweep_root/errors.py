"""The error hierarchy raised at barsweep's boundaries.

Kernels never raise; functions that take user input validate it and raise one of
these with a message naming the file, key or row that was wrong.
"""


class BarsweepError(Exception):
    """Base class of every error barsweep raises on purpose."""


class DataError(BarsweepError, ValueError):
    """Bars that cannot be imported or opened (file, row and rule in the message)."""


class SpecError(BarsweepError, ValueError):
    """A sweep spec, grid or parameter that is refused (the key in the message)."""


class BackendError(BarsweepError, RuntimeError):
    """A compute backend or cluster that cannot be used here."""
