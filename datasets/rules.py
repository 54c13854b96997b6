"""The rules every stored bar obeys, written once for import and for ``data verify``.

Pure functions over NumPy arrays: they say which rule the first bad row breaks and leave
the wording of errors (file, row numbering) to the caller.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SPLIT_MOVE", "first_broken_price_rule", "large_moves"]

#: A one-bar close-to-close move beyond this fraction (either way) looks like a split
#: the prices were not adjusted for (2:1 is -50 %, 1:2 is +100 %).
SPLIT_MOVE = 0.45


def first_broken_price_rule(
    open_: np.ndarray, high: np.ndarray, low: np.ndarray, close: np.ndarray, volume: np.ndarray
) -> tuple[str, int, int] | None:
    """The first price rule the bars break: ``(rule, position, n_rows_breaking_it)``.

    Rules, checked in this order: prices are finite, prices are positive, volume is not
    infinite, volume is not negative (NaN volume means "not recorded" and is allowed),
    ``high >= max(open, close)``, ``low <= min(open, close)``.

    Parameters
    ----------
    open_, high, low, close, volume : numpy.ndarray
        float64, shape (n_bars,).

    Returns
    -------
    tuple of (str, int, int) or None
        None when every bar obeys every rule; otherwise the rule's name, the 0-based
        position of the first row that breaks it and how many rows do.

    Examples
    --------
    >>> one = np.array([1.0])
    >>> first_broken_price_rule(one, np.array([0.9]), one * 0.5, one, one)
    ('high < max(open, close)', 0, 1)
    """
    prices = (open_, high, low, close)
    if _obeys_every_rule(open_, high, low, close, volume):
        return None
    with np.errstate(invalid="ignore"):
        rules = (
            ("non-finite price", np.logical_or.reduce([~np.isfinite(p) for p in prices])),
            ("non-positive price", np.logical_or.reduce([p <= 0 for p in prices])),
            ("infinite volume", np.isinf(volume)),
            ("negative volume", volume < 0),
            ("high < max(open, close)", high < np.maximum(open_, close)),
            ("low > min(open, close)", low > np.minimum(open_, close)),
        )
    for rule, mask in rules:
        hits = np.flatnonzero(mask)
        if hits.size:
            return rule, int(hits[0]), int(hits.size)
    return None


def _obeys_every_rule(
    open_: np.ndarray, high: np.ndarray, low: np.ndarray, close: np.ndarray, volume: np.ndarray
) -> bool:
    """True when no bar breaks a rule of `first_broken_price_rule`, found with reductions
    and boolean compares instead of its masks (a valid file's whole cost)."""
    prices = (open_, high, low, close)
    if open_.size == 0:
        return True
    if not all(p.min() > 0 and p.max() < np.inf for p in prices):  # NaN fails both
        return False
    lowest, highest = np.fmin.reduce(volume), np.fmax.reduce(volume)  # NaN volume ignored
    if not (np.isnan(lowest) or (lowest >= 0 and highest < np.inf)):
        return False
    return bool((high >= open_).all() and (high >= close).all()
                and (low <= open_).all() and (low <= close).all())


def large_moves(close: np.ndarray, limit: float = SPLIT_MOVE) -> np.ndarray:
    """Positions of the bars whose close moved more than `limit` from the bar before.

    Parameters
    ----------
    close : numpy.ndarray
        float64, shape (n_bars,), positive.
    limit : float, default `SPLIT_MOVE`
        The fraction ``|close[t] / close[t - 1] - 1|`` must exceed.

    Returns
    -------
    numpy.ndarray
        intp, shape (n_moves,): each ``t`` (>= 1), in order.

    Examples
    --------
    >>> large_moves(np.array([100.0, 101.0, 50.5, 51.0])).tolist()
    [2]
    """
    if close.size < 2:
        return np.zeros(0, dtype=np.intp)
    with np.errstate(all="ignore"):
        move = close[1:] / close[:-1] - 1.0
    return np.flatnonzero(np.abs(move) > limit) + 1
