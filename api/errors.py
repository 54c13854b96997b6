"""The error hierarchy raised at barsweep's boundaries.

Kernels never raise; functions that take user input validate it and raise one of
these with a message naming the file, key or row that was wrong.
"""


class BarsweepError(Exception):
    """Base class of every error barsweep raises on purpose.

    ``exit_code`` is the command line's exit status for it (2: refused input).
    """

    exit_code = 2


class DataError(BarsweepError, ValueError):
    """Bars that cannot be imported or opened (file, row and rule in the message)."""


class SpecError(BarsweepError, ValueError):
    """A sweep spec, grid or parameter that is refused (the key in the message)."""


class BackendError(BarsweepError, RuntimeError):
    """A compute backend or cluster that cannot be used here."""


class ResultsError(BarsweepError):
    """A results store that cannot be written, replaced, resumed or read as asked."""


class RunError(BarsweepError, RuntimeError):
    """A run that could not finish: a block failed, or no worker was there to run it.

    The store is left incomplete (its ``complete`` attribute false) and can be resumed.
    """

    exit_code = 1


class Interrupted(BarsweepError):
    """The user stopped the run (Ctrl-C); the message says what is done and how to resume."""

    exit_code = 130
